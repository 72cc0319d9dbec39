// EventWriter: a TensorBoard event file (events.out.tfevents.*) of scalar
// summaries, as TensorFlow's tf.summary.FileWriter writes one.
#pragma once

#include "schema/Status.h"

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tensorflow {
class Event;
}

namespace dtf::summary {

/// A scalar's tag ("loss", "learning_rate") and value.
using Scalar = std::pair<std::string, double>;

struct EventWriterOptions {
  /// Buffered events reach the file at most this many seconds after they
  /// were written (a background flush), and at close.
  double flushSeconds = 2;
  /// The file name's host part; empty: gethostname().
  std::string hostname;
};

/// Writes `<dir>/events.out.tfevents.<unix seconds>.<hostname>`: first the
/// `file_version: "brain.Event:2"` event, then one event per call. Thread
/// safe. A name already taken (two writers within a second) gets ".1", ".2"...
/// appended, so no run overwrites another's events.
class EventWriter {
public:
  /// Creates `dir` (and its parents) and the event file.
  static Status open(const std::string &dir, std::unique_ptr<EventWriter> *out,
                     const EventWriterOptions &options = {});
  /// Closes (errors are lost; call close() to see them).
  ~EventWriter();

  /// One event at `step` holding a simple_value summary per scalar (written
  /// as float, TensorBoard's scalar type).
  Status writeScalars(int64_t step, const std::vector<Scalar> &scalars);
  Status writeScalar(int64_t step, const std::string &tag, double value) {
    return writeScalars(step, {{tag, value}});
  }
  /// Any event; a zero wall_time is set to now.
  Status writeEvent(const tensorflow::Event &event);

  /// Writes the buffered events to the file.
  Status flush();
  /// Flushes and closes the file; later writes fail. Returns the first error
  /// of any write or flush, including the background ones.
  Status close();

  /// The event file's path.
  const std::string &path() const { return path_; }

private:
  EventWriter() = default;
  Status writeLocked(const std::string &record);
  Status flushLocked();
  void flushLoop();

  std::string path_;
  double flushSeconds_ = 2;
  std::mutex mu_;
  std::condition_variable wake_;
  std::FILE *file_ = nullptr;
  bool dirty_ = false;
  bool closing_ = false;
  Status error_; // the first failure; sticky
  std::thread flusher_;
};

/// Seconds since the Unix epoch, with microseconds (an Event's wall_time).
double wallTimeNow();

} // namespace dtf::summary
