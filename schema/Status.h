// Status: the result of a runtime call, ok or an error message (no exceptions).
#pragma once

#include <sstream>
#include <string>
#include <utility>

namespace dtf {

/// Either ok or an error with a message meant for the user (a sentence that
/// names the op, the values involved and, where there is one, the fix).
class [[nodiscard]] Status {
public:
  Status() = default;

  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.ok_ = false;
    s.message_ = message.empty() ? "unknown error" : std::move(message);
    return s;
  }

  bool isOk() const { return ok_; }
  /// Empty for an ok status.
  const std::string &message() const { return message_; }

private:
  bool ok_ = true;
  std::string message_;
};

/// Streams every argument into one string: strCat("got ", 3, " dims").
template <typename... Args> std::string strCat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

/// An error status whose message is the streamed arguments.
template <typename... Args> Status errorStatus(const Args &...args) {
  return Status::error(strCat(args...));
}

} // namespace dtf

/// Returns from the enclosing function when `expr` gives an error status.
#define DTF_RETURN_IF_ERROR(expr)                                              \
  do {                                                                         \
    ::dtf::Status dtfStatus_ = (expr);                                         \
    if (!dtfStatus_.isOk())                                                    \
      return dtfStatus_;                                                       \
  } while (false)
