// Mixed precision on the emulated GPU: cudnnTransformTensor's casts round
// as runtime/core's CPU casts do, bit for bit; cublasGemmEx and cuDNN's bf16
// and f16 convolutions compute the f32 product of rounded operands; the GPU
// kernels with compute_dtype give that (bit for bit) and follow the CPU's
// mixed precision kernels within a stated tolerance; each call is counted
// with its type and math.
#include "runtime/core/Bf16.h"
#include "runtime/core/F16.h"
#include "runtime/gpu/GpuKernels.h"
#include "runtime/gpu/GpuOp.h"
#include "runtime/kernels/CpuKernels.h"
#include "tests/unit/gpu/TestGpu.h"

#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace dtf::gpu {
namespace {

using namespace cuda;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Tensor randomTensor(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t = Tensor::allocate(DType::F32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = u(rng);
  return t;
}

// `t` with every element rounded to bf16 or f16 (kept in f32).
Tensor rounded(const Tensor &t, bool bf16) {
  Tensor r = Tensor::allocate(DType::F32, t.shape());
  for (int64_t i = 0; i < t.numElements(); ++i) {
    const float v = t.data<float>()[i];
    r.data<float>()[i] = bf16 ? f32FromBf16(bf16FromF32(v)) : roundToF16(v);
  }
  return r;
}

// The emulation's count after `label` ("cublasGemmEx bf16 tensor-op="), 0
// when it has counted none.
unsigned long typedCount(const std::string &label) {
  const std::string stats = processEmulationStats();
  const size_t at = stats.find(label);
  return at == std::string::npos ? 0ul
                                 : std::stoul(stats.substr(at + label.size()));
}

Tensor onCpu(const std::string &op, std::vector<Tensor> inputs,
             const AttrMap &attrs) {
  KernelContext c;
  std::vector<Tensor *> ptrs;
  for (Tensor &t : inputs)
    ptrs.push_back(&t);
  c.setInputs(ptrs);
  c.setAttrs(attrs);
  c.setOpName(op);
  c.setNumOutputs(1);
  Status s = callKernel(cpuKernels().lookup(op), c);
  EXPECT_TRUE(s.isOk()) << op << ": " << s.message();
  return c.output(0);
}

// Output 0 of `op` on the emulated GPU, run 3 steps (eager, captured,
// replayed), each step's result the same bit for bit.
Tensor onGpu(GpuDevice &device, const std::string &op,
             std::vector<Tensor> inputs, const AttrMap &attrs) {
  auto ctx = std::make_unique<GpuKernelContext>(device);
  ctx->setAttrs(attrs);
  ctx->setOpName(op);
  GpuOp g(device, gpuKernelRegistry().lookup(op), std::move(ctx));
  g.setNumOutputs(1);
  for (Tensor &t : inputs)
    g.addHostInput(&t);
  g.setDownload(0);
  Tensor first;
  for (int step = 0; step < 3; ++step) {
    Status s = g.run(uint64_t(step), 0);
    EXPECT_TRUE(s.isOk()) << op << ": " << s.message();
    if (!s.isOk())
      return first;
    const Tensor &got = *g.hostOutput(0);
    if (step == 0) {
      first = Tensor::allocate(DType::F32, got.shape());
      std::memcpy(first.rawData(), got.rawData(), got.byteSize());
    } else {
      EXPECT_EQ(std::memcmp(first.rawData(), got.rawData(), got.byteSize()), 0)
          << op << " step " << step;
    }
  }
  EXPECT_EQ(g.graphLaunches(), 2u) << op;
  return first;
}

// The values a cast must get right: ties (to even, both ways), the largest
// finite values and overflow, subnormals of f32 and of the target, signed
// zeros, infinities and NaNs with payloads, and random ones.
std::vector<float> castCases() {
  std::vector<float> v = {
      0.0f,
      -0.0f,
      1.0f,
      -1.0f,
      fromBits(0x3f808000u), // 1 + 2^-8: a bf16 tie, to even (1)
      fromBits(0x3f818000u), // 1 + 3*2^-8: a bf16 tie, to even (up)
      fromBits(0x3f808001u), // just past the tie: up
      1.0f + 0x1p-11f,
      1.0f + 3 * 0x1p-11f, // f16 ties
      65504.0f,
      65519.0f,
      65520.0f,
      -65520.0f, // f16's largest, overflow
      std::numeric_limits<float>::max(),
      -std::numeric_limits<float>::max(),
      fromBits(0x7f7f8000u), // rounds past bf16's largest: inf
      0x1p-14f,
      0x1p-15f,
      0x1p-24f,
      0x1p-25f,
      0x1.8p-25f, // f16 subnormals
      std::numeric_limits<float>::denorm_min(),
      fromBits(0x00408000u),
      std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      fromBits(0x7fc00000u),
      fromBits(0xffc00001u),
      fromBits(0x7f800001u), // a signalling NaN: stays a NaN, made quiet
      fromBits(0x7fa12345u)};
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i)
    v.push_back(fromBits(rng()));
  return v;
}

// Host <-> emulated device copies (the null stream), and a wait for the
// device's compute stream, where its cuBLAS and cuDNN handles run.
void up(CudaDriver &d, CUdeviceptr dst, const void *src, size_t bytes) {
  ASSERT_EQ(d.cuMemcpyHtoDAsync(dst, src, bytes, nullptr), CUDA_SUCCESS);
}
template <typename T>
std::vector<T> down(CudaDriver &d, CUdeviceptr src, size_t n) {
  std::vector<T> out(n);
  EXPECT_EQ(d.cuMemcpyDtoHAsync(out.data(), src, n * sizeof(T), nullptr),
            CUDA_SUCCESS);
  return out;
}

// Converts `n` elements from `from` to `to` through the emulated
// cudnnTransformTensor.
void transform(CudaDriver &d, cudnnHandle_t dnn, int from, const void *src,
               int to, void *dst, int n) {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  ASSERT_EQ(d.cudnnCreateTensorDescriptor(&x), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(d.cudnnCreateTensorDescriptor(&y), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(
      d.cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, from, 1, 1, 1, n),
      CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(d.cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, to, 1, 1, 1, n),
            CUDNN_STATUS_SUCCESS);
  const float one = 1, zero = 0;
  ASSERT_EQ(d.cudnnTransformTensor(dnn, &one, x, src, &zero, y, dst),
            CUDNN_STATUS_SUCCESS)
      << d.errorText("cudnnTransformTensor", 0);
  d.cudnnDestroyTensorDescriptor(x);
  d.cudnnDestroyTensorDescriptor(y);
}

TEST(GpuMixedPrecision, CastsRoundToNearestEvenAsTheCpuCastsBitForBit) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  CudaDriver &d = e.device->driver();
  const std::vector<float> in = castCases();
  const int n = int(in.size());
  CUdeviceptr src = 0, low = 0, back = 0;
  ASSERT_EQ(d.cuMemAlloc(&src, in.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemAlloc(&low, in.size() * 2), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemAlloc(&back, in.size() * 4), CUDA_SUCCESS);
  up(d, src, in.data(), in.size() * 4);
  const unsigned long casts0 =
      typedCount("cudnnTransformTensor f32->bf16 convert=");
  // The emulation keeps a NaN's payload as the CPU does; a real cuDNN need
  // not (it is checked to give a NaN).
  const bool exactNaN =
      emulationCounts("a NaN's payload bit for bit (a NaN is checked to stay one)");
  for (int type : {CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF}) {
    const bool bf16 = type == CUDNN_DATA_BFLOAT16;
    transform(d, e.device->dnn(), CUDNN_DATA_FLOAT,
              reinterpret_cast<void *>(src), type,
              reinterpret_cast<void *>(low), n);
    transform(d, e.device->dnn(), type, reinterpret_cast<void *>(low),
              CUDNN_DATA_FLOAT, reinterpret_cast<void *>(back), n);
    ASSERT_EQ(d.cuStreamSynchronize(e.device->computeStream()), CUDA_SUCCESS);
    const std::vector<uint16_t> h = down<uint16_t>(d, low, in.size());
    const std::vector<float> w = down<float>(d, back, in.size());
    for (int i = 0; i < n; ++i) {
      const uint16_t want =
          bf16 ? bf16FromF32(in[size_t(i)]) : f16FromF32(in[size_t(i)]);
      if (std::isnan(in[size_t(i)]) && !exactNaN) {
        // A real cuDNN writes its canonical NaN (0x7fff, seen on an H200
        // with cuDNN 9.14) where the CPU keeps the payload (0x7fc0): a NaN
        // either way, which is all a NaN's bits mean to training.
        const uint16_t exp = bf16 ? 0x7f80 : 0x7c00, man = bf16 ? 0x7f : 0x3ff;
        EXPECT_TRUE((h[size_t(i)] & exp) == exp && (h[size_t(i)] & man) != 0)
            << (bf16 ? "bf16" : "f16") << " of a NaN is 0x" << std::hex
            << h[size_t(i)] << ", not a NaN";
        EXPECT_TRUE(std::isnan(w[size_t(i)])) << "widening a NaN";
        continue;
      }
      ASSERT_EQ(h[size_t(i)], want) << (bf16 ? "bf16" : "f16") << " of 0x"
                                    << std::hex << bits(in[size_t(i)]);
      const float wide = bf16 ? f32FromBf16(want) : f32FromF16(want);
      ASSERT_EQ(bits(w[size_t(i)]), bits(wide))
          << "widening 0x" << std::hex << want;
    }
  }
  // Spot checks of the reference itself: a tie to even, overflow, a NaN.
  EXPECT_EQ(bf16FromF32(fromBits(0x3f808000u)), 0x3f80);
  EXPECT_EQ(bf16FromF32(fromBits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(f16FromF32(65520.0f), 0x7c00);
  EXPECT_EQ(f16FromF32(65519.0f), 0x7bff);
  EXPECT_EQ(bf16FromF32(fromBits(0x7f800001u)) & 0x7fc0, 0x7fc0);
  if (emulationCounts("cudnnTransformTensor's call count")) {
    EXPECT_EQ(typedCount("cudnnTransformTensor f32->bf16 convert=") - casts0,
              1u);
  }
}

// cublasGemmEx on bf16 or f16 operands with an f32 result: the f32 product
// of the rounded values, bit for bit the emulated cublasSgemm on them (the
// same sums in the same order), within 1e-5 relative of a float64
// reference; counted as tensor-op calls.
TEST(GpuMixedPrecision, GemmExIsTheF32ProductOfRoundedOperands) {
  // On a real GPU (DTF_GPU=real) only the float64 band is checked: its
  // cuBLAS sums in its own order, and refuses in its own words.
  const bool emulated = !onRealGpu();
  TestGpu e;
  ASSERT_TRUE(e.device);
  CudaDriver &d = e.device->driver();
  const int m = 7, n = 5, k = 33;
  const Tensor a = randomTensor({k, m}, 1), b = randomTensor({n, k}, 2);
  for (bool bf16 : {true, false}) {
    const Tensor ar = rounded(a, bf16), br = rounded(b, bf16);
    std::vector<uint16_t> a16(size_t(m) * k), b16(size_t(k) * n);
    for (size_t i = 0; i < a16.size(); ++i)
      a16[i] = bf16 ? bf16FromF32(a.data<float>()[i])
                    : f16FromF32(a.data<float>()[i]);
    for (size_t i = 0; i < b16.size(); ++i)
      b16[i] = bf16 ? bf16FromF32(b.data<float>()[i])
                    : f16FromF32(b.data<float>()[i]);
    CUdeviceptr da = 0, db = 0, dar = 0, dbr = 0, c = 0, c32 = 0;
    ASSERT_EQ(d.cuMemAlloc(&da, a16.size() * 2), CUDA_SUCCESS);
    ASSERT_EQ(d.cuMemAlloc(&db, b16.size() * 2), CUDA_SUCCESS);
    ASSERT_EQ(d.cuMemAlloc(&dar, ar.byteSize()), CUDA_SUCCESS);
    ASSERT_EQ(d.cuMemAlloc(&dbr, br.byteSize()), CUDA_SUCCESS);
    ASSERT_EQ(d.cuMemAlloc(&c, size_t(m) * n * 4), CUDA_SUCCESS);
    ASSERT_EQ(d.cuMemAlloc(&c32, size_t(m) * n * 4), CUDA_SUCCESS);
    up(d, da, a16.data(), a16.size() * 2);
    up(d, db, b16.data(), b16.size() * 2);
    up(d, dar, ar.rawData(), ar.byteSize());
    up(d, dbr, br.rawData(), br.byteSize());
    const int type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const std::string label =
        std::string("cublasGemmEx ") + (bf16 ? "bf16" : "f16") + " tensor-op=";
    const unsigned long calls0 = typedCount(label);
    // Column-major C[m, n] = A^T B^T with A stored k x m and B n x k.
    const float one = 1, zero = 0;
    ASSERT_EQ(d.cublasGemmEx(e.device->blas(), CUBLAS_OP_T, CUBLAS_OP_T, m, n,
                             k, &one, reinterpret_cast<void *>(da), type, k,
                             reinterpret_cast<void *>(db), type, n, &zero,
                             reinterpret_cast<void *>(c), CUDA_R_32F, m,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS)
        << d.errorText("cublasGemmEx", 0);
    ASSERT_EQ(d.cublasSgemm_v2(e.device->blas(), CUBLAS_OP_T, CUBLAS_OP_T, m, n,
                               k, &one, reinterpret_cast<float *>(dar), k,
                               reinterpret_cast<float *>(dbr), n, &zero,
                               reinterpret_cast<float *>(c32), m),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(d.cuStreamSynchronize(e.device->computeStream()), CUDA_SUCCESS);
    const std::vector<float> got = down<float>(d, c, size_t(m) * n),
                             f32 = down<float>(d, c32, size_t(m) * n);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double ref = 0, mag = 0;
        for (int p = 0; p < k; ++p) {
          const double t = double(ar.data<float>()[i * k + p]) *
                           double(br.data<float>()[p * n + j]);
          ref += t;
          mag += std::fabs(t);
        }
        const float g = got[size_t(j * m + i)];
        if (emulated) {
          ASSERT_EQ(bits(g), bits(f32[size_t(j * m + i)])) << i << "," << j;
        }
        ASSERT_NEAR(g, ref, 1e-5 * mag) << i << "," << j;
      }
    if (!emulated) {
      std::printf("[   NOTE   ] DTF_GPU=real: not checked: the emulation's "
                  "call count and refusals\n");
      for (CUdeviceptr p : {da, db, dar, dbr, c, c32})
        d.cuMemFree(p);
      continue;
    }
    EXPECT_EQ(typedCount(label) - calls0, 1u) << processEmulationStats();
    // What dtf never passes is refused with the reason: an f16 compute
    // type, a bf16 result.
    EXPECT_EQ(d.cublasGemmEx(e.device->blas(), CUBLAS_OP_T, CUBLAS_OP_T, m, n,
                             k, &one, reinterpret_cast<void *>(da), type, k,
                             reinterpret_cast<void *>(db), type, n, &zero,
                             reinterpret_cast<void *>(c), CUDA_R_32F, m, 64,
                             CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_NE(d.errorText("cublasGemmEx", 0).find("compute type 64"),
              std::string::npos);
    EXPECT_EQ(d.cublasGemmEx(e.device->blas(), CUBLAS_OP_T, CUBLAS_OP_T, m, n,
                             k, &one, reinterpret_cast<void *>(da), type, k,
                             reinterpret_cast<void *>(db), type, n, &zero,
                             reinterpret_cast<void *>(c), type, m,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_NOT_SUPPORTED);
    for (CUdeviceptr p : {da, db, dar, dbr, c, c32})
      d.cuMemFree(p);
  }
}

// Output 0 of `op` with compute_dtype `dtype` on the emulated GPU: bit for
// bit the f32 GPU kernel on the rounded operands (matmul: f32 result; the
// convolutions: that result rounded to bf16 or f16, as cuDNN writes its
// low-precision output), and within `tol` relative (plus 1e-5 absolute) of
// the CPU's own mixed precision kernel.
void expectLowPrecisionOnGpu(GpuDevice &device, const std::string &op,
                             std::vector<Tensor> inputs, AttrMap attrs,
                             const std::string &dtype, bool roundsOutput,
                             double tol) {
  const bool bf16 = dtype == "bf16";
  std::vector<Tensor> roundedInputs;
  for (const Tensor &t : inputs)
    roundedInputs.push_back(rounded(t, bf16));
  const Tensor f32 = onGpu(device, op, roundedInputs, attrs);
  AttrMap low = attrs;
  low["compute_dtype"] = dtype;
  const Tensor got = onGpu(device, op, inputs, low);
  const Tensor cpu = onCpu(op, inputs, low);
  ASSERT_EQ(got.shape(), f32.shape()) << op;
  ASSERT_EQ(got.shape(), cpu.shape()) << op;
  for (int64_t i = 0; i < got.numElements(); ++i) {
    float want = f32.data<float>()[i];
    if (roundsOutput)
      want = bf16 ? f32FromBf16(bf16FromF32(want)) : roundToF16(want);
    // A real GPU sums in its own order: there only the CPU's band holds
    // (1e-4 relative at least, as the f32 kernels' tests allow).
    if (!onRealGpu()) {
      ASSERT_EQ(bits(got.data<float>()[i]), bits(want))
          << op << " " << dtype << " element " << i;
    }
    const float c = cpu.data<float>()[i];
    const double band = onRealGpu() ? std::max(tol, 1e-4) : tol;
    ASSERT_NEAR(got.data<float>()[i], c, band * std::fabs(c) + 1e-5)
        << op << " " << dtype << " element " << i << " against the CPU";
  }
}

TEST(GpuMixedPrecision, KernelsComputeInBf16AndF16AndAreCountedAsTensorOps) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  const unsigned long gemm0 = typedCount("cublasGemmEx bf16 tensor-op="),
                      batched0 = typedCount("cublasGemmEx f16 tensor-op="),
                      conv0 =
                          typedCount("cudnnConvolutionForward bf16 tensor-op="),
                      bwd0 = typedCount(
                          "cudnnConvolutionBackwardFilter f16 tensor-op=");
  // The f32 sums of the CPU's (oneDNN's blocked ones) differ from the
  // emulation's in order only: 1e-5 relative for the matmuls; the GPU's
  // convolutions round their output to bf16 (2^-8 relative) or f16 (2^-11),
  // the CPU's keep f32.
  for (const std::string dtype : {"bf16", "f16"}) {
    expectLowPrecisionOnGpu(
        *e.device, "dtf.matmul",
        {randomTensor({6, 40}, 3), randomTensor({5, 40}, 4)},
        {{"transpose_b", true}}, dtype, false, 1e-5);
    // Batched (cublasGemmStridedBatchedEx).
    expectLowPrecisionOnGpu(
        *e.device, "dtf.matmul",
        {randomTensor({3, 4, 24}, 5), randomTensor({3, 24, 6}, 6)}, {}, dtype,
        false, 1e-5);
    const double convTol = dtype == "bf16" ? 0x1p-8 : 0x1p-11;
    AttrMap attrs = {{"padding", std::string("same")},
                     {"strides", std::vector<int64_t>{1, 1}}};
    Tensor x = randomTensor({2, 6, 6, 5}, 7), f = randomTensor({3, 3, 5, 4}, 8);
    Tensor dy = randomTensor({2, 6, 6, 4}, 9);
    expectLowPrecisionOnGpu(*e.device, "dtf.conv2d", {x, f}, attrs, dtype, true,
                            convTol);
    AttrMap in = attrs;
    in["input_shape"] = std::vector<int64_t>{2, 6, 6, 5};
    expectLowPrecisionOnGpu(*e.device, "dtf.conv2d_backprop_input", {dy, f}, in,
                            dtype, true, convTol);
    AttrMap fl = attrs;
    fl["filter_shape"] = std::vector<int64_t>{3, 3, 5, 4};
    expectLowPrecisionOnGpu(*e.device, "dtf.conv2d_backprop_filter", {x, dy},
                            fl, dtype, true, convTol);
  }
  if (!emulationCounts("the typed cuBLAS and cuDNN call counts"))
    return;
  // 3 steps each (eager, captured, replayed): the replays count as calls.
  EXPECT_EQ(typedCount("cublasGemmEx bf16 tensor-op=") - gemm0, 6u);
  EXPECT_EQ(typedCount("cublasGemmEx f16 tensor-op=") - batched0, 6u);
  EXPECT_EQ(typedCount("cudnnConvolutionForward bf16 tensor-op=") - conv0, 3u);
  EXPECT_EQ(typedCount("cudnnConvolutionBackwardFilter f16 tensor-op=") - bwd0,
            3u);
}

// A compute_dtype the GPU kernels do not know is an error naming the op.
TEST(GpuMixedPrecision, AnUnknownComputeDtypeIsRefusedWithTheOpsName) {
  TestGpu e;
  ASSERT_TRUE(e.device);
  auto ctx = std::make_unique<GpuKernelContext>(*e.device);
  ctx->setAttrs({{"compute_dtype", std::string("f8")}});
  ctx->setOpName("dtf.matmul");
  GpuOp g(*e.device, gpuKernelRegistry().lookup("dtf.matmul"), std::move(ctx));
  g.setNumOutputs(1);
  Tensor a = randomTensor({2, 3}, 1), b = randomTensor({3, 2}, 2);
  g.addHostInput(&a);
  g.addHostInput(&b);
  g.setDownload(0);
  Status s = g.run(0, 0);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find(
                "dtf.matmul: compute_dtype is \"bf16\", \"f16\" or absent, "
                "not \"f8\""),
            std::string::npos)
      << s.message();
}

} // namespace
} // namespace dtf::gpu
