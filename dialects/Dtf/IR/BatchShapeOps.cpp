// Verifiers of the shape ops whose result may take the batch from another
// tensor (broadcast_to, tile) and of tile's gradient.
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"

using namespace mlir;
using namespace mlir::dtf;

namespace {

/// Each of `result`'s positions in `fromBatch` takes its size from
/// `batchOf` at the same position at run time: `batchOf` must be there and
/// reach that far, and must not be there when nothing needs it.
LogicalResult verifyBatchOf(Operation *op, RankedTensorType result,
                            ArrayRef<int64_t> fromBatch, Value batchOf) {
  if (fromBatch.empty()) {
    if (batchOf)
      return op->emitOpError()
             << "takes no size from batch_of, so it needs none";
    return success();
  }
  if (!batchOf)
    return op->emitOpError()
           << "needs batch_of for its dynamic size in dimension "
           << fromBatch.front() << " of " << result
           << " (a tensor with the batch at that position)";
  auto batch = cast<RankedTensorType>(batchOf.getType());
  for (int64_t d : fromBatch)
    if (d >= batch.getRank() || !ShapedType::isDynamic(batch.getDimSize(d)))
      return op->emitOpError()
             << "takes dimension " << d << " of " << result << " from batch_of "
             << batch << ", which has no batch there";
  return success();
}

} // namespace

LogicalResult BroadcastToOp::verify() {
  auto from = cast<RankedTensorType>(getX().getType());
  auto to = cast<RankedTensorType>(getType());
  if (from.getElementType() != to.getElementType())
    return emitOpError() << "keeps the dtype, got " << from << " to " << to;
  if (failed(verifyBroadcastable(from.getShape(), to.getShape(),
                                 [&] { return emitError(); })))
    return failure();
  // A dynamic size of the result comes from x when x has it there (aligned
  // at the right), else from batch_of.
  SmallVector<int64_t> fromBatch;
  const int64_t pad = to.getRank() - from.getRank();
  for (int64_t d = 0; d < to.getRank(); ++d)
    if (to.isDynamicDim(d) && (d < pad || !from.isDynamicDim(d - pad)))
      fromBatch.push_back(d);
  return verifyBatchOf(*this, to, fromBatch, getBatchOf());
}

LogicalResult TileOp::verify() {
  auto x = cast<RankedTensorType>(getX().getType());
  FailureOr<RankedTensorType> inferred =
      inferTile(x, getMultiples(), [&] { return emitOpError(); });
  if (failed(inferred))
    return failure();
  if (inferred->getShape() != getType().getShape() ||
      x.getElementType() != getType().getElementType())
    return emitOpError() << "of " << x << " gives " << *inferred << ", not "
                         << getType();
  SmallVector<int64_t> fromBatch;
  for (auto [d, m] : llvm::enumerate(getMultiples()))
    if (m == kBatchMultiple)
      fromBatch.push_back(static_cast<int64_t>(d));
  return verifyBatchOf(*this, getType(), fromBatch, getBatchOf());
}

LogicalResult TileGradOp::verify() {
  auto dy = cast<RankedTensorType>(getDy().getType());
  auto x = cast<RankedTensorType>(getX().getType());
  if (dy.getElementType() != x.getElementType() || dy.getRank() != x.getRank())
    return emitOpError() << "expects dy of the input's dtype and rank, got "
                         << dy << " for " << x;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    int64_t n = dy.getDimSize(d), m = x.getDimSize(d);
    if (!ShapedType::isDynamic(n) && !ShapedType::isDynamic(m) && n % m != 0)
      return emitOpError() << "expects each size of dy to be a multiple of the "
                              "input's, got "
                           << dy << " for " << x;
  }
  return success();
}
