// dtf-optimize: the optimizer's updates, its slot variables, the global step,
// the learning-rate schedule, clipping and moving averages.
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFOPTIMIZE
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

namespace {

double valueOf(Attribute a, double fallback) {
  return numberOf(a).value_or(fallback);
}

double number(DictionaryAttr dict, StringRef key, double fallback) {
  return dict ? valueOf(dict.get(key), fallback) : fallback;
}

/// Appends the (indices, rows) pairs of a gradient made only of
/// dtf.gather_grad ops, summed by same-type dtf.add ops, each used only
/// there (a variable that is only gathered); false for any other gradient.
/// `made` receives those ops, which the sparse update leaves unused.
bool gatherSlices(Value g, SmallVectorImpl<Value> &slices,
                  SmallVectorImpl<Operation *> &made) {
  Operation *def = g.getDefiningOp();
  if (!def || !g.hasOneUse())
    return false;
  if (auto grad = dyn_cast<GatherGradOp>(def)) {
    slices.push_back(grad.getIndices());
    slices.push_back(grad.getDy());
    made.push_back(def);
    return true;
  }
  auto add = dyn_cast<AddOp>(def);
  if (!add || add.getLhs().getType() != g.getType() ||
      add.getRhs().getType() != g.getType())
    return false;
  made.push_back(def);
  return gatherSlices(add.getLhs(), slices, made) &&
         gatherSlices(add.getRhs(), slices, made);
}

class UpdateBuilder {
public:
  UpdateBuilder(ModuleOp module, func::FuncOp train, OpBuilder &b)
      : module(module), train(train), b(b), symbols(module) {}

  LogicalResult run(DictionaryAttr settings);

private:
  /// A scalar of the hyperparameters' float type (floatType).
  Value scalarFloat(double v) {
    return b.create<ConstantOp>(loc,
                                DenseElementsAttr::get(floatScalar(), b.getFloatAttr(floatType, v)));
  }
  RankedTensorType floatScalar() { return RankedTensorType::get({}, floatType); }
  Value scalarI64(int64_t v) {
    auto type = RankedTensorType::get({}, b.getI64Type());
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getI64IntegerAttr(v)));
  }
  /// A variable beside `of` (same type and device unless told), created once.
  FlatSymbolRefAttr slot(VariableOp of, StringRef suffix, InitializerAttr init,
                         Type type = {}) {
    std::string name = (of.getSymName() + "/" + suffix).str();
    if (!symbols.lookup(name)) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(of);
      auto v = b.create<VariableOp>(of.getLoc(), StringRef(name),
                                    cast<RankedTensorType>(type ? type : of.getType()), init,
                                    /*trainable=*/false);
      if (auto device = of->getAttr("dtf.device"))
        v->setAttr("dtf.device", device);
      v->setAttr("dtf.slot_of", FlatSymbolRefAttr::get(of.getSymNameAttr()));
      symbols.insert(v);
    }
    return FlatSymbolRefAttr::get(b.getContext(), name);
  }
  InitializerAttr constantInit(double value) {
    return InitializerAttr::get(
        b.getContext(), InitKind::constant,
        b.getDictionaryAttr(b.getNamedAttr("value", b.getF64FloatAttr(value))));
  }
  InitializerAttr zerosInit() {
    return InitializerAttr::get(b.getContext(), InitKind::zeros, DictionaryAttr());
  }
  Value learningRate(Attribute spec, Value step);
  LogicalResult applyUpdate(VariableOp var, Value g, StringRef kind,
                            DictionaryAttr optimizer, Value lr, Value step,
                            bool sparse, ArrayRef<Value> slices);
  LogicalResult addMovingAverages(FloatAttr decay,
                                  ArrayRef<std::pair<VariableOp, Value>> grads,
                                  Value step);

  ModuleOp module;
  func::FuncOp train;
  OpBuilder &b;
  SymbolTable symbols;
  Location loc = UnknownLoc::get(b.getContext());
  /// The element type of the learning rate and the other computed scalars:
  /// the first gradient's (f64 for an f64 model, as TensorFlow casts the
  /// learning rate to the variable's dtype), f32 when there is none.
  Type floatType = b.getF32Type();
};

/// The learning rate of this step, as a scalar of floatType: a constant or a
/// schedule of the global step.
Value UpdateBuilder::learningRate(Attribute spec, Value step) {
  auto schedule = dyn_cast_or_null<DictionaryAttr>(spec);
  if (!schedule)
    return scalarFloat(valueOf(spec, 0.001));
  StringRef kind = schedule.getAs<StringAttr>("kind").getValue();
  if (kind == "exponential_decay") {
    // lr * rate ^ (step / decay_steps), the exponent an integer with staircase.
    double lr = number(schedule, "learning_rate", 0.001);
    int64_t decaySteps = static_cast<int64_t>(number(schedule, "decay_steps", 1));
    double rate = number(schedule, "decay_rate", 1.0);
    auto staircase = schedule.getAs<BoolAttr>("staircase");
    Value exponent;
    auto scalar = floatScalar();
    if (staircase && staircase.getValue())
      exponent = b.create<CastOp>(loc, scalar, b.create<DivOp>(loc, step, scalarI64(decaySteps)));
    else
      exponent = b.create<DivOp>(loc, b.create<CastOp>(loc, scalar, step),
                                 scalarFloat(static_cast<double>(decaySteps)));
    return b.create<MulOp>(loc, scalarFloat(lr),
                           b.create<PowOp>(loc, scalarFloat(rate), exponent));
  }
  // piecewise_constant: values[i] once step >= boundaries[i - 1].
  auto boundaries = schedule.getAs<ArrayAttr>("boundaries");
  auto values = schedule.getAs<ArrayAttr>("values");
  auto valueAt = [&](unsigned i) { return valueOf(values[i], 0.0); };
  Value lr = scalarFloat(valueAt(0));
  for (unsigned i = 0; i < boundaries.size(); ++i) {
    Value past = b.create<CompareOp>(loc, ComparePredicate::ge, step,
                                     scalarI64(cast<IntegerAttr>(boundaries[i]).getInt()));
    lr = b.create<SelectOp>(loc, past, scalarFloat(valueAt(i + 1)), lr);
  }
  return lr;
}

/// The optimizer's update of `var` by its gradient `g` (or, when `sparse`,
/// by the (indices, rows) pairs `slices`), with the optimizer's slots.
LogicalResult UpdateBuilder::applyUpdate(VariableOp var, Value g,
                                         StringRef kind,
                                         DictionaryAttr optimizer, Value lr,
                                         Value step, bool sparse,
                                         ArrayRef<Value> slices) {
  auto name = FlatSymbolRefAttr::get(var.getSymNameAttr());
  if (kind == "sgd") {
    if (sparse)
      b.create<SparseApplySgdOp>(loc, name, lr, slices);
    else
      b.create<ApplySgdOp>(loc, name, g, lr);
  } else if (kind == "momentum") {
    auto accum = slot(var, "Momentum", zerosInit());
    auto momentum = b.getF64FloatAttr(number(optimizer, "momentum", 0.9));
    auto useNesterov = optimizer.getAs<BoolAttr>("use_nesterov");
    UnitAttr nesterov =
        useNesterov && useNesterov.getValue() ? b.getUnitAttr() : UnitAttr();
    if (sparse)
      b.create<SparseApplyMomentumOp>(loc, name, accum, lr, slices, momentum,
                                      nesterov);
    else
      b.create<ApplyMomentumOp>(loc, name, accum, g, lr, momentum, nesterov);
  } else if (kind == "adam") {
    auto m = slot(var, "Adam", zerosInit());
    auto v = slot(var, "Adam_1", zerosInit());
    auto beta1 = b.getF64FloatAttr(number(optimizer, "beta1", 0.9));
    auto beta2 = b.getF64FloatAttr(number(optimizer, "beta2", 0.999));
    auto epsilon = b.getF64FloatAttr(number(optimizer, "epsilon", 1e-8));
    if (sparse)
      b.create<SparseApplyAdamOp>(loc, name, m, v, lr, step, slices, beta1,
                                  beta2, epsilon);
    else
      b.create<ApplyAdamOp>(loc, name, m, v, g, lr, step, beta1, beta2,
                            epsilon);
  } else if (kind == "adagrad") {
    auto accum =
        slot(var, "Adagrad",
             constantInit(number(optimizer, "initial_accumulator_value", 0.1)));
    if (sparse)
      b.create<SparseApplyAdagradOp>(loc, name, accum, lr, slices);
    else
      b.create<ApplyAdagradOp>(loc, name, accum, g, lr);
  } else if (kind == "rmsprop") {
    // TensorFlow 1 starts the mean square at one.
    auto ms = slot(var, "RMSProp", constantInit(1.0));
    auto mom = slot(var, "RMSProp_1", zerosInit());
    auto decay = b.getF64FloatAttr(number(optimizer, "decay", 0.9));
    auto momentum = b.getF64FloatAttr(number(optimizer, "momentum", 0.0));
    auto epsilon = b.getF64FloatAttr(number(optimizer, "epsilon", 1e-10));
    if (sparse)
      b.create<SparseApplyRmspropOp>(loc, name, ms, mom, lr, slices, decay,
                                     momentum, epsilon);
    else
      b.create<ApplyRmspropOp>(loc, name, ms, mom, g, lr, decay, momentum,
                               epsilon);
  } else {
    return train.emitError() << "unknown optimizer '" << kind << "'";
  }
  return success();
}

/// The moving average of each trained variable (`decay`: the settings'),
/// updated after its variable.
LogicalResult UpdateBuilder::addMovingAverages(
    FloatAttr decay, ArrayRef<std::pair<VariableOp, Value>> grads, Value step) {
  // min(decay, (1 + step) / (10 + step)): TensorFlow's num_updates.
  Value stepF = b.create<CastOp>(loc, floatScalar(), step);
  Value ratio =
      b.create<DivOp>(loc, b.create<AddOp>(loc, stepF, scalarFloat(1.0)),
                      b.create<AddOp>(loc, stepF, scalarFloat(10.0)));
  Value stepDecay =
      b.create<MinimumOp>(loc, scalarFloat(decay.getValueAsDouble()), ratio);
  for (auto [var, g] : grads) {
    if (var->hasAttr("dtf.dynamic"))
      return var.emitError()
             << "moving_average cannot cover the dynamic table '"
             << var.getSymName()
             << "': its rows come and go at run time; remove "
                "moving_average or use a fixed vocabulary";
    auto avg = slot(var, "ExponentialMovingAverage", var.getInitializer());
    // The runtime starts an average at its variable's first value.
    symbols.lookup<VariableOp>(avg.getValue())
        ->setAttr("dtf.moving_average", b.getUnitAttr());
    b.create<MovingAverageUpdateOp>(
        var.getLoc(), avg, FlatSymbolRefAttr::get(var.getSymNameAttr()), decay,
        stepDecay);
  }
  return success();
}

LogicalResult UpdateBuilder::run(DictionaryAttr settings) {
  Block &block = train.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  loc = ret.getLoc();

  // Split the results: the fetches stay, the gradients become updates.
  SmallVector<Value> fetches;
  SmallVector<Attribute> fetchAttrs;
  SmallVector<std::pair<VariableOp, Value>> grads;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    DictionaryAttr attrs = train.getResultAttrDict(i);
    auto of = attrs ? attrs.getAs<FlatSymbolRefAttr>("dtf.grad_of") : FlatSymbolRefAttr();
    if (!of) {
      fetches.push_back(ret.getOperand(i));
      fetchAttrs.push_back(attrs ? Attribute(attrs) : b.getDictionaryAttr({}));
      continue;
    }
    auto var = symbols.lookup<VariableOp>(of.getValue());
    if (!var)
      return train.emitError() << "gradient of unknown variable " << of;
    grads.push_back({var, ret.getOperand(i)});
  }

  // The global step, on the first ps task when variables go to ps.
  if (!symbols.lookup("global_step")) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto step = b.create<VariableOp>(loc, StringRef("global_step"),
                                     RankedTensorType::get({}, b.getI64Type()),
                                     zerosInit(), /*trainable=*/false);
    symbols.insert(step);
  }
  b.setInsertionPoint(ret);
  Value step = b.create<ReadVariableOp>(loc, RankedTensorType::get({}, b.getI64Type()),
                                        FlatSymbolRefAttr::get(b.getContext(), "global_step"));

  if (!grads.empty())
    if (auto element = dyn_cast<FloatType>(
            cast<RankedTensorType>(grads.front().second.getType()).getElementType()))
      floatType = element;
  auto optimizer = settings ? settings.getAs<DictionaryAttr>("optimizer") : DictionaryAttr();
  StringRef kind = optimizer ? optimizer.getAs<StringAttr>("kind").getValue() : "sgd";
  Value lr = learningRate(optimizer ? optimizer.get("learning_rate") : Attribute(), step);

  // Clipping by global norm.
  auto clip = settings ? settings.getAs<DictionaryAttr>("clip_gradients") : DictionaryAttr();
  if (clip && !grads.empty()) {
    SmallVector<Value> values;
    SmallVector<Type> types;
    for (auto &[var, g] : grads) {
      values.push_back(g);
      types.push_back(g.getType());
    }
    auto clipped = b.create<GlobalNormClipOp>(loc, types, values,
                                              b.getF64FloatAttr(number(clip, "clip_norm", 1.0)));
    for (auto [i, entry] : llvm::enumerate(grads))
      entry.second = clipped.getResult(i);
  }

  // A variable that is only gathered (an embedding table) gets a sparse
  // update of the rows its gathers picked, unless clipping needs its dense
  // gradient or the optimizer is told to update every row (lazy = false:
  // Adam's and momentum's slots then decay on every row, as TensorFlow 1's
  // dense optimizers do).
  auto lazyAttr = optimizer ? optimizer.getAs<BoolAttr>("lazy") : BoolAttr();
  const bool lazy = !lazyAttr || lazyAttr.getValue();
  const bool sparseAllowed =
      !clip && (kind == "sgd" || kind == "adagrad" || lazy);
  SmallVector<Operation *> unused; // dense gradients a sparse update replaced
  for (auto &[var, g] : grads) {
    loc = var.getLoc();
    SmallVector<Value> slices;
    SmallVector<Operation *> made;
    const bool sparse = sparseAllowed && gatherSlices(g, slices, made);
    if (sparse)
      llvm::append_range(unused, made);
    // A dynamic table exists only as the rows its ids were given: it can
    // take only a sparse update, which skips each shard's reserved row.
    const bool dynamic = var->hasAttr("dtf.dynamic");
    if (dynamic && !sparse)
      return var.emitError()
             << "the dynamic table '" << var.getSymName()
             << "' can only be updated row by row (a sparse update), but "
             << (clip             ? "clip_gradients needs its whole gradient"
                 : !sparseAllowed ? "the optimizer is told to update every "
                                    "row (lazy = false)"
                                  : "it is used other than by its gathers")
             << "; remove that or use a fixed vocabulary";
    if (failed(applyUpdate(var, g, kind, optimizer, lr, step, sparse, slices)))
      return failure();
  }

  // Mark the updates of dynamic tables (made just above, in order).
  for (Operation &op : block)
    if (op.getName().getStringRef().starts_with("dtf.sparse_apply_"))
      if (auto var = symbols.lookup<VariableOp>(
              op.getAttrOfType<FlatSymbolRefAttr>("var").getValue()))
        if (var->hasAttr("dtf.dynamic")) {
          auto parts = var->getAttrOfType<IntegerAttr>("dtf.partitions");
          op.setAttr("dynamic_shards",
                     b.getI64IntegerAttr(parts ? parts.getInt() : 1));
        }

  // Moving averages of the trainable variables, after their update.
  if (auto decay = settings ? settings.getAs<FloatAttr>("moving_average")
                            : FloatAttr()) {
    loc = ret.getLoc();
    if (failed(addMovingAverages(decay, grads, step)))
      return failure();
  }

  loc = ret.getLoc();
  b.create<AssignAddOp>(loc, FlatSymbolRefAttr::get(b.getContext(), "global_step"), scalarI64(1));
  b.create<func::ReturnOp>(ret.getLoc(), fetches);
  ret.erase();
  // Users before producers: each is unused once the ones after it are gone.
  for (Operation *op : unused)
    if (op->use_empty())
      op->erase();
  SmallVector<Type> types;
  for (Value v : fetches)
    types.push_back(v.getType());
  train.setType(b.getFunctionType({}, types));
  train.setAllResultAttrs(fetchAttrs);
  return success();
}

struct OptimizePass : public mlir::dtf::impl::DtfOptimizeBase<OptimizePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto train = module.lookupSymbol<func::FuncOp>("train_step");
    if (!train) {
      module.emitError() << "dtf-optimize needs @train_step (run dtf-autodiff first)";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    UpdateBuilder updates(module, train, b);
    if (failed(updates.run(module->getAttrOfType<DictionaryAttr>("dtf.train"))))
      return signalPassFailure();
  }
};

} // namespace
