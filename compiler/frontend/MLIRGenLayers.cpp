// The front end's layers (dense, conv2d, embedding, ...) and network calls:
// how they name, create or share their variables.
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

namespace {
/// A setting's value as the user wrote it (the number's text), for errors.
std::string asWritten(const ast::Expr *given, double value) {
  if (auto *number = dyn_cast_or_null<ast::NumberExpr>(given))
    return number->text;
  std::ostringstream text;
  text << value;
  return text.str();
}
} // namespace

std::optional<LayerName> ModelGen::layerNameFor(const ast::CallExpr &call,
                                                StringRef kind) {
  switch (call.naming) {
  case ast::CallExpr::Naming::None: {
    // dense_1, dense_2, ...: skipping names that `as` already took.
    std::string full;
    do {
      unsigned n = ++autoCounters[prefix + kind.str()];
      full = prefix + kind.str() + "_" + std::to_string(n);
    } while (!sharing && layerNames.count(full));
    if (!sharing)
      layerNames.try_emplace(full, call.getLoc(), kind.str());
    return LayerName{full, sharing};
  }
  case ast::CallExpr::Naming::As: {
    std::string full = prefix + call.layerName;
    if (sharing)
      return LayerName{full, true};
    auto [it, inserted] =
        layerNames.try_emplace(full, call.layerLoc, kind.str());
    if (inserted)
      indexDefinition(
          call.layerName, FrontendIndex::Kind::Layer, call.layerLoc,
          call.callee + " " +
              (findNetwork(call.callee) ? "network call" : "layer") +
              ", variables " + full + "/...");
    if (!inserted) {
      auto diag = error(call.layerLoc)
                  << "the name '" << full
                  << "' is already used by another layer; write `shares "
                  << call.layerName
                  << "` to reuse its variables, or choose another name";
      diag.attachNote(loc(it->second.first))
          << "'" << full << "' is named here";
      return std::nullopt;
    }
    return LayerName{full, false};
  }
  case ast::CallExpr::Naming::Shares: {
    std::string full = prefix + call.layerName;
    if (!layerNames.count(full) && !sharing) {
      auto diag = error(call.layerLoc)
                  << "shares '" << call.layerName
                  << "', but no earlier layer or network call is named '"
                  << call.layerName << "'";
      std::vector<std::string> names;
      for (const auto &entry : layerNames)
        names.push_back(entry.first().str());
      if (auto s = closestName(full, names))
        diag << "; did you mean '" << *s << "'?";
      return std::nullopt;
    }
    if (auto it = layerNames.find(full); it != layerNames.end()) {
      indexReference(call.layerLoc, call.layerName.size(), it->second.first);
      if (it->second.second != kind) {
        auto diag = error(call.layerLoc)
                    << "shares '" << call.layerName << "', which is a "
                    << it->second.second << ", not a " << kind;
        diag.attachNote(loc(it->second.first))
            << "'" << full << "' is named here";
        return std::nullopt;
      }
    }
    return LayerName{full, true};
  }
  }
  return std::nullopt;
}

Value ModelGen::layerVariable(const LayerName &layer, StringRef leaf,
                              RankedTensorType type, InitializerAttr init,
                              ast::Loc at, std::optional<int64_t> partitions,
                              bool trainable) {
  std::string symbol = layer.full + "/" + leaf.str();
  if (!layer.share) {
    if (!createVariable(symbol, type, init, trainable, at, partitions))
      return nullptr;
    return readVariable(symbol, at);
  }
  auto it = variables.find(symbol);
  if (it == variables.end()) {
    error(at) << "cannot share '" << layer.full << "': it has no variable '"
              << symbol << "'";
    return nullptr;
  }
  if (it->second.first.getType() != type) {
    auto diag = error(at) << "cannot share '" << symbol << "': it is "
                          << formatType(it->second.first.getType())
                          << ", but this call needs " << formatType(type);
    diag.attachNote(loc(it->second.second))
        << "'" << symbol << "' is created here";
    return nullptr;
  }
  return readVariable(symbol, at);
}

Value ModelGen::applyActivation(Value x, StringRef activation, ast::Loc at) {
  Location l = loc(at);
  if (activation == "relu")
    return builder.create<ReluOp>(l, x);
  if (activation == "sigmoid")
    return builder.create<SigmoidOp>(l, x);
  if (activation == "tanh")
    return builder.create<TanhOp>(l, x);
  if (activation == "softmax")
    return builder.create<SoftmaxOp>(l, x, -1);
  if (activation == "gelu") // Keras' activation: the exact form
    return buildGelu(x, false, l);
  return x;
}

/// layer_norm(x, epsilon, center, scale): over the last axis of each
/// position, (x - mean) / sqrt(variance + epsilon), then * gamma + beta
/// (Keras' LayerNormalization; variables NAME/gamma, ones, and NAME/beta,
/// zeros). Built from mean, sub, mul, rsqrt and add, whose gradients the
/// autodiff already has.
Value ModelGen::genLayerNorm(Value x, const LayerName &layer,
                             const BoundArgs &args, ast::Loc at) {
  Location l = loc(at);
  auto xt = cast<RankedTensorType>(x.getType());
  std::optional<double> epsilon = numberArg(args, "epsilon", 1e-5);
  std::optional<bool> center = boolArg(args, "center", true);
  std::optional<bool> scale = boolArg(args, "scale", true);
  if (!epsilon || !center || !scale)
    return nullptr;
  if (!(*epsilon > 0)) {
    const ast::Expr *given = resolve(args.get("epsilon"));
    error(given ? given->getLoc() : at)
        << "layer_norm needs epsilon > 0, got " << asWritten(given, *epsilon);
    return nullptr;
  }
  if (!isa<FloatType>(xt.getElementType()) || xt.getRank() < 1 ||
      ShapedType::isDynamic(xt.getShape().back())) {
    auto diag = error(at) << "layer_norm needs a floating-point input with a "
                             "known last axis, got "
                          << formatType(xt);
    noteOrigin(diag, args.get("x"), x);
    return nullptr;
  }
  Type element = xt.getElementType();
  auto lastAxis = builder.getDenseI64ArrayAttr({-1});
  Value mean = builder.create<MeanOp>(l, x, lastAxis, builder.getUnitAttr());
  Value centered = builder.create<SubOp>(l, x, mean);
  Value variance = builder.create<MeanOp>(
      l, builder.create<MulOp>(l, centered, centered), lastAxis,
      builder.getUnitAttr());
  auto scalarType = RankedTensorType::get({}, element);
  Value eps = builder.create<ConstantOp>(
      l, DenseElementsAttr::get(scalarType,
                                builder.getFloatAttr(element, *epsilon)));
  Value y = builder.create<MulOp>(
      l, centered,
      builder.create<RsqrtOp>(l, builder.create<AddOp>(l, variance, eps)));
  auto paramType = RankedTensorType::get({xt.getShape().back()}, element);
  if (*scale) {
    Value gamma = layerVariable(
        layer, "gamma", paramType,
        InitializerAttr::get(context, InitKind::ones, DictionaryAttr()), at);
    if (!gamma)
      return nullptr;
    y = builder.create<MulOp>(l, y, gamma);
  }
  if (*center) {
    Value beta = layerVariable(
        layer, "beta", paramType,
        InitializerAttr::get(context, InitKind::zeros, DictionaryAttr()), at);
    if (!beta)
      return nullptr;
    y = builder.create<AddOp>(l, y, beta);
  }
  return y;
}

/// batch_norm(x, momentum, epsilon, center, scale): Keras'
/// BatchNormalization over every axis but the last. The training step
/// normalizes with the batch's mean and (biased) variance and moves
/// NAME/moving_mean and NAME/moving_variance (non-trainable; zeros and ones)
/// toward them with dtf.assign_moving_average; evaluation normalizes with
/// the moving statistics (dtf.if_training picks). Then * gamma + beta.
Value ModelGen::genBatchNorm(Value x, const LayerName &layer,
                             const BoundArgs &args, ast::Loc at) {
  Location l = loc(at);
  auto xt = cast<RankedTensorType>(x.getType());
  std::optional<double> momentum = numberArg(args, "momentum", 0.99);
  std::optional<double> epsilon = numberArg(args, "epsilon", 0.001);
  std::optional<bool> center = boolArg(args, "center", true);
  std::optional<bool> scale = boolArg(args, "scale", true);
  if (!momentum || !epsilon || !center || !scale)
    return nullptr;
  auto refuse = [&](StringRef param, StringRef rule, double value) {
    const ast::Expr *e = resolve(args.get(param));
    error(e ? e->getLoc() : at) << "batch_norm needs " << rule << ", got "
                                << asWritten(e, value);
    return nullptr;
  };
  if (!(*momentum >= 0 && *momentum < 1))
    return refuse("momentum", "0 <= momentum < 1", *momentum);
  if (!(*epsilon > 0))
    return refuse("epsilon", "epsilon > 0", *epsilon);
  if (!isa<FloatType>(xt.getElementType()) || xt.getRank() < 2 ||
      ShapedType::isDynamic(xt.getShape().back())) {
    auto diag = error(at) << "batch_norm needs a floating-point input [batch, "
                             "..., channels] with known channels, got "
                          << formatType(xt);
    noteOrigin(diag, args.get("x"), x);
    return nullptr;
  }
  Type element = xt.getElementType();
  const int64_t channels = xt.getShape().back();
  auto paramType = RankedTensorType::get({channels}, element);
  auto init = [&](InitKind kind) {
    return InitializerAttr::get(context, kind, DictionaryAttr());
  };
  Value movingMean = layerVariable(layer, "moving_mean", paramType,
                                   init(InitKind::zeros), at, std::nullopt,
                                   /*trainable=*/false);
  Value movingVariance = layerVariable(layer, "moving_variance", paramType,
                                       init(InitKind::ones), at, std::nullopt,
                                       /*trainable=*/false);
  if (!movingMean || !movingVariance)
    return nullptr;
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i + 1 < xt.getRank(); ++i)
    axes.push_back(i);
  auto axesAttr = builder.getDenseI64ArrayAttr(axes);
  Value batchMean = builder.create<MeanOp>(l, x, axesAttr, UnitAttr());
  Value centeredBatch = builder.create<SubOp>(l, x, batchMean);
  Value batchVariance = builder.create<MeanOp>(
      l, builder.create<MulOp>(l, centeredBatch, centeredBatch), axesAttr,
      UnitAttr());
  auto momentumAttr = builder.getF64FloatAttr(*momentum);
  builder.create<AssignMovingAverageOp>(
      l, FlatSymbolRefAttr::get(context, layer.full + "/moving_mean"),
      batchMean, momentumAttr);
  builder.create<AssignMovingAverageOp>(
      l, FlatSymbolRefAttr::get(context, layer.full + "/moving_variance"),
      batchVariance, momentumAttr);
  Value mean = builder.create<IfTrainingOp>(l, batchMean, movingMean);
  Value variance = builder.create<IfTrainingOp>(l, batchVariance, movingVariance);
  Value eps = builder.create<ConstantOp>(
      l, DenseElementsAttr::get(RankedTensorType::get({}, element),
                                builder.getFloatAttr(element, *epsilon)));
  Value y = builder.create<MulOp>(
      l, builder.create<SubOp>(l, x, mean),
      builder.create<RsqrtOp>(l, builder.create<AddOp>(l, variance, eps)));
  if (*scale) {
    Value gamma = layerVariable(layer, "gamma", paramType, init(InitKind::ones), at);
    if (!gamma)
      return nullptr;
    y = builder.create<MulOp>(l, y, gamma);
  }
  if (*center) {
    Value beta = layerVariable(layer, "beta", paramType, init(InitKind::zeros), at);
    if (!beta)
      return nullptr;
    y = builder.create<AddOp>(l, y, beta);
  }
  return y;
}

/// An embedding's initializer: its `initializer` argument, else
/// normal(stddev = 0.05) (Keras' default is uniform(-0.05, 0.05)).
std::optional<InitializerAttr>
ModelGen::embeddingInitializer(const BoundArgs &args, ast::Loc at) {
  if (args.get("initializer"))
    return buildInitializer(args.get("initializer"), at, "normal");
  return InitializerAttr::get(
      context, InitKind::normal,
      builder.getDictionaryAttr(
          builder.getNamedAttr("stddev", builder.getF64FloatAttr(0.05))));
}

/// False (with the error) unless an embedding's ids are i32 or i64.
bool ModelGen::checkEmbeddingIds(Value ids, const BoundArgs &args,
                                 ast::Loc at) {
  auto type = cast<RankedTensorType>(ids.getType());
  if (type.getElementType().isInteger(32) ||
      type.getElementType().isInteger(64))
    return true;
  auto diag = error(at) << "embedding needs integer ids (i32 or i64), got "
                        << formatType(type);
  noteOrigin(diag, args.get("ids"), ids);
  return false;
}

/// embedding(ids, vocab = dynamic, dim, capacity, admit_after, evict_after,
/// initializer, partitions): a table without a fixed vocabulary. The
/// variable NAME/embeddings holds `capacity` rows plus one reserved row (of
/// zeros, for ids without a row) per partition; dtf.dynamic_rows maps the
/// ids to rows, which the run time creates on first sight (after
/// admit_after sightings) and evicts (after evict_after steps unused).
Value ModelGen::genDynamicEmbedding(Value ids, const LayerName &layer,
                                    const BoundArgs &args, ast::Loc at) {
  auto idsType = cast<RankedTensorType>(ids.getType());
  std::optional<int64_t> dim = intArg(args, "dim", 0, 1, kMaxDimSize);
  std::optional<int64_t> partitions = intArg(args, "partitions", 1, 1, 1 << 16);
  std::optional<int64_t> capacity =
      intArg(args, "capacity", 1 << 20, 1, kMaxDimSize / 2);
  std::optional<int64_t> admit = intArg(args, "admit_after", 1, 1, 1 << 30);
  std::optional<int64_t> evict =
      intArg(args, "evict_after", 0, 0, int64_t(1) << 40);
  std::optional<InitializerAttr> init = embeddingInitializer(args, at);
  if (!dim || !partitions || !capacity || !admit || !evict || !init)
    return nullptr;
  switch (init->getKind()) {
  case InitKind::glorot_uniform:
  case InitKind::he_normal:
  case InitKind::orthogonal:
    error(resolve(args.get("initializer"))->getLoc())
        << "a dynamic table has no fixed vocabulary, so "
        << stringifyInitKind(init->getKind())
        << " (which scales by the table's fan-in) cannot size its rows; use "
           "normal(stddev = ...), truncated_normal, uniform or a constant";
    return nullptr;
  default:
    break;
  }
  if (*partitions > *capacity) {
    error(resolve(args.get("partitions"))->getLoc())
        << "partitions (" << *partitions << ") cannot exceed capacity ("
        << *capacity << ")";
    return nullptr;
  }
  if (!checkEmbeddingIds(ids, args, at))
    return nullptr;
  auto tableType = RankedTensorType::get({*capacity + *partitions, *dim},
                                         builder.getF32Type());
  Value table = layerVariable(layer, "embeddings", tableType, *init, at,
                              *partitions > 1 ? partitions : std::nullopt);
  if (!table)
    return nullptr;
  auto found = variables.find(layer.full + "/embeddings");
  if (found == variables.end())
    return nullptr;
  VariableOp var = found->second.first;
  if (!layer.share)
    var->setAttr("dtf.dynamic",
                 builder.getDictionaryAttr(
                     {builder.getNamedAttr("admit_after",
                                           builder.getI64IntegerAttr(*admit)),
                      builder.getNamedAttr(
                          "evict_after", builder.getI64IntegerAttr(*evict))}));
  Location l = loc(at);
  auto rowsType =
      RankedTensorType::get(idsType.getShape(), builder.getI64Type());
  Value rows = builder.create<DynamicRowsOp>(
      l, rowsType, ids, builder.getStringAttr(var.getSymName()),
      builder.getUnitAttr());
  return builder.create<GatherOp>(
      l, *inferGather(tableType, rowsType, [] { return InFlightDiagnostic(); }),
      table, rows);
}

// Keras' per-layer dtype: `dtype = f32` keeps this layer's product (and its
// gradients) in f32 under a mixed precision policy.
std::optional<bool> ModelGen::keepF32Arg(const BoundArgs &args) {
  const ast::Expr *d = args.get("dtype");
  if (!d)
    return false;
  std::optional<Type> t = dtypeValue(d, "dtype");
  if (!t)
    return std::nullopt;
  if (!t->isF32()) {
    error(resolve(d)->getLoc())
        << "a layer's dtype is f32 (it keeps the layer in f32 under a mixed "
           "precision policy), not "
        << *t << "; the train block's precision sets the low precision";
    return std::nullopt;
  }
  return true;
}

Value ModelGen::genLayer(const ast::CallExpr &call, const BuiltinSpec &spec,
                         const BoundArgs &args) {
  StringRef name = spec.name;
  ast::Loc at = call.getLoc();
  Location l = loc(at);
  static const StringRef activations[] = {"none", "linear",  "relu", "sigmoid",
                                          "tanh", "softmax", "gelu"};
  Value x = tensorArg(args, spec.params.front());
  if (!x)
    return nullptr;
  auto xt = cast<RankedTensorType>(x.getType());
  std::optional<LayerName> layer = layerNameFor(call, name);
  if (!layer)
    return nullptr;

  if (name == "embedding") {
    if (auto *v = dyn_cast_or_null<ast::NameExpr>(resolve(args.get("vocab")));
        v && v->name == "dynamic")
      return genDynamicEmbedding(x, *layer, args, at);
    for (StringRef only : {"capacity", "admit_after", "evict_after"})
      if (const ast::Expr *e = args.get(only)) {
        error(resolve(e)->getLoc())
            << only << " applies to dynamic tables only (`vocab = dynamic`)";
        return nullptr;
      }
    std::optional<int64_t> vocab = intArg(args, "vocab", 0, 1, kMaxDimSize);
    std::optional<int64_t> dim = intArg(args, "dim", 0, 1, kMaxDimSize);
    std::optional<int64_t> partitions =
        args.get("partitions") ? intArg(args, "partitions", 1, 1, kMaxDimSize)
                               : std::optional<int64_t>(1);
    std::optional<InitializerAttr> init = embeddingInitializer(args, at);
    if (!vocab || !dim || !partitions || !init)
      return nullptr;
    if (*partitions > *vocab) {
      error(resolve(args.get("partitions"))->getLoc())
          << "partitions (" << *partitions << ") cannot exceed vocab ("
          << *vocab << ")";
      return nullptr;
    }
    if (!checkEmbeddingIds(x, args, at))
      return nullptr;
    auto tableType =
        RankedTensorType::get({*vocab, *dim}, builder.getF32Type());
    Value table = layerVariable(*layer, "embeddings", tableType, *init, at,
                                *partitions > 1 ? partitions : std::nullopt);
    if (!table)
      return nullptr;
    return builder.create<GatherOp>(
        l, *inferGather(tableType, xt, [] { return InFlightDiagnostic(); }),
        table, x);
  }

  if (name == "layer_norm")
    return genLayerNorm(x, *layer, args, at);
  if (name == "batch_norm")
    return genBatchNorm(x, *layer, args, at);
  if (name == "multi_head_attention")
    return genAttention(x, *layer, args, at);
  if (name == "lstm" || name == "gru")
    return genRecurrent(name, x, *layer, args, at);
  // dense's units with the other arguments, so that each is reported.
  std::optional<int64_t> denseUnits =
      name == "dense" ? intArg(args, "units", 0, 1, kMaxDimSize)
                      : std::optional<int64_t>(0);
  std::optional<std::string> activation =
      symbolArg(args, "activation", activations, "none");
  std::optional<bool> useBias = boolArg(args, "use_bias", true),
                      keepF32 = keepF32Arg(args);
  std::optional<InitializerAttr> kernelInit =
      buildInitializer(args.get("kernel_initializer"), at, "glorot_uniform");
  std::optional<InitializerAttr> biasInit =
      buildInitializer(args.get("bias_initializer"), at, "zeros");
  if (!activation || !useBias || !kernelInit || !biasInit || !denseUnits ||
      !keepF32)
    return nullptr;
  if (!isa<FloatType>(xt.getElementType())) {
    auto diag = error(at) << name << " needs a floating-point input, got "
                          << formatType(xt) << " (cast it first)";
    noteOrigin(diag, args.get("x"), x);
    return nullptr;
  }
  Type element = xt.getElementType();
  Value y;
  int64_t units;
  if (name == "dense") {
    units = *denseUnits;
    // Over the last axis, as Keras' Dense: [..., features] -> [..., units],
    // one kernel shared by every leading position (tokens, time steps).
    if (xt.getRank() < 2 || ShapedType::isDynamic(xt.getShape().back())) {
      auto diag = error(at) << "dense needs an input [batch, ..., features] "
                               "with a known number of features, got "
                            << formatType(xt);
      noteOrigin(diag, args.get("x"), x);
      return nullptr;
    }
    auto kernelType =
        RankedTensorType::get({xt.getShape().back(), units}, element);
    Value kernel = layerVariable(*layer, "kernel", kernelType, *kernelInit, at);
    if (!kernel)
      return nullptr;
    SmallVector<int64_t> outShape(xt.getShape().drop_back());
    outShape.push_back(units);
    y = builder.create<MatmulOp>(l, RankedTensorType::get(outShape, element),
                                 x, kernel, false, false);
  } else { // conv2d
    std::optional<int64_t> filters = intArg(args, "filters", 0, 1, kMaxDimSize);
    std::optional<SmallVector<int64_t>> kernelSize = pairArg(args, "kernel", 0);
    std::optional<SmallVector<int64_t>> strides = pairArg(args, "strides", 1);
    std::optional<SmallVector<int64_t>> dilation = pairArg(args, "dilation", 1);
    std::optional<std::string> padding =
        symbolArg(args, "padding", {"same", "valid"}, "same");
    if (!filters || !kernelSize || !strides || !dilation || !padding)
      return nullptr;
    units = *filters;
    if (xt.getRank() != 4 || ShapedType::isDynamic(xt.getDimSize(3))) {
      auto diag = error(at)
                  << "conv2d needs an NHWC input [batch, height, "
                     "width, channels] with known channels, got "
                  << formatType(xt)
                  << " (reshape it, as in reshape(x, [-1, 28, 28, 1]))";
      noteOrigin(diag, args.get("x"), x);
      return nullptr;
    }
    auto kernelType = RankedTensorType::get(
        {(*kernelSize)[0], (*kernelSize)[1], xt.getDimSize(3), units}, element);
    Value kernel = layerVariable(*layer, "kernel", kernelType, *kernelInit, at);
    if (!kernel)
      return nullptr;
    Padding pad = *padding == "same" ? Padding::same : Padding::valid;
    std::pair<const ast::Expr *, Value> operands[] = {{args.get("x"), x}};
    y = buildChecked<Conv2DOp>(
        at, operands,
        [&](EmitErrorFn emit) {
          return inferConv2D(xt, kernelType, *strides, *dilation, pad, emit);
        },
        x, kernel, pad, *strides, *dilation);
    if (!y)
      return nullptr;
  }
  if (*keepF32)
    y.getDefiningOp()->setAttr("dtf.keep_f32", builder.getUnitAttr());
  if (*useBias) {
    auto biasType = RankedTensorType::get({units}, element);
    Value bias = layerVariable(*layer, "bias", biasType, *biasInit, at);
    if (!bias)
      return nullptr;
    y = builder.create<AddOp>(l, y.getType(), y, bias);
  }
  return applyActivation(y, *activation, at);
}

Value ModelGen::genNetworkCall(const ast::CallExpr &call,
                               const ast::Network &network) {
  if (llvm::is_contained(networkStack, &network) ||
      networkStack.size() >= kMaxNetworkDepth) {
    error(call.getLoc()) << "network '" << network.name
                         << "' calls itself; networks cannot be recursive";
    return nullptr;
  }
  // An unnamed call may not create variables: which ones it uses must be
  // said with `as` (new) or `shares` (existing).
  std::optional<LayerName> instance;
  if (call.naming == ast::CallExpr::Naming::None)
    instance =
        LayerName{prefix + network.name + "." +
                      std::to_string(++autoCounters["network." + network.name]),
                  false};
  else
    instance = layerNameFor(call, network.name);
  if (!instance)
    return nullptr;

  // Bind arguments to parameters, like a builtin's.
  std::vector<StringRef> params;
  for (const ast::Param &p : network.params)
    params.push_back(p.name);
  BuiltinSpec spec{network.name, BuiltinKind::Op, params, 0, "network"};
  auto emit = [&](ast::Loc l) { return error(l); };
  BoundArgs args = bindArguments(spec, call.args, call.getLoc(), emit);
  Scope scope;
  scope.isBarrier = true;
  // The arguments that bound are still made after a refused one, so that
  // their own errors are reported too.
  bool ok = args.complete;
  for (const ast::Param &p : network.params) {
    const ast::Expr *arg = args.get(p.name);
    if (!arg)
      arg = p.defaultValue.get();
    if (!arg && llvm::is_contained(args.suggested, p.name)) {
      ok = false; // a misspelled keyword said it
      continue;
    }
    if (!arg) {
      auto diag = error(call.getLoc()) << "network '" << network.name
                                       << "' needs '" << p.name << "'";
      diag.attachNote(loc(p.loc)) << "parameter declared here";
      ok = false;
      continue;
    }
    const ast::Expr *resolved = resolve(arg);
    bool literal = isNumberLiteral(*resolved) || isa<ast::BoolExpr>(resolved) ||
                   isa<ast::StringExpr>(resolved) ||
                   isa<ast::DTypeExpr>(resolved) ||
                   isa<ast::ListExpr>(resolved) ||
                   (isa<ast::NameExpr>(resolved) &&
                    !lookup(cast<ast::NameExpr>(resolved)->name));
    if (literal) {
      scope.bindings[p.name] = {
          Binding::Kind::Literal, nullptr, "", resolved, p.loc, "parameter",
          scopes.size()};
      continue;
    }
    Value v = genExpr(*arg);
    if (!v) {
      ok = false;
      continue;
    }
    scope.bindings[p.name] = {Binding::Kind::Value, v, "", nullptr, p.loc,
                              "parameter"};
  }
  if (!ok)
    return nullptr;

  std::string savedPrefix = prefix;
  bool savedSharing = sharing;
  const ast::CallExpr *savedUnnamed = unnamedNetworkCall;
  unnamedNetworkCall =
      call.naming == ast::CallExpr::Naming::None
          ? &call
          : (sharing || call.naming != ast::CallExpr::Naming::None
                 ? nullptr
                 : unnamedNetworkCall);
  llvm::StringMap<unsigned> savedCounters = std::move(autoCounters);
  std::vector<Value> savedReturned = std::move(returned);
  autoCounters.clear();
  returned.clear();
  prefix = instance->full + "/";
  sharing = instance->share;
  scopes.push_back(std::move(scope));
  networkStack.push_back(&network);
  unsigned errorsBefore = errors;
  for (const ast::StmtPtr &stmt : network.body)
    genStmt(*stmt);
  networkStack.pop_back();
  scopes.pop_back();
  prefix = savedPrefix;
  sharing = savedSharing;
  unnamedNetworkCall = savedUnnamed;
  autoCounters = std::move(savedCounters);
  std::vector<Value> results = std::move(returned);
  returned = std::move(savedReturned);

  if (errors != errorsBefore)
    return nullptr;
  if (results.size() != 1) {
    auto diag = error(call.getLoc()) << "network '" << network.name
                                     << "' must end with one `return`";
    diag.attachNote(loc(network.loc)) << "network defined here";
    return nullptr;
  }
  return results.front();
}

} // namespace mlir::dtf::frontend
