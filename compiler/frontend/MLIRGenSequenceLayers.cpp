// The front end's layers over sequences (multi_head_attention, lstm, gru):
// built from the graph's ops, or one library op for a recurrent layer.
#include "compiler/frontend/ModelGen.h"

#include "compiler/frontend/Builtins.h"
#include "compiler/frontend/Diagnostics.h"
#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <sstream>

namespace mlir::dtf::frontend {

/// multi_head_attention(query, value, heads, key_dim, mask, dropout): Keras'
/// MultiHeadAttention with key = value. Per head h, with the projections
/// q = query @ Wq + bq, k = value @ Wk + bk, v = value @ Wv + bv (each
/// [E, heads * key_dim], split into heads), softmax(q_h k_h^T / sqrt(key_dim))
/// v_h; the heads side by side, projected back to query's width by Wo, bo.
/// A bool mask [B, Tq or 1, Tv] keeps the scores where it holds; `dropout`
/// drops attention weights while training. Built from matmul, reshape,
/// transpose, softmax, select and dropout.
Value ModelGen::genAttention(Value query, const LayerName &layer,
                             const BoundArgs &args, ast::Loc at) {
  Location l = loc(at);
  Value value = tensorArg(args, "value");
  std::optional<int64_t> heads = intArg(args, "heads", 0, 1, 4096);
  std::optional<int64_t> keyDim = intArg(args, "key_dim", 0, 1, kMaxDimSize);
  double dropoutRate = 0;
  bool dropoutOk = false;
  if (std::optional<double> d = numberArg(args, "dropout", 0.0)) {
    dropoutRate = *d;
    dropoutOk = dropoutRate >= 0.0 && dropoutRate < 1.0;
    if (!dropoutOk) {
      std::ostringstream written; // 1, -0.1: as the user writes them
      written.precision(15);
      written << dropoutRate;
      error(resolve(args.get("dropout"))->getLoc())
          << "multi_head_attention dropout must be in [0, 1), got "
          << written.str();
    }
  }
  if (!value || !heads || !keyDim || !dropoutOk)
    return nullptr;
  auto qt = cast<RankedTensorType>(query.getType());
  auto vt = cast<RankedTensorType>(value.getType());
  auto sequence = [&](RankedTensorType t, StringRef what, const ast::Expr *expr,
                      Value v) {
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
  auto glorot =
      InitializerAttr::get(context, InitKind::glorot_uniform, DictionaryAttr());
  auto zeros = InitializerAttr::get(context, InitKind::zeros, DictionaryAttr());
  auto type = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, element);
  };
  // x [B, T, E] @ kernel [E, units] + bias [units].
  auto project = [&](Value x, StringRef part, int64_t units) -> Value {
    auto xt = cast<RankedTensorType>(x.getType());
    Value kernel = layerVariable(layer, (part + "/kernel").str(),
                                 type({xt.getDimSize(2), units}), glorot, at);
    Value bias =
        layerVariable(layer, (part + "/bias").str(), type({units}), zeros, at);
    if (!kernel || !bias)
      return nullptr;
    Value y = builder.create<MatmulOp>(
        l, type({ShapedType::kDynamic, xt.getDimSize(1), units}), x, kernel,
        false, false);
    return builder.create<AddOp>(l, y, bias);
  };
  // [B, T, heads * dk] -> [B, heads, T, dk].
  auto splitHeads = [&](Value x, int64_t t) -> Value {
    Value r =
        builder.create<ReshapeOp>(l, type({ShapedType::kDynamic, t, h, dk}), x);
    return builder.create<TransposeOp>(
        l, r, builder.getDenseI64ArrayAttr({0, 2, 1, 3}));
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
      l, DenseElementsAttr::get(
             type({}),
             builder.getFloatAttr(element, 1.0 / std::sqrt(double(dk)))));
  Value scores = builder.create<MulOp>(
      l,
      builder.create<MatmulOp>(l, type({ShapedType::kDynamic, h, tq, tv}), q, k,
                               false, true),
      scale);
  if (mask) {
    auto mt = cast<RankedTensorType>(mask.getType());
    Value m4 = builder.create<ReshapeOp>(
        l,
        RankedTensorType::get({ShapedType::kDynamic, 1, mt.getDimSize(1), tv},
                              mt.getElementType()),
        mask);
    Value masked = builder.create<ConstantOp>(
        l,
        DenseElementsAttr::get(type({}), builder.getFloatAttr(element, -1e9)));
    scores = builder.create<SelectOp>(l, m4, scores, masked);
  }
  Value weights = builder.create<SoftmaxOp>(l, scores, -1);
  // Keras drops attention weights (after the softmax) while training; the
  // dropout op is the identity in evaluation, prediction and export.
  if (dropoutRate > 0)
    weights = builder.create<DropoutOp>(l, weights,
                                        builder.getF64FloatAttr(dropoutRate),
                                        IntegerAttr());
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
  // Keras' defaults: a glorot_uniform kernel and an orthogonal recurrent
  // kernel; either may be given.
  std::optional<InitializerAttr> kernelInit =
      buildInitializer(args.get("kernel_initializer"), at, "glorot_uniform");
  std::optional<InitializerAttr> recurrentInit =
      buildInitializer(args.get("recurrent_initializer"), at, "orthogonal");
  // `dtype = f32`: the layer's products stay f32 under a mixed precision
  // policy (the library op, or every matmul of the unrolled steps).
  std::optional<bool> keepF32 = keepF32Arg(args);
  if (!units || !sequences || !kernelInit || !recurrentInit || !keepF32)
    return nullptr;
  auto kept = [&](Value v) {
    if (*keepF32)
      v.getDefiningOp()->setAttr("dtf.keep_f32", builder.getUnitAttr());
    return v;
  };
  if (xt.getRank() != 3 || !isa<FloatType>(xt.getElementType()) ||
      ShapedType::isDynamic(xt.getDimSize(1)) ||
      ShapedType::isDynamic(xt.getDimSize(2)) || xt.getDimSize(1) > 4096) {
    auto diag =
        error(at) << name
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
  Value kernel = layerVariable(
      layer, "kernel", type({xt.getDimSize(2), gates * u}), *kernelInit, at);
  Value recurrent = layerVariable(layer, "recurrent_kernel",
                                  type({u, gates * u}), *recurrentInit, at);
  Value bias = layerVariable(layer, "bias", type({gates * u}),
                             init(InitKind::zeros), at);
  Value recurrentBias =
      lstm ? Value()
           : layerVariable(layer, "recurrent_bias", type({gates * u}),
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
    // No compute_dtype: dtf-mixed-precision sets it after differentiation.
    if (lstm)
      return kept(builder.create<LstmOp>(l, out, x, kernel, recurrent, bias, seq,
                                         StringAttr()));
    return kept(builder.create<GruOp>(l, out, x, kernel, recurrent, bias,
                                      recurrentBias, seq, StringAttr()));
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
  auto sigmoid = [&](Value v) -> Value {
    return builder.create<SigmoidOp>(l, v);
  };
  auto tanh = [&](Value v) -> Value { return builder.create<TanhOp>(l, v); };
  auto add = [&](Value a, Value b) -> Value {
    return builder.create<AddOp>(l, a, b);
  };
  auto mul = [&](Value a, Value b) -> Value {
    return builder.create<MulOp>(l, a, b);
  };
  // The inputs' part of every step at once: [B, T, G * u].
  Value xw = add(kept(builder.create<MatmulOp>(l, type({dyn, steps, gates * u}),
                                               x, kernel, false, false)),
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
      Value z =
          h ? add(xs, kept(builder.create<MatmulOp>(l, type({dyn, gates * u}), h,
                                                    recurrent, false, false)))
            : xs;
      Value i = sigmoid(gate(z, 0)), f = sigmoid(add(gate(z, 1), one));
      Value g = tanh(gate(z, 2)), o = sigmoid(gate(z, 3));
      c = c ? add(mul(f, c), mul(i, g)) : mul(i, g);
      h = mul(o, tanh(c));
    } else {
      // With h = 0 the recurrent product is only its bias.
      Value hu = h ? add(kept(builder.create<MatmulOp>(
                             l, type({dyn, gates * u}), h, recurrent, false, false)),
                         recurrentBias)
                   : recurrentBias;
      Value z = sigmoid(add(gate(xs, 0), h ? gate(hu, 0) : gateOfBias(hu, 0)));
      Value r = sigmoid(add(gate(xs, 1), h ? gate(hu, 1) : gateOfBias(hu, 1)));
      Value hh =
          tanh(add(gate(xs, 2), mul(r, h ? gate(hu, 2) : gateOfBias(hu, 2))));
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

} // namespace mlir::dtf::frontend
