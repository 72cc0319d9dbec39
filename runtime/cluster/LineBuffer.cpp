// LineBuffer: line splitting with carriage-return redraws made plain lines.
#include "runtime/cluster/LineBuffer.h"

namespace dtf::cluster {

void LineBuffer::flush(const Emit &emit, bool keepEmpty) {
  // ESC [ K (erase to end of line) only matters on a terminal.
  for (size_t at; (at = pending_.find("\x1b[K")) != std::string::npos;)
    pending_.erase(at, 3);
  if (keepEmpty || !pending_.empty())
    emit(pending_);
  pending_.clear();
}

void LineBuffer::append(const char *data, size_t size, const Emit &emit) {
  for (size_t i = 0; i < size; ++i) {
    const char c = data[i];
    if (afterCarriageReturn_) {
      afterCarriageReturn_ = false;
      if (c == '\n') {
        // CRLF: the line went out at the '\r', unless it was empty.
        if (emptyBeforeCarriageReturn_)
          emit(std::string_view());
        continue;
      }
    }
    if (c == '\n') {
      flush(emit, /*keepEmpty=*/true);
    } else if (c == '\r') {
      // A redraw: what was drawn so far is one line. An empty one (the
      // "\r" that starts the first redraw) is not worth a line.
      emptyBeforeCarriageReturn_ = pending_.empty();
      flush(emit, /*keepEmpty=*/false);
      afterCarriageReturn_ = true;
    } else {
      pending_ += c;
      if (pending_.size() >= kMaxLine)
        flush(emit, /*keepEmpty=*/false);
    }
  }
}

void LineBuffer::finish(const Emit &emit) {
  afterCarriageReturn_ = false;
  flush(emit, /*keepEmpty=*/false);
}

} // namespace dtf::cluster
