// What the cut passes (dtf-cut-train-step, dtf-cut-stages,
// dtf-shard-ps-update) share with dtfc's plan emitter: which ops update
// variables, and the names of the programs the cut makes.
#pragma once

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::dtf {

/// The variables an update op writes in place (and, for a moving average,
/// also the variable it averages), in the order the op-by-op kernel takes
/// them: the plan op's first inputs. A dtf.fused update's are its update's.
/// Empty for an op that updates no variable.
SmallVector<StringRef> updateSymbols(Operation *op);

/// The stage of a model-parallel replica an op of a worker's step runs on:
/// the task of its worker device (0 for a chief's, a ps's or none); the
/// inputs and the pushes to the ps on stage 0; -1 for constants and
/// variable reads, which every stage using them repeats (schema/Placement's
/// stageOf, on the MLIR ops).
int stageOf(Operation &op);

/// The functions the cut makes, besides @train_step and @eval.
inline constexpr const char *kWorkerStep = "worker_step";
inline constexpr const char *kPsUpdate = "ps_update";
/// The lookup cut's (dtf-cut-train-step's `lookups`).
inline constexpr const char *kLookupWorkerStep = "lookup_worker_step";
inline constexpr const char *kLookupPsUpdate = "lookup_ps_update";
inline constexpr const char *kLookupEval = "lookup_eval";
/// dtf-cut-stages': @worker_step_stage_<k>.
inline constexpr const char *kStagePrefix = "worker_step_stage_";

} // namespace mlir::dtf
