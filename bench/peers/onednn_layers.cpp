// The seed CNN's heavy layers (conv1, conv2, dense 3136->500) timed through
// oneDNN alone, forward, backward-data and backward-weights, in f32 and bf16
// (f32 accumulation), at batch 50: the same source builds against oneDNN 2.x
// (Debian's 2.6) and 3.x (the PyPI wheel onednn-cpu-gomp), so that one run of
// bench/onednn_versions.sh says which library computes these layers faster on
// this CPU. Every memory is `format_tag::any` (each library picks its own
// layouts; reorders are outside the timing), as a primitive's own speed.
//
//   onednn_layers [--repeat N] [--threads T]   (threads: OMP_NUM_THREADS)
// Prints one line per layer, pass and type: "layer pass dtype ms".
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

engine eng(engine::kind::cpu, 0);
stream strm(eng);
int repeat = 200;

double timeIt(const std::function<void()> &run) {
  for (int i = 0; i < 10; ++i) run();
  strm.wait();
  std::vector<double> ms;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeat / 5; ++i) run();
    strm.wait();
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() /
                 (repeat / 5));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

memory filled(const memory::desc &md) {
  memory m(md, eng);
  // Small values in whichever type: zero bytes then a pattern of 0x3c (a
  // normal number in f32's and bf16's upper bytes).
  std::memset(m.get_data_handle(), 0x3c, md.get_size());
  return m;
}

void report(const char *layer, const char *pass, dt type, double ms) {
  std::printf("%s %s %s %.4f\n", layer, pass, type == dt::bf16 ? "bf16" : "f32",
              ms);
}

void conv(const char *name, memory::dim n, memory::dim c, memory::dim hw,
          memory::dim k, memory::dim ks, dt type) {
  memory::dims src{n, c, hw, hw}, wei{k, c, ks, ks}, bia{k}, dst{n, k, hw, hw};
  memory::dims strides{1, 1}, pad{ks / 2, ks / 2};
  auto any = [&](const memory::dims &d, dt t) { return memory::desc(d, t, tag::any); };
  dt acc = type == dt::bf16 ? dt::f32 : dt::f32;
#if DNNL_VERSION_MAJOR >= 3
  auto fpd = convolution_forward::primitive_desc(
      eng, prop_kind::forward_training, algorithm::convolution_direct,
      any(src, type), any(wei, type), any(bia, acc), any(dst, type), strides,
      pad, pad);
  auto bdpd = convolution_backward_data::primitive_desc(
      eng, algorithm::convolution_direct, any(src, type), any(wei, type),
      any(dst, type), strides, pad, pad, fpd);
  auto bwpd = convolution_backward_weights::primitive_desc(
      eng, algorithm::convolution_direct, any(src, type), any(wei, acc),
      any(bia, acc), any(dst, type), strides, pad, pad, fpd);
#else
  auto fpd = convolution_forward::primitive_desc(
      convolution_forward::desc(prop_kind::forward_training,
                                algorithm::convolution_direct, any(src, type),
                                any(wei, type), any(bia, acc), any(dst, type),
                                strides, pad, pad),
      eng);
  auto bdpd = convolution_backward_data::primitive_desc(
      convolution_backward_data::desc(algorithm::convolution_direct,
                                      any(src, type), any(wei, type),
                                      any(dst, type), strides, pad, pad),
      eng, fpd);
  auto bwpd = convolution_backward_weights::primitive_desc(
      convolution_backward_weights::desc(algorithm::convolution_direct,
                                         any(src, type), any(wei, acc),
                                         any(bia, acc), any(dst, type),
                                         strides, pad, pad),
      eng, fpd);
#endif
  auto s = filled(fpd.src_desc()), w = filled(fpd.weights_desc()),
       b = filled(fpd.bias_desc()), d = filled(fpd.dst_desc());
  convolution_forward f(fpd);
  report(name, "forward", type, timeIt([&] {
           f.execute(strm, {{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, w},
                            {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, d}});
         }));
  if (c > 1) {
    auto ds = filled(bdpd.diff_src_desc()), dd = filled(bdpd.diff_dst_desc()),
         w2 = filled(bdpd.weights_desc());
    convolution_backward_data bd(bdpd);
    report(name, "backward_data", type, timeIt([&] {
             bd.execute(strm, {{DNNL_ARG_DIFF_SRC, ds}, {DNNL_ARG_WEIGHTS, w2},
                               {DNNL_ARG_DIFF_DST, dd}});
           }));
  }
  auto s3 = filled(bwpd.src_desc()), dw = filled(bwpd.diff_weights_desc()),
       db = filled(bwpd.diff_bias_desc()), dd3 = filled(bwpd.diff_dst_desc());
  convolution_backward_weights bw(bwpd);
  report(name, "backward_weights", type, timeIt([&] {
           bw.execute(strm, {{DNNL_ARG_SRC, s3}, {DNNL_ARG_DIFF_WEIGHTS, dw},
                             {DNNL_ARG_DIFF_BIAS, db}, {DNNL_ARG_DIFF_DST, dd3}});
         }));
}

void dense(const char *name, memory::dim n, memory::dim in, memory::dim out,
           dt type) {
  memory::dims src{n, in}, wei{out, in}, bia{out}, dst{n, out};
  auto any = [&](const memory::dims &d, dt t) { return memory::desc(d, t, tag::any); };
#if DNNL_VERSION_MAJOR >= 3
  auto fpd = inner_product_forward::primitive_desc(
      eng, prop_kind::forward_training, any(src, type), any(wei, type),
      any(bia, dt::f32), any(dst, type));
  auto bdpd = inner_product_backward_data::primitive_desc(
      eng, any(src, type), any(wei, type), any(dst, type), fpd);
  auto bwpd = inner_product_backward_weights::primitive_desc(
      eng, any(src, type), any(wei, dt::f32), any(bia, dt::f32),
      any(dst, type), fpd);
#else
  auto fpd = inner_product_forward::primitive_desc(
      inner_product_forward::desc(prop_kind::forward_training, any(src, type),
                                  any(wei, type), any(bia, dt::f32),
                                  any(dst, type)),
      eng);
  auto bdpd = inner_product_backward_data::primitive_desc(
      inner_product_backward_data::desc(any(src, type), any(wei, type),
                                        any(dst, type)),
      eng, fpd);
  auto bwpd = inner_product_backward_weights::primitive_desc(
      inner_product_backward_weights::desc(any(src, type), any(wei, dt::f32),
                                           any(bia, dt::f32), any(dst, type)),
      eng, fpd);
#endif
  auto s = filled(fpd.src_desc()), w = filled(fpd.weights_desc()),
       b = filled(fpd.bias_desc()), d = filled(fpd.dst_desc());
  inner_product_forward f(fpd);
  report(name, "forward", type, timeIt([&] {
           f.execute(strm, {{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, w},
                            {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, d}});
         }));
  auto ds = filled(bdpd.diff_src_desc()), dd = filled(bdpd.diff_dst_desc()),
       w2 = filled(bdpd.weights_desc());
  inner_product_backward_data bd(bdpd);
  report(name, "backward_data", type, timeIt([&] {
           bd.execute(strm, {{DNNL_ARG_DIFF_SRC, ds}, {DNNL_ARG_WEIGHTS, w2},
                             {DNNL_ARG_DIFF_DST, dd}});
         }));
  auto s3 = filled(bwpd.src_desc()), dw = filled(bwpd.diff_weights_desc()),
       db = filled(bwpd.diff_bias_desc()), dd3 = filled(bwpd.diff_dst_desc());
  inner_product_backward_weights bw(bwpd);
  report(name, "backward_weights", type, timeIt([&] {
           bw.execute(strm, {{DNNL_ARG_SRC, s3}, {DNNL_ARG_DIFF_WEIGHTS, dw},
                             {DNNL_ARG_DIFF_BIAS, db}, {DNNL_ARG_DIFF_DST, dd3}});
         }));
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(5, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--repeat N]\n", argv[0]);
      return 2;
    }
  }
  const dnnl_version_t *v = dnnl_version();
  std::printf("# oneDNN %d.%d.%d\n", v->major, v->minor, v->patch);
  for (dt type : {dt::f32, dt::bf16}) {
    try {
      conv("conv1", 50, 1, 28, 32, 5, type);
      conv("conv2", 50, 32, 14, 64, 5, type);
      dense("dense1", 50, 3136, 500, type);
    } catch (const dnnl::error &e) {
      std::printf("# %s: %s\n", type == dt::bf16 ? "bf16" : "f32", e.what());
    }
  }
  return 0;
}
