// Mixed precision on the CPU: the bf16 rounding bit for bit (the cast
// kernel and runtime/core/Bf16.h), and matmul and the convolutions with
// compute_dtype "bf16" against float64 on bf16-rounded operands, and their
// gradients against float64 on the unrounded ones.
#include "KernelTestUtil.h"

#include "runtime/core/Bf16.h"
#include "runtime/core/F16.h"
#include "runtime/kernels/cpu/OneDnn.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <pthread.h>
#include <random>
#include <thread>
#include <time.h>
#include <vector>

namespace dtf::test {
namespace {

// The reference, written from the definition rather than with bit tricks:
// the two bf16 values around x (by magnitude), the nearer one, on a tie the
// one with an even last bit; beyond the largest bf16 (and its half ulp) inf.
uint16_t referenceBf16(float x) {
  const uint32_t u = bitsOf(x);
  if (std::isnan(x))
    return uint16_t((u >> 16) | 0x40); // quiet, sign and payload top kept
  const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  const uint32_t down = mag & 0xffff0000u, up = down + 0x10000u;
  const double dx = std::fabs(double(x));
  const double dDown = dx - double(floatOf(down));
  // `up` may be inf's pattern: its distance is that of the next power step.
  const double upValue = up >= 0x7f800000u ? std::ldexp(1.0, 128)
                                           : double(floatOf(up));
  const double dUp = upValue - dx;
  uint32_t pick = dDown < dUp                 ? down
                  : dUp < dDown               ? up
                  : ((down >> 16) & 1u) == 0 ? down
                                              : up;
  if (mag >= 0x7f800000u) // inf stays inf
    pick = mag;
  return uint16_t((sign | pick) >> 16);
}

TEST(Bf16, RoundsToNearestEvenBitForBitIncludingSpecialValues) {
  std::vector<uint32_t> patterns = {
      0x00000000, 0x80000000,             // +-0
      0x7f800000, 0xff800000,             // +-inf
      0x7f800001, 0xff812345, 0x7fc00000, // signalling and quiet NaNs
      0x7fffffff,                         // NaN whose rounding would carry
      0x00000001, 0x80000001, 0x00008000, // smallest subnormals, a tie
      0x00018000, 0x00028000, 0x007fffff, // ties to odd/even, largest subnormal
      0x3f808000, 0x3f818000, 0x3f80ffff, // ties around 1, just below a step
      0x7f7fffff, 0xff7fffff,             // FLT_MAX: overflows to inf
      0x7f7f7fff, 0x7f7f8000,             // just below / at the overflow tie
  };
  std::mt19937 gen(7);
  for (int i = 0; i < 200000; ++i)
    patterns.push_back(uint32_t(gen()));
  for (uint32_t p : patterns) {
    const float x = floatOf(p);
    SCOPED_TRACE(::testing::Message() << std::hex << "0x" << p);
    const uint16_t got = bf16FromF32(x);
    ASSERT_EQ(got, referenceBf16(x));
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(f32FromBf16(got)));
      ASSERT_TRUE(got & 0x40) << "a NaN comes out quiet";
    }
  }
  EXPECT_EQ(bf16FromF32(floatOf(0x7f7fffff)), 0x7f80); // overflow: inf
  EXPECT_EQ(bf16FromF32(floatOf(0x00008000)), 0x0000); // tie to even 0
  EXPECT_EQ(bf16FromF32(floatOf(0x00018000)), 0x0002); // tie to even 2
  // The vectorized loop rounds as the scalar one.
  std::vector<float> xs;
  for (uint32_t p : patterns)
    xs.push_back(floatOf(p));
  std::vector<uint16_t> out(xs.size());
  narrowToBf16(xs.data(), int64_t(xs.size()), out.data());
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(out[i], bf16FromF32(xs[i])) << i;
}

TEST(Bf16, CastKernelRoundsAndWidensAndRefusesOtherPairs) {
  const float values[] = {1.0f, floatOf(0x3f808000), floatOf(0x3f818000),
                          floatOf(0x7f7fffff), -floatOf(0x00000001),
                          std::nanf(""), -INFINITY};
  const int64_t n = std::size(values);
  Tensor x = Tensor::allocate(DType::F32, {n});
  std::memcpy(x.rawData(), values, sizeof values);
  KernelRun narrow("dtf.cast");
  narrow.attr("out_dtype", std::string("bf16")).in(x);
  ASSERT_EQ(errorOf(narrow), "");
  ASSERT_EQ(narrow.out().dtype(), DType::BF16);
  const uint16_t *got = static_cast<const uint16_t *>(narrow.out().rawData());
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(got[i], referenceBf16(values[i])) << i;
  KernelRun widen("dtf.cast");
  widen.attr("out_dtype", std::string("f32")).in(narrow.out());
  ASSERT_EQ(errorOf(widen), "");
  for (int64_t i = 0; i < n; ++i) {
    const float w = widen.out().data<float>()[i];
    EXPECT_EQ(bitsOf(w), uint32_t(got[i]) << 16) << i;
  }
  KernelRun other("dtf.cast");
  other.attr("out_dtype", std::string("i32")).in(narrow.out());
  EXPECT_NE(errorOf(other).find("bf16 casts to and from f32 only"),
            std::string::npos);
}

Values roundedValues(const Values &v, const std::string &dtype) {
  Values r;
  for (double x : v)
    r.push_back(dtype == "f16" ? roundToF16(float(x))
                               : f32FromBf16(bf16FromF32(float(x))));
  return r;
}

// Runs `op` twice: with compute_dtype `dtype` (bf16 or f16) on f32
// operands, and in f64 on the operands rounded to it (the reference
// kernels' loops). f32 accumulation over at most a few hundred terms:
// within 1e-4 relative.
void expectLowMatchesRoundedF64(const std::string &op,
                                const std::function<void(KernelRun &)> &attrs,
                                const Shape &as, const Shape &bs,
                                const std::string &dtype = "bf16") {
  Rng rng;
  Values a = rng.uniform(numElementsOf(as)), b = rng.uniform(numElementsOf(bs));
  KernelRun low(op), ref(op);
  attrs(low);
  attrs(ref);
  low.attr("compute_dtype", dtype).in(f32(as, a)).in(f32(bs, b));
  ref.in(f64(as, roundedValues(a, dtype))).in(f64(bs, roundedValues(b, dtype)));
  ASSERT_EQ(errorOf(low), "");
  ASSERT_EQ(errorOf(ref), "");
  const Values want = valuesOf(ref.out());
  EXPECT_TRUE(near(low.out(), ref.out().shape(), want, 1e-4, 1e-4));
  // The operands really were rounded: f32 on unrounded ones is elsewhere.
  KernelRun full(op);
  attrs(full);
  full.in(f32(as, a)).in(f32(bs, b));
  ASSERT_EQ(errorOf(full), "");
  EXPECT_FALSE(near(low.out(), full.out().shape(), valuesOf(full.out()), 1e-6, 1e-6));
}

// Whether the CPU narrows to bf16 natively; where not, prints why the test
// has nothing to check (`fallback`: what the code does there instead).
bool nativeBf16OrSay(const char *fallback) {
  if (cpu::bf16Native())
    return true;
  std::printf("note: no AVX512-BF16/AMX here (or DTF_BF16_NATIVE=0); %s\n",
              fallback);
  EXPECT_FALSE(cpu::bf16Native());
  return false;
}

// `specials` (f32 bit patterns) followed by random bit patterns from `seed`,
// `count` values in all.
std::vector<float> specialsThenRandom(std::initializer_list<uint32_t> specials,
                                      size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<float> xs;
  for (uint32_t p : specials)
    xs.push_back(floatOf(p));
  while (xs.size() < count)
    xs.push_back(floatOf(uint32_t(gen())));
  return xs;
}

// The native path's narrowing (oneDNN's reorder, vcvtneps2bf16) rounds as
// Bf16.h but for subnormal inputs, which it flushes to a zero of their sign.
TEST(Bf16, NativeNarrowingMatchesBf16hButFlushesSubnormals) {
  if (!nativeBf16OrSay("the fallback path does not use the native narrowing"))
    return;
  const std::vector<float> xs = specialsThenRandom(
      {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0x3f808000u,
       0x3f818000u, 0x7f7fffffu, 0x00000000u, 0x80000000u, 0x00008000u,
       0x807fffffu},
      11 + 100003, 11); // odd: a masked tail
  std::vector<uint16_t> out(xs.size());
  cpu::narrowToBf16Native(xs.data(), int64_t(xs.size()), out.data());
  int subnormals = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const uint32_t u = bitsOf(xs[i]);
    if ((u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0) {
      ++subnormals;
      ASSERT_EQ(out[i], uint16_t((u >> 16) & 0x8000u)) << std::hex << u;
    } else if (std::isnan(xs[i])) {
      ASSERT_TRUE(std::isnan(f32FromBf16(out[i]))) << std::hex << u;
    } else {
      ASSERT_EQ(out[i], bf16FromF32(xs[i])) << std::hex << u;
    }
  }
  EXPECT_GT(subnormals, 0);
}

// A large cast is cut into chunks over the pool (kNarrowGrain at least):
// the same bits as on one thread, wherever the cuts and the masked tails
// fall, and the pool's worker does part of it: its own CPU clock moves by
// at least a quarter of what the cast took on one thread (half is its
// share; a worker woken for a job it finds taken spends microseconds). It
// may wake after the calling thread took every chunk on a loaded machine:
// a few tries.
TEST(Bf16, NativeNarrowingOverAPoolGivesTheSameBitsAsOnOneThread) {
  if (!nativeBf16OrSay("the fallback path does not use the native narrowing"))
    return;
  const std::vector<float> xs = specialsThenRandom(
      {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000001u, 0x807fffffu,
       0x7f7fffffu, 0x3f808000u, 0x3f818000u},
      size_t(16 * cpu::kNarrowGrain + 7), 17); // odd: a masked tail
  auto ns = [](clockid_t clock) {
    timespec t{};
    clock_gettime(clock, &t);
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
  };
  std::vector<uint16_t> alone(xs.size());
  const int64_t start = ns(CLOCK_THREAD_CPUTIME_ID);
  cpu::narrowToBf16Native(xs.data(), int64_t(xs.size()), alone.data());
  const int64_t aloneNs = ns(CLOCK_THREAD_CPUTIME_ID) - start;
  std::atomic<bool> started{false};
  pthread_t worker{};
  ThreadPool pool(2, [&] {
    worker = pthread_self();
    started = true;
  });
  while (!started)
    std::this_thread::yield();
  clockid_t clock;
  ASSERT_EQ(pthread_getcpuclockid(worker, &clock), 0);
  int64_t workerNs = 0;
  for (int attempt = 0; attempt < 5 && workerNs < aloneNs / 4; ++attempt) {
    std::vector<uint16_t> pooled(xs.size(), 0xdead);
    const int64_t before = ns(clock);
    cpu::narrowToBf16Native(xs.data(), int64_t(xs.size()), pooled.data(),
                            &pool);
    workerNs = ns(clock) - before;
    for (size_t i = 0; i < xs.size(); ++i)
      ASSERT_EQ(pooled[i], alone[i]) << i << ": " << std::hex << bitsOf(xs[i]);
  }
  EXPECT_GE(workerNs, aloneNs / 4)
      << "the pool's worker took no share of the cast (" << aloneNs
      << " ns on one thread)";
}

// The convolutions narrow their f32 activations with narrowToBf16Native
// where oneDNN's reorder did (PlannedPrimitive's narrowOnly inputs): the
// two agree bit for bit, NaNs, infinities, subnormals and overflow included.
TEST(Bf16, NativeNarrowingMatchesOneDnnReorderBitForBit) {
  if (!nativeBf16OrSay("the convolutions keep f32 primitives there"))
    return;
  std::vector<float> xs = specialsThenRandom(
      {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xff812345u, 0x00000001u,
       0x807fffffu, 0x7f7fffffu, 0x3f808000u},
      2 * 3 * 5 * 7 * 64, 13);
  using dnnl::memory;
  const memory::dims dims = {2 * 5, 64, 3, 7}; // NCHW dims, NHWC layout
  memory src({dims, memory::data_type::f32, memory::format_tag::nhwc},
             cpu::cpuEngine(), xs.data());
  std::vector<uint16_t> viaReorder(xs.size()), native(xs.size());
  memory dst({dims, memory::data_type::bf16, memory::format_tag::nhwc},
             cpu::cpuEngine(), viaReorder.data());
  dnnl::stream stream(cpu::cpuEngine());
  dnnl::reorder(src, dst).execute(stream, src, dst);
  stream.wait();
  cpu::narrowToBf16Native(xs.data(), int64_t(xs.size()), native.data());
  int nans = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (std::isnan(xs[i])) { // both quiet NaNs of the input's sign
      ++nans;
      EXPECT_TRUE(std::isnan(f32FromBf16(native[i])));
      EXPECT_TRUE(std::isnan(f32FromBf16(viaReorder[i])));
      EXPECT_EQ(native[i] & 0x8000u, viaReorder[i] & 0x8000u);
      continue;
    }
    ASSERT_EQ(native[i], viaReorder[i]) << std::hex << bitsOf(xs[i]);
  }
  EXPECT_GT(nans, 0);
}

TEST(MixedPrecision, MatmulComputesOnBf16RoundedOperandsInF32) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb);
      auto attrs = [&](KernelRun &r) {
        r.attr("transpose_a", ta).attr("transpose_b", tb);
      };
      expectLowMatchesRoundedF64("dtf.matmul", attrs,
                                  ta ? Shape{96, 37} : Shape{37, 96},
                                  tb ? Shape{29, 96} : Shape{96, 29});
    }
  // Batched (attention's products).
  expectLowMatchesRoundedF64(
      "dtf.matmul", [](KernelRun &r) { r.attr("transpose_b", true); },
      {3, 2, 7, 16}, {3, 2, 9, 16});
}

KernelRun &conv(KernelRun &r) {
  return r.attr("strides", std::vector<int64_t>{1, 1})
      .attr("dilations", std::vector<int64_t>{1, 1})
      .attr("padding", std::string("same"));
}

TEST(MixedPrecision, ConvolutionsComputeOnBf16RoundedOperandsInF32) {
  expectLowMatchesRoundedF64("dtf.conv2d", [](KernelRun &r) { conv(r); },
                              {4, 9, 9, 16}, {3, 3, 16, 32});
  expectLowMatchesRoundedF64(
      "dtf.conv2d_backprop_input",
      [](KernelRun &r) {
        conv(r).attr("input_shape", std::vector<int64_t>{-1, 9, 9, 16});
      },
      {4, 9, 9, 32}, {3, 3, 16, 32});
  expectLowMatchesRoundedF64(
      "dtf.conv2d_backprop_filter",
      [](KernelRun &r) {
        conv(r).attr("filter_shape", std::vector<int64_t>{3, 3, 16, 32});
      },
      {4, 9, 9, 16}, {4, 9, 9, 32});
}

// The gradient check in mixed precision: matmul's and conv2d's gradient ops
// with compute_dtype bf16 against central differences of the float64
// forward on the unrounded operands. bf16 keeps 8 significant bits (a
// relative error of at most 2^-9 per operand), so over K terms of values in
// [-1, 1] the error stays within 2e-2 + 2e-2 relative here; f16 keeps 11
// (2^-12), well inside the same bound.
TEST(MixedPrecision, GradientsMatchFloat64WithinBf16AndF16Tolerance) {
  for (const std::string dtype : {"bf16", "f16"}) {
  SCOPED_TRACE(dtype);
  Rng rng;
  const int64_t m = 6, k = 40, n = 5;
  Values a = rng.uniform(m * k), b = rng.uniform(k * n), dy = rng.uniform(m * n);
  auto forward = [&](const Values &av) {
    Values c(m * n, 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t q = 0; q < k; ++q)
          c[i * n + j] += av[i * k + q] * b[q * n + j];
    return c;
  };
  // dA = dy B^T, as dtf-autodiff makes it.
  KernelRun da("dtf.matmul");
  da.attr("transpose_b", true)
      .attr("compute_dtype", dtype)
      .in(f32({m, n}, dy))
      .in(f32({k, n}, b));
  ASSERT_EQ(errorOf(da), "");
  EXPECT_TRUE(near(da.out(), {m, k}, numericGrad(forward, a, dy, 1e-3), 2e-2, 2e-2));

  Values x = rng.uniform(2 * 7 * 7 * 8), f = rng.uniform(3 * 3 * 8 * 4);
  Values gy = rng.uniform(2 * 7 * 7 * 4);
  auto convForward = [&](const Values &fv) {
    KernelRun r("dtf.conv2d");
    conv(r).in(f64({2, 7, 7, 8}, x)).in(f64({3, 3, 8, 4}, fv));
    EXPECT_EQ(errorOf(r), "");
    return valuesOf(r.out());
  };
  KernelRun df("dtf.conv2d_backprop_filter");
  conv(df)
      .attr("filter_shape", std::vector<int64_t>{3, 3, 8, 4})
      .attr("compute_dtype", dtype)
      .in(f32({2, 7, 7, 8}, x))
      .in(f32({2, 7, 7, 4}, gy));
  ASSERT_EQ(errorOf(df), "");
  EXPECT_TRUE(near(df.out(), {3, 3, 8, 4}, numericGrad(convForward, f, gy, 1e-3),
                   2e-2, 2e-2));
  }
}

// compute_dtype f16 (mixed_float16): oneDNN 2.6 has no f16 primitive on
// this CPU, so the products are f32 ones on f16-rounded operands (F16.h's
// rounding, by F16C), f32 accumulation.
TEST(MixedPrecision, F16ProductsComputeOnF16RoundedOperandsInF32) {
  for (bool tb : {false, true})
    expectLowMatchesRoundedF64(
        "dtf.matmul", [&](KernelRun &r) { r.attr("transpose_b", tb); },
        {37, 96}, tb ? Shape{29, 96} : Shape{96, 29}, "f16");
  expectLowMatchesRoundedF64(
      "dtf.matmul", [](KernelRun &r) { r.attr("transpose_b", true); },
      {3, 2, 7, 16}, {3, 2, 9, 16}, "f16");
  expectLowMatchesRoundedF64("dtf.conv2d", [](KernelRun &r) { conv(r); },
                             {4, 9, 9, 16}, {3, 3, 16, 32}, "f16");
  expectLowMatchesRoundedF64(
      "dtf.conv2d_backprop_input",
      [](KernelRun &r) {
        conv(r).attr("input_shape", std::vector<int64_t>{-1, 9, 9, 16});
      },
      {4, 9, 9, 32}, {3, 3, 16, 32}, "f16");
  expectLowMatchesRoundedF64(
      "dtf.conv2d_backprop_filter",
      [](KernelRun &r) {
        conv(r).attr("filter_shape", std::vector<int64_t>{3, 3, 16, 32});
      },
      {4, 9, 9, 16}, {4, 9, 9, 32}, "f16");
}

TEST(MixedPrecision, ComputeDtypeOnAnotherDtypeOrValueIsRefused) {
  KernelRun r("dtf.matmul");
  r.attr("compute_dtype", std::string("bf16"))
      .in(f64({2, 2}, {1, 2, 3, 4}))
      .in(f64({2, 2}, {1, 2, 3, 4}));
  EXPECT_NE(errorOf(r).find("compute_dtype \"bf16\" applies to f32 operands"),
            std::string::npos);
  KernelRun v("dtf.conv2d");
  conv(v).attr("compute_dtype", std::string("f8"))
      .in(f32({1, 3, 3, 1}, Values(9, 1.0)))
      .in(f32({1, 1, 1, 1}, {1.0}));
  EXPECT_NE(errorOf(v).find("compute_dtype is \"bf16\", \"f16\" or absent"),
            std::string::npos);
  KernelRun h("dtf.matmul");
  h.attr("compute_dtype", std::string("f16"))
      .in(f64({2, 2}, {1, 2, 3, 4}))
      .in(f64({2, 2}, {1, 2, 3, 4}));
  EXPECT_NE(errorOf(h).find("compute_dtype \"f16\" applies to f32 operands"),
            std::string::npos);
}

} // namespace
} // namespace dtf::test
