// GpuDevice: a GPU's context, streams, library handles and modules, and the
// ops and segments made on it.
#include "runtime/gpu/GpuDevice.h"

#include "runtime/gpu/GpuFusedContext.h"
#include "runtime/gpu/GpuKernels.h"
#include "runtime/gpu/GpuOp.h"
#include "runtime/gpu/GpuSegment.h"

#include <atomic>
#include <cstdio>

namespace dtf::gpu {

using namespace cuda;

Status GpuDevice::check(const char *call, CUresult r) const {
  if (r == CUDA_SUCCESS)
    return Status::ok();
  return errorStatus("GPU ", index_, ": ", driver_.errorText(call, r));
}

Status GpuDevice::create(CudaDriver &driver, int index,
                         std::unique_ptr<GpuDevice> *out,
                         const device::DeviceOptions &options) {
  std::unique_ptr<GpuDevice> d(new GpuDevice(driver, index));
  CUdevice dev = 0;
  DTF_RETURN_IF_ERROR(d->check("cuDeviceGet", driver.cuDeviceGet(&dev, index)));
  int major = 0, minor = 0;
  driver.cuDeviceGetAttribute(
      &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  driver.cuDeviceGetAttribute(
      &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  d->cc_ = major * 10 + minor;
  DTF_RETURN_IF_ERROR(d->check("cuDevicePrimaryCtxRetain",
                               driver.cuDevicePrimaryCtxRetain(&d->ctx_, dev)));
  DTF_RETURN_IF_ERROR(d->makeCurrent());
  DTF_RETURN_IF_ERROR(
      d->check("cuStreamCreate",
               driver.cuStreamCreate(&d->stream_, CU_STREAM_NON_BLOCKING)));
  DTF_RETURN_IF_ERROR(
      d->check("cuStreamCreate",
               driver.cuStreamCreate(&d->copyStream_, CU_STREAM_NON_BLOCKING)));
  // A library that did not load has no handle; placement keeps the ops
  // that need it off this GPU (CudaPlatform::kernelUnusable).
  // Its math mode says it: TF32 tensor ops only where the plan allows them
  // (cuBLAS's default math keeps f32; convolutions set theirs per call).
  d->allowTf32_ = options.allowTf32;
  if (driver.missing(CudaDriver::Library::kCublas).empty() &&
      (driver.cublasCreate_v2(&d->blas_) != CUBLAS_STATUS_SUCCESS ||
       driver.cublasSetStream_v2(d->blas_, d->stream_) !=
           CUBLAS_STATUS_SUCCESS ||
       driver.cublasSetMathMode(d->blas_, options.allowTf32
                                              ? CUBLAS_TF32_TENSOR_OP_MATH
                                              : CUBLAS_DEFAULT_MATH) !=
           CUBLAS_STATUS_SUCCESS))
    return errorStatus("GPU ", index, ": cuBLAS cannot start");
  if (driver.missing(CudaDriver::Library::kCudnn).empty() &&
      (driver.cudnnCreate(&d->dnn_) != CUDNN_STATUS_SUCCESS ||
       driver.cudnnSetStream(d->dnn_, d->stream_) != CUDNN_STATUS_SUCCESS))
    return errorStatus("GPU ", index, ": cuDNN cannot start");
  *out = std::move(d);
  return Status::ok();
}

GpuDevice::~GpuDevice() {
  if (!ctx_)
    return;
  driver_.cuCtxSetCurrent(ctx_);
  if (copyStream_)
    driver_.cuStreamSynchronize(copyStream_);
  if (stream_)
    driver_.cuStreamSynchronize(stream_);
  for (CUevent e : stepEnd_)
    if (e)
      driver_.cuEventDestroy(e);
  for (auto &[code, module] : modules_)
    driver_.cuModuleUnload(module);
  allocator_.freeAll();
  if (dnn_)
    driver_.cudnnDestroy(dnn_);
  if (blas_)
    driver_.cublasDestroy_v2(blas_);
  if (copyStream_)
    driver_.cuStreamDestroy(copyStream_);
  if (stream_)
    driver_.cuStreamDestroy(stream_);
  CUdevice dev = 0;
  if (driver_.cuDeviceGet(&dev, index_) == CUDA_SUCCESS)
    driver_.cuDevicePrimaryCtxRelease(dev);
}

Status GpuDevice::makeCurrent() {
  return check("cuCtxSetCurrent", driver_.cuCtxSetCurrent(ctx_));
}

Status GpuDevice::synchronize() {
  // Segments join the copy stream back into the compute stream; a failed
  // one may not have.
  DTF_RETURN_IF_ERROR(
      check("cuStreamSynchronize", driver_.cuStreamSynchronize(copyStream_)));
  return check("cuStreamSynchronize", driver_.cuStreamSynchronize(stream_));
}

// The step's work all ends on the compute stream: a segment joins its copy
// stream back into it, and copies outside segments go on it.
Status GpuDevice::recordStepEnd(int slot) {
  DTF_RETURN_IF_ERROR(makeCurrent());
  CUevent &e = stepEnd_[slot % 2];
  if (!e)
    DTF_RETURN_IF_ERROR(createEvent(&e));
  return check("cuEventRecord", driver_.cuEventRecord(e, stream_));
}

Status GpuDevice::waitStepEnd(int slot) {
  CUevent e = stepEnd_[slot % 2];
  if (!e)
    return Status::ok();
  DTF_RETURN_IF_ERROR(makeCurrent());
  return check("cuEventSynchronize", driver_.cuEventSynchronize(e));
}

Status GpuDevice::createEvent(CUevent *event) {
  // An event belongs to the context current when it is made: this GPU's,
  // whatever GPU the calling thread used last.
  DTF_RETURN_IF_ERROR(makeCurrent());
  return check("cuEventCreate",
               driver_.cuEventCreate(event, CU_EVENT_DISABLE_TIMING));
}

Status GpuDevice::createTimingEvent(CUevent *event) {
  DTF_RETURN_IF_ERROR(makeCurrent());
  return check("cuEventCreate", driver_.cuEventCreate(event, 0));
}

Status GpuDevice::waitFor(CUevent event) {
  return check("cuStreamWaitEvent",
               driver_.cuStreamWaitEvent(stream_, event, 0));
}

Status GpuDevice::order(CUevent event, CUstream from, CUstream to) {
  DTF_RETURN_IF_ERROR(
      check("cuEventRecord", driver_.cuEventRecord(event, from)));
  return check("cuStreamWaitEvent", driver_.cuStreamWaitEvent(to, event, 0));
}

Status GpuDevice::capture(const std::function<Status()> &enqueue,
                          CUgraphExec *exec) {
  DTF_RETURN_IF_ERROR(check("cuStreamBeginCapture",
                            driver_.cuStreamBeginCapture(
                                stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)));
  capturing_ = true;
  Status s = enqueue();
  capturing_ = false;
  CUgraph graph = nullptr;
  CUresult r = driver_.cuStreamEndCapture(stream_, &graph);
  if (graph && (!s.isOk() || r != CUDA_SUCCESS))
    driver_.cuGraphDestroy(graph);
  DTF_RETURN_IF_ERROR(s);
  DTF_RETURN_IF_ERROR(check("cuStreamEndCapture", r));
  r = driver_.cuGraphInstantiateWithFlags(exec, graph, 0);
  driver_.cuGraphDestroy(graph);
  return check("cuGraphInstantiate", r);
}

Status GpuDevice::loadModule(const GpuModuleCode &code, CUmodule *out) {
  auto it = modules_.find(&code);
  if (it != modules_.end()) {
    *out = it->second;
    return Status::ok();
  }
  // A module belongs to the context current when it is loaded (a real
  // driver's functions launch only there): this GPU's.
  DTF_RETURN_IF_ERROR(makeCurrent());
  const std::string chip = strCat("sm_", cc_);
  auto cubin = code.cubins.find(chip);
  if (cubin == code.cubins.end() && code.ptx.empty())
    return errorStatus("the plan has no cubin for ", chip, " and no PTX");
  // The cubin built for this chip, else the PTX, which the driver compiles
  // for it (NUL-terminated, as cuModuleLoadData wants text).
  const void *image = cubin != code.cubins.end()
                          ? static_cast<const void *>(cubin->second.data())
                          : static_cast<const void *>(code.ptx.c_str());
  CUmodule module = nullptr;
  CUresult r = driver_.cuModuleLoadData(&module, image);
  if (r != CUDA_SUCCESS && cubin != code.cubins.end() && !code.ptx.empty()) {
    // A driver that refuses the cubin (older than the toolkit that built it,
    // a chip revision it does not cover) may still compile the PTX.
    static std::atomic<bool> said{false}; // once per process
    if (!said.exchange(true)) {
      std::fprintf(stderr,
                   "dtf-run: warning: %s: the driver refused the plan's %s "
                   "cubin (%s); compiling its PTX instead (JIT, once per "
                   "module)\n",
                   name().c_str(), chip.c_str(),
                   check("cuModuleLoadData", r).message().c_str());
    }
    r = driver_.cuModuleLoadData(&module, code.ptx.c_str());
    DTF_RETURN_IF_ERROR(check("cuModuleLoadData(PTX, after the cubin)", r));
  } else {
    DTF_RETURN_IF_ERROR(
        check(strCat("cuModuleLoadData(",
                     cubin != code.cubins.end() ? chip + " cubin" : "PTX", ")")
                  .c_str(),
              r));
  }
  modules_[&code] = module;
  *out = module;
  return Status::ok();
}

std::string GpuDevice::name() const { return device::gpuDeviceName(index_); }

Status GpuDevice::createOp(device::DeviceOpSpec spec,
                           std::unique_ptr<device::DeviceOp> *out) {
  std::unique_ptr<GpuKernelContext> ctx;
  if (spec.code)
    ctx = std::make_unique<GpuFusedContext>(*this, spec.kernels, spec.kernel,
                                            *spec.code);
  else
    ctx = std::make_unique<GpuKernelContext>(*this);
  ctx->setOpName(spec.opName);
  ctx->setAttrs(std::move(spec.attrs));
  auto op = std::make_unique<GpuOp>(
      *this, gpuKernelRegistry().lookup(spec.opName), std::move(ctx));
  op->setNumOutputs(spec.numOutputs);
  *out = std::move(op);
  return Status::ok();
}

std::unique_ptr<device::Graph> GpuDevice::createGraph() {
  return std::make_unique<GpuSegment>(*this);
}

} // namespace dtf::gpu
