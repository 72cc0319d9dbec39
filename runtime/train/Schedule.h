// The learning rate a plan's schedule gives each step, as dtf-optimize
// computes it in the graph: for summaries and for a plan that feeds it.
#pragma once

#include "plan.pb.h"

#include <cstdint>

namespace dtf::train {

/// The value of the Training.optimizer.learning_rate schedule at `step`:
/// constant; exponential_decay (learning_rate * decay_rate ^ (step /
/// decay_steps), the exponent floored when staircase); piecewise_constant
/// (values[i] while boundaries[i-1] <= step < boundaries[i]); cosine_decay
/// (Keras 3's CosineDecay, with its linear warmup).
double scheduledLearningRate(const plan::Schedule &schedule, int64_t step);

} // namespace dtf::train
