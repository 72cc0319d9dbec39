// The LSTM layer as one op (dtf.lstm, dtf.lstm_train, dtf.lstm_grad) on
// oneDNN's LSTM primitive: x [B, T, F] read in place as oneDNN's `ntc`
// layout, Keras' kernel [F, 4 U] and recurrent_kernel [U, 4 U] as `ldigo`
// and bias [4 U] as `ldgo` (the same gate order i, f, c, o), zero initial
// states. The layer adds 1 to the forget gate's pre-activation (Keras'
// unit_forget_bias as a constant): the primitive gets bias + 1 on the f
// gate, and the bias's gradient is unchanged by it.
//
// The training step's forward op keeps oneDNN's workspace for the backward
// primitive; without return_sequences the workspace tensor also keeps every
// step's output (dst_layer), which the backward primitive reads too. Layout
// of the workspace (i32 elements; docs/plan-format.md, "The LSTM layer"):
// oneDNN's workspace, padded to 64 bytes, then with return_sequences unset
// B * T * U floats of dst_layer.
#include "runtime/kernels/cpu/OneDnn.h"

#include <cstring>

namespace dtf::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

enum Kind : int64_t { kInference, kTraining, kBackward };

struct LstmShape {
  int64_t b = 0, t = 0, f = 0, u = 0;
  bool sequences = false;
  std::vector<int64_t> key(Kind kind) const {
    return {kind, b, t, f, u, sequences ? 1 : 0};
  }
  std::vector<int64_t> outputShape() const {
    return sequences ? std::vector<int64_t>{b, t, u} : std::vector<int64_t>{b, u};
  }
};

struct LstmDescs {
  memory::desc layer, iter, weightsLayer, weightsIter, bias, dst; // the caller's formats
  memory::desc weightsLayerAny, weightsIterAny;
};

LstmDescs lstmDescs(const LstmShape &s) {
  auto f32 = memory::data_type::f32;
  LstmDescs d;
  d.layer = memory::desc({s.t, s.b, s.f}, f32, Tag::ntc);
  d.iter = memory::desc({1, 1, s.b, s.u}, f32, Tag::ldnc);
  d.weightsLayer = memory::desc({1, 1, s.f, 4, s.u}, f32, Tag::ldigo);
  d.weightsIter = memory::desc({1, 1, s.u, 4, s.u}, f32, Tag::ldigo);
  d.bias = memory::desc({1, 1, 4, s.u}, f32, Tag::ldgo);
  d.dst = memory::desc({s.t, s.b, s.u}, f32, Tag::ntc);
  d.weightsLayerAny = memory::desc({1, 1, s.f, 4, s.u}, f32, Tag::any);
  d.weightsIterAny = memory::desc({1, 1, s.u, 4, s.u}, f32, Tag::any);
  return d;
}

dnnl::lstm_forward::primitive_desc forwardPd(const LstmDescs &d,
                                             dnnl::prop_kind kind) {
  memory::desc none;
  dnnl::lstm_forward::desc desc(kind, dnnl::rnn_direction::unidirectional_left2right,
                                d.layer, d.iter, d.iter, d.weightsLayerAny,
                                d.weightsIterAny, d.bias, d.dst, none, none);
  return dnnl::lstm_forward::primitive_desc(desc, userScratchpad(), cpuEngine());
}

/// A cached primitive and the size of its workspace in bytes, padded to 64
/// (0 for inference).
struct LstmPrimitive {
  PlannedPrimitive planned;
  memory::desc workspace;
  int64_t workspaceBytes = 0;
  memory::desc iter; // the initial states' (and their gradients')
};

PrimitiveCache<LstmPrimitive> &lstmCache() {
  static PrimitiveCache<LstmPrimitive> cache;
  return cache;
}

int64_t padded(size_t bytes) { return static_cast<int64_t>((bytes + 63) / 64 * 64); }

/// The workspace tensor's length in i32 elements.
int64_t workspaceElements(const LstmShape &s, int64_t workspaceBytes) {
  int64_t bytes = workspaceBytes + (s.sequences ? 0 : s.b * s.t * s.u * 4);
  return bytes / 4;
}

void *ptr(const Tensor &t) { return const_cast<void *>(t.rawData()); }

/// Checks x [B, T, F], kernel [F, 4 U], recurrent_kernel [U, 4 U] and bias
/// [4 U], all f32, and reads return_sequences.
Status lstmShape(const KernelContext &ctx, const char *op, LstmShape *s) {
  const Tensor &x = ctx.input(0), &k = ctx.input(1), &r = ctx.input(2),
               &bias = ctx.input(3);
  for (const Tensor *t : {&x, &k, &r, &bias})
    if (t->dtype() != DType::F32)
      return errorStatus(op, " runs f32 only (dtfc unrolls an lstm of another "
                             "float type), got ",
                         t->describe());
  if (x.rank() != 3 || k.rank() != 2 || r.rank() != 2 || bias.rank() != 1 ||
      r.shape()[1] != 4 * r.shape()[0] || k.shape()[0] != x.shape()[2] ||
      k.shape()[1] != r.shape()[1] || bias.shape()[0] != r.shape()[1])
    return errorStatus(op,
                       " expects x [B, T, F], kernel [F, 4 U], "
                       "recurrent_kernel [U, 4 U] and bias [4 U], got ",
                       x.describe(), ", ", k.describe(), ", ", r.describe(),
                       " and ", bias.describe());
  *s = {x.shape()[0], x.shape()[1], x.shape()[2], r.shape()[0],
        ctx.getBool("return_sequences")};
  if (s->t == 0 || s->u == 0)
    return errorStatus(op, " needs at least one time step and one unit, got x ",
                       x.describe(), " and recurrent_kernel ", r.describe());
  return Status::ok();
}

/// bias with 1 added to the forget gate's part, in a per-thread buffer.
const float *forgetBiased(const Tensor &bias, int64_t u) {
  thread_local std::vector<float> adjusted;
  adjusted.assign(bias.data<float>(), bias.data<float>() + 4 * u);
  for (int64_t i = u; i < 2 * u; ++i)
    adjusted[i] += 1.0f;
  return adjusted.data();
}

/// The initial states (h and c): zeros. They are given as memory rather than
/// left out (a zero descriptor), because oneDNN 2.6's backward pass then
/// reads the last step's h as the first step's previous h: with one time
/// step, recurrent_kernel's gradient came out as h * dz instead of 0
/// (kernels.Shapes/Lstm.MatchesTheFloat64Recurrence/b1_t1_f1_u1_last). The
/// initial states' gradients go to scratch memory.
void addInitialStates(const LstmShape &s, const memory::desc &iter, bool backward,
                      std::unordered_map<int, memory> *extra) {
  thread_local std::vector<float> zeros, unused;
  const size_t n = static_cast<size_t>(s.b * s.u);
  zeros.assign(2 * n, 0.0f);
  (*extra)[DNNL_ARG_SRC_ITER] = memory(iter, cpuEngine(), zeros.data());
  (*extra)[DNNL_ARG_SRC_ITER_C] = memory(iter, cpuEngine(), zeros.data() + n);
  if (backward) {
    unused.resize(2 * n);
    (*extra)[DNNL_ARG_DIFF_SRC_ITER] = memory(iter, cpuEngine(), unused.data());
    (*extra)[DNNL_ARG_DIFF_SRC_ITER_C] = memory(iter, cpuEngine(), unused.data() + n);
  }
}

/// The last step's output: row b of [B, U] is dst [b, T - 1, :].
void copyLastStep(const LstmShape &s, const float *dst, float *out) {
  for (int64_t b = 0; b < s.b; ++b)
    std::memcpy(out + b * s.u, dst + (b * s.t + s.t - 1) * s.u,
                sizeof(float) * s.u);
}

std::shared_ptr<LstmPrimitive> forwardPrimitive(const LstmShape &s, bool training) {
  return lstmCache().get(s.key(training ? kTraining : kInference), [&] {
    LstmDescs d = lstmDescs(s);
    auto pd = forwardPd(d, training ? dnnl::prop_kind::forward_training
                                    : dnnl::prop_kind::forward_inference);
    memory::desc ws = training ? pd.workspace_desc() : memory::desc();
    return LstmPrimitive{PlannedPrimitive(pd, dnnl::lstm_forward(pd),
                                          {{DNNL_ARG_SRC_LAYER, d.layer, false},
                                           {DNNL_ARG_WEIGHTS_LAYER, d.weightsLayer, false},
                                           {DNNL_ARG_WEIGHTS_ITER, d.weightsIter, false},
                                           {DNNL_ARG_BIAS, d.bias, false},
                                           {DNNL_ARG_DST_LAYER, d.dst, true}}),
                         ws, training ? padded(ws.get_size()) : 0, d.iter};
  });
}

// dtf.lstm (inference) and dtf.lstm_train (the training step's forward pass,
// which also writes the workspace).
Status lstmForward(KernelContext &ctx, const char *name, bool training) {
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 4));
  LstmShape s;
  DTF_RETURN_IF_ERROR(lstmShape(ctx, name, &s));
  Tensor *out;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, DType::F32, s.outputShape(), &out));
  if (s.b == 0) {
    if (training) {
      Tensor *ws;
      DTF_RETURN_IF_ERROR(ctx.allocateOutput(1, DType::I32, {0}, &ws));
    }
    return Status::ok();
  }
  const Tensor &x = ctx.input(0), &k = ctx.input(1), &r = ctx.input(2);
  return guardDnnl(name, [&]() -> Status {
    std::shared_ptr<LstmPrimitive> prim = forwardPrimitive(s, training);
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
    addInitialStates(s, prim->iter, false, &extra);
    if (training)
      extra[DNNL_ARG_WORKSPACE] = memory(prim->workspace, cpuEngine(), ws->rawData());
    prim->planned.execute({ptr(x), ptr(k), ptr(r),
                           const_cast<float *>(forgetBiased(ctx.input(3), s.u)), dst},
                          extra);
    if (!s.sequences)
      copyLastStep(s, dst, out->data<float>());
    return Status::ok();
  });
}

Status lstmKernel(KernelContext &ctx) { return lstmForward(ctx, "dtf.lstm", false); }

Status lstmTrainKernel(KernelContext &ctx) {
  return lstmForward(ctx, "dtf.lstm_train", true);
}

// dtf.lstm_grad(x, kernel, recurrent_kernel, bias, output, workspace, dy):
// dx, dkernel, drecurrent_kernel, dbias.
Status lstmGradKernel(KernelContext &ctx) {
  const char *name = "dtf.lstm_grad";
  DTF_RETURN_IF_ERROR(checkNumInputs(ctx, name, 7));
  LstmShape s;
  DTF_RETURN_IF_ERROR(lstmShape(ctx, name, &s));
  const Tensor &x = ctx.input(0), &k = ctx.input(1), &r = ctx.input(2),
               &bias = ctx.input(3), &y = ctx.input(4), &ws = ctx.input(5),
               &dy = ctx.input(6);
  if (y.dtype() != DType::F32 || y.shape() != s.outputShape() ||
      dy.dtype() != DType::F32 || dy.shape() != s.outputShape())
    return errorStatus(name, " expects the output and dy of type f32",
                       shapeString(s.outputShape()), " for x ", x.describe(),
                       ", got ", y.describe(), " and ", dy.describe());
  Tensor *grads[4];
  for (int i = 0; i < 4; ++i)
    DTF_RETURN_IF_ERROR(
        ctx.allocateOutput(i, DType::F32, ctx.input(i).shape(), &grads[i]));
  // oneDNN adds the weights' gradients to what its outputs hold.
  for (int i = 1; i < 4; ++i)
    std::memset(grads[i]->rawData(), 0, grads[i]->byteSize());
  if (s.b == 0)
    return Status::ok();
  return guardDnnl(name, [&]() -> Status {
    auto prim = lstmCache().get(s.key(kBackward), [&] {
      LstmDescs d = lstmDescs(s);
      auto fwd = forwardPd(d, dnnl::prop_kind::forward_training);
      memory::desc none;
      dnnl::lstm_backward::desc desc(
          dnnl::prop_kind::backward, dnnl::rnn_direction::unidirectional_left2right,
          d.layer, d.iter, d.iter, d.weightsLayerAny, d.weightsIterAny, d.bias, d.dst,
          none, none, d.layer, d.iter, d.iter, d.weightsLayer, d.weightsIter, d.bias,
          d.dst, none, none);
      dnnl::lstm_backward::primitive_desc pd(desc, userScratchpad(), cpuEngine(), fwd);
      memory::desc workspace = pd.workspace_desc();
      return LstmPrimitive{
          PlannedPrimitive(pd, dnnl::lstm_backward(pd),
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
          workspace, padded(workspace.get_size()), d.iter};
    });
    const int64_t want = workspaceElements(s, prim->workspaceBytes);
    if (ws.dtype() != DType::I32 || ws.shape() != std::vector<int64_t>{want})
      return errorStatus(name, " expects the workspace dtf.lstm_train wrote for x ",
                         x.describe(), ", i32[", want, "], got ", ws.describe());
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
    std::unordered_map<int, memory> extra;
    addInitialStates(s, prim->iter, true, &extra);
    extra[DNNL_ARG_WORKSPACE] = memory(prim->workspace, cpuEngine(), wsBytes);
    prim->planned.execute({ptr(x), ptr(k), ptr(r),
                           const_cast<float *>(forgetBiased(bias, s.u)),
                           const_cast<float *>(dst), const_cast<float *>(ddst),
                           grads[0]->rawData(), grads[1]->rawData(),
                           grads[2]->rawData(), grads[3]->rawData()},
                          extra);
    return Status::ok();
  });
}

} // namespace

void registerLstmKernels(KernelRegistry &registry) {
  registry.add("dtf.lstm", lstmKernel);
  registry.add("dtf.lstm_train", lstmTrainKernel);
  registry.add("dtf.lstm_grad", lstmGradKernel);
}

} // namespace dtf::cpu
