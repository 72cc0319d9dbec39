// LineBuffer: turns a child's output bytes into whole lines for prefixing.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace dtf::cluster {

/// Collects bytes and hands out complete lines, so that the launcher never
/// interleaves half lines of two tasks. An in-place redraw ("\rtext\x1b[K",
/// how dtf-run redraws progress on a terminal) becomes a line of its own; a
/// CRLF ends one line; the erase-line sequence ESC [ K is dropped. A line
/// longer than kMaxLine is handed out in pieces, so memory stays bounded.
class LineBuffer {
public:
  using Emit = std::function<void(std::string_view line)>;
  static constexpr size_t kMaxLine = 64 * 1024;

  void append(const char *data, size_t size, const Emit &emit);
  /// Hands out what is left (a last line without its newline).
  void finish(const Emit &emit);

private:
  void flush(const Emit &emit, bool keepEmpty);

  std::string pending_;
  bool afterCarriageReturn_ = false;
  bool emptyBeforeCarriageReturn_ = false;
};

} // namespace dtf::cluster
