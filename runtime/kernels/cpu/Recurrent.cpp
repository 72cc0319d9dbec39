// The LSTM and GRU layers as one op each (dtf.lstm, dtf.lstm_train,
// dtf.lstm_grad; dtf.gru, dtf.gru_train, dtf.gru_grad) on oneDNN's LSTM and
// linear-before-reset GRU primitives: x [B, T, F] read in place as oneDNN's
// `ntc` layout, Keras' kernel [F, G U] and recurrent_kernel [U, G U] as
// `ldigo` (the same gate orders: i, f, c, o and z, r, h), zero initial
// states.
//
// LSTM: bias [4 U] is `ldgo`. The layer adds 1 to the forget gate's
// pre-activation (Keras' unit_forget_bias as a constant): the primitive gets
// bias + 1 on the f gate, and the bias's gradient is unchanged by it.
//
// GRU (TensorFlow 2's reset_after): oneDNN's bias has 4 parts, z and r (the
// input and recurrent biases summed: both are added before the sigmoid),
// then h's input bias and h's recurrent bias (inside r * (h @ U_h + b)). The
// gradient of that bias gives both of the layer's: z's and r's parts to each,
// the last two parts one each.
//
// The training step's forward op keeps oneDNN's workspace for the backward
// primitive; without return_sequences the workspace tensor also keeps every
// step's output (dst_layer), which the backward primitive reads too. Layout
// of the workspace (i32 elements; docs/plan-format.md, "The LSTM and GRU
// layers"): oneDNN's workspace, padded to 64 bytes, then with
// return_sequences unset B * T * U floats of dst_layer.
//
// Mixed precision (compute_dtype, docs/kernels.md "Mixed precision"): with
// "bf16" on a CPU with bf16 instructions the primitives take x, the weights,
// h and dst_layer in bf16 (oneDNN's reorders round the caller's f32 to
// nearest even on the way in; x is narrowed once per version), while the
// bias, the LSTM's cell state, the accumulation and every gradient stay
// f32, as oneDNN's bf16 RNN primitives have them. dst_layer comes back
// widened to f32 (exactly, so the backward primitive narrowing it again reads
// the bits the forward one wrote): the output and the workspace keep their
// f32 layout. Without bf16 instructions (or DTF_BF16_NATIVE=0), and for "f16"
// on every CPU, the f32 primitives run on x and weights rounded through
// bf16 (f16): the state between steps is then not rounded.
#include "runtime/kernels/cpu/OneDnn.h"

#include <array>
#include <cstdio>
#include <cstring>

namespace dtf::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

enum Kind : int64_t { kInference, kTraining, kBackward };

/// What differs between the two layers.
struct Cell {
  bool lstm;
  const char *forward, *train, *grad;    // op names
  int64_t gates;                         // in the kernels: 4 or 3
  int64_t variables;                     // kernel, recurrent_kernel, biases
};
constexpr Cell kLstm{true, dtf::ops::kLstm, dtf::ops::kLstmTrain, dtf::ops::kLstmGrad, 4, 3};
constexpr Cell kGru{false, dtf::ops::kGru, dtf::ops::kGruTrain, dtf::ops::kGruGrad, 3, 4};
// Both primitives' biases have 4 gates (the GRU's h twice: input and recurrent).
constexpr int64_t kBiasGates = 4;

struct RnnShape {
  const Cell *cell = &kLstm;
  int64_t b = 0, t = 0, f = 0, u = 0;
  bool sequences = false;
  bool bf16 = false; // oneDNN's bf16 primitive (compute_dtype bf16, native)
  bool lstm() const { return cell->lstm; }
  std::vector<int64_t> key(Kind kind) const {
    return {lstm() ? 0 : 1, kind, b, t, f, u, sequences ? 1 : 0, bf16 ? 1 : 0};
  }
  std::vector<int64_t> outputShape() const {
    return sequences ? std::vector<int64_t>{b, t, u} : std::vector<int64_t>{b, u};
  }
};

struct RnnDescs {
  // The caller's formats, all f32 (the gradients' too), and the LSTM's
  // cell state (f32 in the bf16 primitives as well).
  memory::desc layer, iter, weightsLayer, weightsIter, bias, dst;
  // What the primitive computes with: f32, or bf16 for a bf16 primitive.
  memory::desc layerLow, iterLow, dstLow, weightsLayerAny, weightsIterAny;
};

RnnDescs rnnDescs(const RnnShape &s) {
  auto f32 = memory::data_type::f32;
  auto low = s.bf16 ? memory::data_type::bf16 : f32;
  const int64_t g = s.cell->gates;
  RnnDescs d;
  d.layer = memory::desc({s.t, s.b, s.f}, f32, Tag::ntc);
  d.iter = memory::desc({1, 1, s.b, s.u}, f32, Tag::ldnc);
  d.weightsLayer = memory::desc({1, 1, s.f, g, s.u}, f32, Tag::ldigo);
  d.weightsIter = memory::desc({1, 1, s.u, g, s.u}, f32, Tag::ldigo);
  d.bias = memory::desc({1, 1, kBiasGates, s.u}, f32, Tag::ldgo);
  d.dst = memory::desc({s.t, s.b, s.u}, f32, Tag::ntc);
  d.layerLow = memory::desc({s.t, s.b, s.f}, low, Tag::ntc);
  d.iterLow = memory::desc({1, 1, s.b, s.u}, low, Tag::ldnc);
  d.dstLow = memory::desc({s.t, s.b, s.u}, low, Tag::ntc);
  d.weightsLayerAny = memory::desc({1, 1, s.f, g, s.u}, low, Tag::any);
  d.weightsIterAny = memory::desc({1, 1, s.u, g, s.u}, low, Tag::any);
  return d;
}

constexpr auto kLeftToRight = dnnl::rnn_direction::unidirectional_left2right;

dnnl::lstm_forward::primitive_desc lstmForwardPd(const RnnDescs &d,
                                                 dnnl::prop_kind kind) {
  memory::desc none;
  return {dnnl::lstm_forward::desc(kind, kLeftToRight, d.layerLow, d.iterLow, d.iter,
                                   d.weightsLayerAny, d.weightsIterAny, d.bias,
                                   d.dstLow, none, none),
          userScratchpad(), cpuEngine()};
}

dnnl::lbr_gru_forward::primitive_desc gruForwardPd(const RnnDescs &d,
                                                   dnnl::prop_kind kind) {
  memory::desc none;
  return {dnnl::lbr_gru_forward::desc(kind, kLeftToRight, d.layerLow, d.iterLow,
                                      d.weightsLayerAny, d.weightsIterAny, d.bias,
                                      d.dstLow, none),
          userScratchpad(), cpuEngine()};
}

dnnl::primitive_desc forwardPd(const RnnShape &s, const RnnDescs &d,
                               dnnl::prop_kind kind) {
  if (s.lstm())
    return lstmForwardPd(d, kind);
  return gruForwardPd(d, kind);
}

/// A cached primitive and the size of its workspace in bytes, padded to 64
/// (0 for inference).
struct RnnPrimitive {
  PlannedPrimitive planned;
  memory::desc workspace;
  int64_t workspaceBytes = 0;
  memory::desc iter;    // the initial c state's and the states' gradients (f32)
  memory::desc iterLow; // the initial h state's (bf16 in a bf16 primitive)
};

PrimitiveCache<RnnPrimitive> &rnnCache() {
  static PrimitiveCache<RnnPrimitive> cache;
  return cache;
}

int64_t padded(size_t bytes) { return static_cast<int64_t>((bytes + 63) / 64 * 64); }

/// The workspace tensor's length in i32 elements.
int64_t workspaceElements(const RnnShape &s, int64_t workspaceBytes) {
  int64_t bytes = workspaceBytes + (s.sequences ? 0 : s.b * s.t * s.u * 4);
  return bytes / 4;
}

/// Checks x [B, T, F], kernel [F, G U], recurrent_kernel [U, G U] and the
/// biases [G U], all f32, and reads return_sequences.
Status rnnShape(const KernelContext &ctx, const Cell &cell, const char *op,
                RnnShape *s) {
  const Tensor &x = ctx.input(0), &k = ctx.input(1), &r = ctx.input(2);
  std::vector<const Tensor *> inputs = {&x, &k, &r};
  for (int64_t i = 3; i < 1 + cell.variables; ++i)
    inputs.push_back(&ctx.input(i));
  for (const Tensor *t : inputs)
    if (t->dtype() != DType::F32)
      return errorStatus(op, " runs f32 only (dtfc unrolls ",
                         cell.lstm ? "an lstm" : "a gru", " of another float type), got ",
                         t->describe());
  const int64_t g = cell.gates;
  bool ok = x.rank() == 3 && k.rank() == 2 && r.rank() == 2 &&
            r.shape()[1] == g * r.shape()[0] && k.shape()[0] == x.shape()[2] &&
            k.shape()[1] == r.shape()[1];
  for (size_t i = 3; i < inputs.size(); ++i)
    ok = ok && inputs[i]->rank() == 1 && inputs[i]->shape()[0] == r.shape()[1];
  if (!ok) {
    std::string got = x.describe() + ", " + k.describe() + ", " + r.describe();
    for (size_t i = 3; i < inputs.size(); ++i)
      got += (i + 1 == inputs.size() ? " and " : ", ") + inputs[i]->describe();
    return errorStatus(op, " expects x [B, T, F], kernel [F, ", g,
                       " U], recurrent_kernel [U, ", g, " U] and ",
                       cell.lstm ? "bias" : "bias and recurrent_bias", " [", g,
                       " U], got ", got);
  }
  *s = {&cell, x.shape()[0], x.shape()[1], x.shape()[2], r.shape()[0],
        ctx.getBool("return_sequences")};
  if (s->t == 0 || s->u == 0)
    return errorStatus(op, " needs at least one time step and one unit, got x ",
                       x.describe(), " and recurrent_kernel ", r.describe());
  return Status::ok();
}

/// oneDNN's bias [4 U] from the layer's, in a per-thread buffer: the LSTM's
/// with 1 added to the forget gate's part; the GRU's z and r parts of bias +
/// recurrent_bias, then bias's h part, then recurrent_bias's.
const float *primitiveBias(const KernelContext &ctx, const RnnShape &s) {
  thread_local std::vector<float> adjusted;
  const int64_t u = s.u;
  adjusted.resize(kBiasGates * u);
  const float *bias = ctx.input(3).data<float>();
  if (s.lstm()) {
    std::copy(bias, bias + 4 * u, adjusted.begin());
    for (int64_t i = u; i < 2 * u; ++i)
      adjusted[i] += 1.0f;
  } else {
    const float *recurrent = ctx.input(4).data<float>();
    for (int64_t i = 0; i < 2 * u; ++i)
      adjusted[i] = bias[i] + recurrent[i];
    std::copy(bias + 2 * u, bias + 3 * u, adjusted.begin() + 2 * u);
    std::copy(recurrent + 2 * u, recurrent + 3 * u, adjusted.begin() + 3 * u);
  }
  return adjusted.data();
}

/// The initial states (h, and the LSTM's c): zeros. They are given as
/// memory rather than left out (a zero descriptor), because oneDNN 2.6's
/// LSTM backward pass then reads the last step's h as the first step's
/// previous h: with one time step, recurrent_kernel's gradient came out as
/// h * dz instead of 0
/// (kernels.Shapes/Lstm.MatchesTheFloat64Recurrence/b1_t1_f1_u1_last). The
/// initial states' gradients go to scratch memory.
/// The zeros serve a bf16 h as well (0.0 in bf16 is all zero bits too).
void addInitialStates(const RnnShape &s, const RnnPrimitive &prim, bool backward,
                      std::unordered_map<int, memory> *extra) {
  thread_local std::vector<float> zeros, unused;
  const size_t n = static_cast<size_t>(s.b * s.u);
  if (zeros.size() < 2 * n) // inputs only: oneDNN never writes them
    zeros.assign(2 * n, 0.0f);
  (*extra)[DNNL_ARG_SRC_ITER] = memory(prim.iterLow, cpuEngine(), zeros.data());
  if (s.lstm())
    (*extra)[DNNL_ARG_SRC_ITER_C] = memory(prim.iter, cpuEngine(), zeros.data() + n);
  if (backward) {
    unused.resize(2 * n);
    (*extra)[DNNL_ARG_DIFF_SRC_ITER] = memory(prim.iter, cpuEngine(), unused.data());
    if (s.lstm())
      (*extra)[DNNL_ARG_DIFF_SRC_ITER_C] =
          memory(prim.iter, cpuEngine(), unused.data() + n);
  }
}

/// How the layer computes: compute_dtype (absent: f32) and the CPU.
enum class RnnPrecision { kF32, kBf16, kRoundedBf16, kRoundedF16 };

Status rnnPrecision(const KernelContext &ctx, const char *op, RnnPrecision *p) {
  bool bf16 = false, f16 = false;
  DTF_RETURN_IF_ERROR(lowPrecisionCompute(ctx, op, ctx.input(0), &bf16, &f16));
  *p = f16    ? RnnPrecision::kRoundedF16
       : !bf16 ? RnnPrecision::kF32
       : bf16Native() ? RnnPrecision::kBf16
                      : RnnPrecision::kRoundedBf16;
  if (*p == RnnPrecision::kRoundedBf16) {
    static const bool said = [] {
      std::fprintf(stderr,
                   "dtf: %s: bf16 LSTM and GRU layers run oneDNN's f32 "
                   "primitives on bf16-rounded inputs and weights (the state "
                   "between steps stays f32; no speedup)\n",
                   bf16FallbackReason());
      return true;
    }();
    (void)said;
  }
  return Status::ok();
}

/// x, kernel and recurrent_kernel as the primitive's caller gives them:
/// the inputs themselves, or under kRoundedBf16 and kRoundedF16 copies
/// rounded through bf16 or f16 (kept in `rounded` while the primitive runs;
/// the f16 rounding says once on stderr that it runs in f32).
std::array<void *, 3> rnnOperands(const KernelContext &ctx, RnnPrecision p,
                                  std::array<Tensor, 3> &rounded) {
  std::array<void *, 3> out;
  for (int i = 0; i < 3; ++i) {
    if (p == RnnPrecision::kRoundedF16)
      rounded[i] = roundedThroughF16(ctx.input(i), ctx.threadPool());
    else if (p == RnnPrecision::kRoundedBf16)
      rounded[i] = roundedThroughBf16(ctx.input(i), ctx.threadPool());
    out[i] = p == RnnPrecision::kRoundedF16 || p == RnnPrecision::kRoundedBf16
                 ? ptr(rounded[i])
                 : ptr(ctx.input(i));
  }
  return out;
}

/// The inputs' versions for a bf16 primitive: x is then narrowed once per
/// version (PlannedPrimitive::execute); the weights go through oneDNN's
/// reorder into its blocked bf16 layout on every call either way.
std::vector<const VariableVersion *> rnnVersions(const KernelContext &ctx,
                                                 const RnnShape &s) {
  if (!s.bf16)
    return {};
  return {ctx.inputVersion(0), ctx.inputVersion(1), ctx.inputVersion(2)};
}

/// The last step's output: row b of [B, U] is dst [b, T - 1, :].
void copyLastStep(const RnnShape &s, const float *dst, float *out) {
  for (int64_t b = 0; b < s.b; ++b)
    std::memcpy(out + b * s.u, dst + (b * s.t + s.t - 1) * s.u,
                sizeof(float) * s.u);
}

std::shared_ptr<RnnPrimitive> forwardPrimitive(const RnnShape &s, bool training) {
  return rnnCache().get(s.key(training ? kTraining : kInference), [&] {
    RnnDescs d = rnnDescs(s);
    auto pd = forwardPd(s, d, training ? dnnl::prop_kind::forward_training
                                       : dnnl::prop_kind::forward_inference);
    memory::desc ws = training ? pd.workspace_desc() : memory::desc();
    return RnnPrimitive{PlannedPrimitive(pd, dnnl::primitive(pd),
                                         {{DNNL_ARG_SRC_LAYER, d.layer, false},
                                          {DNNL_ARG_WEIGHTS_LAYER, d.weightsLayer, false},
                                          {DNNL_ARG_WEIGHTS_ITER, d.weightsIter, false},
                                          {DNNL_ARG_BIAS, d.bias, false},
                                          {DNNL_ARG_DST_LAYER, d.dst, true}}),
                        ws, training ? padded(ws.get_size()) : 0, d.iter, d.iterLow};
  });
}

// dtf.lstm and dtf.gru (inference), dtf.lstm_train and dtf.gru_train (the
// training step's forward pass, which also writes the workspace).
Status rnnForward(KernelContext &ctx, const Cell &cell, bool training) {
  const char *name = training ? cell.train : cell.forward;
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 1 + cell.variables));
  RnnShape s;
  DTF_RETURN_IF_ERROR(rnnShape(ctx, cell, name, &s));
  RnnPrecision precision;
  DTF_RETURN_IF_ERROR(rnnPrecision(ctx, name, &precision));
  s.bf16 = precision == RnnPrecision::kBf16;
  Tensor *out;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, DType::F32, s.outputShape(), &out));
  if (s.b == 0) {
    if (training) {
      Tensor *ws;
      DTF_RETURN_IF_ERROR(ctx.allocateOutput(1, DType::I32, {0}, &ws));
    }
    return Status::ok();
  }
  return guardDnnl(name, [&]() -> Status {
    std::array<Tensor, 3> rounded;
    const std::array<void *, 3> in = rnnOperands(ctx, precision, rounded);
    std::shared_ptr<RnnPrimitive> prim = forwardPrimitive(s, training);
    float *dst = nullptr;
    Tensor *ws = nullptr;
    thread_local std::vector<float> sequence; // inference without sequences
    if (training) {
      DTF_RETURN_IF_ERROR(ctx.allocateOutput(
          1, DType::I32, {workspaceElements(s, prim->workspaceBytes)}, &ws));
      dst = s.sequences ? out->data<float>()
                        : reinterpret_cast<float *>(static_cast<char *>(ws->rawData()) +
                                                    prim->workspaceBytes);
    } else if (s.sequences) {
      dst = out->data<float>();
    } else {
      sequence.resize(s.b * s.t * s.u);
      dst = sequence.data();
    }
    std::unordered_map<int, memory> extra;
    addInitialStates(s, *prim, false, &extra);
    if (training)
      extra[DNNL_ARG_WORKSPACE] = memory(prim->workspace, cpuEngine(), ws->rawData());
    prim->planned.execute(
        {in[0], in[1], in[2], const_cast<float *>(primitiveBias(ctx, s)), dst}, extra,
        rnnVersions(ctx, s), ctx.threadPool());
    if (!s.sequences)
      copyLastStep(s, dst, out->data<float>());
    return Status::ok();
  });
}

dnnl::primitive_desc backwardPd(const RnnShape &s, const RnnDescs &d) {
  memory::desc none;
  auto backward = dnnl::prop_kind::backward;
  auto training = dnnl::prop_kind::forward_training;
  if (s.lstm())
    return dnnl::lstm_backward::primitive_desc(
        dnnl::lstm_backward::desc(backward, kLeftToRight, d.layerLow, d.iterLow, d.iter,
                                  d.weightsLayerAny, d.weightsIterAny, d.bias, d.dstLow,
                                  none, none, d.layer, d.iter, d.iter, d.weightsLayer,
                                  d.weightsIter, d.bias, d.dst, none, none),
        userScratchpad(), cpuEngine(), lstmForwardPd(d, training));
  return dnnl::lbr_gru_backward::primitive_desc(
      dnnl::lbr_gru_backward::desc(backward, kLeftToRight, d.layerLow, d.iterLow,
                                   d.weightsLayerAny, d.weightsIterAny, d.bias,
                                   d.dstLow, none, d.layer, d.iter, d.weightsLayer, d.weightsIter,
                                   d.bias, d.dst, none),
      userScratchpad(), cpuEngine(), gruForwardPd(d, training));
}

// dtf.lstm_grad(x, kernel, recurrent_kernel, bias, output, workspace, dy):
// dx, dkernel, drecurrent_kernel, dbias. dtf.gru_grad(x, kernel,
// recurrent_kernel, bias, recurrent_bias, output, workspace, dy): dx,
// dkernel, drecurrent_kernel, dbias, drecurrent_bias.
Status rnnGrad(KernelContext &ctx, const Cell &cell) {
  const char *name = cell.grad;
  const int nvars = static_cast<int>(cell.variables);
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 4 + nvars));
  RnnShape s;
  DTF_RETURN_IF_ERROR(rnnShape(ctx, cell, name, &s));
  RnnPrecision precision;
  DTF_RETURN_IF_ERROR(rnnPrecision(ctx, name, &precision));
  s.bf16 = precision == RnnPrecision::kBf16;
  const Tensor &x = ctx.input(0), &y = ctx.input(1 + nvars), &ws = ctx.input(2 + nvars),
               &dy = ctx.input(3 + nvars);
  if (y.dtype() != DType::F32 || y.shape() != s.outputShape() ||
      dy.dtype() != DType::F32 || dy.shape() != s.outputShape())
    return errorStatus(name, " expects the output and dy of type f32",
                       shapeString(s.outputShape()), " for x ", x.describe(),
                       ", got ", y.describe(), " and ", dy.describe());
  std::vector<Tensor *> grads(1 + nvars);
  for (int i = 0; i <= nvars; ++i)
    DTF_RETURN_IF_ERROR(
        ctx.allocateOutput(i, DType::F32, ctx.input(i).shape(), &grads[i]));
  // oneDNN adds the weights' gradients to what its outputs hold.
  for (int i = 1; i <= nvars; ++i)
    std::memset(grads[i]->rawData(), 0, grads[i]->byteSize());
  if (s.b == 0)
    return Status::ok();
  return guardDnnl(name, [&]() -> Status {
    auto prim = rnnCache().get(s.key(kBackward), [&] {
      RnnDescs d = rnnDescs(s);
      auto pd = backwardPd(s, d);
      memory::desc workspace = pd.workspace_desc();
      return RnnPrimitive{
          PlannedPrimitive(pd, dnnl::primitive(pd),
                           {{DNNL_ARG_SRC_LAYER, d.layer, false},
                            {DNNL_ARG_WEIGHTS_LAYER, d.weightsLayer, false},
                            {DNNL_ARG_WEIGHTS_ITER, d.weightsIter, false},
                            {DNNL_ARG_BIAS, d.bias, false},
                            {DNNL_ARG_DST_LAYER, d.dst, false},
                            {DNNL_ARG_DIFF_DST_LAYER, d.dst, false},
                            {DNNL_ARG_DIFF_SRC_LAYER, d.layer, true},
                            {DNNL_ARG_DIFF_WEIGHTS_LAYER, d.weightsLayer, true},
                            {DNNL_ARG_DIFF_WEIGHTS_ITER, d.weightsIter, true},
                            {DNNL_ARG_DIFF_BIAS, d.bias, true}}),
          workspace, padded(workspace.get_size()), d.iter, d.iterLow};
    });
    const int64_t want = workspaceElements(s, prim->workspaceBytes);
    if (ws.dtype() != DType::I32 || ws.shape() != std::vector<int64_t>{want})
      return errorStatus(name, " expects the workspace ", cell.train,
                         " wrote for x ", x.describe(),
                         s.bf16 ? " in bf16" : "", ", i32[", want, "], got ",
                         ws.describe(), " (both ops take the same compute_dtype)");
    char *wsBytes = static_cast<char *>(ptr(ws));
    const float *dst = s.sequences
                           ? y.data<float>()
                           : reinterpret_cast<const float *>(wsBytes + prim->workspaceBytes);
    // Without sequences only the last step's output has a gradient.
    thread_local std::vector<float> dsequence;
    const float *ddst = dy.data<float>();
    if (!s.sequences) {
      dsequence.assign(s.b * s.t * s.u, 0.0f);
      for (int64_t b = 0; b < s.b; ++b)
        std::memcpy(dsequence.data() + (b * s.t + s.t - 1) * s.u,
                    dy.data<float>() + b * s.u, sizeof(float) * s.u);
      ddst = dsequence.data();
    }
    // The GRU's bias gradient comes in oneDNN's 4 parts (zeroed: oneDNN
    // adds to it) and is split into the layer's two biases below.
    thread_local std::vector<float> dbiasParts;
    float *dbias = grads[3]->data<float>();
    if (!s.lstm()) {
      dbiasParts.assign(kBiasGates * s.u, 0.0f);
      dbias = dbiasParts.data();
    }
    std::unordered_map<int, memory> extra;
    addInitialStates(s, *prim, true, &extra);
    extra[DNNL_ARG_WORKSPACE] = memory(prim->workspace, cpuEngine(), wsBytes);
    std::array<Tensor, 3> rounded;
    const std::array<void *, 3> in = rnnOperands(ctx, precision, rounded);
    prim->planned.execute({in[0], in[1], in[2],
                           const_cast<float *>(primitiveBias(ctx, s)),
                           const_cast<float *>(dst), const_cast<float *>(ddst),
                           grads[0]->rawData(), grads[1]->rawData(),
                           grads[2]->rawData(), dbias},
                          extra, rnnVersions(ctx, s), ctx.threadPool());
    if (!s.lstm()) {
      const int64_t u = s.u;
      float *db = grads[3]->data<float>(), *drb = grads[4]->data<float>();
      std::copy(dbias, dbias + 3 * u, db);
      std::copy(dbias, dbias + 2 * u, drb);
      std::copy(dbias + 3 * u, dbias + 4 * u, drb + 2 * u);
    }
    return Status::ok();
  });
}

} // namespace

void registerRecurrentKernels(KernelRegistry &registry) {
  registry.add(dtf::ops::kLstm, [](KernelContext &ctx) { return rnnForward(ctx, kLstm, false); });
  registry.add(dtf::ops::kLstmTrain,
               [](KernelContext &ctx) { return rnnForward(ctx, kLstm, true); });
  registry.add(dtf::ops::kLstmGrad, [](KernelContext &ctx) { return rnnGrad(ctx, kLstm); });
  registry.add(dtf::ops::kGru, [](KernelContext &ctx) { return rnnForward(ctx, kGru, false); });
  registry.add(dtf::ops::kGruTrain,
               [](KernelContext &ctx) { return rnnForward(ctx, kGru, true); });
  registry.add(dtf::ops::kGruGrad, [](KernelContext &ctx) { return rnnGrad(ctx, kGru); });
}

} // namespace dtf::cpu
