// The plain-text training log.
#include "runtime/summary/TrainLog.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace dtf::summary {

std::string plainText(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\r')
      continue;
    if (c == '\x1b') {
      // ESC '[' parameters... final byte in @..~; a lone ESC is dropped.
      if (i + 1 < text.size() && text[i + 1] == '[') {
        i += 2;
        while (i < text.size() && !(text[i] >= '@' && text[i] <= '~'))
          ++i;
      }
      continue;
    }
    out.push_back(c);
  }
  return out;
}

Status TrainLog::open(const std::string &path, std::unique_ptr<TrainLog> *out) {
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec)
      return errorStatus("cannot create the directory ", parent.string(),
                         " for the training log: ", ec.message());
  }
  std::FILE *f = std::fopen(path.c_str(), "ae");
  if (!f)
    return errorStatus("cannot open the training log ", path, ": ",
                       std::strerror(errno));
  std::unique_ptr<TrainLog> log(new TrainLog());
  log->path_ = path;
  log->file_ = f;
  *out = std::move(log);
  return Status::ok();
}

TrainLog::~TrainLog() {
  if (file_)
    std::fclose(file_);
}

Status TrainLog::line(const std::string &text) {
  std::string s = plainText(text);
  s.push_back('\n');
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.isOk())
    return error_;
  if (std::fwrite(s.data(), 1, s.size(), file_) != s.size() ||
      std::fflush(file_) != 0)
    error_ = errorStatus("cannot write the training log ", path_, ": ",
                         std::strerror(errno));
  return error_;
}

} // namespace dtf::summary
