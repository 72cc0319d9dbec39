// Helpers for the data tests: temporary directories, IDX and gzip files,
// timeouts, reads under a memory limit.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <new>
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

/// Whether this build runs under AddressSanitizer, whose shadow memory an
/// address-space limit breaks.
constexpr bool kSanitized =
#if defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

/// The peak resident memory of this process so far (VmHWM), in bytes.
inline size_t peakResidentBytes() {
  size_t kb = 0;
  if (std::FILE *f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %zu kB", &kb) == 1)
        break;
    std::fclose(f);
  }
  return kb << 10;
}

/// Runs `body` in a forked child whose address space may grow by at most
/// `headroom` bytes beyond its size at the fork (RLIMIT_AS), and returns the
/// child's exit status: what `body` returned, 99 when an allocation failed
/// (std::bad_alloc), 98 when the limit could not be set. A reader that
/// allocates what a lying length field promises fails with 99. Under
/// AddressSanitizer, whose shadow memory an address-space limit breaks, the
/// child's peak resident memory may grow by at most `headroom` instead (99
/// when it grew more): weaker, as it sees only the pages a reader touched.
inline int exitStatusUnderMemoryLimit(size_t headroom,
                                      const std::function<int()> &body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0 && kSanitized) {
    const size_t before = peakResidentBytes();
    int status = 99;
    try {
      status = body();
    } catch (const std::bad_alloc &) {
    }
    const size_t after = peakResidentBytes();
    _exit(before == 0 || after == 0 ? 98 : after - before > headroom ? 99 : status);
  }
  if (pid == 0) {
    long pages = 0;
    if (std::FILE *f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1)
        pages = 0;
      std::fclose(f);
    }
    const rlim_t limit =
        rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + rlim_t(headroom);
    const rlimit r{limit, limit};
    if (pages <= 0 || setrlimit(RLIMIT_AS, &r) != 0)
      _exit(98);
    try {
      _exit(body());
    } catch (const std::bad_alloc &) {
      _exit(99);
    }
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace dtf::data::testing
