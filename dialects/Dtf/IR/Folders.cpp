// Folders of the dtf ops: constant folding where operands are constants of the
// result's type, and the identities that are obvious (x + 0, x * 1, neg(neg x),
// casts and reshapes to the same type, ...).
#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/Dialect/CommonFolders.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::dtf;

namespace {

/// True when `attr` is a constant whose every element is `value`.
bool isSplatOf(Attribute attr, double value) {
  auto splat = dyn_cast_or_null<SplatElementsAttr>(attr);
  if (!splat)
    return false;
  Type element = splat.getElementType();
  if (isa<FloatType>(element))
    return splat.getSplatValue<APFloat>().convertToDouble() == value;
  if (element.isInteger(1))
    return false;
  return splat.getSplatValue<APInt>().getSExtValue() ==
         static_cast<int64_t>(value);
}

/// `x` when folding `x op c` to `x` keeps the type (no broadcasting happened).
OpFoldResult identityIf(bool holds, Value x, Type resultType) {
  if (holds && x.getType() == resultType)
    return x;
  return {};
}

/// Elementwise folding of two constants of the result's type, for float and
/// integer dtypes; `intFn` may decline (returns nullopt) e.g. on division by 0.
template <typename FloatFn, typename IntFn>
OpFoldResult foldArithmetic(ArrayRef<Attribute> operands, Type resultType,
                            FloatFn floatFn, IntFn intFn) {
  auto type = cast<RankedTensorType>(resultType);
  for (Attribute operand : operands) {
    auto elements = dyn_cast_or_null<ElementsAttr>(operand);
    if (!elements || elements.getType() != type)
      return {};
  }
  if (isa<FloatType>(type.getElementType()))
    return constFoldBinaryOp<FloatAttr, APFloat, void>(
        operands, resultType, [&](const APFloat &a, const APFloat &b) {
          return floatFn(a, b);
        });
  if (type.getElementType().isInteger(1))
    return {};
  return constFoldBinaryOpConditional<IntegerAttr, APInt, void>(
      operands, resultType,
      [&](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return intFn(a, b);
      });
}

} // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult r = identityIf(isSplatOf(adaptor.getRhs(), 0), getLhs(), getType()))
    return r;
  if (OpFoldResult r = identityIf(isSplatOf(adaptor.getLhs(), 0), getRhs(), getType()))
    return r;
  return foldArithmetic(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) { return a + b; },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> { return a + b; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult r = identityIf(isSplatOf(adaptor.getRhs(), 0), getLhs(), getType()))
    return r;
  return foldArithmetic(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) { return a - b; },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> { return a - b; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult r = identityIf(isSplatOf(adaptor.getRhs(), 1), getLhs(), getType()))
    return r;
  if (OpFoldResult r = identityIf(isSplatOf(adaptor.getLhs(), 1), getRhs(), getType()))
    return r;
  return foldArithmetic(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) { return a * b; },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> { return a * b; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult r = identityIf(isSplatOf(adaptor.getRhs(), 1), getLhs(), getType()))
    return r;
  return foldArithmetic(
      adaptor.getOperands(), getType(),
      [](APFloat a, const APFloat &b) { return a / b; },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        if (b.isZero() || (b.isAllOnes() && a.isMinSignedValue()))
          return std::nullopt;
        return a.sdiv(b);
      });
}

OpFoldResult MaximumOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs())
    return getLhs();
  return foldArithmetic(
      adaptor.getOperands(), getType(),
      [](const APFloat &a, const APFloat &b) { return llvm::maximum(a, b); },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return a.sge(b) ? a : b;
      });
}

OpFoldResult MinimumOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs())
    return getLhs();
  return foldArithmetic(
      adaptor.getOperands(), getType(),
      [](const APFloat &a, const APFloat &b) { return llvm::minimum(a, b); },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return a.sle(b) ? a : b;
      });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return identityIf(isSplatOf(adaptor.getRhs(), 1), getLhs(), getType());
}

OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  auto condition = dyn_cast_or_null<SplatElementsAttr>(adaptor.getCondition());
  if (condition)
    return identityIf(true,
                      condition.getSplatValue<bool>() ? getOnTrue()
                                                      : getOnFalse(),
                      getType());
  if (getOnTrue() == getOnFalse())
    return identityIf(true, getOnTrue(), getType());
  return {};
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  if (auto inner = getX().getDefiningOp<NegOp>())
    return inner.getX();
  if (isa<FloatType>(getType().getElementType()))
    return constFoldUnaryOp<FloatAttr, APFloat, void>(
        adaptor.getOperands(), [](const APFloat &a) { return -a; });
  return constFoldUnaryOp<IntegerAttr, APInt, void>(
      adaptor.getOperands(), [](const APInt &a) { return -a; });
}

OpFoldResult ReluOp::fold(FoldAdaptor) {
  // relu is idempotent.
  if (getX().getDefiningOp<ReluOp>())
    return getX();
  return {};
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  return identityIf(true, getX(), getType());
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  // reshape(reshape(y)) reads y directly.
  if (auto inner = getX().getDefiningOp<ReshapeOp>()) {
    getXMutable().assign(inner.getX());
    return getResult();
  }
  auto type = cast<RankedTensorType>(getType());
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getX()))
    if (type.hasStaticShape())
      return dense.reshape(type);
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    if (static_cast<int64_t>(i) != p)
      return {};
  return identityIf(true, getX(), getType());
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return identityIf(true, getInputs().front(), getType());
  return {};
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (llvm::any_of(getBegin(), [](int64_t b) { return b != 0; }))
    return {};
  return identityIf(true, getX(), getType());
}

OpFoldResult BroadcastToOp::fold(FoldAdaptor) {
  return identityIf(true, getX(), getType());
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  return identityIf(getRate().isZero(), getX(), getType());
}
