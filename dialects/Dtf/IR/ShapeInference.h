// Result types of dtf ops from their operand types and attributes.
//
// These rules are shared by the ops' inferReturnTypes (and so their verifiers)
// and by the front end, which calls them with an emitter that points at the
// user's source, so the messages read the same in both places.
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace mlir::dtf {

enum class Padding : uint32_t;

/// The largest size of one dimension (and of strides, dilations, windows and
/// one_hot's depth): large enough for any model, small enough that products of
/// a few sizes cannot overflow int64.
constexpr int64_t kMaxDimSize = int64_t(1) << 31;

/// Makes the diagnostic for a rule that does not hold; it may be inactive (an
/// empty InFlightDiagnostic) when the caller only asks whether a type exists.
using EmitErrorFn = llvm::function_ref<InFlightDiagnostic()>;

/// An emitter that reports at `loc`, or reports nothing when `loc` is empty.
std::function<InFlightDiagnostic()>
errorEmitterAt(std::optional<Location> loc);

/// NumPy broadcasting of two shapes. A dynamic dimension is the batch B: it
/// matches itself and broadcasts with 1, but not with a fixed size. Fails when
/// two sizes differ and neither is 1.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b);

/// Elementwise binary ops: same dtype, broadcast shapes. `resultElement` (when
/// given) replaces the dtype of the result, as for comparisons.
FailureOr<RankedTensorType> inferBroadcast(StringRef opName,
                                           RankedTensorType lhs,
                                           RankedTensorType rhs,
                                           EmitErrorFn emitError,
                                           Type resultElement = {});

FailureOr<RankedTensorType> inferMatmul(RankedTensorType a, RankedTensorType b,
                                        bool transposeA, bool transposeB,
                                        EmitErrorFn emitError);

/// One spatial output size of a convolution or pooling window.
int64_t windowOutputSize(int64_t in, int64_t window, int64_t stride,
                         int64_t dilation, Padding padding);

FailureOr<RankedTensorType>
inferConv2D(RankedTensorType input, RankedTensorType filter,
            ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
            Padding padding, EmitErrorFn emitError);

FailureOr<RankedTensorType> inferPool(StringRef opName, RankedTensorType input,
                                      ArrayRef<int64_t> window,
                                      ArrayRef<int64_t> strides,
                                      Padding padding, EmitErrorFn emitError);

FailureOr<RankedTensorType> inferTranspose(RankedTensorType x,
                                           ArrayRef<int64_t> permutation,
                                           EmitErrorFn emitError);

FailureOr<RankedTensorType> inferConcat(ArrayRef<RankedTensorType> inputs,
                                        int64_t axis, EmitErrorFn emitError);

FailureOr<RankedTensorType> inferSlice(RankedTensorType x,
                                       ArrayRef<int64_t> begin,
                                       ArrayRef<int64_t> size,
                                       EmitErrorFn emitError);

/// tile: each dimension `multiples[i]` times its size; a multiple of -1
/// (kBatchMultiple) repeats a dimension of size 1 over the batch, a dynamic
/// size in the result.
constexpr int64_t kBatchMultiple = -1;
FailureOr<RankedTensorType> inferTile(RankedTensorType x,
                                      ArrayRef<int64_t> multiples,
                                      EmitErrorFn emitError);

/// Checks that `from` broadcasts to `to` (used by broadcast_to).
LogicalResult verifyBroadcastable(ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                                  EmitErrorFn emitError);

/// Reductions over `axes` (all when empty), keeping size-1 dims on request.
FailureOr<RankedTensorType> inferReduce(StringRef opName, RankedTensorType x,
                                        std::optional<ArrayRef<int64_t>> axes,
                                        bool keepDims, EmitErrorFn emitError);

/// Normalizes `axis` (negative counts from the end) into [0, rank).
FailureOr<int64_t> normalizeAxis(StringRef opName, int64_t axis, int64_t rank,
                                 EmitErrorFn emitError);

/// The shape of `x` without dimension `axis` (argmax).
FailureOr<SmallVector<int64_t>> inferArgmaxShape(RankedTensorType x,
                                                 int64_t axis,
                                                 EmitErrorFn emitError);

FailureOr<RankedTensorType> inferSoftmaxCrossEntropy(RankedTensorType logits,
                                                     RankedTensorType labels,
                                                     EmitErrorFn emitError);

FailureOr<RankedTensorType>
inferSparseSoftmaxCrossEntropy(RankedTensorType logits,
                               RankedTensorType labels, EmitErrorFn emitError);

FailureOr<RankedTensorType> inferGather(RankedTensorType params,
                                        RankedTensorType indices,
                                        EmitErrorFn emitError);

/// Checks a reshape: same dtype and, as far as the static sizes tell, the same
/// number of elements.
LogicalResult verifyReshape(RankedTensorType from, RankedTensorType to,
                            EmitErrorFn emitError);

/// bucketize keeps the shape of its input; its boundaries are finite and
/// sorted ascending (TensorFlow's Bucketize; equal ones are allowed).
LogicalResult verifyBucketize(RankedTensorType from, RankedTensorType to,
                              ArrayRef<double> boundaries,
                              EmitErrorFn emitError);

} // namespace mlir::dtf
