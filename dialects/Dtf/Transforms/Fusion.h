// What dtf-fuse may put into a dtf.fused region, shared with the plan
// emitter and the kernel generator so the three agree.
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <optional>
#include <string>

namespace mlir::dtf {

/// How a fused kernel indexes an input over the iteration shape's elements.
enum class FusedIndex {
  Same,   // element i: the input has the iteration shape
  Scalar, // element 0: one element, broadcast everywhere
  Suffix, // element i mod its size: static trailing dims of the shape
  Prefix, // element i / D: the shape with static trailing dims as 1 (a row
          // statistic [B, 1] against [B, C]; D the product of those dims)
};

/// How `operand` is indexed over `shape`, or nothing when a flat index
/// cannot reach it (say [B,1] against [B,10]).
std::optional<FusedIndex> fusedIndexOf(RankedTensorType operand,
                                       ArrayRef<int64_t> shape);

/// "same", "scalar", "suffix", "prefix": KernelParam.meaning (a prefix
/// input's meaning also carries its divisor: "prefix:<D>").
const char *fusedIndexName(FusedIndex index);

/// For a Prefix operand of `shape`, D: the product of the trailing dims of
/// `shape` where the operand has 1.
int64_t fusedPrefixDivisor(RankedTensorType operand, ArrayRef<int64_t> shape);

/// True for an elementwise op that dtf-fuse may put into a region: one of
/// the ops it knows, on f32, f64, i32, i64 or i1 elements (not integer
/// division, whose zero divisor the op-by-op kernel reports), each operand
/// indexable over its result's shape.
bool isFusableElementwise(Operation *op);

/// The names of the ops isFusableElementwise may accept ("dtf.add", ...):
/// tests/unit/dialect/FusableOpsTest.cpp checks that a kernel of
/// tests/unit/fusion/elementwise/every_op.dtf holds each, so that the
/// generated code of every one is compared with its op-by-op kernel.
SmallVector<StringRef> fusableElementwiseOpNames();

/// For a reduction a region may end in, its spec over its operand's shape
/// (the region's iteration shape): one char per axis, 'k' kept, 'r' reduced
/// and dropped, '1' reduced and kept as size 1 (KernelParam.meaning
/// "reduce:<spec>"). The reductions: dtf.sum, dtf.mean and dtf.max over
/// one contiguous run of axes (all of them too: to one element), and
/// dtf.sum_to_shape whose
/// summed axes are one contiguous run (leading ones: a bias gradient), on
/// f32 or f64. Nothing for any other op.
std::optional<std::string> fusedReduceSpec(Operation *op);

/// Whether a spec keeps axes after its reduced run (a column reduction: a
/// bias gradient, a batch statistic), so that its kernel may sum N > 1
/// columns.
bool isColumnSpec(StringRef spec);

/// Whether two specs reduce the same axes (they may keep them differently).
bool sameReducedAxes(const std::string &a, const std::string &b);

/// The iteration shape of a dtf.fused op: the operand shape of its
/// reductions when it has any, else the shape of its results.
SmallVector<int64_t> fusedIterationShape(Operation *fused);

/// The spec of each result of a dtf.fused op: "" for a result in the
/// iteration shape, else its reduction's spec.
SmallVector<std::string> fusedResultSpecs(Operation *fused);

/// For a dense optimizer update that dtf-fuse turns into a dtf.fused region
/// of its own (dtf.apply_sgd, apply_momentum, apply_adam, apply_adagrad,
/// apply_rmsprop on f32 or f64, with a one-element learning rate and step
/// and no attribute the generated code does not know: not centered, not
/// lazy): the variable and slots it updates in place, in the order the
/// op-by-op kernel takes them. Empty for any other op.
SmallVector<StringRef> fusableUpdateSymbols(Operation *op);

/// Whether `device` (an op's dtf.device) names a GPU: "/gpu:0",
/// "/device:GPU:1", "/job:worker/task:1/gpu:0". On a GPU every op needs a
/// generated kernel (it has no other), so a region may hold one op, a
/// reduction may start one, and column reductions join; dtf-fuse-library
/// leaves a GPU's convolutions to cuDNN.
bool isGpuDevice(Attribute device);

/// The update op of a dtf.fused region that holds one (an update region
/// holds that op alone and has no results); null otherwise.
Operation *fusedUpdateOp(Operation *fused);

/// For a row op that dtf-fuse puts alone into a dtf.fused region (a "row
/// kernel", docs/kernels.md): dtf.softmax, dtf.log_softmax, their _grad ops,
/// dtf.softmax_cross_entropy, dtf.sparse_softmax_cross_entropy, their _grad
/// ops and dtf.argmax, on f32 or f64 rows along the last axis (of static,
/// non-zero size): the operand whose shape is the region's iteration shape
/// (the logits, or softmax_grad's y). Null for any other op (another axis
/// stays op by op).
Value rowOpRowsOperand(Operation *op);

/// The op of a dtf.fused region of one result that holds one op alone (a
/// row op, a dropout); null otherwise.
Operation *fusedLoneOp(Operation *fused);

/// The row op of a dtf.fused region that holds one (a row region holds that
/// op alone); null otherwise.
Operation *fusedRowOp(Operation *fused);

/// How a row kernel indexes an operand of `rowOp` (or a result, with
/// `isResult`) of type `type` over the iteration shape `shape`:
/// "same"/"output" (the shape), "row" (one element per row: the shape
/// without its last axis) or "row-index" (sparse labels: one class index
/// per row, which the runtime checks against [0, classes)).
std::string rowParamMeaning(Operation *rowOp, Type type,
                            ArrayRef<int64_t> shape, bool isResult);

/// For a dtf.dropout or dtf.dropout_grad on f32 or f64 elements that dtf-fuse
/// puts alone into a dtf.fused region (a "dropout kernel", docs/kernels.md):
/// true. Its kernel draws the op-by-op kernel's mask (runtime/kernels/
/// DropoutMask.h) from a per-step word dtf-run fills ("dropout-key").
bool isFusableDropout(Operation *op);

/// The dropout op of a dtf.fused region that holds one (alone); null
/// otherwise.
Operation *fusedDropoutOp(Operation *fused);

} // namespace mlir::dtf
