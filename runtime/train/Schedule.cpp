// The learning-rate schedules of the plan, in double.
#include "runtime/train/Schedule.h"

#include <algorithm>
#include <cmath>

namespace dtf::train {

double scheduledLearningRate(const plan::Schedule &schedule, int64_t step) {
  const std::string &kind = schedule.kind();
  if (kind == "exponential_decay" && schedule.decay_steps() > 0) {
    double p = double(step) / double(schedule.decay_steps());
    if (schedule.staircase())
      p = std::floor(p);
    return schedule.learning_rate() * std::pow(schedule.decay_rate(), p);
  }
  if (kind == "cosine_decay" && schedule.decay_steps() > 0) {
    // Keras 3's CosineDecay, as dtf-optimize builds it in the graph.
    const double decaySteps = double(schedule.decay_steps());
    const bool warmup = schedule.has_warmup_target();
    const double warmupSteps = warmup ? double(schedule.warmup_steps()) : 0;
    const double s = std::min(double(step), decaySteps + warmupSteps);
    const double from =
        warmup ? schedule.warmup_target() : schedule.learning_rate();
    if (s < warmupSteps)
      return (from - schedule.learning_rate()) * (s / warmupSteps) +
             schedule.learning_rate();
    const double pi = 3.14159265358979323846;
    const double cosine =
        0.5 * (1.0 + std::cos(pi * (s - warmupSteps) / decaySteps));
    return from * ((1.0 - schedule.alpha()) * cosine + schedule.alpha());
  }
  if (kind == "piecewise_constant" && schedule.values_size() > 0) {
    int i = 0;
    while (i < schedule.boundaries_size() && i + 1 < schedule.values_size() &&
           step >= schedule.boundaries(i))
      ++i;
    return schedule.values(i);
  }
  return schedule.learning_rate();
}

} // namespace dtf::train
