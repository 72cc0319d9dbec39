// Helpers for the data tests: temporary directories, IDX and gzip files,
// timeouts.
#pragma once

#include <zlib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace dtf::data::testing {

/// A fresh directory under the system's temporary directory, removed at the
/// end.
class TempDir {
public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "dtf-data-test-XXXXXX")
            .string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
      ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = buf.data();
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

using Bytes = std::vector<uint8_t>;

/// An IDX file's bytes: the big-endian magic and dimensions, then `data`.
inline Bytes idxBytes(uint32_t magic, const std::vector<uint32_t> &dims,
                      const Bytes &data) {
  Bytes out;
  auto put32 = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<uint8_t>(v >> shift));
  };
  put32(magic);
  for (uint32_t d : dims)
    put32(d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline void writeRaw(const std::string &path, const Bytes &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline void writeGzip(const std::string &path, const Bytes &bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << "cannot write " << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

inline Bytes readRaw(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in),
               std::istreambuf_iterator<char>());
}

/// Runs `body` on a thread and ends the whole test binary if it has not
/// finished within `limit`: a hang in the code under test fails fast instead of
/// stalling the suite.
template <typename Body>
void runWithin(std::chrono::milliseconds limit, const char *what, Body body) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  std::thread worker([&] {
    body();
    done.set_value();
  });
  if (finished.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: %s did not finish within %lld ms (a hang)\n",
                 what, static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::_Exit(1);
  }
  worker.join();
}

} // namespace dtf::data::testing
