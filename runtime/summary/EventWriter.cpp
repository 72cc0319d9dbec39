// Event files: TFRecord-framed tensorflow.Event protos.
#include "runtime/summary/EventWriter.h"

#include "runtime/summary/Record.h"

#include "summary.pb.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

namespace dtf::summary {
namespace {

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0])
    return "localhost";
  return buf;
}

} // namespace

double wallTimeNow() {
  using namespace std::chrono;
  return double(
             duration_cast<microseconds>(system_clock::now().time_since_epoch())
                 .count()) /
         1e6;
}

Status EventWriter::open(const std::string &dir,
                         std::unique_ptr<EventWriter> *out,
                         const EventWriterOptions &options) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return errorStatus("cannot create the summary directory ", dir, ": ",
                       ec.message());
  const std::string base =
      (std::filesystem::path(dir) /
       ("events.out.tfevents." + std::to_string(int64_t(wallTimeNow())) + "." +
        (options.hostname.empty() ? hostName() : options.hostname)))
          .string();
  // O_EXCL: a name taken by another writer gets a suffix instead of being
  // appended to or truncated.
  std::string path = base;
  int fd = -1;
  for (int i = 1; i < 1000; ++i) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST)
      break;
    path = base + "." + std::to_string(i);
  }
  if (fd < 0)
    return errorStatus("cannot create the event file ", path, ": ",
                       std::strerror(errno));
  std::FILE *f = ::fdopen(fd, "wb");
  if (!f) {
    const int err = errno;
    ::close(fd);
    return errorStatus("cannot open the event file ", path, ": ",
                       std::strerror(err));
  }

  std::unique_ptr<EventWriter> w(new EventWriter());
  w->path_ = path;
  w->file_ = f;
  w->flushSeconds_ = options.flushSeconds > 0 ? options.flushSeconds : 2;
  tensorflow::Event version;
  version.set_wall_time(wallTimeNow());
  version.set_file_version("brain.Event:2");
  {
    std::lock_guard<std::mutex> lock(w->mu_);
    DTF_RETURN_IF_ERROR(
        w->writeLocked(encodeRecord(version.SerializeAsString())));
    // TensorBoard finds the run as soon as the file has its version event.
    DTF_RETURN_IF_ERROR(w->flushLocked());
  }
  w->flusher_ = std::thread([p = w.get()] { p->flushLoop(); });
  *out = std::move(w);
  return Status::ok();
}

EventWriter::~EventWriter() { (void)close(); }

Status EventWriter::writeScalars(int64_t step,
                                 const std::vector<Scalar> &scalars) {
  tensorflow::Event event;
  event.set_wall_time(wallTimeNow());
  event.set_step(step);
  tensorflow::Summary *summary = event.mutable_summary();
  for (const auto &[tag, value] : scalars) {
    tensorflow::Summary::Value *v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(float(value));
  }
  return writeEvent(event);
}

Status EventWriter::writeEvent(const tensorflow::Event &event) {
  std::string bytes;
  if (event.wall_time() == 0) {
    tensorflow::Event copy = event;
    copy.set_wall_time(wallTimeNow());
    bytes = copy.SerializeAsString();
  } else {
    bytes = event.SerializeAsString();
  }
  std::lock_guard<std::mutex> lock(mu_);
  return writeLocked(encodeRecord(bytes));
}

Status EventWriter::writeLocked(const std::string &record) {
  if (!error_.isOk())
    return error_;
  if (!file_)
    return errorStatus(path_, ": the event file is closed");
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    error_ = errorStatus("cannot write the event file ", path_, ": ",
                         std::strerror(errno));
    return error_;
  }
  dirty_ = true;
  return Status::ok();
}

Status EventWriter::flushLocked() {
  if (!error_.isOk())
    return error_;
  if (!file_ || !dirty_)
    return Status::ok();
  if (std::fflush(file_) != 0) {
    error_ = errorStatus("cannot write the event file ", path_, ": ",
                         std::strerror(errno));
    return error_;
  }
  dirty_ = false;
  return Status::ok();
}

Status EventWriter::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  return flushLocked();
}

void EventWriter::flushLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!closing_) {
    wake_.wait_for(lock, std::chrono::duration<double>(flushSeconds_));
    if (!closing_)
      (void)flushLocked(); // an error stays in error_ for the next call
  }
}

Status EventWriter::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  wake_.notify_all();
  if (flusher_.joinable())
    flusher_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_)
    return error_;
  Status s = flushLocked();
  if (std::fclose(file_) != 0 && s.isOk() && error_.isOk())
    error_ = errorStatus("cannot close the event file ", path_, ": ",
                         std::strerror(errno));
  file_ = nullptr;
  return error_.isOk() ? s : error_;
}

} // namespace dtf::summary
