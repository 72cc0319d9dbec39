// The front end's builtin ops (matmul, elementwise math, shapes, reductions,
// losses, gather, pooling, ...): arguments checked, result types inferred.
#include "compiler/frontend/ModelGen.h"

#include "compiler/frontend/Builtins.h"
#include "compiler/frontend/Diagnostics.h"
#include "compiler/frontend/Parser.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"
#include "schema/DeviceName.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <sstream>

namespace mlir::dtf::frontend {

Value ModelGen::genOp(const ast::CallExpr &call, const BuiltinSpec &spec,
                      const BoundArgs &args) {
  StringRef name = spec.name;
  ast::Loc at = call.getLoc();
  if (name == "concat")
    return genConcat(call, args);
  // Ops over two tensors where either may be a number: maximum(0, x).
  // Arguments are evaluated in their written order.
  Value condition;
  if (name == "select" && !(condition = tensorArg(args, "condition")))
    return nullptr;
  Value pairFirst, pairSecond;
  StringRef secondParam = name == "matmul" ? "b"
                          : (name == "maximum" || name == "minimum" ||
                             name == "pow" || name == "floormod")
                              ? "y"
                          : name == "select" ? "on_false"
                                             : "";
  StringRef firstParam = name == "select" ? "on_true" : spec.params.front();
  if (!secondParam.empty() && args.get(firstParam) && args.get(secondParam)) {
    std::tie(pairFirst, pairSecond) =
        genPair(*args.get(firstParam), *args.get(secondParam));
    if (!pairFirst || !pairSecond)
      return nullptr;
  }
  // The first tensor argument; its dtype is the hint for number literals in
  // the others (maximum(x, 0) compares with 0.0 when x is f32).
  Value x = name == "select" ? condition
            : pairFirst      ? pairFirst
                             : tensorArg(args, spec.params.front());
  if (!x)
    return nullptr;
  OpCall op{call,
            spec,
            args,
            name,
            at,
            x,
            cast<RankedTensorType>(x.getType()),
            pairFirst,
            pairSecond};

  // Each family of ops checks its own arguments.
  using FamilyFn = Value (ModelGen::*)(const OpCall &);
  static const llvm::StringMap<FamilyFn> families = {
      {"matmul", &ModelGen::genArithmeticOp},
      {"relu", &ModelGen::genArithmeticOp},
      {"neg", &ModelGen::genArithmeticOp},
      {"sigmoid", &ModelGen::genArithmeticOp},
      {"tanh", &ModelGen::genArithmeticOp},
      {"exp", &ModelGen::genArithmeticOp},
      {"log", &ModelGen::genArithmeticOp},
      {"sqrt", &ModelGen::genArithmeticOp},
      {"rsqrt", &ModelGen::genArithmeticOp},
      {"maximum", &ModelGen::genArithmeticOp},
      {"minimum", &ModelGen::genArithmeticOp},
      {"pow", &ModelGen::genArithmeticOp},
      {"cast", &ModelGen::genArithmeticOp},
      {"select", &ModelGen::genSelect},
      {"reshape", &ModelGen::genReshape},
      {"broadcast_to", &ModelGen::genBroadcastTo},
      {"tile", &ModelGen::genTile},
      {"flatten", &ModelGen::genShapeOp},
      {"transpose", &ModelGen::genShapeOp},
      {"slice", &ModelGen::genShapeOp},
      {"sum", &ModelGen::genReductionOp},
      {"mean", &ModelGen::genReductionOp},
      {"max", &ModelGen::genReductionOp},
      {"argmax", &ModelGen::genReductionOp},
      {"softmax", &ModelGen::genReductionOp},
      {"log_softmax", &ModelGen::genReductionOp},
      {"softmax_cross_entropy", &ModelGen::genLossOp},
      {"sparse_softmax_cross_entropy", &ModelGen::genLossOp},
      {"one_hot", &ModelGen::genIndicesOp},
      {"gather", &ModelGen::genIndicesOp},
      {"dropout", &ModelGen::genDropout},
      {"max_pool", &ModelGen::genPool},
      {"avg_pool", &ModelGen::genPool},
      {"gelu", &ModelGen::genMathOp},
      {"erf", &ModelGen::genMathOp},
      {"floor", &ModelGen::genMathOp},
      {"ceil", &ModelGen::genMathOp},
      {"round", &ModelGen::genMathOp},
      {"abs", &ModelGen::genMathOp},
      {"floormod", &ModelGen::genMathOp},
      {"bucketize", &ModelGen::genMathOp},
  };
  auto family = families.find(name);
  if (family != families.end())
    return (this->*family->second)(op);
  error(at) << name << " is not supported here";
  return nullptr;
}

bool ModelGen::requireFloat(const OpCall &op, Value v) {
  if (isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType()))
    return true;
  auto diag = error(op.at) << op.name << " needs a floating-point tensor, got "
                           << formatType(v.getType());
  noteOrigin(diag, op.args.get(op.spec.params.front()), v);
  return false;
}

bool ModelGen::requireNumeric(const OpCall &op, Value v) {
  if (!cast<RankedTensorType>(v.getType()).getElementType().isInteger(1))
    return true;
  error(op.at) << op.name << " is not defined on bool tensors";
  return false;
}

Value ModelGen::genArithmeticOp(const OpCall &op) {
  StringRef name = op.name;
  ast::Loc at = op.at;
  Location l = loc(at);
  const BoundArgs &args = op.args;
  Value x = op.x;
  RankedTensorType xt = op.xt;
  if (name == "matmul") {
    Value b = op.pairSecond;
    std::optional<bool> ta = boolArg(args, "transpose_a", false);
    std::optional<bool> tb = boolArg(args, "transpose_b", false);
    if (!b || !ta || !tb || !requireNumeric(op, x))
      return nullptr;
    auto bt = cast<RankedTensorType>(b.getType());
    std::pair<const ast::Expr *, Value> operands[] = {{args.get("a"), x},
                                                      {args.get("b"), b}};
    return buildChecked<MatmulOp>(
        at, operands,
        [&](EmitErrorFn emit) { return inferMatmul(xt, bt, *ta, *tb, emit); },
        x, b, *ta, *tb);
  }
  if (name == "relu" || name == "neg") {
    if (!requireNumeric(op, x))
      return nullptr;
    return name == "relu" ? builder.create<ReluOp>(l, x).getResult()
                          : builder.create<NegOp>(l, x).getResult();
  }
  if (name == "sigmoid" || name == "tanh" || name == "exp" || name == "log" ||
      name == "sqrt" || name == "rsqrt") {
    if (!requireFloat(op, x))
      return nullptr;
    if (name == "sigmoid")
      return builder.create<SigmoidOp>(l, x);
    if (name == "tanh")
      return builder.create<TanhOp>(l, x);
    if (name == "exp")
      return builder.create<ExpOp>(l, x);
    if (name == "log")
      return builder.create<LogOp>(l, x);
    if (name == "sqrt")
      return builder.create<SqrtOp>(l, x);
    return builder.create<RsqrtOp>(l, x);
  }
  if (name == "maximum" || name == "minimum" || name == "pow") {
    Value y = op.pairSecond;
    if (!y || !requireNumeric(op, x) || (name == "pow" && !requireFloat(op, x)))
      return nullptr;
    auto yt = cast<RankedTensorType>(y.getType());
    std::pair<const ast::Expr *, Value> operands[] = {{args.get("x"), x},
                                                      {args.get("y"), y}};
    auto infer = [&](EmitErrorFn emit) {
      return inferBroadcast(name, xt, yt, emit);
    };
    if (name == "maximum")
      return buildChecked<MaximumOp>(at, operands, infer, x, y);
    if (name == "minimum")
      return buildChecked<MinimumOp>(at, operands, infer, x, y);
    return buildChecked<PowOp>(at, operands, infer, x, y);
  }
  // cast
  std::optional<Type> to = dtypeValue(args.get("to"), "to");
  if (!to)
    return nullptr;
  return builder.create<CastOp>(l, RankedTensorType::get(xt.getShape(), *to),
                                x);
}

Value ModelGen::genSelect(const OpCall &op) {
  const BoundArgs &args = op.args;
  Value x = op.x;
  RankedTensorType xt = op.xt;
  if (!xt.getElementType().isInteger(1)) {
    auto diag = error(op.at)
                << "select needs a bool condition, got " << formatType(xt);
    noteOrigin(diag, args.get("condition"), x);
    return nullptr;
  }
  Value t = op.pairFirst, f = op.pairSecond;
  if (!t || !f)
    return nullptr;
  auto tt = cast<RankedTensorType>(t.getType());
  auto ft = cast<RankedTensorType>(f.getType());
  std::pair<const ast::Expr *, Value> operands[] = {{args.get("condition"), x},
                                                    {args.get("on_true"), t},
                                                    {args.get("on_false"), f}};
  return buildChecked<SelectOp>(
      op.at, operands,
      [&](EmitErrorFn emit) -> FailureOr<RankedTensorType> {
        FailureOr<RankedTensorType> values =
            inferBroadcast("select", tt, ft, emit);
        if (failed(values))
          return failure();
        FailureOr<SmallVector<int64_t>> shape =
            broadcastShapes(xt.getShape(), values->getShape());
        if (failed(shape)) {
          emit() << "select expects a condition that broadcasts with the "
                    "values, got "
                 << xt << " and " << *values;
          return failure();
        }
        return RankedTensorType::get(*shape, values->getElementType());
      },
      x, t, f);
}

Value ModelGen::genReshape(const OpCall &op) {
  StringRef name = op.name;
  ast::Loc at = op.at;
  const BoundArgs &args = op.args;
  Value x = op.x;
  RankedTensorType xt = op.xt;
  SmallVector<ast::Loc> itemLocs;
  std::optional<SmallVector<int64_t>> shape =
      batchListValue(args.get("shape"), "shape", itemLocs);
  if (!shape)
    return nullptr;
  ast::Loc shapeLoc = resolve(args.get("shape"))->getLoc();
  int inferred = -1;
  const bool namesBatch = !shape->empty() && ShapedType::isDynamic(shape->front());
  for (auto [i, d] : llvm::enumerate(*shape)) {
    if (ShapedType::isDynamic(d)) {
      // B: the batch, which stays first, as -1 there.
      if (i != 0 || xt.hasStaticShape()) {
        auto diag = error(itemLocs[i])
                    << "reshape takes B (the batch) only as the first size "
                       "of a tensor with a batch dimension, got B at position "
                    << i << " for " << formatType(xt);
        noteOrigin(diag, args.get("x"), x);
        return nullptr;
      }
      d = -1;
    }
    if (d == -1 && inferred < 0) {
      inferred = i;
      continue;
    }
    if (d < 1 || d > kMaxDimSize) {
      error(shapeLoc) << name
                      << " sizes must be positive (with one -1 for the size "
                         "that follows from the others)"
                      << ", got " << d << " at position " << i;
      return nullptr;
    }
  }
  SmallVector<int64_t> target(*shape);
  int64_t mergedFactor = 1; // rows per example after the reshape
  if (inferred >= 0) {
    // -1 takes what is left; with a batch dimension it stays symbolic.
    int64_t rest = 1;
    for (auto [i, d] : llvm::enumerate(target))
      if (static_cast<int>(i) != inferred)
        rest *= d;
    if (!xt.hasStaticShape()) {
      // The only unknown size is the batch: -1 stands for it, first. The
      // other sizes may merge it with other axes ([B, 16, 49] -> [-1, 49]:
      // 16 rows per example) or split it back ([-1, 16, 64]); the rows
      // per example must stay a whole number.
      int64_t perExample = batchFactor(x);
      for (int64_t d : xt.getShape())
        if (!ShapedType::isDynamic(d))
          perExample *= d;
      if (inferred != 0 || rest == 0 || perExample % rest != 0) {
        auto diag = error(shapeLoc)
                    << "reshape of a batch keeps the batch first and "
                       "whole: write -1 first and sizes whose product "
                       "divides the "
                    << perExample << " elements of one example, as in "
                    << "reshape(x, [-1, " << perExample << "])";
        noteOrigin(diag, args.get("x"), x);
        return nullptr;
      }
      mergedFactor = perExample / rest;
      if (namesBatch && mergedFactor != 1) {
        // B is the batch itself: one row per example.
        auto diag = error(itemLocs[0])
                    << "reshape with B keeps one row per example, but the "
                       "other sizes take "
                    << rest << " of the " << perExample
                    << " elements of one example; write -1 to merge the "
                       "batch with other axes ("
                    << mergedFactor << " rows per example)";
        noteOrigin(diag, args.get("x"), x);
        return nullptr;
      }
    }
    if (xt.hasStaticShape()) {
      int64_t count = xt.getNumElements();
      if (count % rest != 0) {
        auto diag =
            error(shapeLoc)
            << "reshape cannot fit " << count << " elements of "
            << formatType(xt) << " into "
            << formatType(RankedTensorType::get(target, xt.getElementType()))
            << " (with -1 for one size)";
        noteOrigin(diag, args.get("x"), x);
        return nullptr;
      }
      target[inferred] = count / rest;
    } else {
      target[inferred] = kDynamic;
    }
  }
  auto type = RankedTensorType::get(target, xt.getElementType());
  std::pair<const ast::Expr *, Value> operands[] = {{args.get("x"), x}};
  Value y = buildChecked<ReshapeOp>(
      at, operands,
      [&](EmitErrorFn emit) -> FailureOr<RankedTensorType> {
        if (failed(verifyReshape(xt, type, emit)))
          return failure();
        return type;
      },
      x);
  if (y && mergedFactor > 1)
    batchFactors[y] = mergedFactor;
  return y;
}

Value ModelGen::genShapeOp(const OpCall &op) {
  StringRef name = op.name;
  ast::Loc at = op.at;
  const BoundArgs &args = op.args;
  Value x = op.x;
  RankedTensorType xt = op.xt;
  std::pair<const ast::Expr *, Value> xOperand[] = {
      {args.get(op.spec.params.front()), x}};
  if (name == "flatten") {
    if (xt.getRank() < 1) {
      error(at) << "flatten needs a tensor with a batch dimension, got "
                << formatType(xt);
      return nullptr;
    }
    int64_t rest = 1;
    for (int64_t d : xt.getShape().drop_front()) {
      if (ShapedType::isDynamic(d)) {
        error(at) << "flatten needs static sizes after the batch dimension, "
                     "got "
                  << formatType(xt);
        return nullptr;
      }
      rest *= d;
    }
    return builder.create<ReshapeOp>(
        loc(at),
        RankedTensorType::get({xt.getDimSize(0), rest}, xt.getElementType()),
        x);
  }
  if (name == "transpose") {
    std::optional<SmallVector<int64_t>> perm =
        intListValue(args.get("perm"), "perm", false);
    if (!perm)
      return nullptr;
    return buildChecked<TransposeOp>(
        at, xOperand,
        [&](EmitErrorFn emit) { return inferTranspose(xt, *perm, emit); }, x,
        *perm);
  }
  // slice
  std::optional<SmallVector<int64_t>> begin =
      intListValue(args.get("begin"), "begin", false);
  std::optional<SmallVector<int64_t>> size =
      intListValue(args.get("size"), "size", false);
  if (!begin || !size)
    return nullptr;
  return buildChecked<SliceOp>(
      at, xOperand,
      [&](EmitErrorFn emit) { return inferSlice(xt, *begin, *size, emit); }, x,
      *begin, *size);
}

Value ModelGen::genReductionOp(const OpCall &op) {
  StringRef name = op.name;
  ast::Loc at = op.at;
  Location l = loc(at);
  const BoundArgs &args = op.args;
  Value x = op.x;
  RankedTensorType xt = op.xt;
  if (name == "sum" || name == "mean" || name == "max") {
    std::pair<const ast::Expr *, Value> xOperand[] = {
        {args.get(op.spec.params.front()), x}};
    auto axes = axesArg(args, "axis");
    std::optional<bool> keep = boolArg(args, "keep_dims", false);
    if (!axes || !keep || !requireNumeric(op, x))
      return nullptr;
    auto infer = [&](EmitErrorFn emit) {
      return inferReduce(name, xt,
                         *axes ? std::optional<ArrayRef<int64_t>>(**axes)
                               : std::nullopt,
                         *keep, emit);
    };
    DenseI64ArrayAttr axesAttr =
        *axes ? builder.getDenseI64ArrayAttr(**axes) : nullptr;
    if (name == "sum")
      return buildChecked<SumOp>(at, xOperand, infer, x, axesAttr, *keep);
    if (name == "mean")
      return buildChecked<MeanOp>(at, xOperand, infer, x, axesAttr, *keep);
    return buildChecked<MaxOp>(at, xOperand, infer, x, axesAttr, *keep);
  }
  if (name == "argmax") {
    std::optional<int64_t> axis = intValue(args.get("axis"), "axis");
    std::optional<Type> outType = builder.getI32Type();
    if (args.get("output_type"))
      outType = dtypeValue(args.get("output_type"), "output_type");
    if (!axis || !outType || !requireNumeric(op, x))
      return nullptr;
    if (!outType->isInteger(32) && !outType->isInteger(64)) {
      error(resolve(args.get("output_type"))->getLoc())
          << "output_type of argmax must be i32 or i64";
      return nullptr;
    }
    auto emit = [&]() { return error(at); };
    FailureOr<SmallVector<int64_t>> shape = inferArgmaxShape(xt, *axis, emit);
    if (failed(shape))
      return nullptr;
    return builder.create<ArgmaxOp>(l, RankedTensorType::get(*shape, *outType),
                                    x, *axis);
  }
  // softmax, log_softmax
  std::optional<int64_t> axis = intArg(args, "axis", -1, INT32_MIN, INT32_MAX);
  if (!axis || !requireFloat(op, x))
    return nullptr;
  auto emit = [&]() { return error(at); };
  if (failed(normalizeAxis(name, *axis, xt.getRank(), emit)))
    return nullptr;
  if (name == "softmax")
    return builder.create<SoftmaxOp>(l, x, *axis);
  return builder.create<LogSoftmaxOp>(l, x, *axis);
}

Value ModelGen::genLossOp(const OpCall &op) {
  ast::Loc at = op.at;
  const BoundArgs &args = op.args;
  Value x = op.x;
  RankedTensorType xt = op.xt;
  Value labels = tensorArg(args, "labels");
  if (!labels || !requireFloat(op, x))
    return nullptr;
  auto lt = cast<RankedTensorType>(labels.getType());
  std::pair<const ast::Expr *, Value> operands[] = {
      {args.get("logits"), x}, {args.get("labels"), labels}};
  if (op.name == "softmax_cross_entropy")
    return buildChecked<SoftmaxCrossEntropyOp>(
        at, operands,
        [&](EmitErrorFn emit) {
          return inferSoftmaxCrossEntropy(xt, lt, emit);
        },
        x, labels);
  if (!lt.getElementType().isInteger(32) &&
      !lt.getElementType().isInteger(64)) {
    auto diag = error(at) << "sparse_softmax_cross_entropy needs class indices "
                             "(i32 or i64) as labels, got "
                          << formatType(lt)
                          << " (for label distributions, use "
                             "softmax_cross_entropy)";
    noteOrigin(diag, args.get("labels"), labels);
    return nullptr;
  }
  return buildChecked<SparseSoftmaxCrossEntropyOp>(
      at, operands,
      [&](EmitErrorFn emit) {
        return inferSparseSoftmaxCrossEntropy(xt, lt, emit);
      },
      x, labels);
}

Value ModelGen::genIndicesOp(const OpCall &op) {
  ast::Loc at = op.at;
  const BoundArgs &args = op.args;
  Value x = op.x;
  RankedTensorType xt = op.xt;
  if (op.name == "one_hot") {
    std::optional<int64_t> depth = intArg(args, "depth", 0, 1, kMaxDimSize);
    std::optional<double> on = numberArg(args, "on_value", 1.0);
    std::optional<double> off = numberArg(args, "off_value", 0.0);
    std::optional<Type> dtype = builder.getF32Type();
    if (args.get("dtype"))
      dtype = dtypeValue(args.get("dtype"), "dtype");
    if (!depth || !on || !off || !dtype)
      return nullptr;
    if (dtype->isInteger(1)) {
      error(resolve(args.get("dtype"))->getLoc())
          << "one_hot gives numbers: dtype is f32, f64, f16, bf16, i32 or i64";
      return nullptr;
    }
    if (!xt.getElementType().isInteger(32) &&
        !xt.getElementType().isInteger(64)) {
      auto diag = error(at)
                  << "one_hot needs integer indices (i32 or i64), got "
                  << formatType(xt);
      noteOrigin(diag, args.get("indices"), x);
      return nullptr;
    }
    SmallVector<int64_t> shape(xt.getShape());
    shape.push_back(*depth);
    return builder.create<OneHotOp>(
        loc(at), RankedTensorType::get(shape, *dtype), x,
        builder.getI64IntegerAttr(*depth), builder.getF64FloatAttr(*on),
        builder.getF64FloatAttr(*off));
  }
  // gather
  Value indices = tensorArg(args, "indices");
  if (!indices)
    return nullptr;
  auto it = cast<RankedTensorType>(indices.getType());
  if (!it.getElementType().isInteger(32) &&
      !it.getElementType().isInteger(64)) {
    auto diag = error(at) << "gather needs integer indices (i32 or i64), got "
                          << formatType(it);
    noteOrigin(diag, args.get("indices"), indices);
    return nullptr;
  }
  std::pair<const ast::Expr *, Value> operands[] = {
      {args.get("params"), x}, {args.get("indices"), indices}};
  return buildChecked<GatherOp>(
      at, operands, [&](EmitErrorFn emit) { return inferGather(xt, it, emit); },
      x, indices);
}

Value ModelGen::genDropout(const OpCall &op) {
  const BoundArgs &args = op.args;
  std::optional<double> rate = numberArg(args, "rate", 0.0);
  if (!rate || !requireFloat(op, op.x))
    return nullptr;
  if (!(*rate >= 0.0 && *rate < 1.0)) {
    error(resolve(args.get("rate"))->getLoc())
        << "dropout rate must be in [0, 1), got " << *rate;
    return nullptr;
  }
  IntegerAttr seed;
  auto *noSeed = dyn_cast_or_null<ast::NameExpr>(
      args.get("seed") ? resolve(args.get("seed")) : nullptr);
  if (args.get("seed") && !(noSeed && noSeed->name == "none")) {
    std::optional<int64_t> s = intValue(args.get("seed"), "seed");
    if (!s)
      return nullptr;
    seed = builder.getI64IntegerAttr(*s);
  }
  return builder.create<DropoutOp>(loc(op.at), op.x,
                                   builder.getF64FloatAttr(*rate), seed);
}

Value ModelGen::genPool(const OpCall &op) {
  StringRef name = op.name;
  const BoundArgs &args = op.args;
  Value x = op.x;
  RankedTensorType xt = op.xt;
  std::pair<const ast::Expr *, Value> xOperand[] = {
      {args.get(op.spec.params.front()), x}};
  std::optional<SmallVector<int64_t>> size = pairArg(args, "size", 2);
  if (!size)
    return nullptr;
  std::optional<SmallVector<int64_t>> strides =
      args.get("strides") ? pairArg(args, "strides", 1) : size;
  std::optional<std::string> padding =
      symbolArg(args, "padding", {"valid", "same"}, "valid");
  if (!strides || !padding || !requireFloat(op, x))
    return nullptr;
  Padding pad = *padding == "same" ? Padding::same : Padding::valid;
  auto infer = [&](EmitErrorFn emit) {
    return inferPool(name, xt, *size, *strides, pad, emit);
  };
  if (name == "max_pool")
    return buildChecked<MaxPoolOp>(op.at, xOperand, infer, x, pad, *size,
                                   *strides);
  return buildChecked<AvgPoolOp>(op.at, xOperand, infer, x, pad, *size,
                                 *strides);
}

Value ModelGen::genConcat(const ast::CallExpr &call, const BoundArgs &args) {
  auto *list = dyn_cast<ast::ListExpr>(resolve(args.get("values")));
  if (!list || list->items.empty()) {
    error(resolve(args.get("values"))->getLoc())
        << "concat takes a non-empty list of tensors, as in concat([a, b], "
           "axis = 1)";
    return nullptr;
  }
  std::optional<int64_t> axis = intValue(args.get("axis"), "axis");
  SmallVector<Value> values;
  SmallVector<RankedTensorType> types;
  SmallVector<std::pair<const ast::Expr *, Value>> operands;
  for (const ast::ExprPtr &item : list->items) {
    Value v =
        genExpr(*item, types.empty() ? Type() : types.front().getElementType());
    if (!v)
      return nullptr;
    values.push_back(v);
    types.push_back(cast<RankedTensorType>(v.getType()));
    operands.push_back({item.get(), v});
  }
  if (!axis)
    return nullptr;
  return buildChecked<ConcatOp>(
      call.getLoc(), operands,
      [&](EmitErrorFn emit) { return inferConcat(types, *axis, emit); },
      ValueRange(values), *axis);
}

} // namespace mlir::dtf::frontend
