// The front end's math ops of issue 36: erf and gelu, floor, ceil, round, abs,
// floormod (also the `%` operator) and bucketize, with TensorFlow's meanings.
#include "compiler/frontend/ModelGen.h"

#include "compiler/frontend/Builtins.h"
#include "compiler/frontend/Diagnostics.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <sstream>

namespace mlir::dtf::frontend {
namespace {

/// A number as a user writes it: 5, 0.25, 1e-08.
std::string asWritten(double v) {
  std::ostringstream os;
  os.precision(15);
  os << v;
  return os.str();
}

} // namespace

/// tf.nn.gelu as TensorFlow writes it: 0.5 x (1 + erf(x / sqrt(2))), or with
/// `approximate` 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Built
/// from ops the autodiff and the generated kernels already have (x^3 as
/// x * x * x, whose gradient needs no log).
Value ModelGen::buildGelu(Value x, bool approximate, Location l) {
  Type element = cast<RankedTensorType>(x.getType()).getElementType();
  auto constant = [&](double v) -> Value {
    auto type = RankedTensorType::get({}, element);
    return builder.create<ConstantOp>(
        l, DenseElementsAttr::get(type, builder.getFloatAttr(element, v)));
  };
  Value inner;
  if (approximate) {
    Value cube = builder.create<MulOp>(l, builder.create<MulOp>(l, x, x), x);
    Value sum = builder.create<AddOp>(
        l, x, builder.create<MulOp>(l, constant(0.044715), cube));
    inner = builder.create<TanhOp>(
        l, builder.create<MulOp>(l, constant(0.7978845608028654), sum));
  } else {
    inner = builder.create<ErfOp>(
        l, builder.create<DivOp>(l, x, constant(1.4142135623730951)));
  }
  Value half = builder.create<MulOp>(l, constant(0.5), x);
  return builder.create<MulOp>(l, half,
                               builder.create<AddOp>(l, constant(1.0), inner));
}

Value ModelGen::genMathOp(const OpCall &op) {
  StringRef name = op.name;
  Location l = loc(op.at);
  Value x = op.x;
  if (name == "floormod") {
    Value y = op.pairSecond;
    if (!y || !requireNumeric(op, x))
      return nullptr;
    auto xt = op.xt, yt = cast<RankedTensorType>(y.getType());
    std::pair<const ast::Expr *, Value> operands[] = {{op.args.get("x"), x},
                                                      {op.args.get("y"), y}};
    return buildChecked<FloorModOp>(
        op.at, operands,
        [&](EmitErrorFn emit) { return inferBroadcast(name, xt, yt, emit); }, x,
        y);
  }
  if (name == "abs") {
    if (!requireNumeric(op, x))
      return nullptr;
    return builder.create<AbsOp>(l, x);
  }
  if (name == "bucketize")
    return genBucketize(op);
  if (!requireFloat(op, x))
    return nullptr;
  if (name == "gelu") {
    std::optional<bool> approximate = boolArg(op.args, "approximate", false);
    return approximate ? buildGelu(x, *approximate, l) : Value();
  }
  if (name == "erf")
    return builder.create<ErfOp>(l, x);
  if (name == "floor")
    return builder.create<FloorOp>(l, x);
  if (name == "ceil")
    return builder.create<CeilOp>(l, x);
  return builder.create<RoundOp>(l, x);
}

/// bucketize(x, boundaries = [...]): tf.raw_ops.Bucketize, i32 buckets; the
/// boundaries are numbers sorted ascending (an unsorted one is refused where
/// it is written).
Value ModelGen::genBucketize(const OpCall &op) {
  Value x = op.x;
  if (!requireNumeric(op, x))
    return nullptr;
  const ast::Expr *arg = resolve(op.args.get("boundaries"));
  auto *list = dyn_cast<ast::ListExpr>(arg);
  if (!list) {
    error(arg->getLoc()) << "bucketize boundaries must be a list of numbers "
                            "sorted ascending, such as [0, 10, 100]";
    return nullptr;
  }
  SmallVector<double> bounds;
  for (const ast::ExprPtr &item : list->items) {
    std::optional<double> v = numberValue(item.get(), "a bucketize boundary");
    if (!v)
      return nullptr;
    if (!bounds.empty() && *v < bounds.back()) {
      error(item->getLoc())
          << "bucketize boundaries must be sorted "
             "ascending, got "
          << asWritten(*v) << " after " << asWritten(bounds.back())
          << " at position " << bounds.size();
      return nullptr;
    }
    bounds.push_back(*v);
  }
  auto type = RankedTensorType::get(op.xt.getShape(), builder.getI32Type());
  return builder.create<BucketizeOp>(loc(op.at), type, x,
                                     builder.getDenseF64ArrayAttr(bounds));
}

} // namespace mlir::dtf::frontend
