// When to save a checkpoint: the plan's `checkpoint every N steps|s|min keep
// K`, shared by the single-machine loop and a cluster's chief. Without a
// policy (but with a model dir) only at the end, keeping 5.
#pragma once

#include "plan.pb.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace dtf::train {

class CheckpointSchedule {
public:
  /// `lastStep`: the step saved or restored last (-1: none).
  CheckpointSchedule(const plan::Training &t, bool enabled, int64_t lastStep)
      : enabled_(enabled), lastStep_(lastStep), lastTime_(Clock::now()) {
    keep_ = t.checkpoint_keep() > 0 ? int(t.checkpoint_keep()) : 5;
    const double every = t.checkpoint_every();
    if (every <= 0)
      return;
    if (t.checkpoint_unit() == "s")
      everySeconds_ = every;
    else if (t.checkpoint_unit() == "min")
      everySeconds_ = every * 60;
    else
      everySteps_ = std::max<int64_t>(1, int64_t(every));
  }
  bool enabled() const { return enabled_; }
  int keep() const { return keep_; }
  /// True when `step` (just reached) should be saved: it crossed a multiple
  /// of the step interval since the last save (a cluster's global step may
  /// jump several at once), or the time interval has passed.
  bool due(int64_t step) const {
    if (!enabled_ || step <= lastStep_)
      return false;
    if (everySteps_ > 0)
      return step / everySteps_ > std::max<int64_t>(lastStep_, 0) / everySteps_;
    return everySeconds_ > 0 &&
           std::chrono::duration<double>(Clock::now() - lastTime_).count() >=
               everySeconds_;
  }
  /// True when `step` has not been saved (nor restored) yet.
  bool unsaved(int64_t step) const { return enabled_ && step > lastStep_; }
  /// `step` was saved, or restored (then its time counts from now too).
  void saved(int64_t step) {
    lastStep_ = step;
    lastTime_ = Clock::now();
  }

private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  int keep_ = 5;
  int64_t everySteps_ = 0;
  double everySeconds_ = 0;
  int64_t lastStep_;
  Clock::time_point lastTime_;
};

} // namespace dtf::train
