// A plan's generated kernels as the executor uses them: loaded once per
// process, or the reason dtf-run runs their regions op by op instead.
#pragma once

#include "runtime/device/KernelCode.h"
#include "runtime/kernels/GeneratedKernels.h"

#include "plan.pb.h"

#include <memory>
#include <string>
#include <vector>

namespace dtf::exec {

struct PlanKernels {
  /// Plan.kernels without their GPU code: the bodies the op-by-op path runs.
  google::protobuf::RepeatedPtrField<plan::Kernel> kernels;
  /// The loaded CPU object; null when the regions run op by op.
  std::shared_ptr<const GeneratedKernels> loaded;
  /// Why `loaded` is null ("" when it is not).
  std::string fallbackReason;
  /// Per kernel, its GPU code (block 0 when the plan has none), for the
  /// dtf.fused ops placed on a GPU (runtime/device).
  std::vector<device::KernelCode> gpu;
};

/// The kernels of `plan` (null when it has none). Loads its cpu_object the
/// first time this process sees that object and reuses it afterwards. Runs
/// the regions op by op, with one note on stderr per object, when the object
/// is missing, does not load, was compiled for a baseline this CPU lacks, or
/// the environment sets DTF_GENERATED_KERNELS=off.
std::shared_ptr<const PlanKernels> planKernelsOf(const plan::Plan &plan);

} // namespace dtf::exec
