// A test model compiled to a plan as dtfc compiles it, for the gradient and
// optimizer-step tests.
#pragma once

#include "plan.pb.h"

#include <string>

namespace dtf::testing {

/// Compiles `source` (autodiff, optimize, the precision policy; with `fuse`, the library folds and
/// the generated kernels, compiled for the CPU), appending every diagnostic
/// to `error`; false on any failure.
bool compileCase(const std::string &source, dtf::plan::Plan &plan,
                 std::string &error, bool fuse = false);

} // namespace dtf::testing
