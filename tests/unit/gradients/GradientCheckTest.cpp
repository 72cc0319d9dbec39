// Every gradient rule of dtf-autodiff, checked against central finite
// differences: each case compiles a small model with dtfc's own front end and
// passes, runs one SGD step with learning rate 1 through the runtime's
// executor (so the update is exactly the gradient), and compares it with
// (L(w + eps) - L(w - eps)) / 2 eps from the evaluation program.
//
// The case texts write the float type as $T, so every case runs twice: in
// float64 (suite F64: eps 1e-6 and a tight tolerance, the check of the rules
// themselves, as TensorFlow's gradient tests run in float64) and in float32
// (suite F32: the f32 kernels, with eps and tolerance chosen for float32).
#include "CompileCase.h"
#include "compiler/Registration.h"
#include "compiler/kernels/KernelGen.h"
#include "compiler/frontend/MLIRGen.h"
#include "compiler/frontend/Parser.h"
#include "compiler/plan/PlanEmitter.h"
#include "dialects/Dtf/Transforms/Passes.h"
#include "runtime/exec/Executor.h"
#include "runtime/kernels/CpuKernels.h"
#include "runtime/plan/PlanTypes.h"
#include "schema/PlanSchema.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

namespace {

struct Case {
  const char *name;
  const char *inputs;  // input declarations, the float type written $T
  const char *var;     // the type of the trainable variable `w` ("": none)
  const char *loss;    // the graph, defining `loss`
  double lo = -1.0, hi = 1.0; // w and float inputs drawn from [lo, hi)
  const char *checked = "w";  // the variable whose gradient is checked
  double eps32 = 1e-2;        // float32's eps: smaller where a kink (relu) is near
  // The loss of the training step rather than of evaluation (batch_norm
  // normalizes with the batch's statistics only while training).
  bool trainingLoss = false;
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

/// How one precision checks: the dtype that replaces $T, the step, and the
/// tolerance |analytic - numeric| <= abs + rel * |numeric|.
struct Precision {
  const char *dtype;
  double eps;
  double abs, rel;
  bool fuse = false; // dtf-fuse and generated CPU kernels, as dtfc's default
};

// float64: the truncation error of the central difference is about
// eps^2 |L'''| and the rounding error about 1e-16 |L| / eps, both near 1e-10
// for these losses; 1e-7 leaves room and still catches a wrong rule.
constexpr double kEps64 = 1e-6;
constexpr double kTol64 = 1e-7;

/// `text` with every $T replaced by `dtype`.
std::string substitute(std::string text, const char *dtype) {
  for (size_t at = text.find("$T"); at != std::string::npos; at = text.find("$T", at))
    text.replace(at, 2, dtype);
  return text;
}

using dtf::testing::compileCase;

/// Compiles case `c` with T as its float type, takes the gradient of `loss`
/// for variable `c.checked` from one SGD step and compares every element
/// with central differences.
/// Case `c`'s model with T as its float type, trained by SGD with learning
/// rate 1; `trainExtra` adds settings to its train block.
std::string caseSource(const Case &c, const char *dtype, const char *trainExtra = "") {
  return substitute(std::string("model g {\n") + c.inputs + "\n" +
                        (*c.var ? std::string("  var w: ") + c.var + " = zeros\n" : "") +
                        "  graph {\n" + c.loss + "\n  }\n  train {\n    optimizer = sgd(1.0)\n" +
                        trainExtra + "  }\n}\n",
                    dtype);
}

template <typename T> void checkGradient(const Case &c, const Precision &p) {
  std::string source = caseSource(c, p.dtype);
  dtf::plan::Plan plan;
  std::string error;
  ASSERT_TRUE(compileCase(source, plan, error, p.fuse)) << error << "\n" << source;

  std::mt19937 rng(1234);
  std::uniform_real_distribution<T> draw(T(c.lo), T(c.hi));
  dtf::exec::VariableStore variables;
  for (const auto &v : plan.variables()) {
    std::vector<int64_t> shape(v.type().shape().dims().begin(), v.type().shape().dims().end());
    dtf::DType dtype = dtf::DType::F32;
    ASSERT_TRUE(dtf::plan::toDType(v.type().dtype(), &dtype).isOk()) << v.name();
    dtf::Tensor t = dtf::Tensor::zeros(dtype, shape);
    if (v.name() == c.checked) {
      ASSERT_EQ(dtype, dtf::dtypeOf<T>()) << v.name() << " is not " << p.dtype;
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.data<T>()[i] = draw(rng);
    }
    ASSERT_TRUE(variables.add(v.name(), t).isOk());
  }
  if (p.fuse && std::string(c.name) == "max_pool") {
    // Not vacuous: the gradient checked is the one that reads the argmax.
    int indexed = 0;
    for (const auto &op : plan.train_step().ops())
      indexed += op.name() == "dtf.max_pool_grad_with_argmax";
    EXPECT_EQ(indexed, 1) << "no max_pool_grad_with_argmax in the fused plan";
  }
  dtf::KernelRegistry kernels;
  dtf::registerCpuKernels(kernels);
  std::unique_ptr<dtf::exec::Executor> train, eval;
  dtf::exec::ExecutorOptions options;
  dtf::exec::applySessionOptions(plan, &options); // the generated kernels
  if (p.fuse && plan.kernels_size() > 0) {
    std::printf("[ fused    ] %s: %d generated kernels\n", c.name, plan.kernels_size());
    ASSERT_TRUE(options.planKernels && options.planKernels->loaded)
        << "the fused plan's kernels did not load: "
        << (options.planKernels ? options.planKernels->fallbackReason : "none");
  }
  auto status = dtf::exec::Executor::create(plan.train_step(), variables, kernels, options, &train);
  ASSERT_TRUE(status.isOk()) << status.message();
  status = dtf::exec::Executor::create(plan.eval(), variables, kernels, options, &eval);
  ASSERT_TRUE(status.isOk()) << status.message();

  // The same random feeds for both programs: integers as class indices.
  const int64_t batch = 2;
  for (dtf::exec::Executor *e : {train.get(), eval.get()}) {
    std::mt19937 feedRng(99);
    for (int i = 0; i < e->numFeeds(); ++i) {
      dtf::Tensor *t = nullptr;
      ASSERT_TRUE(e->prepareFeed(i, batch, &t).isOk());
      for (int64_t k = 0; k < t->numElements(); ++k) {
        if (t->dtype() == dtf::DType::F32)
          t->data<float>()[k] =
              std::uniform_real_distribution<float>(float(c.lo), float(c.hi))(feedRng);
        else if (t->dtype() == dtf::DType::F64)
          t->data<double>()[k] = std::uniform_real_distribution<double>(c.lo, c.hi)(feedRng);
        else if (t->dtype() == dtf::DType::I32)
          t->data<int32_t>()[k] = int32_t(feedRng() % 3);
        else if (t->dtype() == dtf::DType::I64)
          t->data<int64_t>()[k] = int64_t(feedRng() % 3);
      }
    }
  }
  dtf::Tensor *w = variables.find(c.checked);
  ASSERT_NE(w, nullptr);
  T *pw = w->data<T>();
  std::vector<T> w0(pw, pw + w->numElements());
  std::map<std::string, std::vector<char>> before;
  auto restore = [&] {
    for (auto &[name, bytes] : before)
      std::copy(bytes.begin(), bytes.end(),
                static_cast<char *>(variables.find(name)->rawData()));
  };
  auto lossAt = [&]() {
    dtf::exec::Executor *e = c.trainingLoss ? train.get() : eval.get();
    auto s = e->run(0);
    EXPECT_TRUE(s.isOk()) << s.message();
    const dtf::Tensor &loss = e->fetch(e->findFetch("loss"));
    EXPECT_EQ(loss.dtype(), dtf::dtypeOf<T>()) << "the loss is " << loss.describe();
    const double value = double(loss.data<T>()[0]);
    if (c.trainingLoss) // the step updated the variables: put them back
      restore();
    return value;
  };

  // One SGD step with learning rate 1: w1 = w0 - gradient. The step updates
  // every trainable variable: all are put back afterwards.
  for (const std::string &name : variables.names()) {
    const dtf::Tensor *t = variables.find(name);
    const char *bytes = static_cast<const char *>(t->rawData());
    before[name].assign(bytes, bytes + t->byteSize());
  }
  auto s = train->run(0);
  ASSERT_TRUE(s.isOk()) << s.message();
  std::vector<double> analytic(w0.size());
  for (size_t i = 0; i < w0.size(); ++i)
    analytic[i] = double(w0[i]) - double(pw[i]);
  restore();

  double worst = 0; // max |analytic - numeric| / max(1, |numeric|)
  for (size_t i = 0; i < w0.size(); ++i) {
    const T wUp = w0[i] + T(p.eps), wDown = w0[i] - T(p.eps);
    pw[i] = wUp;
    const double up = lossAt();
    pw[i] = wDown;
    const double down = lossAt();
    pw[i] = w0[i];
    // Divided by the step actually taken, after rounding w0 +- eps to T.
    const double numeric = (up - down) / (double(wUp) - double(wDown));
    const double diff = std::abs(analytic[i] - numeric);
    worst = std::max(worst, diff / std::max(1.0, std::abs(numeric)));
    EXPECT_LE(diff, p.abs + p.rel * std::abs(numeric))
        << p.dtype << " gradient of case '" << c.name << "': d loss / d " << c.checked << "[" << i
        << "]: analytic " << analytic[i] << " vs numeric " << numeric << " (|difference| " << diff
        << ")";
  }
  std::printf("[ gradient ] %s %s: %zu elements, max |analytic - numeric| / max(1, |numeric|) "
              "= %.3g\n",
              p.dtype, c.name, w0.size(), worst);
}

class F64 : public ::testing::TestWithParam<Case> {};
class F32 : public ::testing::TestWithParam<Case> {};
class F64Fused : public ::testing::TestWithParam<Case> {};

TEST_P(F64, GradientMatchesFiniteDifferences) {
  checkGradient<double>(GetParam(), {"f64", kEps64, kTol64, kTol64});
}

// The same rules with dtfc's fusion: dtf-fuse-library's folds (max_pool
// with its argmax and max_pool_grad_with_argmax among them), and the
// elementwise chains of the forward and backward pass as generated kernels.
TEST_P(F64Fused, GradientMatchesFiniteDifferences) {
  checkGradient<double>(GetParam(), {"f64", kEps64, kTol64, kTol64, true});
}

// float32: rounding in the loss (about 1e-7 |L| / eps) dominates.
TEST_P(F32, GradientMatchesFiniteDifferences) {
  const Case &c = GetParam();
  checkGradient<float>(c, {"f32", c.eps32, 2e-2, 2e-2});
}

const Case kCases[] = {
    {"add_broadcast", "  input x: $T[B, 3]", "$T[3]", "    loss = sum((x + w) * (x + w))"},
    {"sub", "  input x: $T[B, 3]", "$T[3]", "    loss = sum((x - w) * (x - w) * x)"},
    {"mul_broadcast", "  input x: $T[B, 2, 3]", "$T[2, 1]", "    loss = sum(x * w * x * w)"},
    {"div", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(x / w + w / (x + 3))", 0.5, 1.5},
    {"maximum", "  input x: $T[B, 4]", "$T[4]", "    loss = sum(maximum(x, w) * x)"},
    {"minimum", "  input x: $T[B, 4]", "$T[4]", "    loss = sum(minimum(w, x) * x)"},
    {"pow", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(pow(w, x) + pow(x + 1, w))", 0.5, 1.5},
    {"neg", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(-w * x)"},
    {"exp", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(exp(w) * x)"},
    {"log", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(log(w) * x)", 0.5, 1.5},
    {"sqrt", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(sqrt(w) * x)", 0.5, 1.5},
    {"rsqrt", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(rsqrt(w) * x)", 0.5, 1.5},
    {"relu", "  input x: $T[B, 5]", "$T[5]", "    loss = sum(relu(w * x) * x)", -1.0, 1.0, "w", 1e-3},
    {"sigmoid", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(sigmoid(w * x) * x)"},
    {"tanh", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(tanh(w * x) * x)"},
    {"erf", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(erf(w * x) * x)"},
    {"gelu", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(gelu(w * x * 2) * x)"},
    {"gelu_approximate", "  input x: $T[B, 3]", "$T[3]",
     "    loss = sum(gelu(w * x * 2, approximate = true) * x)"},
    {"gelu_activation", "  input x: $T[B, 3]", "",
     "    d = dense(x, units = 2, activation = gelu) as d\n    loss = sum(d * d)",
     -1.0, 1.0, "d/kernel"},
    {"abs", "  input x: $T[B, 5]", "$T[5]", "    loss = sum(abs(w * x) * x)", -1.0, 1.0, "w", 1e-3},
    // floormod away from its jumps (x / y never crosses an integer here):
    // d/dx = 1, d/dy = -floor(x / y), with a positive and a negative divisor.
    {"floormod", "  input x: $T[B, 3]", "$T[3]",
     "    loss = sum(((x + 5) % (w + 4)) * x + ((x + 5) % (w - 9)) * x * 2 + floormod(w + 4.25, 3) * x * 3)",
     0.5, 1.5},
    // floor, ceil, round and bucketize have no gradient (TensorFlow's None):
    // they hold w constant, so only w * x counts.
    {"no_gradient_ops", "  input x: $T[B, 3]", "$T[3]",
     "    k = floor(w * 4) + ceil(w * 4) + round(w * 4) + cast(bucketize(w, boundaries = [0.25]), to = $T)\n"
     "    loss = sum(k * x + w * x)",
     -1.0, 1.0, "w", 1e-3},
    {"select", "  input x: $T[B, 4]", "$T[4]", "    loss = sum(select(x > 0, w * w, w * 3) * x)"},
    {"cast", "  input x: $T[B, 3]", "$T[3]", "    loss = sum(cast(w, to = $T) * x)"},
    {"cast_through_f64", "  input x: $T[B, 3]", "$T[3]",
     "    loss = sum(cast(cast(w, to = f64) * cast(x, to = f64), to = $T))"},
    {"matmul", "  input x: $T[B, 3]", "$T[3, 2]", "    loss = sum(matmul(x, w) * matmul(x, w))"},
    {"matmul_odd", "  input x: $T[B, 7]", "$T[7, 5]",
     "    p = matmul(x, w)\n    loss = sum(p * p * p)"},
    {"matmul_transpose_a", "  input x: $T[B, 3]", "$T[3, 2]",
     "    p = matmul(w, w, transpose_a = true)\n    loss = sum(p * p * 0.5) + sum(x)"},
    {"matmul_transpose_b", "  input x: $T[B, 3]", "$T[2, 3]",
     "    p = matmul(x, w, transpose_b = true)\n    loss = sum(p * p)"},
    {"matmul_transpose_both", "  input x: $T[B, 3]", "$T[3, 3]",
     "    p = matmul(w, w, transpose_a = true, transpose_b = true)\n    loss = sum(p * p)"},
    // Batch dimensions that broadcast (NumPy's matmul): the gradient of the
    // shared operand sums over them.
    {"matmul_batch_shared_rhs", "  input x: $T[B, 3, 4]", "$T[4, 2]",
     "    p = x @ w\n    loss = sum(p * p)"},
    {"matmul_batch_shared_lhs", "  input x: $T[B, 4, 2]", "$T[3, 4]",
     "    p = w @ x\n    loss = sum(p * p * p)"},
    {"matmul_batch_ones", "  input x: $T[B, 1, 3, 4]", "$T[2, 4, 5]",
     "    p = x @ w\n    loss = sum(p * p)"},
    {"matmul_batch_var_lhs", "  input x: $T[B, 1, 4, 2]", "$T[2, 3, 4]",
     "    p = matmul(w, x)\n    loss = sum(p * p)"},
    {"matmul_batch_transposed", "  input x: $T[B, 4, 3]", "$T[2, 4]",
     "    p = matmul(x, w, transpose_a = true, transpose_b = true)\n    loss = sum(p * p)"},
    {"dense_tokens", "  input x: $T[B, 3, 4]", "",
     "    d = dense(x, units = 2, activation = tanh) as d\n    loss = sum(d * d)",
     -1.0, 1.0, "d/kernel"},
    // layer_norm: through the statistics (the input scaled by w), and its
    // own scale.
    {"layer_norm_input", "  input x: $T[B, 3, 4]", "$T[4]",
     "    n = layer_norm(x * w, center = false, scale = false) as n\n    loss = sum(n * x)",
     0.5, 1.5},
    {"layer_norm_gamma", "  input x: $T[B, 5]", "",
     "    n = layer_norm(x, epsilon = 0.001) as n\n    loss = sum(n * n * x)",
     -1.0, 1.0, "n/gamma"},
    // multi_head_attention: through the scores (query and key kernels), the
    // values and the output projection.
    {"attention_query", "  input x: $T[B, 3, 4]", "",
     "    a = multi_head_attention(x, x, heads = 2, key_dim = 2) as att\n    loss = sum(a * a)",
     -1.0, 1.0, "att/query/kernel"},
    {"attention_key", "  input x: $T[B, 3, 4]\n  input v: $T[B, 2, 3]", "",
     "    a = multi_head_attention(x, v, heads = 2, key_dim = 3) as att\n    loss = sum(a * a * x)",
     -1.0, 1.0, "att/key/kernel"},
    {"attention_value", "  input x: $T[B, 3, 4]", "",
     "    a = multi_head_attention(x, x, 1, 2) as att\n    loss = sum(a * a)",
     -1.0, 1.0, "att/value/kernel"},
    {"attention_output", "  input x: $T[B, 3, 4]", "",
     "    a = multi_head_attention(x, x, heads = 2, key_dim = 2) as att\n    loss = sum(a * a)",
     -1.0, 1.0, "att/attention_output/kernel"},
    // Recurrent layers: every step's use of the shared kernels. In f64 the
    // lstm and gru are unrolled; in f32 each is one op (dtf.lstm or dtf.gru:
    // oneDNN's LSTM or GRU primitive, with their _train and _grad ops), so
    // the F32 cases check those primitives' gradients for every variable
    // and the input.
    {"lstm_kernel", "  input x: $T[B, 3, 2]", "",
     "    h = lstm(x, units = 3) as rnn\n    loss = sum(h * h)",
     -1.0, 1.0, "rnn/kernel"},
    {"lstm_recurrent_sequences", "  input x: $T[B, 4, 2]", "",
     "    h = lstm(x, units = 2, return_sequences = true) as rnn\n    loss = sum(h * h * h)",
     -1.0, 1.0, "rnn/recurrent_kernel"},
    {"lstm_bias", "  input x: $T[B, 3, 2]", "",
     "    h = lstm(x, units = 3) as rnn\n    loss = sum(h * h)",
     -1.0, 1.0, "rnn/bias"},
    {"lstm_input_stacked", "  input x: $T[B, 4, 2]", "$T[4, 2]",
     "    s = lstm(x * w, units = 3, return_sequences = true) as a\n"
     "    h = lstm(s, units = 2) as b\n    loss = sum(h * h * h)"},
    {"gru_kernel", "  input x: $T[B, 3, 2]", "",
     "    h = gru(x, units = 3) as rnn\n    loss = sum(h * h)",
     -1.0, 1.0, "rnn/kernel"},
    {"gru_recurrent_bias", "  input x: $T[B, 3, 2]", "",
     "    h = gru(x, 2, return_sequences = true) as rnn\n    loss = sum(h * h * h)",
     -1.0, 1.0, "rnn/recurrent_bias"},
    {"gru_recurrent_kernel", "  input x: $T[B, 4, 2]", "",
     "    h = gru(x, units = 3) as rnn\n    loss = sum(h * h * h)",
     -1.0, 1.0, "rnn/recurrent_kernel"},
    {"gru_bias", "  input x: $T[B, 3, 2]", "",
     "    h = gru(x, units = 3) as rnn\n    loss = sum(h * h)",
     -1.0, 1.0, "rnn/bias"},
    {"gru_input_stacked", "  input x: $T[B, 4, 2]", "$T[4, 2]",
     "    s = gru(x * w, units = 3, return_sequences = true) as a\n"
     "    h = gru(s, units = 2) as b\n    loss = sum(h * h * h)"},
    // batch_norm while training: through the batch's mean and variance (the
    // input scaled by w), and its gamma.
    {"batch_norm_input", "  input x: $T[B, 2, 3]", "$T[3]",
     "    n = batch_norm(x * w, center = false, scale = false) as bn\n    loss = sum(n * x)",
     0.5, 1.5, "w", 1e-2, true},
    {"batch_norm_gamma", "  input x: $T[B, 4]", "",
     "    n = batch_norm(x, epsilon = 0.01) as bn\n    loss = sum(n * n * x)",
     -1.0, 1.0, "bn/gamma", 1e-2, true},
    {"conv2d_filter", "  input x: $T[B, 5, 5, 2]", "",
     "    c = conv2d(x, filters = 2, kernel = 3, padding = valid, use_bias = false) as c\n"
     "    loss = sum(c * c)",
     -1.0, 1.0, "c/kernel"},
    {"conv2d_input_same_stride", "  input x: $T[B, 6, 6, 1]", "$T[6, 6, 1]",
     "    c = conv2d(x * w, filters = 2, kernel = 3, strides = 2, use_bias = false) as c\n"
     "    loss = sum(c * c)"},
    {"conv2d_dilation", "  input x: $T[B, 7, 7, 1]", "",
     "    c = conv2d(x, filters = 1, kernel = 3, dilation = 2, padding = valid, use_bias = false) as c\n"
     "    loss = sum(c * c)",
     -1.0, 1.0, "c/kernel"},
    {"dense_bias", "  input x: $T[B, 3]", "",
     "    d = dense(x, units = 2, activation = tanh) as d\n    loss = sum(d * d)",
     -1.0, 1.0, "d/bias"},
    {"max_pool", "  input x: $T[B, 4, 4, 1]", "$T[4, 4, 1]",
     "    p = max_pool(x * w, size = 2)\n    loss = sum(p * p)"},
    {"avg_pool", "  input x: $T[B, 4, 4, 1]", "$T[4, 4, 1]",
     "    p = avg_pool(x * w, size = 2, padding = same, strides = 1)\n    loss = sum(p * p)"},
    {"reshape", "  input x: $T[B, 6]", "$T[2, 3]", "    loss = sum(reshape(w, [3, 2]) * reshape(w, [3, 2]) * 2)"},
    {"transpose", "  input x: $T[B, 3]", "$T[2, 3]", "    loss = sum(matmul(x, transpose(w, [1, 0]) @ w))"},
    {"broadcast_to", "  input x: $T[B, 4]", "$T[4]", "    loss = sum(broadcast_to(w, [3, 4]) * broadcast_to(w, [3, 4]))"},
    // tile and the batch in shape lists (issue 36): tile's gradient sums the
    // repeats; a token repeated over the batch gets the sum over the batch.
    {"tile", "  input x: $T[B, 3]", "$T[2, 3]",
     "    t = tile(w, [2, 3])\n    loss = sum(t * t * t) + sum(x)"},
    {"tile_over_batch", "  input x: $T[B, 3]", "$T[1, 3]",
     "    t = tile(w, [B, 2])\n    loss = sum(t * t * tile(x, [1, 2]))"},
    {"broadcast_to_batch", "  input x: $T[B, 3]", "$T[1, 3]",
     "    loss = sum(broadcast_to(w, [B, 3]) * x * broadcast_to(w, [-1, 3]))"},
    {"class_token", "  input x: $T[B, 3, 2]", "$T[1, 1, 2]",
     "    c = concat([broadcast_to(w, [B, 1, 2]), x], axis = 1)\n    loss = sum(c * c * c)"},
    {"slice", "  input x: $T[B, 3]", "$T[4, 5]",
     "    s = slice(w, begin = [1, 2], size = [2, -1])\n    loss = sum(s * s * 3) + sum(x)"},
    // Pieces that tile w along axis 1: their gradients are joined by one
    // concat (dtf-autodiff), not summed as zero-padded slice_grads.
    {"slices_tiling", "  input x: $T[B, 3]", "$T[4, 6]",
     "    a = slice(w, begin = [0, 4], size = [-1, 2])\n    b = slice(w, begin = [0, 0], size = [-1, 2])\n"
     "    c = slice(w, begin = [0, 2], size = [-1, 2])\n    loss = sum(tanh(a) * b * b + c * 3) + sum(x)"},
    {"concat", "  input x: $T[B, 3]", "$T[3]", "    c = concat([w, w * w], axis = 0)\n    loss = sum(c * c)"},
    {"sum_axis", "  input x: $T[B, 3]", "$T[2, 3]", "    s = sum(w * w, axis = 1)\n    loss = sum(s * s)"},
    {"mean_keep_dims", "  input x: $T[B, 3]", "$T[2, 3]", "    m = mean(w, axis = 0, keep_dims = true)\n    loss = sum(m * m * x)"},
    {"max_reduce", "  input x: $T[B, 3]", "$T[2, 3]", "    m = max(w, axis = 1)\n    loss = sum(m * m)"},
    {"softmax", "  input x: $T[B, 4]", "$T[4]", "    loss = sum(softmax(x * w) * x)"},
    {"log_softmax", "  input x: $T[B, 4]", "$T[4]", "    loss = sum(log_softmax(x * w) * x)"},
    {"softmax_cross_entropy", "  input x: $T[B, 3]", "$T[3]",
     "    loss = mean(softmax_cross_entropy(x * w, softmax(x)))"},
    {"sparse_softmax_cross_entropy", "  input x: $T[B, 3]\n  input y: i32[B]", "$T[3, 3]",
     "    loss = mean(sparse_softmax_cross_entropy(x @ w, y))"},
    {"gather", "  input ids: i32[B, 2]", "$T[3, 2]", "    e = gather(w, ids)\n    loss = sum(e * e)"},
    {"dense_layer_chain", "  input x: $T[B, 3]", "$T[3, 4]",
     "    h = relu(x @ w)\n    loss = mean(sparse_softmax_cross_entropy(h, cast(argmax(x, 1), to = i32)))"},
};

std::string caseName(const ::testing::TestParamInfo<Case> &info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Rules, F64, ::testing::ValuesIn(kCases), caseName);
INSTANTIATE_TEST_SUITE_P(Rules, F32, ::testing::ValuesIn(kCases), caseName);
INSTANTIATE_TEST_SUITE_P(Rules, F64Fused, ::testing::ValuesIn(kCases), caseName);

// Mixed precision: the LSTM cases under mixed_bfloat16, where each layer is
// the library ops with compute_dtype "bf16" (oneDNN's bf16 primitives: x,
// the weights and h in bf16, the sums and the gradients f32), against
// float64 (the GRU stays f32 under the policy: docs/kernels.md). The analytic gradient is the bf16 plan's (one SGD step
// with learning rate 1); the numeric one is the central difference of the
// float64 plan's loss (the unrolled layer) at the same point: every variable
// and feed is drawn once in [-1, 1), rounded to f32, and given to both. bf16
// keeps 8 significant bits (2^-9 relative per rounding) and each gradient
// sums over every step and example: the bound is 5e-3 + 3e-2 |numeric|, ten
// times the worst case measured here (5.3e-4 of max(1, |numeric|), printed;
// the F32 suite's f32 primitives: 3.5e-5).
TEST(MixedBfloat16, RecurrentGradientsMatchFloat64) {
  for (const Case &c : kCases) {
    const std::string name = c.name;
    if (name.rfind("lstm", 0) != 0)
      continue;
    SCOPED_TRACE(name);
    dtf::plan::Plan low, exact;
    std::string error;
    ASSERT_TRUE(compileCase(caseSource(c, "f32", "    precision = mixed_bfloat16\n"), low, error))
        << error;
    ASSERT_TRUE(compileCase(caseSource(c, "f64"), exact, error)) << error;
    // Not vacuous: the layers are library ops computing in bf16.
    int bf16Layers = 0;
    for (const auto &op : low.train_step().ops()) {
      auto it = op.attrs().find("compute_dtype");
      bf16Layers += dtf::plan::isRecurrentLayerOp(op.name()) && it != op.attrs().end() &&
                    it->second.s() == "bf16";
    }
    EXPECT_GE(bf16Layers, 2) << "no bf16 LSTM pair in the mixed_bfloat16 plan";

    std::mt19937 rng(4321);
    std::uniform_real_distribution<double> draw(c.lo, c.hi);
    dtf::exec::VariableStore lowVars, exactVars;
    for (const auto &v : low.variables()) {
      std::vector<int64_t> shape(v.type().shape().dims().begin(), v.type().shape().dims().end());
      dtf::DType dtype = dtf::DType::F32;
      ASSERT_TRUE(dtf::plan::toDType(v.type().dtype(), &dtype).isOk()) << v.name();
      const bool real = dtype == dtf::DType::F32;
      dtf::Tensor f = dtf::Tensor::zeros(dtype, shape);
      dtf::Tensor d = dtf::Tensor::zeros(real ? dtf::DType::F64 : dtype, shape);
      // The checked variable and the layers' weights drawn; the rest (the
      // global step, w where a layer's variable is checked) zeros.
      if (real && (v.name() == c.checked || v.name().find('/') != std::string::npos))
        for (int64_t i = 0; i < f.numElements(); ++i)
          d.data<double>()[i] = f.data<float>()[i] = float(draw(rng));
      ASSERT_TRUE(lowVars.add(v.name(), f).isOk());
      ASSERT_TRUE(exactVars.add(v.name(), d).isOk()) << v.name();
    }
    dtf::KernelRegistry kernels;
    dtf::registerCpuKernels(kernels);
    std::unique_ptr<dtf::exec::Executor> train, eval;
    dtf::exec::ExecutorOptions options;
    auto status =
        dtf::exec::Executor::create(low.train_step(), lowVars, kernels, options, &train);
    ASSERT_TRUE(status.isOk()) << status.message();
    status = dtf::exec::Executor::create(exact.eval(), exactVars, kernels, options, &eval);
    ASSERT_TRUE(status.isOk()) << status.message();
    ASSERT_EQ(train->numFeeds(), eval->numFeeds());
    std::mt19937 feedRng(99);
    for (int i = 0; i < train->numFeeds(); ++i) {
      dtf::Tensor *f = nullptr, *d = nullptr;
      ASSERT_TRUE(train->prepareFeed(i, 2, &f).isOk());
      ASSERT_TRUE(eval->prepareFeed(i, 2, &d).isOk());
      for (int64_t k = 0; k < f->numElements(); ++k)
        d->data<double>()[k] = f->data<float>()[k] =
            float(std::uniform_real_distribution<double>(c.lo, c.hi)(feedRng));
    }
    dtf::Tensor *w = lowVars.find(c.checked);
    dtf::Tensor *we = exactVars.find(c.checked);
    ASSERT_TRUE(w && we);
    std::vector<float> w0(w->data<float>(), w->data<float>() + w->numElements());
    ASSERT_TRUE(train->run(0).isOk());
    double worst = 0;
    for (size_t i = 0; i < w0.size(); ++i) {
      const double analytic = double(w0[i]) - double(w->data<float>()[i]);
      double *pe = we->data<double>();
      const double at = pe[i], eps = 1e-6;
      auto lossAt = [&](double value) {
        pe[i] = value;
        EXPECT_TRUE(eval->run(0).isOk());
        return eval->fetch(eval->findFetch("loss")).data<double>()[0];
      };
      const double numeric = (lossAt(at + eps) - lossAt(at - eps)) / (2 * eps);
      pe[i] = at;
      const double diff = std::abs(analytic - numeric);
      worst = std::max(worst, diff / std::max(1.0, std::abs(numeric)));
      EXPECT_LE(diff, 5e-3 + 3e-2 * std::abs(numeric))
          << "d loss / d " << c.checked << "[" << i << "]: bf16 analytic " << analytic
          << " vs float64 numeric " << numeric;
    }
    std::printf("[ bf16     ] %s: %zu elements, max |bf16 analytic - f64 numeric| / "
                "max(1, |numeric|) = %.3g\n",
                c.name, w0.size(), worst);
  }
}

// batch_norm's two behaviours: the training step normalizes with the
// batch's statistics (the sum of a normalized batch is 0) and moves the
// moving mean and variance toward them; evaluation normalizes with the
// moving statistics, which the test computes itself from the same batches.
TEST(BatchNorm, TrainingUsesTheBatchEvaluationTheMovingStatistics) {
  const char *source = "model bn {\n"
                       "  input x: f32[B, 3]\n"
                       "  graph {\n"
                       "    n = batch_norm(x, momentum = 0.9, epsilon = 0.001, center = false) as bn\n"
                       "    loss = sum(n)\n"
                       "  }\n"
                       "  train { optimizer = sgd(0.001) }\n"
                       "}\n";
  dtf::plan::Plan plan;
  std::string error;
  ASSERT_TRUE(compileCase(source, plan, error)) << error;
  dtf::exec::VariableStore variables;
  for (const auto &v : plan.variables()) {
    std::vector<int64_t> shape(v.type().shape().dims().begin(), v.type().shape().dims().end());
    dtf::DType dtype = dtf::DType::F32;
    ASSERT_TRUE(dtf::plan::toDType(v.type().dtype(), &dtype).isOk());
    dtf::Tensor t = dtf::Tensor::zeros(dtype, shape);
    const bool ones = v.name() == "bn/moving_variance" || v.name() == "bn/gamma";
    for (int64_t i = 0; ones && i < t.numElements(); ++i)
      t.data<float>()[i] = 1.0f;
    ASSERT_TRUE(variables.add(v.name(), t).isOk()) << v.name();
  }
  ASSERT_NE(variables.find("bn/moving_mean"), nullptr);
  dtf::KernelRegistry kernels;
  dtf::registerCpuKernels(kernels);
  std::unique_ptr<dtf::exec::Executor> train, eval;
  dtf::exec::ExecutorOptions options;
  ASSERT_TRUE(dtf::exec::Executor::create(plan.train_step(), variables, kernels, options, &train).isOk());
  ASSERT_TRUE(dtf::exec::Executor::create(plan.eval(), variables, kernels, options, &eval).isOk());

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> draw(-2.0f, 5.0f);
  auto feed = [&](dtf::exec::Executor &e, std::vector<float> &rows) {
    dtf::Tensor *t = nullptr;
    ASSERT_TRUE(e.prepareFeed(0, 4, &t).isOk());
    rows.resize(12);
    for (int k = 0; k < 12; ++k)
      t->data<float>()[k] = rows[size_t(k)] = draw(rng);
  };
  double mean[3] = {0, 0, 0}, var[3] = {1, 1, 1};
  for (int step = 0; step < 3; ++step) {
    std::vector<float> x;
    feed(*train, x);
    ASSERT_TRUE(train->run(uint64_t(step)).isOk());
    // Normalized with its own statistics, a batch sums to zero.
    EXPECT_NEAR(train->fetch(0).data<float>()[0], 0.0, 1e-4);
    for (int c = 0; c < 3; ++c) {
      double m = 0, v = 0;
      for (int r = 0; r < 4; ++r)
        m += x[size_t(r * 3 + c)] / 4.0;
      for (int r = 0; r < 4; ++r)
        v += (x[size_t(r * 3 + c)] - m) * (x[size_t(r * 3 + c)] - m) / 4.0;
      mean[c] = mean[c] * 0.9 + m * 0.1;
      var[c] = var[c] * 0.9 + v * 0.1;
      EXPECT_NEAR(variables.find("bn/moving_mean")->data<float>()[c], mean[c], 1e-5);
      EXPECT_NEAR(variables.find("bn/moving_variance")->data<float>()[c], var[c], 1e-4);
    }
  }
  std::vector<float> x;
  feed(*eval, x);
  ASSERT_TRUE(eval->run(0).isOk());
  double expected = 0;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c)
      expected += variables.find("bn/gamma")->data<float>()[c] *
                  (x[size_t(r * 3 + c)] - mean[c]) / std::sqrt(var[c] + 0.001);
  const double evalLoss = eval->fetch(0).data<float>()[0];
  EXPECT_NEAR(evalLoss, expected, 1e-3 * std::max(1.0, std::abs(expected)));
  // Not the batch's own statistics, which would give 0.
  EXPECT_GT(std::abs(evalLoss), 1.0);
}

} // namespace
