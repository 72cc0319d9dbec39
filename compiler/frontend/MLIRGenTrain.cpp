// The front end's train block: optimizer, schedules, replication and update
// modes, data, evaluation, checkpoints and summaries, as module attributes.
#include "compiler/frontend/ModelGen.h"

#include "compiler/frontend/Builtins.h"
#include "compiler/frontend/Diagnostics.h"
#include "compiler/frontend/Parser.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"
#include "schema/DeviceName.h"
#include "schema/PlanSchema.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <glob.h>
#include <limits>
#include <sstream>

namespace mlir::dtf::frontend {

Attribute ModelGen::literalAttr(const ast::Expr *expr, StringRef what) {
  expr = resolve(expr);
  if (auto *n = dyn_cast<ast::NumberExpr>(expr))
    return n->isInteger ? Attribute(builder.getI64IntegerAttr(
                              static_cast<int64_t>(n->value)))
                        : Attribute(builder.getF64FloatAttr(n->value));
  if (isa<ast::NegExpr>(expr)) {
    std::optional<double> v = numberValue(expr, what);
    return v ? builder.getF64FloatAttr(*v) : Attribute();
  }
  if (auto *b = dyn_cast<ast::BoolExpr>(expr))
    return builder.getBoolAttr(b->value);
  if (auto *s = dyn_cast<ast::StringExpr>(expr))
    return builder.getStringAttr(s->value);
  if (auto *n = dyn_cast<ast::NameExpr>(expr))
    return builder.getStringAttr(n->name);
  if (auto *l = dyn_cast<ast::ListExpr>(expr)) {
    SmallVector<Attribute> items;
    for (const ast::ExprPtr &item : l->items) {
      Attribute a = literalAttr(item.get(), what);
      if (!a)
        return nullptr;
      items.push_back(a);
    }
    return builder.getArrayAttr(items);
  }
  if (isa<ast::CallExpr>(expr))
    return configCall(expr, BuiltinKind::Schedule, what);
  error(expr->getLoc()) << what
                        << " must be a number, a bool, a string, a "
                           "name or a list";
  return nullptr;
}

bool ModelGen::checkTFRecordArgs(DictionaryAttr dict,
                                 const ast::CallExpr *call) {
  auto argLoc = [&](StringRef name) {
    if (call)
      for (const ast::Arg &a : call->args)
        if (a.key == name)
          return a.value->getLoc();
    return call ? call->getLoc() : ast::Loc{};
  };
  auto symbol = [&](StringRef name, std::initializer_list<StringRef> allowed,
                    StringRef form) {
    Attribute a = dict.get(name);
    if (!a)
      return true;
    auto s = dyn_cast<StringAttr>(a);
    if (s && llvm::is_contained(allowed, s.getValue()))
      return true;
    error(argLoc(name)) << name << " is " << form;
    return false;
  };
  bool ok = symbol("compression", {"none", "gzip"}, "none or gzip");
  ok &= symbol("on_corrupt", {"fail", "skip"}, "fail or skip");
  if (Attribute a = dict.get("features")) {
    auto list = dyn_cast<ArrayAttr>(a);
    bool good = bool(list);
    if (list)
      for (Attribute item : list) {
        auto s = dyn_cast<StringAttr>(item);
        if (!s) {
          good = false;
          break;
        }
        auto [input, feature] = s.getValue().split('=');
        if (input.trim().empty() || feature.trim().empty() ||
            !s.getValue().contains('='))
          good = false;
      }
    if (!good) {
      error(argLoc("features"))
          << "features maps inputs to the records' feature names: a list of "
             "\"INPUT=FEATURE\" strings, as in [\"x=image\", \"y=label\"]";
      ok = false;
    }
  }
  return ok;
}

Attribute ModelGen::checkedSetting(const ast::Expr *expr, StringRef param) {
  // What each parameter of the training calls takes.
  enum class Rule {
    Positive,
    Fraction,
    NonNegative,
    Bool,
    Count,
    Threads,
    Text,
    Ints,
    Numbers,
    LearningRate,
    NonNegativeInt,
    NonPositive,
    Any
  };
  Rule rule =
      llvm::StringSwitch<Rule>(param)
          .Cases("epsilon", "clip_norm", "decay_rate", Rule::Positive)
          .Cases("initial_accumulator_value", "learning_rate",
                 Rule::LearningRate)
          .Cases("beta1", "beta2", "decay", "momentum", Rule::Fraction)
          .Cases("use_nesterov", "lazy", "staircase", "soft_placement",
                 "log_device_placement", "header", "allow_tf32", Rule::Bool)
          .Cases("decay_steps", "examples", "replicas_to_aggregate",
                 "total_num_replicas", "dynamic_growth_steps", Rule::Count)
          .Cases("inter_op_threads", "intra_op_threads", "gpu_towers",
                 Rule::Threads)
          .Cases("seed", "warmup_steps", Rule::NonNegativeInt)
          .Cases("path", "label", Rule::Text)
          .Case("boundaries", Rule::Ints)
          .Case("values", Rule::Numbers)
          .Case("learning_rate_power", Rule::NonPositive)
          .Default(Rule::Any);
  if (llvm::is_contained({"initial_accumulator_value", "initial_learning_rate",
                          "alpha", "weight_decay", "l1", "l2", "l2_shrinkage",
                          "beta"},
                         param))
    rule = Rule::NonNegative;
  if (param == "warmup_target")
    rule = Rule::Positive;
  const ast::Expr *resolved = resolve(expr);
  auto number = [&](auto check, StringRef what) -> Attribute {
    std::optional<double> v = numberValue(resolved, param);
    if (!v)
      return nullptr;
    if (!check(*v)) {
      std::ostringstream shown;
      shown << *v; // 6 significant digits: 0.5, -1, 1e-08
      error(resolved->getLoc())
          << param << " must be " << what << ", got " << shown.str();
      return nullptr;
    }
    return builder.getF64FloatAttr(*v);
  };
  auto integer = [&](int64_t min,
                     int64_t max = std::numeric_limits<int64_t>::max())
      -> Attribute {
    std::optional<int64_t> v = intValue(resolved, param);
    if (!v)
      return nullptr;
    if (*v < min) {
      error(resolved->getLoc())
          << param << " must be at least " << min << ", got " << *v;
      return nullptr;
    }
    if (*v > max) {
      error(resolved->getLoc())
          << param << " must be at most " << max << ", got " << *v;
      return nullptr;
    }
    return builder.getI64IntegerAttr(*v);
  };
  if (param == "initial_scale") // a loss scale
    return number([](double v) { return v >= 1 && v <= 3.4e38; },
                  "at least 1 (and an f32)");
  switch (rule) {
  case Rule::LearningRate:
    if (isa<ast::CallExpr>(resolved))
      return configCall(resolved, BuiltinKind::Schedule,
                        "learning-rate schedule");
    return number([](double v) { return v > 0; }, "positive");
  case Rule::Positive:
    return number([](double v) { return v > 0; }, "positive");
  case Rule::NonNegative:
    return number([](double v) { return v >= 0; }, "zero or more");
  case Rule::NonPositive: // Keras' Ftrl: learning_rate_power <= 0
    return number([](double v) { return v <= 0; }, "zero or less");
  case Rule::Fraction:
    return number([](double v) { return v >= 0 && v < 1; }, "in [0, 1)");
  case Rule::Count:
    return integer(1);
  case Rule::Threads:
    return integer(0, param == "gpu_towers" ? ::dtf::plan::kMaxGpuTowers
                                            : ::dtf::plan::kMaxSessionThreads);
  case Rule::NonNegativeInt:
    return integer(0);
  case Rule::Bool:
    if (auto *b = dyn_cast<ast::BoolExpr>(resolved))
      return builder.getBoolAttr(b->value);
    error(resolved->getLoc()) << param << " must be true or false";
    return nullptr;
  case Rule::Text:
    if (auto *str = dyn_cast<ast::StringExpr>(resolved))
      return builder.getStringAttr(str->value);
    if (param == "label" && isa<ast::NumberExpr>(resolved))
      return integer(0);
    error(resolved->getLoc()) << param << " must be a string, as in \"...\"";
    return nullptr;
  case Rule::Ints:
  case Rule::Numbers: {
    auto *list = dyn_cast<ast::ListExpr>(resolved);
    if (!list) {
      error(resolved->getLoc()) << param << " must be a list";
      return nullptr;
    }
    SmallVector<Attribute> items;
    for (const ast::ExprPtr &item : list->items) {
      if (rule == Rule::Ints) {
        std::optional<int64_t> v = intValue(item.get(), param);
        if (!v)
          return nullptr;
        if (!items.empty() && *v <= cast<IntegerAttr>(items.back()).getInt()) {
          error(item->getLoc()) << param << " must increase";
          return nullptr;
        }
        items.push_back(builder.getI64IntegerAttr(*v));
      } else {
        std::optional<double> v = numberValue(item.get(), param);
        if (!v)
          return nullptr;
        items.push_back(builder.getF64FloatAttr(*v));
      }
    }
    return builder.getArrayAttr(items);
  }
  case Rule::Any:
    return literalAttr(expr, param);
  }
  return nullptr;
}

Attribute ModelGen::configCall(const ast::Expr *expr, BuiltinKind kind,
                               StringRef what) {
  expr = resolve(expr);
  StringRef callee;
  const std::vector<ast::Arg> *args = nullptr;
  static const std::vector<ast::Arg> none;
  if (auto *call = dyn_cast<ast::CallExpr>(expr)) {
    callee = call->callee;
    args = &call->args;
  } else if (auto *name = dyn_cast<ast::NameExpr>(expr)) {
    callee = name->name;
    args = &none;
  } else {
    error(expr->getLoc()) << what << " must be a call such as "
                          << builtinsOfKind(kind).front()->name << "(...)";
    return nullptr;
  }
  const BuiltinSpec *spec = lookupBuiltin(callee, kind);
  if (!spec) {
    std::vector<std::string> names;
    for (const BuiltinSpec *s : builtinsOfKind(kind))
      names.push_back(s->name.str());
    auto diag = error(expr->getLoc())
                << "unknown " << what << " '" << callee << "'";
    if (auto s = closestName(callee, names))
      diag << "; did you mean '" << *s << "'?";
    else
      diag << " (use " << llvm::join(names, ", ") << ")";
    return nullptr;
  }
  auto emit = [&](ast::Loc l) { return error(l); };
  BoundArgs bound = bindArguments(*spec, *args, expr->getLoc(), emit);
  // Every argument that bound is checked, even after a refused one, so that
  // one compile reports all the mistakes of a call and of the calls in it.
  bool ok = bound.complete;
  NamedAttrList attrs;
  attrs.append("kind", builder.getStringAttr(spec->name));
  for (StringRef param : spec->params) {
    const ast::Expr *value = bound.get(param);
    if (!value)
      continue;
    // Keras' None: no warmup.
    auto *none = dyn_cast<ast::NameExpr>(resolve(value));
    if (none && none->name == "none" && param == "warmup_target")
      continue;
    if (kind == BuiltinKind::Schedule && param == "learning_rate" &&
        isa<ast::CallExpr>(resolve(value))) {
      error(resolve(value)->getLoc()) << "the learning_rate of " << spec->name
                                      << " is a number: schedules do not nest";
      ok = false;
      continue;
    }
    Attribute attr = checkedSetting(value, param);
    ok &= bool(attr);
    if (attr)
      attrs.append(param, attr);
  }
  if (!ok)
    return nullptr;
  // Checks across parameters.
  if (spec->name == "cosine_decay" && attrs.get("warmup_steps") &&
      cast<IntegerAttr>(attrs.get("warmup_steps")).getInt() > 0 &&
      !attrs.get("warmup_target")) {
    error(expr->getLoc()) << "cosine_decay warms up only towards a "
                             "warmup_target: give one, as in warmup_target "
                             "= 0.001, or drop warmup_steps";
    return nullptr;
  }
  // FTRL divides by the learning rate (TensorFlow's kernel refuses lr <= 0):
  // a schedule must not reach 0.
  auto schedule = spec->name == "ftrl" ? attrs.getDictionary(context)
                                             .getAs<DictionaryAttr>("learning_rate")
                                       : DictionaryAttr();
  if (schedule) {
    auto kindOf = schedule.getAs<StringAttr>("kind").getValue();
    auto alpha = schedule.getAs<FloatAttr>("alpha");
    auto initial = schedule.getAs<FloatAttr>("initial_learning_rate");
    bool zero = kindOf == "cosine_decay" &&
                (!alpha || alpha.getValueAsDouble() == 0 ||
                 (initial && initial.getValueAsDouble() == 0));
    if (auto values = schedule.getAs<ArrayAttr>("values"))
      for (Attribute v : values)
        zero |= !(cast<FloatAttr>(v).getValueAsDouble() > 0);
    if (zero) {
      error(resolve(bound.get("learning_rate"))->getLoc())
          << "ftrl divides by the learning rate, and this schedule reaches "
             "0 or less; give cosine_decay an alpha > 0 and a positive "
             "initial_learning_rate, piecewise_constant positive values";
      return nullptr;
    }
  }
  if (spec->name == "piecewise_constant") {
    auto boundaries = dyn_cast_or_null<ArrayAttr>(attrs.get("boundaries"));
    auto values = dyn_cast_or_null<ArrayAttr>(attrs.get("values"));
    if (boundaries && values && values.size() != boundaries.size() + 1) {
      error(expr->getLoc()) << "piecewise_constant needs one more value than "
                               "boundaries, got "
                            << boundaries.size() << " boundaries and "
                            << values.size() << " values";
      return nullptr;
    }
  }
  return attrs.getDictionary(context);
}

Value ModelGen::graphValue(StringRef name, ast::Loc at, StringRef what) {
  const Binding *b = lookup(name);
  if (b && b->kind == Binding::Kind::Poisoned)
    return nullptr;
  if (!b || b->kind == Binding::Kind::Literal) {
    auto diag = error(at) << what << " '" << name
                          << "' is not a value of the graph";
    if (auto s = closestName(name, namesInScope()))
      diag << "; did you mean '" << *s << "'?";
    return nullptr;
  }
  Value v = b->kind == Binding::Kind::Variable ? readVariable(b->symbol, at)
                                               : b->value;
  if (!v)
    return nullptr;
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() != 0) {
    auto diag = error(at) << what << " '" << name
                          << "' must be a scalar, but it is "
                          << formatType(type) << "; reduce it, as in mean(...)";
    diag.attachNote(loc(b->loc)) << "'" << name << "' is defined here";
    return nullptr;
  }
  return v;
}

namespace {
/// Adds a value the train block names (a metric, a summary) to the step's
/// outputs, once.
void addOutput(SmallVectorImpl<std::pair<std::string, Value>> &outputs,
               StringRef name, Value v) {
  for (auto &[n, value] : outputs)
    if (n == name)
      return;
  outputs.push_back({name.str(), v});
}
} // namespace

void ModelGen::genTrain(
    SmallVectorImpl<std::pair<std::string, Value>> &outputs) {
  if (model.trainBlocks.empty())
    return;
  for (size_t i = 1; i < model.trainBlocks.size(); ++i) {
    auto diag = error(model.trainBlocks[i]) << "a model has one train block";
    diag.attachNote(loc(model.trainBlocks[0])) << "the first one is here";
  }
  graphErrors = errors;
  NamedAttrList settings;
  llvm::StringMap<ast::Loc> seen;
  std::optional<std::pair<std::string, ast::Loc>> lossName;
  const ast::TrainItem *sync = nullptr;
  SmallVector<const ast::TrainItem *> groups; // optimizer for ... = ...

  for (const ast::TrainItem &item : model.train) {
    if (!item.group.empty()) {
      groups.push_back(&item);
      continue;
    }
    std::string key = item.kind == ast::TrainItem::Kind::Setting ? item.key
                      : item.kind == ast::TrainItem::Kind::Checkpoint
                          ? "checkpoint"
                          : "summary";
    auto [it, inserted] = seen.try_emplace(key, item.loc);
    if (!inserted) {
      auto diag = error(item.loc) << "'" << key << "' is set twice";
      diag.attachNote(loc(it->second)) << "first set here";
      continue;
    }
    Attribute attr = item.kind == ast::TrainItem::Kind::Setting
                         ? genTrainSetting(item, key, outputs, lossName, sync)
                         : genTrainPolicy(item, key, outputs);
    if (attr)
      settings.append(key, attr);
  }
  if (Attribute attr = genOptimizerGroups(groups))
    settings.append("optimizer_groups", attr);
  if (sync)
    checkSyncReplicas(settings, *sync);
  genTrainLoss(settings, outputs, lossName);
  module->setAttr("dtf.train", settings.getDictionary(context));
}

Attribute ModelGen::genTrainPolicy(
    const ast::TrainItem &item, StringRef key,
    SmallVectorImpl<std::pair<std::string, Value>> &outputs) {
  bool checkpoint = item.kind == ast::TrainItem::Kind::Checkpoint;
  static const StringRef checkpointUnits[] = {"s", "min", "steps"};
  static const StringRef summaryUnits[] = {"steps", "s", "min"};
  ArrayRef<StringRef> units = checkpoint ? ArrayRef<StringRef>(checkpointUnits)
                                         : ArrayRef<StringRef>(summaryUnits);
  if (!llvm::is_contained(units, item.unit)) {
    error(item.unitLoc) << "unknown unit '" << item.unit << "' (use "
                        << llvm::join(units, ", ") << ")";
    return {};
  }
  if (!(item.every > 0) || !std::isfinite(item.every)) {
    error(item.everyLoc)
        << key << " interval must be a positive number of reasonable size";
    return {};
  }
  NamedAttrList policy;
  policy.append("every", builder.getF64FloatAttr(item.every));
  policy.append("unit", builder.getStringAttr(item.unit));
  if (item.keep) {
    if (*item.keep < 1) {
      error(item.keepLoc) << "keep must be at least 1";
      return {};
    }
    policy.append("keep", builder.getI64IntegerAttr(*item.keep));
  }
  if (!checkpoint) {
    SmallVector<Attribute> names;
    for (auto &[name, at] : item.names) {
      if (Value v = graphValue(name, at, "summary value")) {
        addOutput(outputs, name, v);
        names.push_back(builder.getStringAttr(name));
      }
    }
    policy.append("values", builder.getArrayAttr(names));
  }
  return policy.getDictionary(context);
}

Attribute ModelGen::genTrainSetting(
    const ast::TrainItem &item, StringRef key,
    SmallVectorImpl<std::pair<std::string, Value>> &outputs,
    std::optional<std::pair<std::string, ast::Loc>> &lossName,
    const ast::TrainItem *&sync) {
  static const StringRef keys[] = {
      "loss",        "metrics", "optimizer", "clip_gradients", "moving_average",
      "replication", "update",  "batch",     "steps",          "seed",
      "data",        "eval",    "session",   "precision",      "loss_scale"};
  const ast::Expr *value = item.value.get();
  if (!llvm::is_contained(keys, key)) {
    auto diag = error(item.loc) << "unknown training setting '" << key << "'";
    std::vector<std::string> names(std::begin(keys), std::end(keys));
    names.push_back("checkpoint");
    names.push_back("summary");
    if (auto s = closestName(key, names))
      diag << "; did you mean '" << *s << "'?";
    return {};
  }
  if (key != "eval" && !item.extra.empty()) {
    error(item.extra.front().keyLoc) << "'" << key << "' takes one value";
    return {};
  }
  Attribute attr;
  if (key == "loss") {
    auto *name = dyn_cast<ast::NameExpr>(value);
    if (!name) {
      error(value->getLoc()) << "loss names a graph value, as in `loss = xent`";
      return {};
    }
    lossName = {name->name, name->getLoc()};
    return {};
  } else if (key == "metrics") {
    auto *list = dyn_cast<ast::ListExpr>(value);
    if (!list) {
      error(value->getLoc()) << "metrics is a list of graph values, as in "
                                "[loss, accuracy]";
      return {};
    }
    SmallVector<Attribute> names;
    for (const ast::ExprPtr &e : list->items) {
      auto *name = dyn_cast<ast::NameExpr>(e.get());
      if (!name) {
        error(e->getLoc()) << "metrics lists names of graph values";
        continue;
      }
      if (Value v = graphValue(name->name, name->getLoc(), "metric")) {
        addOutput(outputs, name->name, v);
        names.push_back(builder.getStringAttr(name->name));
      }
    }
    attr = builder.getArrayAttr(names);
  } else if (key == "optimizer") {
    attr = configCall(value, BuiltinKind::Optimizer, "optimizer");
  } else if (key == "clip_gradients") {
    attr = configCall(value, BuiltinKind::Config, "clip_gradients");
    if (attr &&
        cast<DictionaryAttr>(attr).getAs<StringAttr>("kind").getValue() !=
            "global_norm") {
      error(value->getLoc()) << "clip_gradients takes global_norm(N)";
      attr = nullptr;
    }
  } else if (key == "moving_average") {
    std::optional<double> decay = numberValue(value, "moving_average");
    if (decay && !(*decay > 0 && *decay < 1)) {
      error(value->getLoc())
          << "moving_average is a decay in (0, 1), as in 0.999";
      decay.reset();
    }
    if (decay)
      attr = builder.getF64FloatAttr(*decay);
  } else if (key == "replication") {
    if (auto s =
            symbolValue(value, "replication", {"between_graph", "in_graph"}))
      attr = builder.getStringAttr(*s);
  } else if (key == "precision") {
    // Keras' policy names; dtf-mixed-precision reads the setting.
    if (auto s = symbolValue(value, "precision",
                             {"float32", "mixed_bfloat16", "mixed_float16"})) {
      attr = builder.getStringAttr(*s);
    }
  } else if (key == "loss_scale") {
    // Keras' LossScaleOptimizer: dynamic (its defaults), dynamic(...), or
    // a number, a fixed scale (dynamic = False). Used by mixed_float16.
    const ast::Expr *v = resolve(value);
    if (isa<ast::NumberExpr, ast::NegExpr>(v)) {
      std::optional<double> scale = numberValue(v, "loss_scale");
      if (scale && !(*scale >= 1 && *scale <= 3.4e38)) {
        std::ostringstream shown;
        shown << *scale; // 0.25, not 2.500000e-01
        error(v->getLoc()) << "a fixed loss_scale must be at least 1 (and an "
                              "f32), got "
                           << shown.str();
      } else if (scale)
        attr = builder.getDictionaryAttr(
            {builder.getNamedAttr("kind", builder.getStringAttr("fixed")),
             builder.getNamedAttr("initial_scale",
                                  builder.getF64FloatAttr(*scale))});
    } else if ((attr = configCall(value, BuiltinKind::Config, "loss_scale")) &&
               cast<DictionaryAttr>(attr).getAs<StringAttr>("kind").getValue() !=
                   "dynamic") {
      error(v->getLoc()) << "loss_scale is dynamic, dynamic(initial_scale = "
                            "32768, dynamic_growth_steps = 2000) or a fixed "
                            "scale such as 1024";
      attr = nullptr;
    }
  } else if (key == "update") {
    attr = genUpdateSetting(item, sync);
  } else if (key == "batch" || key == "steps" || key == "seed") {
    if (std::optional<int64_t> n = intValue(value, key)) {
      if (*n < (key == "seed" ? 0 : 1))
        error(value->getLoc()) << key << " must be "
                               << (key == "seed" ? "non-negative" : "positive");
      else
        attr = builder.getI64IntegerAttr(*n);
    }
  } else if (key == "data" || key == "eval") {
    attr = genDataSetting(item);
  } else if (key == "session") {
    attr = configCall(value, BuiltinKind::Config, "session");
    if (attr &&
        cast<DictionaryAttr>(attr).getAs<StringAttr>("kind").getValue() !=
            "session") {
      error(value->getLoc()) << "session takes session(soft_placement = "
                                "true, inter_op_threads = 2, ...)";
      attr = nullptr;
    }
  }
  return attr;
}

Attribute ModelGen::genUpdateSetting(const ast::TrainItem &item,
                                     const ast::TrainItem *&sync) {
  const ast::Expr *value = item.value.get();
  Attribute attr;
  auto *name = dyn_cast<ast::NameExpr>(resolve(value));
  auto *call = dyn_cast<ast::CallExpr>(resolve(value));
  if (name && name->name == "async") {
    attr = builder.getDictionaryAttr(
        builder.getNamedAttr("kind", builder.getStringAttr("async")));
  } else if ((name && name->name != "sync") ||
             (call && call->callee != "sync")) {
    StringRef written = name ? StringRef(name->name) : StringRef(call->callee);
    auto diag = error(value->getLoc())
                << "update is async or sync(replicas_to_aggregate = N, "
                   "total_num_replicas = M), not '"
                << written << "'";
    if (auto s = closestName(written, {"async", "sync"}))
      diag << "; did you mean '" << *s << "'?";
  } else if (call || name) {
    attr = configCall(value, BuiltinKind::Config, "update");
    if (attr &&
        cast<DictionaryAttr>(attr).getAs<StringAttr>("kind").getValue() !=
            "sync") {
      error(value->getLoc()) << "update is async or sync(replicas_to_aggregate "
                                "= N, total_num_replicas = M)";
      attr = nullptr;
    }
    sync = &item;
  } else {
    error(value->getLoc()) << "update is async or sync(...)";
  }
  return attr;
}

Attribute ModelGen::genDataSetting(const ast::TrainItem &item) {
  const ast::Expr *value = item.value.get();
  Attribute attr = configCall(value, BuiltinKind::Data, "data source");
  if (!attr)
    return attr;
  auto dict = cast<DictionaryAttr>(attr);
  NamedAttrList data(dict);
  StringRef kindName = dict.getAs<StringAttr>("kind").getValue();
  auto *call = dyn_cast<ast::CallExpr>(resolve(value));
  if (kindName != "synthetic" && !dict.get("path")) {
    error(value->getLoc()) << kindName << " needs a path";
    return {};
  }
  if (auto path = dict.getAs<StringAttr>("path")) {
    // tfrecord's path is a glob: it must match a file.
    auto exists = [&](StringRef p) {
      if (kindName != "tfrecord")
        return llvm::sys::fs::exists(p);
      glob_t g{};
      const bool found =
          ::glob(p.str().c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0;
      globfree(&g);
      return found;
    };
    if (options.checkDataPaths && !exists(path.getValue())) {
      const ast::Expr *pathExpr =
          call && !call->args.empty() ? call->args.front().value.get() : value;
      emitWarning(loc(pathExpr->getLoc()))
          << "data path '" << path.getValue()
          << (kindName == "tfrecord"
                  ? "' matches no file on this machine; training will "
                    "need some"
                  : "' does not exist on this machine; training will "
                    "need it");
    }
  }
  if (auto split = dict.get("split")) {
    auto s = dyn_cast<StringAttr>(split);
    if (!s || (s.getValue() != "train" && s.getValue() != "test")) {
      error(value->getLoc()) << "split is train or test";
      return {};
    }
  }
  if (kindName == "tfrecord" && !checkTFRecordArgs(dict, call))
    return {};
  for (const ast::Arg &extra : item.extra) {
    if (extra.key != "every") {
      error(extra.keyLoc) << "eval takes `every = N` (steps) after the "
                             "data source, not '"
                          << extra.key << "'";
      continue;
    }
    if (std::optional<int64_t> every = intValue(extra.value.get(), "every")) {
      if (*every < 1)
        error(extra.value->getLoc()) << "every must be positive";
      else
        data.append("every", builder.getI64IntegerAttr(*every));
    }
  }
  return data.getDictionary(context);
}

// SyncReplicasOptimizer: aggregating more gradients than there are replicas
// would wait forever.
void ModelGen::checkSyncReplicas(const NamedAttrList &settings,
                                 const ast::TrainItem &sync) {
  auto dict = dyn_cast_or_null<DictionaryAttr>(settings.get("update"));
  if (!dict)
    return;
  auto aggregate = dict.getAs<IntegerAttr>("replicas_to_aggregate");
  auto total = dict.getAs<IntegerAttr>("total_num_replicas");
  auto *call = dyn_cast<ast::CallExpr>(resolve(sync.value.get()));
  auto argLoc = [&](StringRef name) {
    if (call)
      for (const ast::Arg &a : call->args)
        if (a.key == name)
          return a.keyLoc;
    return sync.value->getLoc();
  };
  if ((dict.get("replicas_to_aggregate") && !aggregate) ||
      (dict.get("total_num_replicas") && !total))
    error(sync.value->getLoc()) << "sync takes integer replica counts";
  else if ((aggregate && aggregate.getInt() < 1) ||
           (total && total.getInt() < 1))
    error(sync.value->getLoc()) << "replica counts must be at least 1";
  else if (aggregate && total && aggregate.getInt() > total.getInt()) {
    auto diag = error(argLoc("replicas_to_aggregate"))
                << "replicas_to_aggregate (" << aggregate.getInt()
                << ") exceeds total_num_replicas (" << total.getInt()
                << "): each step would wait for gradients that never come";
    diag.attachNote(loc(argLoc("total_num_replicas")))
        << "total_num_replicas is set here";
  }
}

// The loss: named in the train block, or the graph value called `loss`.
void ModelGen::genTrainLoss(
    NamedAttrList &settings,
    SmallVectorImpl<std::pair<std::string, Value>> &outputs,
    std::optional<std::pair<std::string, ast::Loc>> lossName) {
  Value loss;
  if (lossName) {
    loss = graphValue(lossName->first, lossName->second, "loss");
  } else if (lookup("loss")) {
    loss = graphValue("loss", model.trainBlocks.front(), "loss");
    lossName = {"loss", model.trainBlocks.front()};
  } else {
    error(model.trainBlocks.front())
        << "the train block has no loss: define `loss = ...` in the graph, "
           "or write `loss = NAME` in the train block";
  }
  if (!loss)
    return;
  if (!isa<FloatType>(cast<RankedTensorType>(loss.getType()).getElementType()))
    error(lossName->second) << "the loss must be floating-point, got "
                            << formatType(loss.getType());
  // The loss is the first result; a metric of the same name is the same.
  llvm::erase_if(outputs, [&](auto &o) { return o.first == lossName->first; });
  outputs.insert(outputs.begin(), {lossName->first, loss});
  settings.append("loss", builder.getStringAttr(lossName->first));
}

} // namespace mlir::dtf::frontend
