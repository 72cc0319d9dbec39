// Writes a compiled module (after dtf-autodiff and dtf-optimize) as a plan.
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include "plan.pb.h"

namespace mlir::dtf {

/// Fills `plan` from `module`: its variables, the @train_step and @eval
/// programs, and the training settings. Reports what it cannot express
/// through the module's diagnostics.
LogicalResult emitPlan(ModuleOp module, llvm::StringRef source,
                       ::dtf::plan::Plan &plan);

} // namespace mlir::dtf
