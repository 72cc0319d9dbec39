// dtf-autodiff: reverse-mode gradients of the loss for every trainable
// variable, one gradient rule per differentiable op.
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFAUTODIFF
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

bool isFloat(Value v) { return isa<FloatType>(typeOf(v).getElementType()); }

/// A shape as an attribute of gradient ops: -1 for the batch dimension.
DenseI64ArrayAttr shapeAttr(OpBuilder &b, RankedTensorType type) {
  SmallVector<int64_t> dims;
  for (int64_t d : type.getShape())
    dims.push_back(ShapedType::isDynamic(d) ? -1 : d);
  return b.getDenseI64ArrayAttr(dims);
}

/// Builds the backward ops of one function body.
class GradientBuilder {
public:
  GradientBuilder(OpBuilder &b, SymbolTable &symbols)
      : b(b), symbols(symbols) {}

  /// Gradients of `loss` for every trainable variable read in `block`,
  /// created before the block's terminator, by variable symbol, in the order
  /// of the variables' first reads.
  FailureOr<llvm::MapVector<StringAttr, Value>> run(Block &block, Value loss);

  /// The loss scale's variable (dtf-loss-scale), or null: no loss scaling.
  FlatSymbolRefAttr lossScale;

private:
  Value scalar(double value, Type element) {
    auto type = RankedTensorType::get({}, element);
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
  }
  /// dy reduced to `like`'s shape when broadcasting made it larger.
  Value unbroadcast(Value g, Value like) {
    if (typeOf(g) == typeOf(like))
      return g;
    return b.create<SumToShapeOp>(loc, typeOf(like), g, like);
  }
  void accumulate(Value v, Value g) {
    if (!g || !needsGrad.contains(v))
      return;
    auto [it, inserted] = grads.try_emplace(v, g);
    if (!inserted)
      it->second = b.create<AddOp>(loc, it->second, g);
  }
  bool isTrainableRead(Operation *op) {
    auto read = dyn_cast<ReadVariableOp>(op);
    if (!read)
      return false;
    auto var = symbols.lookup<VariableOp>(read.getName());
    return var && var.getTrainable() && isFloat(read);
  }
  LogicalResult backward(Operation *op, Value dy);
  // backward's families of ops: each gives nothing for an op not its own.
  std::optional<LogicalResult> backwardElementwise(Operation *op, Value dy);
  std::optional<LogicalResult> backwardLayer(Operation *op, Value dy);
  std::optional<LogicalResult> backwardShape(Operation *op, Value dy);
  std::optional<LogicalResult> backwardReduction(Operation *op, Value dy);
  bool needs(Value v) { return needsGrad.contains(v); }
  void unary(Value x, Value g) { accumulate(x, g); }
  /// Gradients of a broadcasting binary op's operands, each reduced to its
  /// operand's shape.
  void binary(Value lhs, Value rhs, Value gl, Value gr) {
    if (needsGrad.contains(lhs))
      accumulate(lhs, unbroadcast(gl, lhs));
    if (needsGrad.contains(rhs))
      accumulate(rhs, unbroadcast(gr, rhs));
  }
  /// A library LSTM or GRU: the training step keeps oneDNN's workspace for
  /// the gradient. The forward op becomes its Train variant (in its place,
  /// on its device), and the forward op, now unused, goes once the
  /// gradients are built. Operands: x, then the layer's variables.
  template <typename Train, typename Grad, typename Forward>
  LogicalResult recurrent(Forward o, Value dy) {
    SmallVector<Value> operands(o->getOperands());
    UnitAttr sequences = o.getReturnSequencesAttr();
    Train train;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(o);
      train = b.create<Train>(
          o.getLoc(),
          TypeRange{o.getType(),
                    RankedTensorType::get({ShapedType::kDynamic}, b.getI32Type())},
          operands);
      train.setReturnSequences(static_cast<bool>(sequences));
      if (Attribute device = o->getAttr("dtf.device"))
        train->setAttr("dtf.device", device);
      // A layer kept in f32 keeps its training op in f32 too (the gradient
      // op, made below with the other gradients, gets the mark from run()).
      if (Attribute keep = o->getAttr("dtf.keep_f32"))
        train->setAttr("dtf.keep_f32", keep);
    }
    o.getOutput().replaceAllUsesWith(train.getOutput());
    replaced.push_back(o);
    SmallVector<Value> gradOperands(operands);
    gradOperands.append({train.getOutput(), train.getWorkspace(), dy});
    SmallVector<Type> types;
    for (Value v : operands)
      types.push_back(v.getType());
    auto grad = b.create<Grad>(loc, types, gradOperands);
    grad.setReturnSequences(static_cast<bool>(sequences));
    for (auto [v, g] : llvm::zip(operands, grad->getResults()))
      accumulate(v, g);
    return success();
  }

  OpBuilder &b;
  SymbolTable &symbols;
  Location loc = UnknownLoc::get(b.getContext());
  DenseMap<Value, Value> grads;
  DenseSet<Value> needsGrad; // values that depend on a trainable variable
  // Forward ops that a training variant replaced (dtf.lstm by
  // dtf.lstm_train, dtf.gru by dtf.gru_train): erased once the gradients
  // are built.
  SmallVector<Operation *> replaced;
};

FailureOr<llvm::MapVector<StringAttr, Value>>
GradientBuilder::run(Block &block, Value loss) {
  // Forward: which values lead to a trainable variable. Only their gradients
  // are computed; everything else would be pruned anyway.
  for (Operation &op : block.without_terminator()) {
    bool needs = isTrainableRead(&op) ||
                 llvm::any_of(op.getOperands(), [&](Value v) { return needsGrad.contains(v); });
    if (needs)
      for (Value r : op.getResults())
        if (isa<RankedTensorType>(r.getType()) && isFloat(r))
          needsGrad.insert(r);
  }
  llvm::MapVector<StringAttr, Value> varGrads;
  if (!needsGrad.contains(loss))
    return varGrads;
  SmallVector<Operation *> forward;
  for (Operation &op : block.without_terminator())
    forward.push_back(&op);
  b.setInsertionPoint(block.getTerminator());
  // The seed: d loss / d loss = 1, or under loss scaling (dtf-loss-scale)
  // the scale, which is d (loss * scale) / d loss: every gradient comes out
  // multiplied by it, and dtf-optimize divides it out again.
  Type lossElement = typeOf(loss).getElementType();
  if (lossScale) {
    Value s = b.create<ReadVariableOp>(
        loc, RankedTensorType::get({}, b.getF32Type()), lossScale);
    if (!lossElement.isF32())
      s = b.create<CastOp>(loc, RankedTensorType::get({}, lossElement), s);
    grads[loss] = s;
  } else {
    grads[loss] = scalar(1.0, lossElement);
  }
  for (Operation *opPtr : llvm::reverse(forward)) {
    Operation &op = *opPtr;
    if (op.getNumResults() != 1)
      continue;
    Value dy = grads.lookup(op.getResult(0));
    if (!dy)
      continue;
    loc = op.getLoc();
    if (isTrainableRead(&op)) {
      StringAttr name = cast<ReadVariableOp>(op).getNameAttr().getAttr();
      auto [it, inserted] = varGrads.insert({name, dy});
      if (!inserted)
        it->second = b.create<AddOp>(loc, it->second, dy);
      continue;
    }
    // The gradient of an op runs where the op does (TensorFlow's
    // colocate_gradients_with_ops): a model-parallel stage computes the
    // backward pass of its own forward ops.
    Operation *before = block.getTerminator()->getPrevNode();
    if (failed(backward(&op, dy)))
      return failure();
    // Likewise a layer kept in f32 (`dtype = f32`): its gradient products
    // stay f32 under dtf-mixed-precision.
    auto device = op.getAttrOfType<StringAttr>("dtf.device");
    const bool keepF32 = op.hasAttr("dtf.keep_f32");
    if (device || keepF32)
      for (Operation *g = before ? before->getNextNode() : &block.front();
           g && g != block.getTerminator(); g = g->getNextNode()) {
        if (device && !g->hasAttr("dtf.device"))
          g->setAttr("dtf.device", device);
        if (keepF32)
          g->setAttr("dtf.keep_f32", UnitAttr::get(op.getContext()));
      }
  }
  // Reads come first in the forward order: give gradients in that order.
  llvm::MapVector<StringAttr, Value> ordered;
  for (Operation *op : forward)
    if (auto read = dyn_cast<ReadVariableOp>(op))
      if (auto g = varGrads.lookup(read.getNameAttr().getAttr()))
        ordered.insert({read.getNameAttr().getAttr(), g});
  for (Operation *op : replaced)
    op->erase();
  return ordered;
}

/// Elementwise math: gradients broadcast back to each operand's shape.
std::optional<LogicalResult> GradientBuilder::backwardElementwise(Operation *op,
                                                                  Value dy) {
  Type element = typeOf(dy).getElementType();
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](AddOp o) {
        binary(o.getLhs(), o.getRhs(), dy, dy);
        return success();
      })
      .Case([&](SubOp o) {
        binary(o.getLhs(), o.getRhs(), dy,
               needs(o.getRhs()) ? Value(b.create<NegOp>(loc, dy)) : Value());
        return success();
      })
      .Case([&](MulOp o) {
        Value gl = needs(o.getLhs()) ? Value(b.create<MulOp>(loc, dy, o.getRhs())) : Value();
        Value gr = needs(o.getRhs()) ? Value(b.create<MulOp>(loc, dy, o.getLhs())) : Value();
        binary(o.getLhs(), o.getRhs(), gl, gr);
        return success();
      })
      .Case([&](DivOp o) {
        Value gl = needs(o.getLhs()) ? Value(b.create<DivOp>(loc, dy, o.getRhs())) : Value();
        Value gr;
        if (needs(o.getRhs())) {
          // d(a/b)/db = -a / b^2 = -(result / b)
          Value q = b.create<DivOp>(loc, o.getResult(), o.getRhs());
          gr = b.create<NegOp>(loc, b.create<MulOp>(loc, dy, q));
        }
        binary(o.getLhs(), o.getRhs(), gl, gr);
        return success();
      })
      .Case<MaximumOp, MinimumOp>([&](auto o) {
        bool isMax = isa<MaximumOp>(o.getOperation());
        Value mask = b.create<CompareOp>(
            loc, isMax ? ComparePredicate::ge : ComparePredicate::le,
            o.getLhs(), o.getRhs());
        Value zero = scalar(0.0, element);
        binary(o.getLhs(), o.getRhs(), b.create<SelectOp>(loc, mask, dy, zero),
               b.create<SelectOp>(loc, mask, zero, dy));
        return success();
      })
      .Case([&](PowOp o) {
        Value a = o.getLhs(), p = o.getRhs();
        Value gl, gr;
        if (needs(a)) {
          Value pm1 = b.create<SubOp>(loc, p, scalar(1.0, element));
          gl = b.create<MulOp>(loc, b.create<MulOp>(loc, dy, p),
                               b.create<PowOp>(loc, a, pm1));
        }
        if (needs(p))
          gr = b.create<MulOp>(loc, b.create<MulOp>(loc, dy, o.getResult()),
                               b.create<LogOp>(loc, a));
        binary(a, p, gl, gr);
        return success();
      })
      .Case([&](NegOp o) {
        unary(o.getX(), b.create<NegOp>(loc, dy));
        return success();
      })
      .Case([&](ExpOp o) {
        unary(o.getX(), b.create<MulOp>(loc, dy, o.getResult()));
        return success();
      })
      .Case([&](LogOp o) {
        unary(o.getX(), b.create<DivOp>(loc, dy, o.getX()));
        return success();
      })
      .Case([&](SqrtOp o) {
        Value half = b.create<MulOp>(loc, dy, scalar(0.5, element));
        unary(o.getX(), b.create<DivOp>(loc, half, o.getResult()));
        return success();
      })
      .Case([&](RsqrtOp o) {
        Value y = o.getResult();
        Value y3 = b.create<MulOp>(loc, b.create<MulOp>(loc, y, y), y);
        unary(o.getX(), b.create<MulOp>(loc, b.create<MulOp>(loc, dy, y3),
                                        scalar(-0.5, element)));
        return success();
      })
      .Case([&](ReluOp o) {
        unary(o.getX(), b.create<ReluGradOp>(loc, typeOf(o.getX()), dy, o.getX()));
        return success();
      })
      .Case([&](SigmoidOp o) {
        unary(o.getX(), b.create<SigmoidGradOp>(loc, typeOf(dy), dy, o.getResult()));
        return success();
      })
      .Case([&](TanhOp o) {
        unary(o.getX(), b.create<TanhGradOp>(loc, typeOf(dy), dy, o.getResult()));
        return success();
      })
      .Case([&](ErfOp o) {
        // d erf(x) / dx = 2 / sqrt(pi) * exp(-x^2)
        Value x = o.getX();
        Value e = b.create<ExpOp>(
            loc, b.create<NegOp>(loc, b.create<MulOp>(loc, x, x)));
        Value scale =
            b.create<MulOp>(loc, dy, scalar(1.1283791670955126, element));
        unary(x, b.create<MulOp>(loc, scale, e));
        return success();
      })
      .Case([&](AbsOp o) {
        // dy * sign(x), 0 at x = 0 (TensorFlow's).
        Value x = o.getX(), zero = scalar(0.0, element);
        Value pos = b.create<CompareOp>(loc, ComparePredicate::gt, x, zero);
        Value neg = b.create<CompareOp>(loc, ComparePredicate::lt, x, zero);
        Value negDy =
            b.create<SelectOp>(loc, neg, b.create<NegOp>(loc, dy), zero);
        unary(x, b.create<SelectOp>(loc, pos, dy, negDy));
        return success();
      })
      .Case([&](FloorModOp o) {
        // TensorFlow's: dx = dy, dy_y = -dy * floor(x / y).
        Value x = o.getLhs(), y = o.getRhs();
        Value gr;
        if (needs(y)) {
          Value q = b.create<FloorOp>(loc, b.create<DivOp>(loc, x, y));
          gr = b.create<NegOp>(loc, b.create<MulOp>(loc, dy, q));
        }
        binary(x, y, dy, gr);
        return success();
      })
      .Case([&](SelectOp o) {
        Value zero = scalar(0.0, element);
        binary(o.getOnTrue(), o.getOnFalse(),
               b.create<SelectOp>(loc, o.getCondition(), dy, zero),
               b.create<SelectOp>(loc, o.getCondition(), zero, dy));
        return success();
      })
      .Case([&](CastOp o) {
        if (isFloat(o.getX()))
          unary(o.getX(), b.create<CastOp>(loc, typeOf(o.getX()), dy));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Matmul, convolution, the library recurrent layers and pooling.
std::optional<LogicalResult> GradientBuilder::backwardLayer(Operation *op,
                                                            Value dy) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](MatmulOp o) {
        Value a = o.getA(), m = o.getB();
        bool ta = o.getTransposeA(), tb = o.getTransposeB();
        // With C = op(A) op(B): dA and dB in the layout of A and B, summed
        // over the batch dimensions that broadcasting shared.
        if (needs(a)) {
          Value g = !ta ? b.create<MatmulOp>(loc, dy, m, false, !tb)
                  : !tb ? b.create<MatmulOp>(loc, m, dy, false, true)
                        : b.create<MatmulOp>(loc, m, dy, true, true);
          unary(a, unbroadcast(g, a));
        }
        if (needs(m)) {
          auto at = typeOf(a), mt = typeOf(m);
          Value g;
          if (mt.getRank() == 2 && at.getRank() > 2 && !ta && !tb) {
            // [..., K] @ [K, N] (a dense layer over the last axis): dB is
            // one [rows, K]^T [rows, N] product over every leading row.
            const int64_t k = at.getShape().back();
            const int64_t n = mt.getShape().back();
            auto flat = [&](Value v, int64_t cols) -> Value {
              int64_t rows = 1;
              for (int64_t d : typeOf(v).getShape().drop_back())
                rows = ShapedType::isDynamic(d) || ShapedType::isDynamic(rows)
                           ? ShapedType::kDynamic
                           : rows * d;
              return b.create<ReshapeOp>(
                  loc, RankedTensorType::get({rows, cols}, typeOf(v).getElementType()), v);
            };
            g = b.create<MatmulOp>(loc, flat(a, k), flat(dy, n), true, false);
          } else {
            g = !tb ? b.create<MatmulOp>(loc, a, dy, !ta, false)
                : !ta ? b.create<MatmulOp>(loc, dy, a, true, false)
                      : b.create<MatmulOp>(loc, dy, a, true, true);
          }
          unary(m, unbroadcast(g, m));
        }
        return success();
      })
      .Case([&](Conv2DOp o) {
        if (needs(o.getInput()))
          unary(o.getInput(), b.create<Conv2DBackpropInputOp>(
                                  loc, typeOf(o.getInput()), dy, o.getFilter(),
                                  o.getPaddingAttr(), o.getStridesAttr(),
                                  o.getDilationsAttr(), shapeAttr(b, typeOf(o.getInput()))));
        if (needs(o.getFilter()))
          unary(o.getFilter(), b.create<Conv2DBackpropFilterOp>(
                                   loc, typeOf(o.getFilter()), o.getInput(), dy,
                                   o.getPaddingAttr(), o.getStridesAttr(),
                                   o.getDilationsAttr(), shapeAttr(b, typeOf(o.getFilter()))));
        return success();
      })
      .Case([&](LstmOp o) { return recurrent<LstmTrainOp, LstmGradOp>(o, dy); })
      .Case([&](GruOp o) { return recurrent<GruTrainOp, GruGradOp>(o, dy); })
      .Case([&](MaxPoolOp o) {
        unary(o.getInput(), b.create<MaxPoolGradOp>(loc, typeOf(o.getInput()), o.getInput(), dy,
                                                    o.getPaddingAttr(), o.getWindowAttr(),
                                                    o.getStridesAttr(), UnitAttr()));
        return success();
      })
      .Case([&](AvgPoolOp o) {
        unary(o.getInput(), b.create<AvgPoolGradOp>(loc, typeOf(o.getInput()), o.getInput(), dy,
                                                    o.getPaddingAttr(), o.getWindowAttr(),
                                                    o.getStridesAttr()));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Ops that move elements: reshape, transpose, slices, broadcasts, concat,
/// gather.
std::optional<LogicalResult> GradientBuilder::backwardShape(Operation *op,
                                                            Value dy) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ReshapeOp o) {
        unary(o.getX(), b.create<ReshapeOp>(loc, typeOf(o.getX()), dy));
        return success();
      })
      .Case([&](TransposeOp o) {
        SmallVector<int64_t> inverse(o.getPermutation().size());
        for (auto [i, p] : llvm::enumerate(o.getPermutation()))
          inverse[p] = i;
        unary(o.getX(), b.create<TransposeOp>(loc, typeOf(o.getX()), dy, inverse));
        return success();
      })
      .Case([&](SliceOp o) {
        unary(o.getX(), b.create<SliceGradOp>(loc, typeOf(o.getX()), dy, o.getX(),
                                              o.getBeginAttr()));
        return success();
      })
      .Case([&](BroadcastToOp o) {
        unary(o.getX(), unbroadcast(dy, o.getX()));
        return success();
      })
      .Case([&](TileOp o) {
        unary(o.getX(), b.create<TileGradOp>(loc, typeOf(o.getX()), dy, o.getX()));
        return success();
      })
      .Case([&](ConcatOp o) -> LogicalResult {
        int64_t rank = typeOf(dy).getRank();
        int64_t axis = o.getAxisAttr().getInt();
        if (axis < 0)
          axis += rank;
        int64_t offset = 0;
        for (Value input : o.getInputs()) {
          int64_t size = typeOf(input).getDimSize(axis);
          if (ShapedType::isDynamic(size))
            return o.emitOpError() << "has no gradient when it joins along the batch dimension";
          if (needs(input)) {
            SmallVector<int64_t> begin(rank, 0), sizes(rank, -1);
            begin[axis] = offset;
            sizes[axis] = size;
            unary(input, b.create<SliceOp>(loc, typeOf(input), dy, begin, sizes));
          }
          offset += size;
        }
        return success();
      })
      .Case([&](GatherOp o) {
        unary(o.getParams(), b.create<GatherGradOp>(
                                 loc, typeOf(o.getParams()), dy, o.getIndices(),
                                 shapeAttr(b, typeOf(o.getParams()))));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Reductions, the softmaxes and their losses, dropout.
std::optional<LogicalResult> GradientBuilder::backwardReduction(Operation *op,
                                                                Value dy) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case<SumOp, MeanOp>([&](auto o) {
        unary(o.getX(), b.create<ReduceGradOp>(
                            loc, typeOf(o.getX()), dy, o.getX(), o.getAxesAttr(),
                            o.getKeepDimsAttr(),
                            isa<MeanOp>(o.getOperation()) ? b.getUnitAttr() : UnitAttr()));
        return success();
      })
      .Case([&](MaxOp o) {
        unary(o.getX(), b.create<MaxReduceGradOp>(loc, typeOf(o.getX()), dy, o.getX(),
                                                  o.getResult(), o.getAxesAttr(),
                                                  o.getKeepDimsAttr()));
        return success();
      })
      .Case([&](SoftmaxOp o) {
        unary(o.getLogits(), b.create<SoftmaxGradOp>(loc, typeOf(dy), dy, o.getResult(),
                                                     o.getAxisAttr()));
        return success();
      })
      .Case([&](LogSoftmaxOp o) {
        unary(o.getLogits(), b.create<LogSoftmaxGradOp>(loc, typeOf(dy), dy, o.getResult(),
                                                        o.getAxisAttr()));
        return success();
      })
      .Case([&](SoftmaxCrossEntropyOp o) {
        unary(o.getLogits(), b.create<SoftmaxCrossEntropyGradOp>(
                                 loc, typeOf(o.getLogits()), dy, o.getLogits(), o.getLabels()));
        return success();
      })
      .Case([&](SparseSoftmaxCrossEntropyOp o) {
        unary(o.getLogits(), b.create<SparseSoftmaxCrossEntropyGradOp>(
                                 loc, typeOf(o.getLogits()), dy, o.getLogits(), o.getLabels()));
        return success();
      })
      .Case([&](DropoutOp o) {
        unary(o.getX(), b.create<DropoutGradOp>(loc, typeOf(dy), dy, o.getRateAttr(),
                                                o.getSeedAttr()));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

LogicalResult GradientBuilder::backward(Operation *op, Value dy) {
  // Each family answers for its own ops and leaves the others.
  for (auto family :
       {&GradientBuilder::backwardElementwise, &GradientBuilder::backwardLayer,
        &GradientBuilder::backwardShape, &GradientBuilder::backwardReduction})
    if (std::optional<LogicalResult> done = (this->*family)(op, dy))
      return *done;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      // No gradient (TensorFlow's None): floor, ceil and round are flat
      // almost everywhere, so they hold their input constant, as
      // stop_gradient does.
      .Case<ConstantOp, InputOp, ReadVariableOp, ArgmaxOp, CompareOp, OneHotOp,
            FloorOp, CeilOp, RoundOp, BucketizeOp>(
          [](Operation *) { return success(); })
      .Default([&](Operation *other) -> LogicalResult {
        return other->emitOpError()
               << "has no gradient rule yet, and the loss depends on it through "
                  "a trainable variable";
      });
}

/// The model's forward function: named by the module's dtf.model attribute.
func::FuncOp findModel(ModuleOp module) {
  auto name = module->getAttrOfType<StringAttr>("dtf.model");
  if (name)
    return module.lookupSymbol<func::FuncOp>(name);
  func::FuncOp only;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (only)
      return nullptr;
    only = f;
  }
  return only;
}

/// Collects the dtf.slice_grad ops summed by a tree of same-type dtf.add
/// ops rooted at `g` (the inner adds and the slice_grads each used only
/// there). False for any other leaf.
bool sliceGradLeaves(Value g, bool root, SmallVectorImpl<SliceGradOp> &leaves,
                     SmallVectorImpl<Operation *> &adds) {
  Operation *def = g.getDefiningOp();
  if (!def || (!root && !g.hasOneUse()))
    return false;
  if (auto sg = dyn_cast<SliceGradOp>(def)) {
    if (root)
      return false;
    leaves.push_back(sg);
    return true;
  }
  auto add = dyn_cast<AddOp>(def);
  if (!add || add.getLhs().getType() != g.getType() ||
      add.getRhs().getType() != g.getType())
    return false;
  adds.push_back(def);
  return sliceGradLeaves(add.getLhs(), false, leaves, adds) &&
         sliceGradLeaves(add.getRhs(), false, leaves, adds);
}

/// A value sliced into pieces that tile it along one axis (an LSTM's four
/// gates, each time step of an unrolled recurrence) gets, as its gradient,
/// the sum of one zero-padded dtf.slice_grad per piece: n passes over the
/// whole tensor to write zeros and n - 1 to add them. The pieces'
/// gradients joined by one dtf.concat are the same values (each element
/// of the sum is one piece's, plus zeros) in one pass.
void joinSliceGradients(func::FuncOp train) {
  SmallVector<AddOp> roots;
  train.walk([&](AddOp add) {
    Value r = add.getResult();
    if (!r.hasOneUse() || !isa<AddOp>(*r.getUsers().begin()) ||
        r.getUsers().begin()->getResult(0).getType() != r.getType())
      roots.push_back(add);
  });
  for (AddOp root : roots) {
    SmallVector<SliceGradOp> leaves;
    SmallVector<Operation *> adds;
    if (!sliceGradLeaves(root.getResult(), true, leaves, adds) ||
        leaves.size() < 2)
      continue;
    auto out = typeOf(root.getResult());
    const int64_t rank = out.getRank();
    // The one axis the pieces split: every other begins at 0 and spans the
    // whole output (static and equal, or both dynamic: a slice of size -1).
    int64_t axis = -1;
    bool ok = out.hasRank();
    for (SliceGradOp sg : leaves) {
      auto piece = typeOf(sg.getDy());
      ArrayRef<int64_t> begin = sg.getBegin();
      if (piece.getRank() != rank || int64_t(begin.size()) != rank ||
          typeOf(sg.getOutput()) != out ||
          piece.getElementType() != out.getElementType()) {
        ok = false;
        break;
      }
      for (int64_t d = 0; d < rank && ok; ++d) {
        if (begin[d] == 0 && piece.getDimSize(d) == out.getDimSize(d))
          continue;
        if (piece.isDynamicDim(d) || out.isDynamicDim(d) ||
            (axis >= 0 && axis != d))
          ok = false;
        else
          axis = d;
      }
      if (!ok)
        break;
    }
    if (!ok || axis < 0)
      continue;
    // The pieces, in order along the axis, must cover it exactly once.
    llvm::sort(leaves, [&](SliceGradOp a, SliceGradOp b) {
      return a.getBegin()[axis] < b.getBegin()[axis];
    });
    int64_t next = 0;
    for (SliceGradOp sg : leaves) {
      if (sg.getBegin()[axis] != next) {
        ok = false;
        break;
      }
      next += typeOf(sg.getDy()).getDimSize(axis);
    }
    if (!ok || next != out.getDimSize(axis))
      continue;
    OpBuilder b(root);
    SmallVector<Value> pieces;
    for (SliceGradOp sg : leaves)
      pieces.push_back(sg.getDy());
    auto concat = b.create<ConcatOp>(root.getLoc(), pieces, axis);
    if (concat.getType() != out) {
      concat.erase();
      continue;
    }
    root.getResult().replaceAllUsesWith(concat.getResult());
    for (Operation *add : adds) // the root first, then down the tree
      add->erase();
    for (SliceGradOp sg : leaves)
      sg.erase();
  }
}

struct AutodiffPass : public mlir::dtf::impl::DtfAutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp model = findModel(module);
    if (!model) {
      module.emitError() << "dtf-autodiff needs the model function (named by "
                            "the dtf.model attribute)";
      return signalPassFailure();
    }
    if (model.getNumResults() == 0) {
      model.emitError() << "dtf-autodiff needs a loss: the model function "
                           "returns nothing (is there a train block?)";
      return signalPassFailure();
    }
    // Every dropout gets a seed, so its gradient draws the same mask.
    int64_t nextSeed = 1;
    model.walk([&](DropoutOp d) {
      if (!d.getSeedAttr())
        d.setSeedAttr(IntegerAttr::get(IntegerType::get(&getContext(), 64), nextSeed++));
    });

    OpBuilder b(module.getContext());
    SymbolTable symbols(module);
    b.setInsertionPointAfter(model);

    // @eval: the forward function without dropout.
    auto eval = cast<func::FuncOp>(b.clone(*model));
    eval.setSymName("eval");
    eval.walk([](DropoutOp d) {
      d.getResult().replaceAllUsesWith(d.getX());
      d.erase();
    });
    // Evaluation takes the moving statistics and does not update them.
    eval.walk([](IfTrainingOp o) {
      o.getResult().replaceAllUsesWith(o.getEvaluation());
      o.erase();
    });
    eval.walk([](AssignMovingAverageOp o) { o.erase(); });
    // Evaluation looks rows of dynamic tables up without making any.
    eval.walk([](DynamicRowsOp o) { o.setCreate(false); });
    symbols.insert(eval);

    // @train_step: the forward function, then its gradients.
    auto train = cast<func::FuncOp>(b.clone(*model));
    train.setSymName("train_step");
    train.walk([](IfTrainingOp o) {
      o.getResult().replaceAllUsesWith(o.getTraining());
      o.erase();
    });
    symbols.insert(train);
    Block &block = train.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    GradientBuilder gradients(b, symbols);
    if (auto scaling = module->getAttrOfType<DictionaryAttr>("dtf.loss_scale"))
      gradients.lossScale = scaling.getAs<FlatSymbolRefAttr>("scale");
    FailureOr<llvm::MapVector<StringAttr, Value>> grads =
        gradients.run(block, ret.getOperand(0));
    if (failed(grads))
      return signalPassFailure();
    SmallVector<Value> results(ret.getOperands());
    SmallVector<Attribute> resultAttrs;
    for (unsigned i = 0; i < train.getNumResults(); ++i)
      resultAttrs.push_back(train.getResultAttrDict(i) ? Attribute(train.getResultAttrDict(i))
                                                        : b.getDictionaryAttr({}));
    for (auto &[name, g] : *grads) {
      results.push_back(g);
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr("dtf.grad_of", FlatSymbolRefAttr::get(name))));
    }
    b.setInsertionPoint(ret);
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    train.setType(b.getFunctionType({}, types));
    train.setAllResultAttrs(resultAttrs);
    joinSliceGradients(train);
  }
};

} // namespace
