// registerCpuKernels: every op family's table, added explicitly so that
// static libraries need no static-initialization tricks.
#include "runtime/kernels/CpuKernels.h"

#include "runtime/kernels/GeneratedKernels.h"
#include "runtime/kernels/cpu/KernelUtil.h"

namespace dtf {

void registerCpuKernels(KernelRegistry &registry) {
  cpu::registerElementwiseKernels(registry);
  cpu::registerMatmulKernels(registry);
  cpu::registerConvKernels(registry);
  cpu::registerRecurrentKernels(registry);
  cpu::registerPoolKernels(registry);
  cpu::registerReduceKernels(registry);
  cpu::registerShapeKernels(registry);
  cpu::registerLossKernels(registry);
  cpu::registerGatherKernels(registry);
  cpu::registerRandomKernels(registry);
  cpu::registerOptimizerKernels(registry);
  cpu::registerLossScaleKernels(registry);
  registry.add(dtf::ops::kFused, fusedKernel);
}

} // namespace dtf
