// libFuzzer target over every reader of a file a user or a broken disk hands
// dtf: the first byte picks the reader, the rest is the file. Plans
// (parsePlan, behind the seal and, resealed, the checks behind it),
// checkpoint indexes and data files, TFRecord files (plain and gzip), IDX
// images and labels, CSV and cluster.json / TF_CONFIG. Any crash, leak,
// sanitizer report or hang is a bug; a refusal is the expected outcome for
// most inputs. The readers that take a path read a memory file.
#include "runtime/checkpoint/Format.h"
#include "runtime/data/CsvDataset.h"
#include "runtime/data/IdxDataset.h"
#include "runtime/data/TFRecordDataset.h"
#include "runtime/plan/PlanReader.h"
#include "schema/ClusterSpec.h"
#include "schema/PlanSeal.h"

#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace {

// `bytes` as a file: a memory file, named by its /proc/self/fd path.
class MemoryFile {
public:
  explicit MemoryFile(const std::string &bytes)
      : fd_(::memfd_create("dtf-fuzz", MFD_CLOEXEC)) {
    size_t done = 0;
    while (fd_ >= 0 && done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n <= 0)
        break;
      done += size_t(n);
    }
  }
  ~MemoryFile() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
  int fd_;
};

void readPlan(const std::string &bytes) {
  dtf::plan::Plan plan;
  (void)dtf::plan::parsePlan(bytes, "plan.bin", &plan);
  // The checks behind the seal: the same bytes, sealed.
  dtf::plan::Plan unsealed;
  if (unsealed.ParseFromString(bytes)) {
    dtf::plan::Plan sealed;
    (void)dtf::plan::parsePlan(dtf::plan::sealPlan(unsealed), "plan.bin",
                               &sealed);
  }
}

void readTFRecord(const std::string &bytes, bool gzip) {
  MemoryFile file(bytes);
  dtf::data::TFRecordOptions options;
  options.pattern = file.path();
  options.gzip = gzip;
  options.skipCorrupt = !bytes.empty() && (bytes[0] & 1);
  options.columns = {{"x", "image", 4, false, 0}, {"y", "label", 1, true, 10}};
  dtf::data::TFRecordReport report;
  (void)dtf::data::readTFRecords(options, &report);
}

void readIdx(const std::string &bytes) {
  // Images and labels from one input: its first byte says where the images
  // end, in 256ths of the rest.
  if (bytes.empty())
    return;
  const std::string rest = bytes.substr(1);
  const size_t cut = size_t(uint8_t(bytes[0])) * rest.size() / 256;
  MemoryFile images(rest.substr(0, cut)), labels(rest.substr(cut));
  (void)dtf::data::IdxDataset::open(images.path(), labels.path());
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  google::protobuf::SetLogHandler(nullptr); // bad UTF-8 in names, expected
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const std::string bytes(reinterpret_cast<const char *>(data) + 1, size - 1);
  switch (data[0] % 8) {
  case 0:
    readPlan(bytes);
    break;
  case 1: {
    MemoryFile file(bytes);
    dtf::checkpoint::format::Index index;
    (void)dtf::checkpoint::format::parseIndex(file.path(), 1, &index);
    break;
  }
  case 2: {
    MemoryFile file(bytes);
    std::vector<dtf::checkpoint::format::Record> records;
    dtf::checkpoint::format::File info;
    (void)dtf::checkpoint::format::scanDataFile(file.path(), 1, 0, 1, &records,
                                                &info);
    break;
  }
  case 3:
    readTFRecord(bytes, false);
    break;
  case 4:
    readTFRecord(bytes, true);
    break;
  case 5:
    readIdx(bytes);
    break;
  case 6: {
    dtf::data::CsvOptions options;
    (void)dtf::data::parseCsv(bytes, "data.csv", options);
    break;
  }
  case 7: {
    dtf::cluster::ClusterSpec spec;
    std::optional<dtf::cluster::TaskId> task;
    (void)dtf::cluster::ClusterSpec::parseJson(bytes, "TF_CONFIG", &spec, &task);
    break;
  }
  }
  return 0;
}
