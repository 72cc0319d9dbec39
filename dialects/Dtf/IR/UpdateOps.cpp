// Verifiers of the optimizer updates whose hyperparameters have a range the
// types do not say: FTRL's.
#include "dialects/Dtf/IR/DtfDialect.h"

using namespace mlir;
using namespace mlir::dtf;

namespace {

/// Keras' Ftrl refuses a positive learning_rate_power and negative
/// regularization strengths; so do the ops, whoever made them.
LogicalResult verifyFtrl(Operation *op, double lrPower, double l1, double l2,
                         double l2Shrinkage, double beta) {
  if (!(lrPower <= 0))
    return op->emitOpError() << "expects lr_power <= 0, got " << lrPower;
  const std::pair<const char *, double> nonNegative[] = {
      {"l1", l1}, {"l2", l2}, {"l2_shrinkage", l2Shrinkage}, {"beta", beta}};
  for (auto [name, value] : nonNegative)
    if (!(value >= 0))
      return op->emitOpError() << "expects " << name << " >= 0, got " << value;
  return success();
}

} // namespace

LogicalResult ApplyFtrlOp::verify() {
  return verifyFtrl(*this, getLrPower().convertToDouble(),
                    getL1().convertToDouble(), getL2().convertToDouble(),
                    getL2Shrinkage().convertToDouble(),
                    getBeta().convertToDouble());
}

LogicalResult SparseApplyFtrlOp::verify() {
  if (failed(verifyFtrl(*this, getLrPower().convertToDouble(),
                        getL1().convertToDouble(), getL2().convertToDouble(),
                        getL2Shrinkage().convertToDouble(),
                        getBeta().convertToDouble())))
    return failure();
  return verifySparseSlices(*this, getVarAttr(), getLr(), getSlices());
}
