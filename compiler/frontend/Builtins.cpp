// The built-in calls of the model language and argument binding.
#include "compiler/frontend/Builtins.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::dtf;

namespace {

const std::vector<BuiltinSpec> &catalogue() {
  using K = BuiltinKind;
  static const std::vector<BuiltinSpec> specs = {
      // Layers: own their variables (NAME/kernel, NAME/bias, NAME/embeddings).
      {"dense", K::Layer, {"x", "units", "activation", "use_bias", "kernel_initializer", "bias_initializer", "dtype"}, 2,
       "fully connected layer: activation(x @ kernel + bias)"},
      {"conv2d", K::Layer, {"x", "filters", "kernel", "strides", "padding", "dilation", "activation", "use_bias", "kernel_initializer", "bias_initializer", "dtype"}, 3,
       "2-D convolution layer over NHWC input"},
      {"embedding", K::Layer, {"ids", "vocab", "dim", "initializer", "partitions", "capacity", "admit_after", "evict_after"}, 3,
       "embedding lookup in a [vocab, dim] table, or in a dynamic one (vocab = dynamic: any i64 id, rows made on first sight)"},
      {"multi_head_attention", K::Layer, {"query", "value", "heads", "key_dim", "mask", "dropout"}, 4,
       "multi-head scaled dot-product attention of query [B, Tq, E] over value [B, Tv, E']"},
      {"lstm", K::Layer, {"x", "units", "return_sequences", "kernel_initializer", "recurrent_initializer", "dtype"}, 2,
       "LSTM over axis 1 of [B, T, F]: the last output [B, units], or every output [B, T, units]"},
      {"gru", K::Layer, {"x", "units", "return_sequences", "kernel_initializer", "recurrent_initializer", "dtype"}, 2,
       "GRU over axis 1 of [B, T, F]: the last output [B, units], or every output [B, T, units]"},
      {"batch_norm", K::Layer, {"x", "momentum", "epsilon", "center", "scale"}, 1,
       "batch normalization over every axis but the last, with moving statistics for evaluation"},
      {"layer_norm", K::Layer, {"x", "epsilon", "center", "scale"}, 1,
       "layer normalization over the last axis: (x - mean) / sqrt(variance + epsilon) * gamma + beta"},
      // Ops.
      {"matmul", K::Op, {"a", "b", "transpose_a", "transpose_b"}, 2, "matrix product"},
      {"relu", K::Op, {"x"}, 1, "max(x, 0)"},
      {"sigmoid", K::Op, {"x"}, 1, "1 / (1 + exp(-x))"},
      {"tanh", K::Op, {"x"}, 1, "hyperbolic tangent"},
      {"exp", K::Op, {"x"}, 1, "exponential"},
      {"log", K::Op, {"x"}, 1, "natural logarithm"},
      {"sqrt", K::Op, {"x"}, 1, "square root"},
      {"rsqrt", K::Op, {"x"}, 1, "1 / sqrt(x)"},
      {"neg", K::Op, {"x"}, 1, "-x"},
      {"maximum", K::Op, {"x", "y"}, 2, "elementwise maximum"},
      {"minimum", K::Op, {"x", "y"}, 2, "elementwise minimum"},
      {"pow", K::Op, {"x", "y"}, 2, "x to the power y"},
      {"select", K::Op, {"condition", "on_true", "on_false"}, 3, "on_true where condition, else on_false"},
      {"cast", K::Op, {"x", "to"}, 2, "convert to another dtype"},
      {"reshape", K::Op, {"x", "shape"}, 2, "same elements, new shape (one -1 allowed)"},
      {"flatten", K::Op, {"x"}, 1, "[B, ...] to [B, product]"},
      {"transpose", K::Op, {"x", "perm"}, 2, "permute dimensions"},
      {"concat", K::Op, {"values", "axis"}, 2, "join along an axis"},
      {"slice", K::Op, {"x", "begin", "size"}, 3, "a block of x (-1 size: to the end)"},
      {"broadcast_to", K::Op, {"x", "shape"}, 2, "broadcast to a shape (B or -1 first: the batch)"},
      {"tile", K::Op, {"x", "multiples"}, 2, "repeat multiples[i] times along dimension i (B first: over the batch)"},
      {"sum", K::Op, {"x", "axis", "keep_dims"}, 1, "sum over axes"},
      {"mean", K::Op, {"x", "axis", "keep_dims"}, 1, "mean over axes"},
      {"max", K::Op, {"x", "axis", "keep_dims"}, 1, "maximum over axes"},
      {"argmax", K::Op, {"x", "axis", "output_type"}, 2, "index of the largest element"},
      {"softmax", K::Op, {"x", "axis"}, 1, "softmax along an axis"},
      {"log_softmax", K::Op, {"x", "axis"}, 1, "log of softmax along an axis"},
      {"softmax_cross_entropy", K::Op, {"logits", "labels"}, 2, "cross-entropy against label distributions"},
      {"sparse_softmax_cross_entropy", K::Op, {"logits", "labels"}, 2, "cross-entropy against class indices"},
      {"one_hot", K::Op, {"indices", "depth", "on_value", "off_value", "dtype"}, 2, "one-hot vectors"},
      {"gather", K::Op, {"params", "indices"}, 2, "rows of params"},
      {"dropout", K::Op, {"x", "rate", "seed"}, 2, "zero elements at random while training"},
      {"max_pool", K::Op, {"x", "size", "strides", "padding"}, 1, "max over windows (NHWC)"},
      {"avg_pool", K::Op, {"x", "size", "strides", "padding"}, 1, "average over windows (NHWC)"},
      {"gelu", K::Op, {"x", "approximate"}, 1, "0.5 x (1 + erf(x / sqrt(2))); approximate = true: the tanh form"},
      {"erf", K::Op, {"x"}, 1, "error function"},
      {"floor", K::Op, {"x"}, 1, "largest integer not greater than x"},
      {"ceil", K::Op, {"x"}, 1, "smallest integer not less than x"},
      {"round", K::Op, {"x"}, 1, "nearest integer, halves to even"},
      {"abs", K::Op, {"x"}, 1, "absolute value"},
      {"floormod", K::Op, {"x", "y"}, 2, "x - floor(x / y) * y, the sign of y (also x % y)"},
      {"bucketize", K::Op, {"x", "boundaries"}, 2, "i32 index of x's bucket among sorted boundaries"},
      // Initializers.
      {"zeros", K::Initializer, {}, 0, "all zeros"},
      {"ones", K::Initializer, {}, 0, "all ones"},
      {"constant", K::Initializer, {"value"}, 1, "every element = value"},
      {"uniform", K::Initializer, {"minval", "maxval", "seed"}, 0, "uniform in [minval, maxval)"},
      {"normal", K::Initializer, {"mean", "stddev", "seed"}, 0, "normal distribution"},
      {"truncated_normal", K::Initializer, {"mean", "stddev", "seed"}, 0, "normal, redrawn beyond 2 stddev"},
      {"glorot_uniform", K::Initializer, {"seed"}, 0, "Glorot/Xavier uniform"},
      {"he_normal", K::Initializer, {"seed"}, 0, "He normal"},
      {"orthogonal", K::Initializer, {"gain", "seed"}, 0,
       "Keras' Orthogonal: Q of the QR of a normal matrix, sign-corrected, times gain"},
      // Optimizers.
      {"sgd", K::Optimizer, {"learning_rate", "weight_decay", "lazy"}, 1, "gradient descent"},
      {"momentum", K::Optimizer, {"learning_rate", "momentum", "use_nesterov", "lazy", "weight_decay"}, 1, "momentum"},
      {"adam", K::Optimizer, {"learning_rate", "beta1", "beta2", "epsilon", "lazy", "weight_decay"}, 0, "Adam"},
      {"adagrad", K::Optimizer, {"learning_rate", "initial_accumulator_value", "weight_decay", "lazy"}, 1, "Adagrad"},
      {"ftrl", K::Optimizer, {"learning_rate", "learning_rate_power", "initial_accumulator_value", "l1", "l2", "l2_shrinkage", "beta", "lazy", "weight_decay"}, 1,
       "FTRL-proximal (Keras' Ftrl; l1, l2, l2_shrinkage: its *_regularization_strength)"},
      {"rmsprop", K::Optimizer, {"learning_rate", "decay", "momentum", "epsilon", "lazy", "weight_decay"}, 1, "RMSProp"},
      {"adamw", K::Optimizer, {"learning_rate", "weight_decay", "beta1", "beta2", "epsilon", "lazy"}, 0,
       "Adam with decoupled weight decay (Keras' AdamW)"},
      // Learning-rate schedules.
      {"exponential_decay", K::Schedule, {"learning_rate", "decay_steps", "decay_rate", "staircase"}, 3,
       "learning_rate * decay_rate ^ (step / decay_steps)"},
      {"piecewise_constant", K::Schedule, {"boundaries", "values"}, 2, "values[i] between boundaries"},
      {"cosine_decay", K::Schedule, {"initial_learning_rate", "decay_steps", "alpha", "warmup_target", "warmup_steps"}, 2,
       "Keras' CosineDecay: a linear warmup to warmup_target, then a cosine decay to alpha times it over decay_steps"},
      // Data sources.
      {"idx", K::Data, {"path", "split"}, 1, "MNIST-format IDX files (gzip or raw) in a directory"},
      {"csv", K::Data, {"path", "label", "header"}, 1, "a CSV file of features and a label column"},
      {"synthetic", K::Data, {"examples", "seed"}, 0, "random data shaped like the inputs"},
      {"tfrecord", K::Data, {"path", "compression", "on_corrupt", "features"}, 1,
       "TFRecord files of tf.train.Example matched by a glob; features go to the inputs of the same name"},
      // Other settings written as calls.
      {"sync", K::Config, {"replicas_to_aggregate", "total_num_replicas"}, 0, "SyncReplicasOptimizer"},
      {"global_norm", K::Config, {"clip_norm"}, 1, "clip gradients by global norm"},
      {"dynamic", K::Config, {"initial_scale", "dynamic_growth_steps"}, 0,
       "mixed_float16's dynamic loss scale (Keras' LossScaleOptimizer)"},
      {"session", K::Config, {"soft_placement", "log_device_placement", "inter_op_threads", "intra_op_threads", "gpu_towers", "allow_tf32"}, 0,
       "session options"},
      {"replicate", K::Config, {"ps"}, 0, "replica device setter"},
  };
  return specs;
}

/// The short name dtf gives a parameter Keras spells out (Ftrl's
/// l1_regularization_strength is ftrl's l1).
std::optional<StringRef> shortNameOf(const BuiltinSpec &spec, StringRef key) {
  if (spec.name != "ftrl")
    return std::nullopt;
  return llvm::StringSwitch<std::optional<StringRef>>(key)
      .Case("l1_regularization_strength", StringRef("l1"))
      .Case("l2_regularization_strength", StringRef("l2"))
      .Case("l2_shrinkage_regularization_strength", StringRef("l2_shrinkage"))
      .Default(std::nullopt);
}

} // namespace

const BuiltinSpec *mlir::dtf::lookupBuiltin(StringRef name, BuiltinKind kind) {
  for (const BuiltinSpec &spec : catalogue())
    if (spec.kind == kind && spec.name == name)
      return &spec;
  return nullptr;
}

std::vector<const BuiltinSpec *> mlir::dtf::builtinsOfKind(BuiltinKind kind) {
  std::vector<const BuiltinSpec *> out;
  for (const BuiltinSpec &spec : catalogue())
    if (spec.kind == kind)
      out.push_back(&spec);
  return out;
}

std::optional<std::string>
mlir::dtf::closestName(StringRef name, ArrayRef<std::string> candidates) {
  // Close enough to be a typo: one edit in three letters, one for short
  // names (so 'foo' does not become 'log').
  std::optional<std::string> best;
  unsigned bestDistance = std::max<unsigned>(1, name.size() / 3) + 1;
  // Two swapped neighbours ('rleu' for 'relu') count as one edit.
  auto isSwap = [&](StringRef a, StringRef b) {
    if (a.size() != b.size())
      return false;
    size_t i = 0;
    while (i < a.size() && a[i] == b[i])
      ++i;
    return i + 1 < a.size() && a[i] == b[i + 1] && a[i + 1] == b[i] &&
           a.drop_front(i + 2) == b.drop_front(i + 2);
  };
  for (const std::string &candidate : candidates) {
    unsigned d = isSwap(name, candidate)
                     ? 1
                     : name.edit_distance(candidate, true, bestDistance);
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return best;
}

BoundArgs
mlir::dtf::bindArguments(const BuiltinSpec &spec,
                         const std::vector<ast::Arg> &args, ast::Loc callLoc,
                         const LocatedErrorFn &emitError) {
  BoundArgs bound;
  bool ok = true;
  std::vector<std::string> suggested; // missing ones already hinted at
  size_t positional = 0;
  bool sawKeyword = false;
  for (const ast::Arg &arg : args) {
    if (arg.key.empty() && sawKeyword) {
      emitError(arg.value->getLoc())
          << "a positional argument cannot follow keyword arguments in a call "
             "of "
          << spec.name;
      ok = false;
      continue;
    }
    sawKeyword |= !arg.key.empty();
    if (arg.key.empty()) {
      if (positional >= spec.params.size()) {
        emitError(arg.value->getLoc())
            << spec.name << " takes at most " << spec.params.size()
            << " positional argument" << (spec.params.size() == 1 ? "" : "s")
            << " (" << llvm::join(spec.params, ", ") << ")";
        ok = false;
        continue;
      }
      bound.values[spec.params[positional++]] = arg.value.get();
      continue;
    }
    if (!llvm::is_contained(spec.params, arg.key)) {
      InFlightDiagnostic diag = emitError(arg.keyLoc);
      diag << spec.name << " has no parameter '" << arg.key << "'";
      std::vector<std::string> names(spec.params.begin(), spec.params.end());
      if (std::optional<StringRef> short_ = shortNameOf(spec, arg.key)) {
        diag << "; Keras' " << arg.key << " is '" << *short_ << "' here";
        suggested.push_back(short_->str());
      } else if (auto suggestion = closestName(arg.key, names)) {
        diag << "; did you mean '" << *suggestion << "'?";
        suggested.push_back(*suggestion);
      }
      else if (names.empty())
        diag << " (it takes none)";
      else
        diag << " (it takes " << llvm::join(spec.params, ", ") << ")";
      ok = false;
      continue;
    }
    if (bound.values.count(arg.key)) {
      emitError(arg.keyLoc) << spec.name << " gets '" << arg.key
                            << "' twice";
      ok = false;
      continue;
    }
    bound.values[arg.key] = arg.value.get();
  }
  for (unsigned i = 0; i < spec.required; ++i) {
    if (!bound.values.count(spec.params[i]) &&
        !llvm::is_contained(suggested, spec.params[i].str())) {
      emitError(callLoc) << spec.name << " needs '" << spec.params[i] << "'"
                         << " (" << spec.summary << ")";
      ok = false;
    }
  }
  bound.complete = ok;
  bound.suggested = std::move(suggested);
  return bound;
}
