// What dtf-fuse may put into a dtf.fused region, shared with the plan
// emitter and the kernel generator so the three agree.
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <optional>

namespace mlir::dtf {

/// How a fused kernel indexes an input over the iteration shape's elements.
enum class FusedIndex {
  Same,   // element i: the input has the iteration shape
  Scalar, // element 0: one element, broadcast everywhere
  Suffix, // element i mod its size: static trailing dims of the shape
};

/// How `operand` is indexed over `shape`, or nothing when a flat index
/// cannot reach it (say [B,1] against [B,10]).
std::optional<FusedIndex> fusedIndexOf(RankedTensorType operand,
                                       ArrayRef<int64_t> shape);

/// "same", "scalar", "suffix": KernelParam.meaning.
const char *fusedIndexName(FusedIndex index);

/// True for an elementwise op that dtf-fuse may put into a region: one of
/// the ops it knows, on f32, f64, i32, i64 or i1 elements (not integer
/// division, whose zero divisor the op-by-op kernel reports), each operand
/// indexable over its result's shape.
bool isFusableElementwise(Operation *op);

} // namespace mlir::dtf
