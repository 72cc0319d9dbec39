// Support for tests and benches that drive a ps task in their own process
// (runtime/distributed's runParameterServer on a loopback port): a free
// port, and a plan whose one f32 variable `big` is updated by sgd from the
// pushed gradient `g` and learning rate `lr`.
#pragma once

#include "plan.pb.h"

#include <cstdint>

namespace dtf::testing {

/// A TCP port on 127.0.0.1 that was free a moment ago.
int freeLoopbackPort();

/// var big: f32[elements] = zeros, updated by dtf.apply_sgd; already cut
/// into worker_step and ps_update.
plan::Plan oneVariableSgdPlan(int64_t elements, const char *model);

} // namespace dtf::testing
