// A plan's generated kernels (Plan.kernels): their checks, and the expansion
// of each dtf.fused op back into the ops of its region (the op-by-op path).
#pragma once

#include "schema/Status.h"
#include "plan.pb.h"

#include <functional>
#include <string>

namespace dtf::plan {

/// Checks Plan.kernels, cpu_object and cpu_target, and every dtf.fused op of
/// the plan's programs against the kernel it names. `name` prefixes errors.
Status validateKernels(const Plan &plan, const std::string &name);

/// A kernel's region as a program of its own: feeds "input<i>" for its
/// inputs, fetches "output<i>" for its outputs, in order.
Program kernelBodyProgram(const Kernel &kernel);

/// How many inputs `kernel` writes in place: its "inout" parameters (an
/// optimizer update's variable and slots, its first inputs); 0 for a kernel
/// that is not an update.
int inPlaceInputs(const Kernel &kernel);

/// kernelBodyProgram of an update kernel (inPlaceInputs > 0): its in-place
/// inputs are the variables "input<i>" (read by dtf.read_variable, updated
/// there), not feeds; the other inputs are fed as "input<i>".
Program updateKernelBodyProgram(const Kernel &kernel);

/// True when `program` holds a dtf.fused op.
bool hasFusedOps(const Program &program);

/// Replaces every dtf.fused op of `program` (or those `only` accepts) by its
/// kernel's body, with the body's values renumbered past the program's. The
/// kernels must have passed validateKernels.
Status expandFusedOps(const google::protobuf::RepeatedPtrField<Kernel> &kernels,
                      Program *program,
                      const std::function<bool(const Op &)> &only = {});

/// expandFusedOps on every program of `plan`, then drops the kernels and the
/// object: the plan as dtfc --fusion=off would have written it, modulo value
/// numbering (for tools that read ops, such as dtf-export).
Status expandAllFusedOps(Plan *plan);

} // namespace dtf::plan
