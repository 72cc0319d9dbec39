// Dropout and its gradient as regions of their own: which ops.
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/Transforms/Fusion.h"

using namespace mlir;
using namespace mlir::dtf;

bool mlir::dtf::isFusableDropout(Operation *op) {
  if (!isa<DropoutOp, DropoutGradOp>(op) || op->getNumResults() != 1 ||
      op->getNumOperands() != 1)
    return false;
  auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return t && op->getOperand(0).getType() == t &&
         (t.getElementType().isF32() || t.getElementType().isF64());
}

Operation *mlir::dtf::fusedDropoutOp(Operation *fused) {
  Operation *op = fusedLoneOp(fused);
  return op && isFusableDropout(op) ? op : nullptr;
}
