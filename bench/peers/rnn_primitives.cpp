// oneDNN's LSTM and linear-before-reset GRU primitives alone, in f32 and in
// bf16, at one shape: the training step's pair (forward_training, then
// backward) as dtf-run's kernels build them (runtime/kernels/cpu/
// Recurrent.cpp: bf16 x, weights, h and dst_layer; f32 bias, LSTM cell
// state and gradients), on memory already in the primitives' formats. For
// each: the implementation oneDNN picked and the median and best time per
// call over R calls after 5 warm-up calls, in ms. Threads: OMP_NUM_THREADS.
// It says what the library offers on this CPU, apart from dtf.
//   usage: rnn_primitives [B T F U [R]]   (default 64 28 28 64 200: models/lstm.dtf)
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

using namespace dnnl;
using Tag = memory::format_tag;
using DataType = memory::data_type;

namespace {

struct Pair {
  primitive_desc forward, backward;
};

Pair makePair(bool lstm, bool bf16, memory::dim b, memory::dim t, memory::dim f,
              memory::dim u, const engine &eng) {
  const memory::dim g = lstm ? 4 : 3;
  const DataType low = bf16 ? DataType::bf16 : DataType::f32, f32 = DataType::f32;
  memory::desc layer({t, b, f}, low, Tag::ntc), iter({1, 1, b, u}, low, Tag::ldnc),
      iterC({1, 1, b, u}, f32, Tag::ldnc), weightsLayer({1, 1, f, g, u}, low, Tag::any),
      weightsIter({1, 1, u, g, u}, low, Tag::any), bias({1, 1, 4, u}, f32, Tag::ldgo),
      dst({t, b, u}, low, Tag::ntc);
  memory::desc dLayer({t, b, f}, f32, Tag::ntc), dIter({1, 1, b, u}, f32, Tag::ldnc),
      dWeightsLayer({1, 1, f, g, u}, f32, Tag::ldigo),
      dWeightsIter({1, 1, u, g, u}, f32, Tag::ldigo), dDst({t, b, u}, f32, Tag::ntc);
  memory::desc none;
  const auto dir = rnn_direction::unidirectional_left2right;
  const auto training = prop_kind::forward_training;
  if (lstm) {
    lstm_forward::primitive_desc fwd(
        lstm_forward::desc(training, dir, layer, iter, iterC, weightsLayer, weightsIter,
                           bias, dst, none, none),
        eng);
    lstm_backward::primitive_desc bwd(
        lstm_backward::desc(prop_kind::backward, dir, layer, iter, iterC, weightsLayer,
                            weightsIter, bias, dst, none, none, dLayer, dIter, dIter,
                            dWeightsLayer, dWeightsIter, bias, dDst, none, none),
        eng, fwd);
    return {fwd, bwd};
  }
  lbr_gru_forward::primitive_desc fwd(
      lbr_gru_forward::desc(training, dir, layer, iter, weightsLayer, weightsIter, bias,
                            dst, none),
      eng);
  lbr_gru_backward::primitive_desc bwd(
      lbr_gru_backward::desc(prop_kind::backward, dir, layer, iter, weightsLayer,
                             weightsIter, bias, dst, none, dLayer, dIter, dWeightsLayer,
                             dWeightsIter, bias, dDst, none),
      eng, fwd);
  return {fwd, bwd};
}

// Memory for every argument the primitive has, filled with 0x3c00 halves
// (about 0.0078 as bf16, and as the f32 0x3c003c00): finite, no denormals.
void addMemory(const primitive_desc &pd, const std::vector<int> &args, const engine &eng,
               std::unordered_map<int, memory> &out) {
  for (int a : args) {
    memory::desc d = pd.query_md(query::exec_arg_md, a);
    if (d.get_size() == 0 || out.count(a))
      continue;
    memory m(d, eng);
    auto *p = static_cast<uint16_t *>(m.get_data_handle());
    std::fill(p, p + d.get_size() / 2, uint16_t(0x3c00));
    out[a] = m;
  }
}

} // namespace

int main(int argc, char **argv) {
  memory::dim b = 64, t = 28, f = 28, u = 64;
  int reps = 200;
  if (argc >= 5) {
    b = std::atol(argv[1]), t = std::atol(argv[2]), f = std::atol(argv[3]),
    u = std::atol(argv[4]);
    if (argc > 5)
      reps = std::atoi(argv[5]);
  }
  if (argc != 1 && argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: rnn_primitives [B T F U [R]]\n");
    return 2;
  }
  if (b <= 0 || t <= 0 || f <= 0 || u <= 0 || b * t * std::max(f, u) > (1 << 26) ||
      reps <= 0 || reps > 100000) {
    std::fprintf(stderr, "rnn_primitives: B T F U must be positive and small, R in 1..100000\n");
    return 2;
  }
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const std::vector<int> forwardArgs = {
      DNNL_ARG_SRC_LAYER, DNNL_ARG_SRC_ITER,  DNNL_ARG_SRC_ITER_C, DNNL_ARG_WEIGHTS_LAYER,
      DNNL_ARG_WEIGHTS_ITER, DNNL_ARG_BIAS,   DNNL_ARG_DST_LAYER,  DNNL_ARG_WORKSPACE,
      DNNL_ARG_SCRATCHPAD};
  std::vector<int> backwardArgs = forwardArgs;
  for (int a : {DNNL_ARG_DIFF_SRC_LAYER, DNNL_ARG_DIFF_SRC_ITER, DNNL_ARG_DIFF_SRC_ITER_C,
                DNNL_ARG_DIFF_WEIGHTS_LAYER, DNNL_ARG_DIFF_WEIGHTS_ITER, DNNL_ARG_DIFF_BIAS,
                DNNL_ARG_DIFF_DST_LAYER})
    backwardArgs.push_back(a);
  std::printf("| layer | precision | forward impl | forward ms (median, best) | backward impl | "
              "backward ms (median, best) |\n| --- | --- | --- | ---: | --- | ---: |\n");
  for (bool lstm : {true, false})
    for (bool bf16 : {false, true}) {
      Pair p;
      try {
        p = makePair(lstm, bf16, b, t, f, u, eng);
      } catch (const dnnl::error &e) {
        std::printf("| %s | %s | not available (%s) | | | |\n", lstm ? "LSTM" : "GRU",
                    bf16 ? "bf16" : "f32", e.what());
        continue;
      }
      std::unordered_map<int, memory> fm, bm;
      addMemory(p.forward, forwardArgs, eng, fm);
      bm[DNNL_ARG_WORKSPACE] = fm[DNNL_ARG_WORKSPACE];
      addMemory(p.backward, backwardArgs, eng, bm);
      primitive fwd(p.forward), bwd(p.backward);
      std::vector<double> tf, tb;
      for (int i = 0; i < reps + 5; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        fwd.execute(s, fm);
        s.wait();
        auto t1 = std::chrono::steady_clock::now();
        bwd.execute(s, bm);
        s.wait();
        auto t2 = std::chrono::steady_clock::now();
        if (i < 5)
          continue;
        tf.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        tb.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      std::sort(tf.begin(), tf.end());
      std::sort(tb.begin(), tb.end());
      std::printf("| %s | %s | %s | %.3f, %.3f | %s | %.3f, %.3f |\n", lstm ? "LSTM" : "GRU",
                  bf16 ? "bf16" : "f32", p.forward.impl_info_str(), tf[tf.size() / 2], tf[0],
                  p.backward.impl_info_str(), tb[tb.size() / 2], tb[0]);
    }
  return 0;
}
