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

/// multi_head_attention(query, value, heads, key_dim, mask): Keras'
/// MultiHeadAttention with key = value. Per head h, with the projections
/// q = query @ Wq + bq, k = value @ Wk + bk, v = value @ Wv + bv (each
/// [E, heads * key_dim], split into heads), softmax(q_h k_h^T / sqrt(key_dim))
/// v_h; the heads side by side, projected back to query's width by Wo, bo.
/// A bool mask [B, Tq or 1, Tv] keeps the scores where it holds. Built from
/// matmul, reshape, transpose, softmax and select.
Value ModelGen::genAttention(Value query, const LayerName &layer,
                             const BoundArgs &args, ast::Loc at) {
  Location l = loc(at);
  Value value = tensorArg(args, "value");
  std::optional<int64_t> heads = intArg(args, "heads", 0, 1, 4096);
  std::optional<int64_t> keyDim = intArg(args, "key_dim", 0, 1, kMaxDimSize);
  if (!value || !heads || !keyDim)
    return nullptr;
  auto qt = cast<RankedTensorType>(query.getType());
  auto vt = cast<RankedTensorType>(value.getType());
  auto sequence = [&](RankedTensorType t, StringRef what,
                      const ast::Expr *expr, Value v) {
    if (t.getRank() == 3 && isa<FloatType>(t.getElementType()) &&
        !ShapedType::isDynamic(t.getDimSize(1)) &&
        !ShapedType::isDynamic(t.getDimSize(2)))
      return true;
    auto diag = error(at) << "multi_head_attention needs " << what
                          << " as a floating-point [batch, steps, features] "
                             "with known steps and features, got "
                          << formatType(t);
    noteOrigin(diag, expr, v);
    return false;
  };
  if (!sequence(qt, "query", args.get("query"), query) ||
      !sequence(vt, "value", args.get("value"), value))
    return nullptr;
  if (qt.getElementType() != vt.getElementType()) {
    auto diag = error(at) << "multi_head_attention needs query and value of "
                             "one dtype, got "
                          << formatType(qt) << " and " << formatType(vt);
    noteOrigin(diag, args.get("value"), value);
    return nullptr;
  }
  Value mask;
  if (const ast::Expr *m = resolve(args.get("mask"))) {
    auto *none = dyn_cast<ast::NameExpr>(m);
    if (!none || none->name != "none") {
      mask = genExpr(*m);
      if (!mask)
        return nullptr;
      auto mt = cast<RankedTensorType>(mask.getType());
      const int64_t tq = qt.getDimSize(1), tv = vt.getDimSize(1);
      if (!mt.getElementType().isInteger(1) || mt.getRank() != 3 ||
          (mt.getDimSize(1) != tq && mt.getDimSize(1) != 1) ||
          mt.getDimSize(2) != tv) {
        auto diag = error(m->getLoc())
                    << "multi_head_attention needs a bool mask [batch, " << tq
                    << " or 1, " << tv << "], got " << formatType(mt);
        noteOrigin(diag, m, mask);
        return nullptr;
      }
    }
  }
  Type element = qt.getElementType();
  const int64_t h = *heads, dk = *keyDim, width = h * dk;
  const int64_t tq = qt.getDimSize(1), tv = vt.getDimSize(1);
  auto glorot = InitializerAttr::get(context, InitKind::glorot_uniform,
                                     DictionaryAttr());
  auto zeros = InitializerAttr::get(context, InitKind::zeros, DictionaryAttr());
  auto type = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, element);
  };
  // x [B, T, E] @ kernel [E, units] + bias [units].
  auto project = [&](Value x, StringRef part, int64_t units) -> Value {
    auto xt = cast<RankedTensorType>(x.getType());
    Value kernel = layerVariable(layer, (part + "/kernel").str(),
                                 type({xt.getDimSize(2), units}), glorot, at);
    Value bias = layerVariable(layer, (part + "/bias").str(), type({units}),
                               zeros, at);
    if (!kernel || !bias)
      return nullptr;
    Value y = builder.create<MatmulOp>(
        l, type({ShapedType::kDynamic, xt.getDimSize(1), units}), x, kernel,
        false, false);
    return builder.create<AddOp>(l, y, bias);
  };
  // [B, T, heads * dk] -> [B, heads, T, dk].
  auto splitHeads = [&](Value x, int64_t t) -> Value {
    Value r = builder.create<ReshapeOp>(
        l, type({ShapedType::kDynamic, t, h, dk}), x);
    return builder.create<TransposeOp>(l, r,
                                       builder.getDenseI64ArrayAttr({0, 2, 1, 3}));
  };
  Value q = project(query, "query", width);
  Value k = q ? project(value, "key", width) : nullptr;
  Value v = k ? project(value, "value", width) : nullptr;
  if (!v)
    return nullptr;
  q = splitHeads(q, tq);
  k = splitHeads(k, tv);
  v = splitHeads(v, tv);
  Value scale = builder.create<ConstantOp>(
      l, DenseElementsAttr::get(type({}), builder.getFloatAttr(
                                              element, 1.0 / std::sqrt(double(dk)))));
  Value scores = builder.create<MulOp>(
      l,
      builder.create<MatmulOp>(l, type({ShapedType::kDynamic, h, tq, tv}), q,
                               k, false, true),
      scale);
  if (mask) {
    auto mt = cast<RankedTensorType>(mask.getType());
    Value m4 = builder.create<ReshapeOp>(
        l,
        RankedTensorType::get({ShapedType::kDynamic, 1, mt.getDimSize(1), tv},
                              mt.getElementType()),
        mask);
    Value masked = builder.create<ConstantOp>(
        l, DenseElementsAttr::get(type({}), builder.getFloatAttr(element, -1e9)));
    scores = builder.create<SelectOp>(l, m4, scores, masked);
  }
  Value weights = builder.create<SoftmaxOp>(l, scores, -1);
  Value heads4 = builder.create<MatmulOp>(
      l, type({ShapedType::kDynamic, h, tq, dk}), weights, v, false, false);
  Value merged = builder.create<ReshapeOp>(
      l, type({ShapedType::kDynamic, tq, width}),
      builder.create<TransposeOp>(l, heads4,
                                  builder.getDenseI64ArrayAttr({0, 2, 1, 3})));
  return project(merged, "attention_output", qt.getDimSize(2));
}

/// lstm and gru over axis 1 of x [B, T, F], unrolled: the graph holds one
/// step's ops per time step, all sharing the layer's variables (Keras'
/// names and gate order: kernel [F, G * units] for the inputs, applied to
/// every step at once, recurrent_kernel [units, G * units], bias; G = 4 for
/// the LSTM's i, f, c, o, 3 for the GRU's z, r, h). The state starts at
/// zero. LSTM: c = f * c + i * tanh(g), h = o * tanh(c), with the forget
/// gate's pre-activation offset by 1 (Keras' unit_forget_bias, as a constant
/// rather than an initial bias: the same training). GRU: TensorFlow 2's
/// reset_after form, h = z * h + (1 - z) * tanh(x_h + r * (h @ U_h + b_h)),
/// with a recurrent bias [3 * units] beside the input bias.
Value ModelGen::genRecurrent(StringRef name, Value x, const LayerName &layer,
                             const BoundArgs &args, ast::Loc at) {
  Location l = loc(at);
  auto xt = cast<RankedTensorType>(x.getType());
  std::optional<int64_t> units = intArg(args, "units", 0, 1, kMaxDimSize);
  std::optional<bool> sequences = boolArg(args, "return_sequences", false);
  if (!units || !sequences)
    return nullptr;
  if (xt.getRank() != 3 || !isa<FloatType>(xt.getElementType()) ||
      ShapedType::isDynamic(xt.getDimSize(1)) ||
      ShapedType::isDynamic(xt.getDimSize(2)) || xt.getDimSize(1) > 4096) {
    auto diag = error(at) << name
                          << " needs a floating-point [batch, steps, features] "
                             "with known steps (at most 4096) and features, got "
                          << formatType(xt);
    noteOrigin(diag, args.get("x"), x);
    return nullptr;
  }
  const bool lstm = name == "lstm";
  const int64_t u = *units, gates = lstm ? 4 : 3, steps = xt.getDimSize(1);
  Type element = xt.getElementType();
  const int64_t dyn = ShapedType::kDynamic;
  auto type = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, element);
  };
  auto init = [&](InitKind kind) {
    return InitializerAttr::get(context, kind, DictionaryAttr());
  };
  Value kernel = layerVariable(layer, "kernel", type({xt.getDimSize(2), gates * u}),
                               init(InitKind::glorot_uniform), at);
  Value recurrent = layerVariable(layer, "recurrent_kernel", type({u, gates * u}),
                                  init(InitKind::glorot_uniform), at);
  Value bias = layerVariable(layer, "bias", type({gates * u}), init(InitKind::zeros), at);
  Value recurrentBias =
      lstm ? Value() : layerVariable(layer, "recurrent_bias", type({gates * u}),
                                     init(InitKind::zeros), at);
  if (!kernel || !recurrent || !bias || (!lstm && !recurrentBias))
    return nullptr;
  // An f32 LSTM or GRU on the CPU is one library op (oneDNN's LSTM or
  // linear-before-reset GRU primitive): the same function as the unrolled
  // steps below, without the hundreds of small ops (docs/language.md,
  // "Layers").
  const bool onGpu = !deviceTagger.devices.empty() &&
                     deviceTagger.devices.back().type == ::dtf::DeviceType::GPU;
  if (options.libraryRecurrent && element.isF32() && !onGpu) {
    Type out = *sequences ? type({xt.getDimSize(0), steps, u})
                          : type({xt.getDimSize(0), u});
    UnitAttr seq = *sequences ? builder.getUnitAttr() : UnitAttr();
    if (lstm)
      return builder.create<LstmOp>(l, out, x, kernel, recurrent, bias, seq);
    return builder.create<GruOp>(l, out, x, kernel, recurrent, bias, recurrentBias, seq);
  }
  auto constant = [&](double v) -> Value {
    return builder.create<ConstantOp>(
        l, DenseElementsAttr::get(type({}), builder.getFloatAttr(element, v)));
  };
  // Columns [g * u, (g + 1) * u) of a [B, G * u] value.
  auto gate = [&](Value z, int64_t g) -> Value {
    return builder.create<SliceOp>(l, type({dyn, u}), z,
                                   builder.getDenseI64ArrayAttr({0, g * u}),
                                   builder.getDenseI64ArrayAttr({-1, u}));
  };
  // Elements [g * u, (g + 1) * u) of a [G * u] bias.
  auto gateOfBias = [&](Value b, int64_t g) -> Value {
    return builder.create<SliceOp>(l, type({u}), b,
                                   builder.getDenseI64ArrayAttr({g * u}),
                                   builder.getDenseI64ArrayAttr({u}));
  };
  auto sigmoid = [&](Value v) -> Value { return builder.create<SigmoidOp>(l, v); };
  auto tanh = [&](Value v) -> Value { return builder.create<TanhOp>(l, v); };
  auto add = [&](Value a, Value b) -> Value { return builder.create<AddOp>(l, a, b); };
  auto mul = [&](Value a, Value b) -> Value { return builder.create<MulOp>(l, a, b); };
  // The inputs' part of every step at once: [B, T, G * u].
  Value xw = add(builder.create<MatmulOp>(l, type({dyn, steps, gates * u}), x,
                                          kernel, false, false),
                 bias);
  Value one = constant(1.0);
  Value h, c;
  SmallVector<Value> outputs;
  for (int64_t t = 0; t < steps; ++t) {
    Value xs = builder.create<ReshapeOp>(
        l, type({dyn, gates * u}),
        builder.create<SliceOp>(l, type({dyn, 1, gates * u}), xw,
                                builder.getDenseI64ArrayAttr({0, t, 0}),
                                builder.getDenseI64ArrayAttr({-1, 1, -1})));
    if (lstm) {
      Value z = h ? add(xs, builder.create<MatmulOp>(l, type({dyn, gates * u}), h,
                                                     recurrent, false, false))
                  : xs;
      Value i = sigmoid(gate(z, 0)), f = sigmoid(add(gate(z, 1), one));
      Value g = tanh(gate(z, 2)), o = sigmoid(gate(z, 3));
      c = c ? add(mul(f, c), mul(i, g)) : mul(i, g);
      h = mul(o, tanh(c));
    } else {
      // With h = 0 the recurrent product is only its bias.
      Value hu = h ? add(builder.create<MatmulOp>(l, type({dyn, gates * u}), h,
                                                  recurrent, false, false),
                         recurrentBias)
                   : recurrentBias;
      Value z = sigmoid(add(gate(xs, 0), h ? gate(hu, 0) : gateOfBias(hu, 0)));
      Value r = sigmoid(add(gate(xs, 1), h ? gate(hu, 1) : gateOfBias(hu, 1)));
      Value hh = tanh(add(gate(xs, 2), mul(r, h ? gate(hu, 2) : gateOfBias(hu, 2))));
      Value keep = builder.create<SubOp>(l, one, z);
      h = h ? add(mul(z, h), mul(keep, hh)) : mul(keep, hh);
    }
    if (*sequences)
      outputs.push_back(builder.create<ReshapeOp>(l, type({dyn, 1, u}), h));
  }
  if (!*sequences)
    return h;
  if (outputs.size() == 1)
    return outputs.front();
  return builder.create<ConcatOp>(l, outputs, builder.getI64IntegerAttr(1));
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

Value ModelGen::genLayer(const ast::CallExpr &call, const BuiltinSpec &spec,
                         const BoundArgs &args) {
  StringRef name = spec.name;
  ast::Loc at = call.getLoc();
  Location l = loc(at);
  static const StringRef activations[] = {"none",    "linear", "relu",
                                          "sigmoid", "tanh",   "softmax"};
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

  std::optional<std::string> activation =
      symbolArg(args, "activation", activations, "none");
  std::optional<bool> useBias = boolArg(args, "use_bias", true);
  std::optional<InitializerAttr> kernelInit =
      buildInitializer(args.get("kernel_initializer"), at, "glorot_uniform");
  std::optional<InitializerAttr> biasInit =
      buildInitializer(args.get("bias_initializer"), at, "zeros");
  if (!activation || !useBias || !kernelInit || !biasInit)
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
    std::optional<int64_t> u = intArg(args, "units", 0, 1, kMaxDimSize);
    if (!u)
      return nullptr;
    units = *u;
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
  std::optional<BoundArgs> args =
      bindArguments(spec, call.args, call.getLoc(), emit);
  if (!args)
    return nullptr;
  Scope scope;
  scope.isBarrier = true;
  bool ok = true;
  for (const ast::Param &p : network.params) {
    const ast::Expr *arg = args->get(p.name);
    if (!arg)
      arg = p.defaultValue.get();
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
