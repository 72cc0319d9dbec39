// Row ops (softmax, the cross-entropies, their gradients, argmax) as regions
// of their own: which ops and how their kernels index each operand.
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/Transforms/Fusion.h"

using namespace mlir;
using namespace mlir::dtf;

namespace {

/// A ranked f32/f64 tensor of rank >= 1 whose last dim is static and not 0.
bool isRowsTensor(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || r.getRank() == 0 ||
      !(r.getElementType().isF32() || r.getElementType().isF64()))
    return false;
  const int64_t c = r.getShape().back();
  return !ShapedType::isDynamic(c) && c > 0;
}

bool isLastAxis(int64_t axis, Type t) {
  const int64_t rank = cast<RankedTensorType>(t).getRank();
  return axis == -1 || axis == rank - 1;
}

/// Whether `t` is the rows' shape without its last axis, of element type
/// `element` (or of i32/i64 with `element` null).
bool isPerRow(Type t, RankedTensorType rows, Type element) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || r.getShape() != rows.getShape().drop_back())
    return false;
  if (element)
    return r.getElementType() == element;
  return r.getElementType().isInteger(32) || r.getElementType().isInteger(64);
}

} // namespace

Value mlir::dtf::rowOpRowsOperand(Operation *op) {
  if (op->getNumResults() != 1)
    return {};
  Type result = op->getResult(0).getType();
  auto same = [&](Value v) { return v.getType() == result; };
  if (auto o = dyn_cast<SoftmaxOp>(op))
    return isRowsTensor(result) && same(o.getLogits()) &&
                   isLastAxis(o.getAxis(), result)
               ? o.getLogits()
               : Value();
  if (auto o = dyn_cast<LogSoftmaxOp>(op))
    return isRowsTensor(result) && same(o.getLogits()) &&
                   isLastAxis(o.getAxis(), result)
               ? o.getLogits()
               : Value();
  if (auto o = dyn_cast<SoftmaxGradOp>(op))
    return isRowsTensor(result) && same(o.getDy()) && same(o.getY()) &&
                   isLastAxis(o.getAxis(), result)
               ? o.getY()
               : Value();
  if (auto o = dyn_cast<LogSoftmaxGradOp>(op))
    return isRowsTensor(result) && same(o.getDy()) && same(o.getY()) &&
                   isLastAxis(o.getAxis(), result)
               ? o.getY()
               : Value();
  if (auto o = dyn_cast<ArgmaxOp>(op)) {
    Type x = o.getX().getType();
    return isRowsTensor(x) && isLastAxis(o.getAxis(), x) &&
                   isPerRow(result, cast<RankedTensorType>(x), Type())
               ? o.getX()
               : Value();
  }
  Value logits, labels, dloss;
  bool sparse = false;
  if (auto o = dyn_cast<SoftmaxCrossEntropyOp>(op)) {
    logits = o.getLogits(), labels = o.getLabels();
  } else if (auto o = dyn_cast<SparseSoftmaxCrossEntropyOp>(op)) {
    logits = o.getLogits(), labels = o.getLabels(), sparse = true;
  } else if (auto o = dyn_cast<SoftmaxCrossEntropyGradOp>(op)) {
    logits = o.getLogits(), labels = o.getLabels(), dloss = o.getDloss();
  } else if (auto o = dyn_cast<SparseSoftmaxCrossEntropyGradOp>(op)) {
    logits = o.getLogits(), labels = o.getLabels(), dloss = o.getDloss();
    sparse = true;
  } else {
    return {};
  }
  if (!isRowsTensor(logits.getType()))
    return {};
  auto rows = cast<RankedTensorType>(logits.getType());
  Type t = rows.getElementType();
  const bool labelsFit = sparse ? isPerRow(labels.getType(), rows, Type())
                                : labels.getType() == rows;
  const bool resultFits = dloss ? result == rows : isPerRow(result, rows, t);
  if (!labelsFit || !resultFits ||
      (dloss && !isPerRow(dloss.getType(), rows, t)))
    return {};
  return logits;
}

Operation *mlir::dtf::fusedLoneOp(Operation *fused) {
  if (!isa<FusedOp>(fused) || fused->getNumResults() != 1)
    return nullptr;
  Block &body = fused->getRegion(0).front();
  if (body.getOperations().size() != 2) // the op and the yield
    return nullptr;
  return &body.front();
}

Operation *mlir::dtf::fusedRowOp(Operation *fused) {
  Operation *op = fusedLoneOp(fused);
  return op && rowOpRowsOperand(op) ? op : nullptr;
}

std::string mlir::dtf::rowParamMeaning(Operation *rowOp, Type type,
                                       ArrayRef<int64_t> shape, bool isResult) {
  auto r = cast<RankedTensorType>(type);
  if (r.getShape() == shape)
    return isResult ? "output" : "same";
  if (!isResult && !isa<FloatType>(r.getElementType()) &&
      isa<SparseSoftmaxCrossEntropyOp, SparseSoftmaxCrossEntropyGradOp>(rowOp))
    return "row-index";
  return "row";
}
