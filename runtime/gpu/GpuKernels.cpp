// The GPU kernels: matmul (batched too) on cuBLAS; convolution forward,
// backward-data and backward-filter and pooling forward and backward on
// cuDNN. Tensors are NHWC and filters HWIO as on the CPU; cuDNN takes the
// filter as KRSC, so it is transposed on the device with cublasSgeam.
#include "runtime/gpu/GpuKernels.h"
#include "dtf/OpNames.h"
#include "runtime/gpu/ConvAlgo.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuFusedContext.h"
#include "runtime/gpu/GpuLowPrecision.h"
#include "runtime/kernels/ColumnChunks.h"
#include "runtime/kernels/cpu/OneDnn.h"

#include <limits>

namespace dtf::gpu {

using namespace cuda;

namespace {

CUdeviceptr dptr(const Tensor &t) {
  return CUdeviceptr(uintptr_t(t.rawData()));
}
template <typename T = float> const T *cptr(const Tensor &t) {
  return static_cast<const T *>(t.rawData());
}
float *mptr(Tensor *t) { return static_cast<float *>(t->rawData()); }

GpuKernelContext &gpuCtx(KernelContext &ctx) {
  return static_cast<GpuKernelContext &>(ctx);
}

Status requireF32(const KernelContext &ctx) {
  for (int i = 0; i < ctx.numInputs(); ++i)
    if (ctx.input(i).dtype() != DType::F32)
      return errorStatus(ctx.opName(), " on a GPU takes f32 only, got ",
                         ctx.input(i).describe(), " (place it on the CPU)");
  return Status::ok();
}

Status blasStatus(const KernelContext &ctx, const char *call,
                  cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  GpuKernelContext &g = const_cast<GpuKernelContext &>(
      static_cast<const GpuKernelContext &>(ctx));
  return errorStatus(ctx.opName(), ": ", call, " failed with cuBLAS status ", s,
                     g.device().driver().emulated()
                         ? " (" + g.device().driver().errorText(call, 0) + ")"
                         : std::string());
}

Status dnnStatus(GpuKernelContext &ctx, const char *call, cudnnStatus_t s) {
  if (s == CUDNN_STATUS_SUCCESS)
    return Status::ok();
  CudaDriver &d = ctx.device().driver();
  return errorStatus(
      ctx.opName(), ": ", call, " failed: ", d.cudnnGetErrorString(s),
      d.emulated() ? " (" + d.errorText(call, 0) + ")" : std::string());
}

// RAII cuDNN descriptors, made and destroyed through the driver's pointers.
template <typename Desc, auto Create, auto Destroy> struct Descriptor {
  CudaDriver &d;
  Desc desc = nullptr;
  explicit Descriptor(CudaDriver &d) : d(d) { (d.*Create)(&desc); }
  ~Descriptor() { (d.*Destroy)(desc); }
};
using TensorDesc = Descriptor<cudnnTensorDescriptor_t,
                              &CudaDriver::cudnnCreateTensorDescriptor,
                              &CudaDriver::cudnnDestroyTensorDescriptor>;
using FilterDesc = Descriptor<cudnnFilterDescriptor_t,
                              &CudaDriver::cudnnCreateFilterDescriptor,
                              &CudaDriver::cudnnDestroyFilterDescriptor>;
using ConvDesc = Descriptor<cudnnConvolutionDescriptor_t,
                            &CudaDriver::cudnnCreateConvolutionDescriptor,
                            &CudaDriver::cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Descriptor<cudnnPoolingDescriptor_t,
                            &CudaDriver::cudnnCreatePoolingDescriptor,
                            &CudaDriver::cudnnDestroyPoolingDescriptor>;

// An NHWC tensor descriptor, f32 unless `type` says otherwise.
cudnnStatus_t nhwc(TensorDesc &t, int64_t n, int64_t h, int64_t w, int64_t c,
                   int type = CUDNN_DATA_FLOAT) {
  return t.d.cudnnSetTensor4dDescriptor(t.desc, CUDNN_TENSOR_NHWC, type, int(n),
                                        int(c), int(h), int(w));
}

Status matmulKernel(KernelContext &base) {
  GpuKernelContext &ctx = gpuCtx(base);
  const char *name = dtf::ops::kMatmul;
  if (ctx.numInputs() != 2)
    return errorStatus(name, " expects 2 inputs");
  DTF_RETURN_IF_ERROR(requireF32(ctx));
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  if (a.rank() < 2 || b.rank() < 2)
    return errorStatus(name, " expects operands of rank 2 or more, got ",
                       a.describe(), " and ", b.describe());
  const bool ta = ctx.getBool("transpose_a"), tb = ctx.getBool("transpose_b");
  const int64_t m = ta ? a.dim(-1) : a.dim(-2), k = ta ? a.dim(-2) : a.dim(-1);
  const int64_t kb = tb ? b.dim(-1) : b.dim(-2), n = tb ? b.dim(-2) : b.dim(-1);
  if (k != kb)
    return errorStatus(name, " expects inner dimensions to match, got ",
                       a.describe(), " and ", b.describe());
  std::vector<int64_t> aBatch(a.shape().begin(), a.shape().end() - 2);
  std::vector<int64_t> bBatch(b.shape().begin(), b.shape().end() - 2);
  const int64_t na = numElementsOf(aBatch), nb = numElementsOf(bBatch);
  std::vector<int64_t> outShape;
  if (aBatch == bBatch || nb == 1)
    outShape = aBatch;
  else if (na == 1)
    outShape = bBatch;
  else
    return errorStatus(name,
                       " on a GPU takes equal batch dimensions or one "
                       "operand without any, got ",
                       a.describe(), " and ", b.describe());
  const int64_t batch = numElementsOf(outShape);
  outShape.push_back(m);
  outShape.push_back(n);
  Tensor *out;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, DType::F32, outShape, &out));
  if (out->numElements() == 0)
    return Status::ok();
  GpuDevice &dev = ctx.device();
  if (k == 0)
    return dev.check("cuMemsetD8Async",
                     dev.driver().cuMemsetD8Async(
                         dptr(*out), 0, out->byteSize(), dev.computeStream()));
  const float one = 1, zero = 0;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  const int opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N,
            opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = int(a.dim(-1)), ldb = int(b.dim(-1));
  LowPrecision low;
  DTF_RETURN_IF_ERROR(lowPrecisionOf(ctx, name, &low));
  if (low != LowPrecision::kNone) {
    // Mixed precision: bf16 or f16 copies of the operands (scratch 0 and
    // 1), f32 compute and an f32 result, on the tensor cores.
    void *a16, *b16;
    DTF_RETURN_IF_ERROR(
        lowCopy(ctx, low, a.rawData(), a.numElements(), 0, &a16));
    DTF_RETURN_IF_ERROR(
        lowCopy(ctx, low, b.rawData(), b.numElements(), 1, &b16));
    const int type = cudaTypeOf(low);
    if (batch == 1 || (nb == 1 && !ta))
      return blasStatus(ctx, "cublasGemmEx",
                        dev.driver().cublasGemmEx(
                            dev.blas(), opB, opA, int(n), int(batch * m),
                            int(k), &one, b16, type, ldb, a16, type, lda, &zero,
                            mptr(out), CUDA_R_32F, int(n), CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
    return blasStatus(ctx, "cublasGemmStridedBatchedEx",
                      dev.driver().cublasGemmStridedBatchedEx(
                          dev.blas(), opB, opA, int(n), int(m), int(k), &one,
                          b16, type, ldb, nb == 1 ? 0 : k * n, a16, type, lda,
                          na == 1 ? 0 : m * k, &zero, mptr(out), CUDA_R_32F,
                          int(n), m * n, int(batch), CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT));
  }
  if (batch == 1 || (nb == 1 && !ta)) {
    // [B, M, K] x [K, N] is one [B*M, K] x [K, N] product.
    const int rows = int(batch * m);
    return blasStatus(ctx, "cublasSgemm",
                      dev.driver().cublasSgemm_v2(dev.blas(), opB, opA, int(n),
                                                  rows, int(k), &one, cptr(b),
                                                  ldb, cptr(a), lda, &zero,
                                                  mptr(out), int(n)));
  }
  return blasStatus(ctx, "cublasSgemmStridedBatched",
                    dev.driver().cublasSgemmStridedBatched(
                        dev.blas(), opB, opA, int(n), int(m), int(k), &one,
                        cptr(b), ldb, nb == 1 ? 0 : k * n, cptr(a), lda,
                        na == 1 ? 0 : m * k, &zero, mptr(out), int(n), m * n,
                        int(batch)));
}

// The window of a convolution or pooling, refused when cuDNN cannot take
// its padding (it pads both sides alike).
Status window(KernelContext &ctx, const char *name,
              const std::vector<int64_t> &input, int64_t kh, int64_t kw,
              bool conv, cpu::Window2D *w) {
  DTF_RETURN_IF_ERROR(cpu::makeWindow2D(ctx, name, input, kh, kw, conv, w));
  if (w->padTop != w->padBottom || w->padLeft != w->padRight)
    return errorStatus(name,
                       " on a GPU needs the same padding on both sides; "
                       "input ",
                       shapeString(input), " with a ", kh, "x", kw,
                       " window pads unevenly (place the op on the CPU)");
  return Status::ok();
}

// HWIO [R, O] -> KRSC [O, R] (row-major) or back, on the device.
Status transposeFilter(GpuKernelContext &ctx, const float *in, float *out,
                       int64_t rows, int64_t cols) {
  GpuDevice &dev = ctx.device();
  const float one = 1, zero = 0;
  // Row-major [rows, cols] is column-major [cols, rows]; its transpose,
  // column-major [rows, cols], is row-major [cols, rows].
  return blasStatus(ctx, "cublasSgeam",
                    dev.driver().cublasSgeam(dev.blas(), CUBLAS_OP_T,
                                             CUBLAS_OP_T, int(rows), int(cols),
                                             &one, in, int(cols), &zero, in,
                                             int(cols), out, int(rows)));
}

// The descriptors of one convolution call, set for window `w`.
struct ConvCall {
  TensorDesc x, y;
  FilterDesc f;
  ConvDesc c;
  explicit ConvCall(CudaDriver &d) : x(d), y(d), f(d), c(d) {}
};

// Under mixed precision (`low`) the tensors and the filter are bf16 or f16,
// the compute f32 (cuDNN's PSEUDO_BFLOAT16 and PSEUDO_HALF configurations)
// and the math CUDNN_TENSOR_OP_MATH.
Status setConv(GpuKernelContext &ctx, const cpu::Window2D &w, LowPrecision low,
               ConvCall &call) {
  TensorDesc &x = call.x, &y = call.y;
  FilterDesc &f = call.f;
  ConvDesc &c = call.c;
  CudaDriver &d = ctx.device().driver();
  const int type = cudnnTypeOf(low);
  cudnnStatus_t s = nhwc(x, w.n, w.ih, w.iw, w.c, type);
  if (s == CUDNN_STATUS_SUCCESS)
    s = d.cudnnSetFilter4dDescriptor(f.desc, type, CUDNN_TENSOR_NHWC, int(w.oc),
                                     int(w.c), int(w.kh), int(w.kw));
  if (s == CUDNN_STATUS_SUCCESS)
    s = d.cudnnSetConvolution2dDescriptor(
        c.desc, int(w.padTop), int(w.padLeft), int(w.sh), int(w.sw), int(w.dh),
        int(w.dw), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  // Explicitly: TF32 only where the plan allows it (cuDNN's default math
  // would use it on Ampere and later).
  if (s == CUDNN_STATUS_SUCCESS)
    s = d.cudnnSetConvolutionMathType(
        c.desc, low != LowPrecision::kNone ? CUDNN_TENSOR_OP_MATH
                : ctx.device().allowTf32() ? CUDNN_DEFAULT_MATH
                                           : CUDNN_FMA_MATH);
  if (s == CUDNN_STATUS_SUCCESS)
    s = nhwc(y, w.n, w.oh, w.ow, w.oc, type);
  return dnnStatus(ctx, "a cuDNN descriptor", s);
}

// The key of a convolution's algorithm choice: its shape (batch, channels,
// image, filter, padding, strides) and element type.
std::vector<int64_t> convShape(const cpu::Window2D &w, LowPrecision low) {
  return {w.n,      w.c,       w.ih, w.iw, w.oc, w.kh, w.kw,
          w.padTop, w.padLeft, w.sh, w.sw, w.dh, w.dw, int64_t(low)};
}

ConvOperands operands(const ConvCall &call, const void *x, const void *w,
                      const void *y, LowPrecision low) {
  ConvOperands op;
  op.lowPrecision = low != LowPrecision::kNone;
  op.xDesc = call.x.desc;
  op.yDesc = call.y.desc;
  op.wDesc = call.f.desc;
  op.convDesc = call.c.desc;
  op.x = const_cast<void *>(x);
  op.w = const_cast<void *>(w);
  op.y = const_cast<void *>(y);
  return op;
}

// The HWIO filter `f` as cuDNN's KRSC, in the op's scratch buffer 0.
Status krscFilter(GpuKernelContext &ctx, const Tensor &f, int64_t oc,
                  void **krsc) {
  DTF_RETURN_IF_ERROR(ctx.scratch(0, f.byteSize(), krsc));
  return transposeFilter(ctx, cptr(f), static_cast<float *>(*krsc),
                         f.numElements() / oc, oc);
}

Status filterShape(const char *name, const std::vector<int64_t> &shape) {
  if (shape.size() != 4)
    return errorStatus(name, " expects a filter of rank 4, got ",
                       shapeString(shape));
  return Status::ok();
}

// A 4-D shape attribute whose -1 entries come from `like`.
Status shapeAttr(KernelContext &ctx, const char *name, const char *attr,
                 const std::vector<int64_t> &like, std::vector<int64_t> *out) {
  if (!ctx.hasAttr(attr))
    return errorStatus(name, " needs the ", attr, " attribute");
  *out = ctx.getInts(attr);
  if (out->size() != 4)
    return errorStatus(name, " expects ", attr, " of 4 dimensions");
  for (size_t i = 0; i < 4; ++i)
    if ((*out)[i] == -1 && i < like.size())
      (*out)[i] = like[i];
  return Status::ok();
}

Status conv2dKernel(KernelContext &base) {
  GpuKernelContext &ctx = gpuCtx(base);
  const char *name = dtf::ops::kConv2d;
  DTF_RETURN_IF_ERROR(requireF32(ctx));
  const Tensor &x = ctx.input(0), &f = ctx.input(1);
  DTF_RETURN_IF_ERROR(filterShape(name, f.shape()));
  cpu::Window2D w;
  DTF_RETURN_IF_ERROR(
      window(ctx, name, x.shape(), f.dim(0), f.dim(1), true, &w));
  w.oc = f.dim(3);
  Tensor *y;
  DTF_RETURN_IF_ERROR(
      ctx.allocateOutput(0, DType::F32, {w.n, w.oh, w.ow, w.oc}, &y));
  if (y->numElements() == 0 || x.numElements() == 0)
    return Status::ok();
  GpuDevice &dev = ctx.device();
  CudaDriver &d = dev.driver();
  void *krsc;
  DTF_RETURN_IF_ERROR(krscFilter(ctx, f, w.oc, &krsc));
  LowPrecision low;
  DTF_RETURN_IF_ERROR(lowPrecisionOf(ctx, name, &low));
  ConvCall call(d);
  DTF_RETURN_IF_ERROR(setConv(ctx, w, low, call));
  if (low == LowPrecision::kNone)
    return runConvolution(ctx, ConvDirection::kForward, convShape(w, low),
                          operands(call, x.rawData(), krsc, y->rawData(), low));
  // Mixed precision: low copies of the filter and x (scratch 1 and 2), the
  // low result (scratch 3) cast back to f32.
  void *f16, *x16, *y16;
  DTF_RETURN_IF_ERROR(lowCopy(ctx, low, krsc, f.numElements(), 1, &f16));
  DTF_RETURN_IF_ERROR(lowCopy(ctx, low, x.rawData(), x.numElements(), 2, &x16));
  DTF_RETURN_IF_ERROR(ctx.scratch(3, y->numElements() * 2, &y16));
  DTF_RETURN_IF_ERROR(runConvolution(ctx, ConvDirection::kForward,
                                     convShape(w, low),
                                     operands(call, x16, f16, y16, low)));
  return convertOnDevice(ctx, y16, cudnnTypeOf(low), y->rawData(),
                         CUDNN_DATA_FLOAT, y->numElements());
}

Status conv2dBackpropInputKernel(KernelContext &base) {
  GpuKernelContext &ctx = gpuCtx(base);
  const char *name = dtf::ops::kConv2dBackpropInput;
  DTF_RETURN_IF_ERROR(requireF32(ctx));
  const Tensor &dy = ctx.input(0), &f = ctx.input(1);
  DTF_RETURN_IF_ERROR(filterShape(name, f.shape()));
  std::vector<int64_t> inputShape;
  DTF_RETURN_IF_ERROR(
      shapeAttr(ctx, name, "input_shape", dy.shape(), &inputShape));
  cpu::Window2D w;
  DTF_RETURN_IF_ERROR(
      window(ctx, name, inputShape, f.dim(0), f.dim(1), true, &w));
  w.oc = f.dim(3);
  if (dy.shape() != std::vector<int64_t>{w.n, w.oh, w.ow, w.oc})
    return errorStatus(name,
                       " expects dy of the convolution's output shape, got ",
                       dy.describe());
  Tensor *dx;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, DType::F32, inputShape, &dx));
  if (dx->numElements() == 0)
    return Status::ok();
  GpuDevice &dev = ctx.device();
  CudaDriver &d = dev.driver();
  void *krsc;
  DTF_RETURN_IF_ERROR(krscFilter(ctx, f, w.oc, &krsc));
  LowPrecision low;
  DTF_RETURN_IF_ERROR(lowPrecisionOf(ctx, name, &low));
  ConvCall call(d);
  DTF_RETURN_IF_ERROR(setConv(ctx, w, low, call));
  if (low == LowPrecision::kNone)
    return runConvolution(
        ctx, ConvDirection::kBackwardData, convShape(w, low),
        operands(call, dx->rawData(), krsc, dy.rawData(), low));
  // Mixed precision: low copies of the filter and dy (scratch 1 and 2), the
  // low dx (scratch 3) cast back to f32.
  void *f16, *dy16, *dx16;
  DTF_RETURN_IF_ERROR(lowCopy(ctx, low, krsc, f.numElements(), 1, &f16));
  DTF_RETURN_IF_ERROR(
      lowCopy(ctx, low, dy.rawData(), dy.numElements(), 2, &dy16));
  DTF_RETURN_IF_ERROR(ctx.scratch(3, dx->numElements() * 2, &dx16));
  DTF_RETURN_IF_ERROR(runConvolution(ctx, ConvDirection::kBackwardData,
                                     convShape(w, low),
                                     operands(call, dx16, f16, dy16, low)));
  return convertOnDevice(ctx, dx16, cudnnTypeOf(low), dx->rawData(),
                         CUDNN_DATA_FLOAT, dx->numElements());
}

Status conv2dBackpropFilterKernel(KernelContext &base) {
  GpuKernelContext &ctx = gpuCtx(base);
  const char *name = dtf::ops::kConv2dBackpropFilter;
  DTF_RETURN_IF_ERROR(requireF32(ctx));
  const Tensor &x = ctx.input(0), &dy = ctx.input(1);
  if (!ctx.hasAttr("filter_shape"))
    return errorStatus(name, " needs the filter_shape attribute");
  const std::vector<int64_t> fs = ctx.getInts("filter_shape");
  DTF_RETURN_IF_ERROR(filterShape(name, fs));
  cpu::Window2D w;
  DTF_RETURN_IF_ERROR(window(ctx, name, x.shape(), fs[0], fs[1], true, &w));
  w.oc = fs[3];
  if (dy.shape() != std::vector<int64_t>{w.n, w.oh, w.ow, w.oc})
    return errorStatus(name,
                       " expects dy of the convolution's output shape, got ",
                       dy.describe());
  Tensor *df;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, DType::F32, fs, &df));
  if (df->numElements() == 0)
    return Status::ok();
  GpuDevice &dev = ctx.device();
  CudaDriver &d = dev.driver();
  void *krsc;
  DTF_RETURN_IF_ERROR(ctx.scratch(0, df->byteSize(), &krsc));
  LowPrecision low;
  DTF_RETURN_IF_ERROR(lowPrecisionOf(ctx, name, &low));
  ConvCall call(d);
  DTF_RETURN_IF_ERROR(setConv(ctx, w, low, call));
  if (low == LowPrecision::kNone) {
    DTF_RETURN_IF_ERROR(
        runConvolution(ctx, ConvDirection::kBackwardFilter, convShape(w, low),
                       operands(call, x.rawData(), krsc, dy.rawData(), low)));
  } else {
    // Mixed precision: low copies of x and dy (scratch 2 and 1), the low
    // KRSC gradient (scratch 3) cast to f32 into scratch 0.
    void *x16, *dy16, *df16;
    DTF_RETURN_IF_ERROR(
        lowCopy(ctx, low, x.rawData(), x.numElements(), 2, &x16));
    DTF_RETURN_IF_ERROR(
        lowCopy(ctx, low, dy.rawData(), dy.numElements(), 1, &dy16));
    DTF_RETURN_IF_ERROR(ctx.scratch(3, df->numElements() * 2, &df16));
    DTF_RETURN_IF_ERROR(runConvolution(ctx, ConvDirection::kBackwardFilter,
                                       convShape(w, low),
                                       operands(call, x16, df16, dy16, low)));
    DTF_RETURN_IF_ERROR(convertOnDevice(ctx, df16, cudnnTypeOf(low), krsc,
                                        CUDNN_DATA_FLOAT, df->numElements()));
  }
  // KRSC [O, R] back to HWIO [R, O].
  return transposeFilter(ctx, static_cast<const float *>(krsc), mptr(df), w.oc,
                         df->numElements() / w.oc);
}

Status poolWindow(GpuKernelContext &ctx, const char *name, const Tensor &x,
                  cpu::Window2D *w) {
  if (x.rank() != 4)
    return errorStatus(name, " expects an input of rank 4, got ", x.describe());
  int64_t kh = 1, kw = 1;
  DTF_RETURN_IF_ERROR(cpu::getPair(ctx, name, "window", 1, &kh, &kw));
  DTF_RETURN_IF_ERROR(window(ctx, name, x.shape(), kh, kw, false, w));
  w->oc = w->c;
  return Status::ok();
}

Status setPool(GpuKernelContext &ctx, const cpu::Window2D &w, bool isMax,
               PoolDesc &p, TensorDesc &x, TensorDesc &y) {
  CudaDriver &d = ctx.device().driver();
  cudnnStatus_t s = d.cudnnSetPooling2dDescriptor(
      p.desc,
      isMax ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
      CUDNN_PROPAGATE_NAN, int(w.kh), int(w.kw), int(w.padTop), int(w.padLeft),
      int(w.sh), int(w.sw));
  if (s == CUDNN_STATUS_SUCCESS)
    s = nhwc(x, w.n, w.ih, w.iw, w.c);
  if (s == CUDNN_STATUS_SUCCESS)
    s = nhwc(y, w.n, w.oh, w.ow, w.c);
  return dnnStatus(ctx, "a cuDNN descriptor", s);
}

Status poolForward(KernelContext &base, const char *name, bool isMax) {
  GpuKernelContext &ctx = gpuCtx(base);
  DTF_RETURN_IF_ERROR(requireF32(ctx));
  const Tensor &x = ctx.input(0);
  cpu::Window2D w;
  DTF_RETURN_IF_ERROR(poolWindow(ctx, name, x, &w));
  Tensor *y;
  DTF_RETURN_IF_ERROR(
      ctx.allocateOutput(0, DType::F32, {w.n, w.oh, w.ow, w.c}, &y));
  if (y->numElements() == 0)
    return Status::ok();
  CudaDriver &d = ctx.device().driver();
  PoolDesc pd(d);
  TensorDesc xd(d), yd(d);
  DTF_RETURN_IF_ERROR(setPool(ctx, w, isMax, pd, xd, yd));
  const float one = 1, zero = 0;
  return dnnStatus(ctx, "cudnnPoolingForward",
                   d.cudnnPoolingForward(ctx.device().dnn(), pd.desc, &one,
                                         xd.desc, x.rawData(), &zero, yd.desc,
                                         y->rawData()));
}

Status poolBackward(KernelContext &base, const char *name, bool isMax) {
  GpuKernelContext &ctx = gpuCtx(base);
  DTF_RETURN_IF_ERROR(requireF32(ctx));
  const Tensor &x = ctx.input(0), &dy = ctx.input(1);
  cpu::Window2D w;
  DTF_RETURN_IF_ERROR(poolWindow(ctx, name, x, &w));
  if (dy.shape() != std::vector<int64_t>{w.n, w.oh, w.ow, w.c})
    return errorStatus(name, " expects dy of the pooling's output shape, got ",
                       dy.describe());
  Tensor *dx;
  DTF_RETURN_IF_ERROR(ctx.allocateOutput(0, DType::F32, x.shape(), &dx));
  if (dx->numElements() == 0)
    return Status::ok();
  CudaDriver &d = ctx.device().driver();
  PoolDesc pd(d);
  TensorDesc xd(d), yd(d);
  DTF_RETURN_IF_ERROR(setPool(ctx, w, isMax, pd, xd, yd));
  // cuDNN finds each window's maximum in the forward result.
  void *y;
  DTF_RETURN_IF_ERROR(ctx.scratch(0, dy.byteSize(), &y));
  const float one = 1, zero = 0;
  DTF_RETURN_IF_ERROR(dnnStatus(
      ctx, "cudnnPoolingForward",
      d.cudnnPoolingForward(ctx.device().dnn(), pd.desc, &one, xd.desc,
                            x.rawData(), &zero, yd.desc, y)));
  return dnnStatus(ctx, "cudnnPoolingBackward",
                   d.cudnnPoolingBackward(ctx.device().dnn(), pd.desc, &one,
                                          yd.desc, y, yd.desc, dy.rawData(),
                                          xd.desc, x.rawData(), &zero, xd.desc,
                                          dx->rawData()));
}

Status maxPoolKernel(KernelContext &c) {
  return poolForward(c, dtf::ops::kMaxPool, true);
}
Status avgPoolKernel(KernelContext &c) {
  return poolForward(c, dtf::ops::kAvgPool, false);
}
Status maxPoolGradKernel(KernelContext &c) {
  // dtf-fuse-library folds relu_grad in only for CPU-placed ops; never drop
  // the relu's mask silently if such an op reaches a GPU.
  if (c.getBool("relu"))
    return errorStatus("dtf.max_pool_grad with relu (relu_grad folded in by "
                       "dtf-fuse-library for the CPU) has no GPU kernel; "
                       "place it on the CPU, or compile with --fusion=off");
  return poolBackward(c, dtf::ops::kMaxPoolGrad, true);
}
Status avgPoolGradKernel(KernelContext &c) {
  return poolBackward(c, dtf::ops::kAvgPoolGrad, false);
}

// dtf.reshape: the same device buffer under the new shape (no copy, no
// stream work), so that a flatten between GPU ops keeps the data on the GPU.
Status reshapeKernel(KernelContext &base) {
  GpuKernelContext &ctx = gpuCtx(base);
  const char *name = dtf::ops::kReshape;
  if (ctx.numInputs() != 1)
    return errorStatus(name, " on a GPU takes its shape as an attribute, not "
                             "as a tensor (place it on the CPU)");
  const Tensor &x = ctx.input(0);
  std::vector<int64_t> shape = ctx.getInts("out_shape");
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != -1)
      known *= shape[i];
    else if (unknown < 0)
      unknown = int(i);
    else
      return errorStatus(name, ": out_shape ", shapeString(shape),
                         " has more than one -1");
  }
  if (unknown >= 0 && known > 0 && x.numElements() % known == 0)
    shape[size_t(unknown)] = x.numElements() / known;
  if (numElementsOf(shape) != x.numElements())
    return errorStatus(name, " cannot reshape ", x.describe(), " to ",
                       shapeString(shape));
  ctx.setOutput(0, x.reshaped(std::move(shape)));
  return Status::ok();
}

// A generated kernel (dtf.fused): its outputs in the iteration shape (the
// inputs broadcast together) or reduced over it, launched over
// ceil(elements / block) blocks (ceil(elements / outputs_per_block) for a
// reduction's block-wide tree)
// with the plan's parameters packed as the module lays them out.
Status fusedKernel(KernelContext &base) {
  auto *ctx = dynamic_cast<GpuFusedContext *>(&base);
  if (!ctx)
    return errorStatus("dtf.fused on a GPU needs the plan's generated kernels");
  const GeneratedKernelInfo &info = ctx->kernels().info(ctx->kernel());
  const int numInputs = int(info.inputDTypes.size());
  if (ctx->numInputs() != numInputs)
    return errorStatus(info.name, " takes ", numInputs, " inputs, got ",
                       ctx->numInputs());
  std::vector<std::vector<int64_t>> inputShapes;
  for (int i = 0; i < numInputs; ++i) {
    if (ctx->input(i).dtype() != info.inputDTypes[size_t(i)])
      return errorStatus(info.name, ": input ", i, " is ",
                         ctx->input(i).describe());
    inputShapes.push_back(ctx->input(i).shape());
  }
  // The iteration shape, the outputs' shapes (reduced ones too) and the i64
  // parameters: the same rule as the CPU kernel's (GeneratedKernels.h).
  FusedLaunch launch;
  DTF_RETURN_IF_ERROR(fusedLaunchOf(info, inputShapes, &launch));
  const int64_t elements = launch.elements;
  std::vector<const void *> operands;
  for (int i = 0; i < numInputs; ++i)
    operands.push_back(ctx->input(i).rawData());
  for (size_t o = 0; o < info.outputDTypes.size(); ++o) {
    Tensor *out;
    DTF_RETURN_IF_ERROR(ctx->allocateOutput(int(o), info.outputDTypes[o],
                                            launch.outputShapes[o], &out));
    operands.push_back(out->rawData());
  }
  ctx->setRowIndexCheck(false, 0);
  if (elements == 0)
    return Status::ok();
  // A row kernel's report of a label outside [0, C): a word of mapped host
  // memory, read at the step's wait (plan-format.md).
  CUdeviceptr errorWord = 0;
  const bool checksLabels = reportsRowIndexErrors(info);
  if (checksLabels)
    DTF_RETURN_IF_ERROR(ctx->rowIndexErrorWord(&errorWord));
  // One output element per thread, or per block of a reduction's tree
  // (outputs_per_block of them, docs/plan-format.md).
  const int64_t block = ctx->code().block, blockY = ctx->code().blockY;
  const int64_t perBlock =
      ctx->code().outputsPerBlock > 0 ? ctx->code().outputsPerBlock : block;
  const int64_t grid = (elements + perBlock - 1) / perBlock;
  if (grid > int64_t(std::numeric_limits<int32_t>::max()))
    return errorStatus(info.name, ": ", elements, " elements need ", grid,
                       " blocks of ", perBlock,
                       ", more than a launch's grid "
                       "holds (2^31 - 1)");
  // A split column tree (a "workspace" parameter): its rows in chunks over
  // grid.y (ColumnChunks.h); the workspace holds the column groups'
  // counters (8 bytes each), then one array of chunks x elements 8-byte
  // partial sums per reduced output (docs/kernels.md).
  int64_t chunks = 1;
  CUdeviceptr workspace = 0;
  if (std::any_of(info.params.begin(), info.params.end(),
                  [](const GeneratedParam &p) {
                    return p.meaning == GeneratedParam::Meaning::kWorkspace;
                  })) {
    chunks = gpuColumnChunkCount(launch.reduced, grid);
    int64_t reducedOutputs = 0;
    for (const GeneratedParam &p : info.params)
      reducedOutputs += p.meaning == GeneratedParam::Meaning::kReduce;
    const size_t counters = size_t(grid) * 8;
    DTF_RETURN_IF_ERROR(ctx->workspace(
        counters + size_t(reducedOutputs * chunks * elements) * 8, counters,
        &workspace));
  }
  std::vector<uint64_t> params;
  size_t scalar = 0;
  for (const GeneratedParam &p : info.params) {
    if (p.kind == GeneratedParam::Kind::kI64) {
      params.push_back(uint64_t(launch.scalars[scalar++]));
    } else if (p.meaning == GeneratedParam::Meaning::kWorkspace) {
      params.push_back(uint64_t(workspace));
    } else if (p.meaning == GeneratedParam::Meaning::kRowIndexError) {
      params.push_back(uint64_t(errorWord));
    } else if (p.meaning == GeneratedParam::Meaning::kDropoutKey) {
      // This step's key, copied up on the stream (in the graph) just
      // before the launch.
      CUdeviceptr key = 0;
      DTF_RETURN_IF_ERROR(ctx->enqueueDropoutKey(&key));
      params.push_back(uint64_t(key));
    } else {
      if (p.operand < 0 || p.operand >= int(operands.size()))
        return errorStatus(info.name, ": a parameter names operand ",
                           p.operand);
      params.push_back(uint64_t(uintptr_t(operands[size_t(p.operand)])));
    }
  }
  CUfunction fn;
  DTF_RETURN_IF_ERROR(ctx->function(&fn));
  size_t bytes = params.size() * sizeof(uint64_t);
  void *extra[] = {reinterpret_cast<void *>(CU_LAUNCH_PARAM_BUFFER_POINTER),
                   params.data(),
                   reinterpret_cast<void *>(CU_LAUNCH_PARAM_BUFFER_SIZE),
                   &bytes, reinterpret_cast<void *>(CU_LAUNCH_PARAM_END)};
  GpuDevice &dev = ctx->device();
  DTF_RETURN_IF_ERROR(dev.check(
      strCat("cuLaunchKernel(", info.name, ")").c_str(),
      dev.driver().cuLaunchKernel(fn, unsigned(grid), unsigned(chunks), 1,
                                  unsigned(block),
                                  unsigned(blockY), 1, 0, dev.computeStream(),
                                  nullptr, extra)));
  ctx->setRowIndexCheck(checksLabels, launch.reduced);
  return Status::ok();
}

} // namespace

std::vector<CudaDriver::Library> librariesOfKernel(std::string_view opName) {
  using L = CudaDriver::Library;
  if (opName == dtf::ops::kMatmul)
    return {L::kCublas};
  for (std::string_view conv :
       {dtf::ops::kConv2d, dtf::ops::kConv2dBackpropInput,
        dtf::ops::kConv2dBackpropFilter})
    if (opName == conv)
      return {L::kCudnn, L::kCublas};
  for (std::string_view pool : {dtf::ops::kMaxPool, dtf::ops::kAvgPool,
                                dtf::ops::kMaxPoolGrad, dtf::ops::kAvgPoolGrad})
    if (opName == pool)
      return {L::kCudnn};
  return {};
}

const KernelRegistry &gpuKernelRegistry() {
  static const KernelRegistry *r = [] {
    auto *reg = new KernelRegistry();
    reg->add(dtf::ops::kMatmul, matmulKernel);
    reg->add(dtf::ops::kConv2d, conv2dKernel);
    reg->add(dtf::ops::kConv2dBackpropInput, conv2dBackpropInputKernel);
    reg->add(dtf::ops::kConv2dBackpropFilter, conv2dBackpropFilterKernel);
    reg->add(dtf::ops::kMaxPool, maxPoolKernel);
    reg->add(dtf::ops::kAvgPool, avgPoolKernel);
    reg->add(dtf::ops::kMaxPoolGrad, maxPoolGradKernel);
    reg->add(dtf::ops::kAvgPoolGrad, avgPoolGradKernel);
    reg->add(dtf::ops::kFused, fusedKernel);
    reg->add(dtf::ops::kReshape, reshapeKernel);
    return reg;
  }();
  return *r;
}

} // namespace dtf::gpu
