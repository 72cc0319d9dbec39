// Verifiers of the optimizer updates whose hyperparameters have a range the
// types do not say (FTRL's), and of the loss-scaling ops' scalars.
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

namespace {

bool isScalar(Type t) { return cast<RankedTensorType>(t).getRank() == 0; }

} // namespace

LogicalResult UnscaleGradientsOp::verify() {
  if (getGrads().empty())
    return emitOpError() << "expects at least one gradient";
  if (!isScalar(getScale().getType()) ||
      !getScale().getType().getElementType().isF32())
    return emitOpError() << "expects the scale as an f32 scalar, got "
                         << getScale().getType();
  if (!isScalar(getFinite().getType()))
    return emitOpError() << "expects finite as an i1 scalar, got "
                         << getFinite().getType();
  return success();
}

LogicalResult AdjustLossScaleOp::verify() {
  if (!isScalar(getFinite().getType()))
    return emitOpError() << "expects finite as an i1 scalar, got "
                         << getFinite().getType();
  // The variables' types: an f32 scalar scale and an i64 scalar count.
  auto check = [&](FlatSymbolRefAttr name, Type element,
                   StringRef what) -> LogicalResult {
    auto var = SymbolTable::lookupNearestSymbolFrom<VariableOp>(*this, name);
    if (!var)
      return success(); // a cut's program, away from its module: no symbols
    RankedTensorType t = var.getTensorType();
    if (t.getRank() != 0 || t.getElementType() != element)
      return emitOpError() << "expects " << what << " " << name << " to be a "
                           << element << " scalar variable, got " << t;
    return success();
  };
  if (failed(check(getScaleAttr(), Float32Type::get(getContext()), "the scale")))
    return failure();
  return check(getGoodStepsAttr(), IntegerType::get(getContext(), 64),
               "the count");
}

LogicalResult SkipUpdatesUnlessOp::verify() {
  if (!isScalar(getFinite().getType()))
    return emitOpError() << "expects finite as an i1 scalar, got "
                         << getFinite().getType();
  return success();
}
