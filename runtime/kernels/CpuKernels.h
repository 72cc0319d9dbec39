// The CPU kernels of every dtf op, gradient op and optimizer update.
#pragma once

#include "runtime/kernels/Kernel.h"

namespace dtf {

/// Adds the CPU kernel of every op this runtime implements to `registry`
/// ("dtf.add", "dtf.conv2d_backprop_input", "dtf.apply_adam", ...).
void registerCpuKernels(KernelRegistry &registry);

} // namespace dtf
