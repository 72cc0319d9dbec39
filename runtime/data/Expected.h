// Error values for the data pipeline: an Expected<T> holds a value or a
// message.
#pragma once

#include <cassert>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace dtf::data {

/// An error a user can meet: one sentence that names the file (and line,
/// column, or field) and what is wrong with it.
class Error {
public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  const std::string &message() const { return message_; }

private:
  std::string message_;
};

/// A value of type T, or the Error that kept it from being made. Readers return
/// this instead of throwing, so nothing escapes into the training loop.
template <typename T> class [[nodiscard]] Expected {
public:
  /// A value; a forwarding constructor, so `return local;` moves the local.
  template <typename U = T, typename = std::enable_if_t<
                                std::is_constructible_v<T, U &&> &&
                                !std::is_same_v<std::decay_t<U>, Error> &&
                                !std::is_same_v<std::decay_t<U>, Expected>>>
  Expected(U &&value)
      : state_(std::in_place_index<0>, std::forward<U>(value)) {}
  Expected(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  /// The value; only when ok().
  T &value() & {
    assert(ok());
    return *std::get_if<0>(&state_);
  }
  const T &value() const & {
    assert(ok());
    return *std::get_if<0>(&state_);
  }
  T &&value() && {
    assert(ok());
    return std::move(*std::get_if<0>(&state_));
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

  /// The error message; only when !ok().
  const std::string &error() const {
    assert(!ok());
    return std::get_if<1>(&state_)->message();
  }

private:
  std::variant<T, Error> state_;
};

} // namespace dtf::data
