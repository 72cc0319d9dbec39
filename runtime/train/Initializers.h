// Variable initialization: TensorFlow's initializers, seeded from the run's
// seed and each variable's name so that every run and machine agrees.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"
#include "runtime/exec/VariableStore.h"

#include "plan.pb.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace dtf::train {

/// TensorFlow's fan_in and fan_out of a weight shape: 1 and 1 for a scalar;
/// dim 0 for both of a vector; [in, out] for a matrix; and for a conv kernel
/// [..., in, out] the receptive field (the product of the leading dims) times
/// in and times out.
void computeFans(const std::vector<int64_t> &shape, double *fanIn,
                 double *fanOut);

/// The seed of a variable's random stream: Initializer.seed when the plan
/// sets one, else a hash of (the run's seed, the variable's name).
uint64_t variableSeed(uint64_t runSeed, const plan::Variable &var);

/// The initializer's parameter `name` (stddev, minval, ...), or dflt.
double initializerParam(const plan::Initializer &init, const char *name, double dflt);

/// A new tensor of the variable's type filled by its initializer:
///   zeros, ones, constant{value};
///   uniform{minval = 0, maxval = 1}: [minval, maxval);
///   normal{mean = 0, stddev = 1};
///   truncated_normal{mean = 0, stddev = 1}: values beyond 2 stddev drawn
///     again;
///   glorot_uniform: uniform in +-sqrt(6 / (fan_in + fan_out));
///   he_normal: truncated normal, stddev sqrt(2 / fan_in) / .8796... (the
///     stddev of a unit normal truncated at 2, as TensorFlow's he_normal);
///   orthogonal{gain = 1}: Keras' Orthogonal, the rank >= 2 shape as a
///     matrix [product of the other dims, last dim] with orthonormal rows or
///     columns (whichever are fewer), times gain.
/// An empty kind is zeros. Random kinds need f32 or f64 (drawn in double and
/// rounded once); zeros, ones and constant also fill i32, i64 and bool
/// variables.
Status initializeVariable(const plan::Variable &var, uint64_t runSeed,
                          Tensor *out);

/// Rows [rowOffset, rowOffset + rows) of what initializeVariable makes (all
/// of it when rows < 0), without the rest in memory: a ps initializes its
/// shard of a large table so. Each row of a random kind draws from a stream
/// of its own (seeded by the variable's seed and the row), so a shard costs
/// its own rows only, and every placement starts from the same values.
Status initializeRows(const plan::Variable &var, uint64_t runSeed,
                      int64_t rowOffset, int64_t rows, Tensor *out);

/// Creates every variable of `plan` in `store` (which must not hold them
/// yet). A variable of role "moving_average" starts as a copy of the first
/// value of the variable it averages (`slot_of`). Errors name the variable.
Status initializeVariables(const plan::Plan &plan, uint64_t runSeed,
                           exec::VariableStore *store);

} // namespace dtf::train
