// dtf-optimize: the optimizers' updates (each variable's own: its group's or
// the model's), their slot variables, the global step, the learning-rate
// schedules, clipping and moving averages.
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>
#include <optional>

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

/// Keras 3's decoupled weight decay of the optimizer: its `weight_decay`,
/// by default 0.004 for adamw (Keras' AdamW) and none for the others.
double weightDecay(StringRef kind, DictionaryAttr optimizer) {
  return number(optimizer, "weight_decay", kind == "adamw" ? 0.004 : 0.0);
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
  /// Loss scaling: replaces each gradient by it divided by the scale, and
  /// for a dynamic scale adjusts the scale and guards the updates.
  void unscale(DictionaryAttr scaling,
               SmallVectorImpl<std::pair<VariableOp, Value>> &grads);
  Value learningRate(Attribute spec, Value step);
  Value cosineDecay(DictionaryAttr schedule, Value step);
  Value cosOfPiTimes(Value fraction);
  LogicalResult applyUpdate(VariableOp var, Value g, StringRef kind,
                            DictionaryAttr optimizer, Value lr, Value step,
                            bool sparse, ArrayRef<Value> slices);
  /// The train block's optimizers: the model's and each group's.
  void readOptimizers(DictionaryAttr settings);
  /// The optimizer of `var` (its group's, else the model's; null: none),
  /// recorded on it as dtf.optimizer for the plan's readers: "ftrl", or
  /// "ftrl (optimizer for wide)".
  DictionaryAttr optimizerOf(VariableOp var);
  /// The learning rate of `optimizer` (null: none), computed once, at the
  /// step's location (not the variable's that first asked for it).
  Value rateOf(DictionaryAttr optimizer, Value step) {
    Value &lr = rates[optimizer];
    if (!lr) {
      Location at = loc;
      loc = step.getLoc();
      lr = learningRate(optimizer ? optimizer.get("learning_rate") : Attribute(),
                        step);
      loc = at;
    }
    return lr;
  }
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
  DictionaryAttr defaultOptimizer;
  /// Variable -> its group's optimizer and the group as written.
  llvm::StringMap<std::pair<DictionaryAttr, StringRef>> groupOf;
  llvm::DenseMap<Attribute, Value> rates;
};

void UpdateBuilder::readOptimizers(DictionaryAttr settings) {
  defaultOptimizer =
      settings ? settings.getAs<DictionaryAttr>("optimizer") : DictionaryAttr();
  if (auto groups = settings ? settings.getAs<ArrayAttr>("optimizer_groups")
                             : ArrayAttr())
    for (auto group : groups.getAsRange<DictionaryAttr>())
      for (auto v : group.getAs<ArrayAttr>("variables").getAsRange<StringAttr>())
        groupOf[v.getValue()] = {group.getAs<DictionaryAttr>("optimizer"),
                                 group.getAs<StringAttr>("group").getValue()};
}

DictionaryAttr UpdateBuilder::optimizerOf(VariableOp var) {
  auto [optimizer, group] = groupOf.lookup(var.getSymName());
  if (!optimizer)
    optimizer = defaultOptimizer;
  StringRef kind =
      optimizer ? optimizer.getAs<StringAttr>("kind").getValue() : "sgd";
  var->setAttr("dtf.optimizer",
               b.getStringAttr(group.empty() ? kind.str()
                                             : (kind + " (optimizer for " +
                                                group + ")")
                                                   .str()));
  return optimizer;
}

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
  if (kind == "cosine_decay")
    return cosineDecay(schedule, step);
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

/// cos(pi * f) for f in [0, 1], from the ops every backend has: -sin(y) at
/// y = pi * (f - 1/2) in [-pi/2, pi/2], by its Taylor series to y^19, whose
/// remainder (below 3e-16) is under the rounding of f64. The dialect has no
/// cos op, and a schedule is not worth one on every backend.
Value UpdateBuilder::cosOfPiTimes(Value fraction) {
  Value y = b.create<MulOp>(loc, scalarFloat(M_PI),
                            b.create<SubOp>(loc, fraction, scalarFloat(0.5)));
  Value z = b.create<MulOp>(loc, y, y);
  // sin(y) = y * sum_k (-1)^k z^k / (2k + 1)!, by Horner from k = 9.
  double coefficients[10];
  double factorial = 1;
  for (int k = 0; k < 10; ++k) {
    if (k > 0)
      factorial *= double(2 * k) * double(2 * k + 1);
    coefficients[k] = (k % 2 ? -1.0 : 1.0) / factorial;
  }
  Value sum = scalarFloat(coefficients[9]);
  for (int k = 8; k >= 0; --k)
    sum = b.create<AddOp>(loc, scalarFloat(coefficients[k]),
                          b.create<MulOp>(loc, z, sum));
  return b.create<NegOp>(loc, b.create<MulOp>(loc, y, sum));
}

/// Keras 3's CosineDecay of the global step: a linear warmup from
/// initial_learning_rate to warmup_target over warmup_steps (when a target
/// is given), then from that rate (the target, or the initial rate) a
/// cosine down to alpha times it over decay_steps, held there after.
Value UpdateBuilder::cosineDecay(DictionaryAttr schedule, Value step) {
  double initial = number(schedule, "initial_learning_rate", 0.001);
  double decaySteps = number(schedule, "decay_steps", 1);
  double alpha = number(schedule, "alpha", 0.0);
  std::optional<double> target;
  if (Attribute t = schedule.get("warmup_target"))
    target = valueOf(t, initial);
  double warmupSteps = target ? number(schedule, "warmup_steps", 0) : 0;
  Value s = b.create<CastOp>(loc, floatScalar(), step);
  s = b.create<MinimumOp>(loc, s, scalarFloat(decaySteps + warmupSteps));
  auto decayed = [&](Value t, double from) -> Value {
    Value cosine =
        cosOfPiTimes(b.create<DivOp>(loc, t, scalarFloat(decaySteps)));
    Value half = b.create<MulOp>(
        loc, scalarFloat(0.5), b.create<AddOp>(loc, scalarFloat(1.0), cosine));
    // In [0, 1] as Keras' is: the polynomial's last bit must not make the
    // rate negative at the end of the decay (or above its start in f32).
    half = b.create<MinimumOp>(
        loc, b.create<MaximumOp>(loc, half, scalarFloat(0.0)), scalarFloat(1.0));
    Value fraction = b.create<AddOp>(
        loc, b.create<MulOp>(loc, scalarFloat(1.0 - alpha), half),
        scalarFloat(alpha));
    return b.create<MulOp>(loc, scalarFloat(from), fraction);
  };
  if (!target)
    return decayed(s, initial);
  Value decay =
      decayed(b.create<SubOp>(loc, s, scalarFloat(warmupSteps)), *target);
  if (warmupSteps <= 0)
    return decay;
  Value warm = b.create<AddOp>(
      loc,
      b.create<MulOp>(loc, scalarFloat(*target - initial),
                      b.create<DivOp>(loc, s, scalarFloat(warmupSteps))),
      scalarFloat(initial));
  Value warming = b.create<CompareOp>(loc, ComparePredicate::lt, s,
                                      scalarFloat(warmupSteps));
  return b.create<SelectOp>(loc, warming, warm, decay);
}

/// The optimizer's update of `var` by its gradient `g` (or, when `sparse`,
/// by the (indices, rows) pairs `slices`), with the optimizer's slots.
LogicalResult UpdateBuilder::applyUpdate(VariableOp var, Value g,
                                         StringRef kind,
                                         DictionaryAttr optimizer, Value lr,
                                         Value step, bool sparse,
                                         ArrayRef<Value> slices) {
  auto name = FlatSymbolRefAttr::get(var.getSymNameAttr());
  // Keras 3's decoupled weight decay, an attribute of the update.
  const double rate = weightDecay(kind, optimizer);
  FloatAttr wd = rate > 0 ? b.getF64FloatAttr(rate) : FloatAttr();
  if (kind == "sgd") {
    if (sparse)
      b.create<SparseApplySgdOp>(loc, name, lr, slices, wd);
    else
      b.create<ApplySgdOp>(loc, name, g, lr, wd);
  } else if (kind == "momentum") {
    auto accum = slot(var, "Momentum", zerosInit());
    auto momentum = b.getF64FloatAttr(number(optimizer, "momentum", 0.9));
    auto useNesterov = optimizer.getAs<BoolAttr>("use_nesterov");
    UnitAttr nesterov =
        useNesterov && useNesterov.getValue() ? b.getUnitAttr() : UnitAttr();
    if (sparse)
      b.create<SparseApplyMomentumOp>(loc, name, accum, lr, slices, momentum,
                                      nesterov, wd);
    else
      b.create<ApplyMomentumOp>(loc, name, accum, g, lr, momentum, nesterov,
                                wd);
  } else if (kind == "adam" || kind == "adamw") {
    auto m = slot(var, "Adam", zerosInit());
    auto v = slot(var, "Adam_1", zerosInit());
    auto beta1 = b.getF64FloatAttr(number(optimizer, "beta1", 0.9));
    auto beta2 = b.getF64FloatAttr(number(optimizer, "beta2", 0.999));
    // TF1's AdamOptimizer's epsilon; Keras' AdamW's for adamw.
    auto epsilon = b.getF64FloatAttr(
        number(optimizer, "epsilon", kind == "adamw" ? 1e-7 : 1e-8));
    if (sparse)
      b.create<SparseApplyAdamOp>(loc, name, m, v, lr, step, slices, beta1,
                                  beta2, epsilon, wd);
    else
      b.create<ApplyAdamOp>(loc, name, m, v, g, lr, step, beta1, beta2, epsilon,
                            wd);
  } else if (kind == "adagrad") {
    auto accum =
        slot(var, "Adagrad",
             constantInit(number(optimizer, "initial_accumulator_value", 0.1)));
    if (sparse)
      b.create<SparseApplyAdagradOp>(loc, name, accum, lr, slices, wd);
    else
      b.create<ApplyAdagradOp>(loc, name, accum, g, lr, wd);
  } else if (kind == "ftrl") {
    // TensorFlow 1's FtrlOptimizer's slot names: Ftrl (accum), Ftrl_1
    // (linear).
    auto accum =
        slot(var, "Ftrl",
             constantInit(number(optimizer, "initial_accumulator_value", 0.1)));
    auto linear = slot(var, "Ftrl_1", zerosInit());
    auto lrPower = b.getF64FloatAttr(number(optimizer, "learning_rate_power", -0.5));
    auto l1 = b.getF64FloatAttr(number(optimizer, "l1", 0.0));
    auto l2 = b.getF64FloatAttr(number(optimizer, "l2", 0.0));
    auto shrinkage = b.getF64FloatAttr(number(optimizer, "l2_shrinkage", 0.0));
    auto beta = b.getF64FloatAttr(number(optimizer, "beta", 0.0));
    if (sparse)
      b.create<SparseApplyFtrlOp>(loc, name, accum, linear, lr, slices, lrPower,
                                  l1, l2, shrinkage, beta, wd);
    else
      b.create<ApplyFtrlOp>(loc, name, accum, linear, g, lr, lrPower, l1, l2,
                            shrinkage, beta, wd);
  } else if (kind == "rmsprop") {
    // TensorFlow 1 starts the mean square at one.
    auto ms = slot(var, "RMSProp", constantInit(1.0));
    auto mom = slot(var, "RMSProp_1", zerosInit());
    auto decay = b.getF64FloatAttr(number(optimizer, "decay", 0.9));
    auto momentum = b.getF64FloatAttr(number(optimizer, "momentum", 0.0));
    auto epsilon = b.getF64FloatAttr(number(optimizer, "epsilon", 1e-10));
    if (sparse)
      b.create<SparseApplyRmspropOp>(loc, name, ms, mom, lr, slices, decay,
                                     momentum, epsilon, wd);
    else
      b.create<ApplyRmspropOp>(loc, name, ms, mom, g, lr, decay, momentum,
                               epsilon, wd);
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

void UpdateBuilder::unscale(
    DictionaryAttr scaling,
    SmallVectorImpl<std::pair<VariableOp, Value>> &grads) {
  auto scale = scaling.getAs<FlatSymbolRefAttr>("scale");
  Value s = b.create<ReadVariableOp>(
      loc, RankedTensorType::get({}, b.getF32Type()), scale);
  SmallVector<Value> values;
  SmallVector<Type> types;
  for (auto &[var, g] : grads) {
    values.push_back(g);
    types.push_back(g.getType());
  }
  auto boolScalar = RankedTensorType::get({}, b.getI1Type());
  auto op = b.create<UnscaleGradientsOp>(loc, boolScalar, types, values, s);
  for (auto [i, entry] : llvm::enumerate(grads))
    entry.second = op.getUnscaled()[i];
  // A fixed scale (no good_steps) applies every step, as TensorFlow's.
  auto goodSteps = scaling.getAs<FlatSymbolRefAttr>("good_steps");
  if (!goodSteps)
    return;
  auto growth = scaling.getAs<IntegerAttr>("growth_steps");
  b.create<AdjustLossScaleOp>(loc, scale, goodSteps, op.getFinite(),
                              b.getI64IntegerAttr(growth.getInt()));
  b.create<SkipUpdatesUnlessOp>(loc, op.getFinite());
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
  readOptimizers(settings);
  // The model's learning rate first, where it always was.
  if (defaultOptimizer || groupOf.empty())
    rateOf(defaultOptimizer, step);

  // Loss scaling (dtf-loss-scale): the gradients divided by the scale they
  // were made with, before clipping and every update, as TensorFlow's
  // LossScaleOptimizer unscales them before the inner optimizer sees them.
  auto scaling = module->getAttrOfType<DictionaryAttr>("dtf.loss_scale");
  if (scaling && !grads.empty())
    unscale(scaling, grads);

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
  // dense optimizers do, and so does weight decay, as Keras does).
  SmallVector<Operation *> unused; // dense gradients a sparse update replaced
  for (auto &[var, g] : grads) {
    loc = var.getLoc();
    DictionaryAttr optimizer = optimizerOf(var);
    StringRef kind =
        optimizer ? optimizer.getAs<StringAttr>("kind").getValue() : "sgd";
    auto lazyAttr = optimizer ? optimizer.getAs<BoolAttr>("lazy") : BoolAttr();
    const bool lazy = !lazyAttr || lazyAttr.getValue();
    const bool sameEitherWay = (kind == "sgd" || kind == "adagrad") &&
                               weightDecay(kind, optimizer) == 0;
    const bool sparseAllowed =
        !clip && !scaling && (sameEitherWay || lazy);
    Value lr = rateOf(optimizer, step);
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
             << (clip ? "clip_gradients needs its whole gradient"
                 : scaling
                     ? "mixed_float16's loss scaling needs its whole gradient"
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
