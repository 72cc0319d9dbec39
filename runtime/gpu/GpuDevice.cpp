// The process's CUDA driver, GpuDevice, GpuKernelContext and GpuOp.
#include "runtime/gpu/GpuDevice.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace dtf::gpu {

using namespace cuda;

namespace {

struct ProcessGpus {
  std::mutex mutex;
  CudaLibraries libs;
  bool loaded = false;
  std::unique_ptr<CudaDriver> driver;
  std::string whyNot;
};

ProcessGpus &processGpus() {
  static ProcessGpus *p = [] {
    auto *gpus = new ProcessGpus();
    if (const char *lib = std::getenv("DTF_CUDA_DRIVER"))
      gpus->libs.driver = lib;
    return gpus;
  }();
  return *p;
}

} // namespace

void configureProcessGpus(const CudaLibraries &libs) {
  ProcessGpus &p = processGpus();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.libs = libs;
  if (const char *lib = std::getenv("DTF_CUDA_DRIVER");
      lib && !libs.emulatedGpus)
    p.libs.driver = lib;
  p.loaded = false;
  p.driver.reset();
}

CudaDriver *processDriver(std::string *whyNot) {
  ProcessGpus &p = processGpus();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (!p.loaded) {
    p.loaded = true;
    Status s = CudaDriver::load(p.libs, &p.driver);
    if (s.isOk())
      s = p.driver->loadLibraries();
    if (!s.isOk()) {
      p.driver.reset();
      p.whyNot = s.message();
    }
  }
  if (!p.driver && whyNot)
    *whyNot = p.whyNot;
  return p.driver.get();
}

std::string processEmulationStats() {
  ProcessGpus &p = processGpus();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.driver ? p.driver->emulationStats() : std::string();
}

std::string gpuDeviceName(int index) {
  return strCat("/job:localhost/replica:0/task:0/device:GPU:", index);
}

// --- GpuDevice ---------------------------------------------------------------

Status GpuDevice::check(const char *call, CUresult r) const {
  if (r == CUDA_SUCCESS)
    return Status::ok();
  return errorStatus("GPU ", index_, ": ", driver_.errorText(call, r));
}

Status GpuDevice::create(CudaDriver &driver, int index,
                         std::unique_ptr<GpuDevice> *out) {
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
  if (driver.cublasCreate_v2(&d->blas_) != CUBLAS_STATUS_SUCCESS ||
      driver.cublasSetStream_v2(d->blas_, d->stream_) != CUBLAS_STATUS_SUCCESS)
    return errorStatus("GPU ", index, ": cuBLAS cannot start");
  if (driver.cudnnCreate(&d->dnn_) != CUDNN_STATUS_SUCCESS ||
      driver.cudnnSetStream(d->dnn_, d->stream_) != CUDNN_STATUS_SUCCESS)
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
  release(workspace_);
  for (DeviceBuffer *b : buffers_)
    if (!b->inArena && b->ptr)
      driver_.cuMemFree(b->ptr);
  for (auto &[code, module] : modules_)
    driver_.cuModuleUnload(module);
  if (arena_)
    driver_.cuMemFree(arena_);
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

Status GpuDevice::createEvent(CUevent *event) {
  return check("cuEventCreate",
               driver_.cuEventCreate(event, CU_EVENT_DISABLE_TIMING));
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

Status GpuDevice::reserve(DeviceBuffer &b, size_t bytes) {
  if (bytes <= b.capacity)
    return Status::ok();
  // The old buffer may still be in use by queued work.
  if (b.ptr) {
    DTF_RETURN_IF_ERROR(synchronize());
    release(b);
  }
  // Rounded up, so that batches of nearby sizes share a buffer.
  const size_t rounded = (bytes + 255) / 256 * 256;
  DTF_RETURN_IF_ERROR(check("cuMemAlloc", driver_.cuMemAlloc(&b.ptr, rounded)));
  b.capacity = rounded;
  b.inArena = false;
  buffers_.insert(&b);
  allocatedOutsideArena_ = true;
  return Status::ok();
}

void GpuDevice::release(DeviceBuffer &b) {
  if (b.ptr && !b.inArena)
    driver_.cuMemFree(b.ptr);
  buffers_.erase(&b);
  b = DeviceBuffer();
}

Status GpuDevice::planArena() {
  if (!allocatedOutsideArena_)
    return Status::ok();
  DTF_RETURN_IF_ERROR(synchronize());
  size_t total = 0;
  for (DeviceBuffer *b : buffers_)
    total += b->capacity; // multiples of 256 bytes
  CUdeviceptr arena = 0;
  if (total > 0)
    DTF_RETURN_IF_ERROR(check("cuMemAlloc", driver_.cuMemAlloc(&arena, total)));
  size_t offset = 0;
  for (DeviceBuffer *b : buffers_) {
    if (!b->inArena)
      driver_.cuMemFree(b->ptr);
    b->ptr = arena + offset;
    b->inArena = true;
    offset += b->capacity;
  }
  if (arena_)
    driver_.cuMemFree(arena_);
  arena_ = arena;
  allocatedOutsideArena_ = false;
  ++arenasPlanned_;
  return Status::ok();
}

bool cudaGraphsEnabled() {
  const char *graphs = std::getenv("DTF_CUDA_GRAPHS");
  return !(graphs && std::string(graphs) == "0");
}

void GpuDevice::releaseStaged(DeviceBuffer &b, void *pinned) {
  release(b);
  if (pinned)
    driver_.cuMemFreeHost(pinned);
}

Status GpuDevice::capture(const std::function<Status()> &enqueue,
                          CUgraphExec *exec) {
  DTF_RETURN_IF_ERROR(
      check("cuStreamBeginCapture",
            driver_.cuStreamBeginCapture(stream_,
                                         CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)));
  Status s = enqueue();
  CUgraph graph = nullptr;
  CUresult r = driver_.cuStreamEndCapture(stream_, &graph);
  DTF_RETURN_IF_ERROR(s);
  DTF_RETURN_IF_ERROR(check("cuStreamEndCapture", r));
  r = driver_.cuGraphInstantiateWithFlags(exec, graph, 0);
  driver_.cuGraphDestroy(graph);
  return check("cuGraphInstantiate", r);
}

Status GpuDevice::reservePinned(void **p, size_t *capacity, size_t bytes) {
  if (bytes <= *capacity && *p)
    return Status::ok();
  if (*p) {
    DTF_RETURN_IF_ERROR(synchronize());
    driver_.cuMemFreeHost(*p);
    *p = nullptr;
  }
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  DTF_RETURN_IF_ERROR(
      check("cuMemHostAlloc",
            driver_.cuMemHostAlloc(p, rounded, CU_MEMHOSTALLOC_PORTABLE)));
  *capacity = rounded;
  return Status::ok();
}

Status GpuDevice::workspace(size_t bytes, void **p) {
  DTF_RETURN_IF_ERROR(reserve(workspace_, std::max<size_t>(bytes, 256)));
  *p = reinterpret_cast<void *>(uintptr_t(workspace_.ptr));
  return Status::ok();
}

// --- GpuKernelContext ------------------------------------------------------

GpuKernelContext::~GpuKernelContext() {
  for (DeviceBuffer &b : outputBuffers_)
    device_.release(b);
  for (DeviceBuffer &b : scratch_)
    device_.release(b);
}

Status GpuKernelContext::allocateOutput(int i, DType dtype,
                                        std::vector<int64_t> shape,
                                        Tensor **out) {
  if (i >= numOutputs())
    setNumOutputs(i + 1);
  // Registered with the device by address: sized once.
  if (outputBuffers_.size() < size_t(numOutputs())) {
    for (DeviceBuffer &b : outputBuffers_)
      device_.release(b);
    outputBuffers_.assign(size_t(numOutputs()) + 4, DeviceBuffer());
  }
  const size_t bytes = size_t(numElementsOf(shape)) * dtypeSize(dtype);
  DeviceBuffer &b = outputBuffers_[size_t(i)];
  DTF_RETURN_IF_ERROR(device_.reserve(b, std::max<size_t>(bytes, 1)));
  output(i) = Tensor::view(dtype, std::move(shape),
                           reinterpret_cast<void *>(uintptr_t(b.ptr)));
  *out = &output(i);
  return Status::ok();
}

Status GpuKernelContext::scratch(int k, size_t bytes, void **p) {
  if (scratch_.size() <= size_t(k)) {
    for (DeviceBuffer &b : scratch_)
      device_.release(b);
    scratch_.assign(size_t(k) + 4, DeviceBuffer());
  }
  DTF_RETURN_IF_ERROR(
      device_.reserve(scratch_[size_t(k)], std::max<size_t>(bytes, 1)));
  *p = reinterpret_cast<void *>(uintptr_t(scratch_[size_t(k)].ptr));
  return Status::ok();
}

// --- GpuFusedContext ---------------------------------------------------------

Status GpuDevice::loadModule(const GpuModuleCode &code, CUmodule *out) {
  auto it = modules_.find(&code);
  if (it != modules_.end()) {
    *out = it->second;
    return Status::ok();
  }
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
  DTF_RETURN_IF_ERROR(
      check(strCat("cuModuleLoadData(",
                   cubin != code.cubins.end() ? chip + " cubin" : "PTX", ")")
                .c_str(),
            driver_.cuModuleLoadData(&module, image)));
  modules_[&code] = module;
  *out = module;
  return Status::ok();
}

Status GpuFusedContext::function(CUfunction *fn) {
  if (!function_) {
    CudaDriver &d = device().driver();
    CUmodule module = nullptr;
    DTF_RETURN_IF_ERROR(device().loadModule(*code_.module, &module));
    DTF_RETURN_IF_ERROR(device().check(
        strCat("cuModuleGetFunction(", code_.name, ")").c_str(),
        d.cuModuleGetFunction(&function_, module, code_.name.c_str())));
    if (d.emulated() && d.emuRegisterKernel) {
      // The emulation runs the kernel's CPU code from the same plan.
      const GeneratedKernelInfo &info = kernels_->info(kernel_);
      std::string kinds;
      int range = -1;
      for (const GeneratedParam &p : info.params) {
        if (p.kind == GeneratedParam::Kind::kI64 &&
            p.meaning == GeneratedParam::Meaning::kElements)
          range = int(kinds.size());
        kinds += p.kind == GeneratedParam::Kind::kBuffer ? 'b' : 'i';
      }
      d.emuRegisterKernel(code_.name.c_str(), kernels_->function(kernel_),
                          kinds.c_str(), range);
    }
  }
  *fn = function_;
  return Status::ok();
}

GpuFusedContext::~GpuFusedContext() {
  if (errorWord_)
    device().driver().cuMemFreeHost(errorWord_);
  if (dropoutKeyPinned_ || dropoutKeyDevice_.ptr)
    device().releaseStaged(dropoutKeyDevice_, dropoutKeyPinned_);
}

Status GpuFusedContext::stageDropoutKey(GraphSignature *sig) {
  const GeneratedKernelInfo &info = kernels_->info(kernel_);
  if (!isDropoutKernel(info))
    return Status::ok();
  if (numInputs() < 1 || !input(0).defined())
    return Status::ok(); // bound later, before its launch (GpuSegment)
  constexpr size_t kBytes = 2 * sizeof(int64_t);
  void *pinned = dropoutKeyPinned_;
  DTF_RETURN_IF_ERROR(
      device().reservePinned(&pinned, &dropoutKeyCapacity_, kBytes));
  dropoutKeyPinned_ = static_cast<int64_t *>(pinned);
  DTF_RETURN_IF_ERROR(device().reserve(dropoutKeyDevice_, kBytes));
  // The previous step's copy out of the pinned word finished at that step's
  // end (the executor synchronizes every device).
  dropoutKeyWord(info, step(), seed(), input(0).shape(), batchOffset(),
                 batchRows(), dropoutKeyPinned_);
  sig->pointers.push_back(dropoutKeyPinned_);
  sig->pointers.push_back(
      reinterpret_cast<const void *>(uintptr_t(dropoutKeyDevice_.ptr)));
  return Status::ok();
}

Status GpuFusedContext::enqueueDropoutKey(CUdeviceptr *device) {
  if (!dropoutKeyPinned_ || !dropoutKeyDevice_.ptr)
    return errorStatus(kernels_->info(kernel_).name,
                       ": its dropout-key word was not staged before the "
                       "launch");
  DTF_RETURN_IF_ERROR(
      this->device().check("cuMemcpyHtoDAsync (a dropout kernel's key)",
                           this->device().driver().cuMemcpyHtoDAsync(
                               dropoutKeyDevice_.ptr, dropoutKeyPinned_,
                               2 * sizeof(int64_t), this->device().stream())));
  *device = dropoutKeyDevice_.ptr;
  return Status::ok();
}

Status GpuFusedContext::rowIndexErrorWord(CUdeviceptr *out) {
  if (!errorWord_) {
    CudaDriver &d = device().driver();
    void *p = nullptr;
    DTF_RETURN_IF_ERROR(
        device().check("cuMemHostAlloc (a row kernel's label report)",
                       d.cuMemHostAlloc(&p, 2 * sizeof(int64_t),
                                        CU_MEMHOSTALLOC_PORTABLE |
                                            CU_MEMHOSTALLOC_DEVICEMAP)));
    errorWord_ = static_cast<int64_t *>(p);
    errorWord_[0] = errorWord_[1] = 0;
    DTF_RETURN_IF_ERROR(device().check(
        "cuMemHostGetDevicePointer (a row kernel's label report)",
        d.cuMemHostGetDevicePointer(&errorWordDevice_, p, 0)));
  }
  *out = errorWordDevice_;
  return Status::ok();
}

Status GpuFusedContext::rowIndexError() {
  if (!checksRowIndices_ || !errorWord_)
    return Status::ok();
  // The kernel wrote through the mapping before the stream's end.
  volatile int64_t *word = errorWord_;
  const int64_t seen[2] = {word[0], word[1]};
  if (seen[0] == 0)
    return Status::ok();
  word[0] = word[1] = 0;
  return rowIndexErrorOf(kernels_->info(kernel_), seen, classes_);
}

// --- GpuOp -----------------------------------------------------------------

GpuOp::GpuOp(GpuDevice &device, KernelFn fn,
             std::unique_ptr<GpuKernelContext> ctx)
    : device_(device), fn_(fn), ctx_(std::move(ctx)), graph_(device) {}

GpuOp::~GpuOp() {
  (void)device_.makeCurrent();
  (void)device_.synchronize();
  for (Input &in : inputs_)
    device_.releaseStaged(in.buffer, in.pinned);
  for (void *p : pinnedOut_)
    if (p)
      device_.driver().cuMemFreeHost(p);
}

void GpuOp::addHostInput(const Tensor *host) {
  Input in;
  in.host = host;
  inputs_.push_back(in);
}

void GpuOp::addDeviceInput(const Tensor *device) {
  Input in;
  in.device = device;
  inputs_.push_back(in);
}

void GpuOp::setNumOutputs(int n) {
  hostOutputs_.resize(size_t(n));
  download_.assign(size_t(n), false);
  pinnedOut_.assign(size_t(n), nullptr);
  pinnedOutCapacity_.assign(size_t(n), 0);
  ctx_->setNumOutputs(n);
}

void GpuOp::setDownload(int k) { download_[size_t(k)] = true; }

void GraphReplay::drop() {
  if (exec_)
    device_.driver().cuGraphExecDestroy(exec_);
  exec_ = nullptr;
}

Status GraphReplay::run(const GraphSignature &sig,
                        const std::function<Status()> &enqueue) {
  replayed_ = exec_ && sig == captured_;
  if (replayed_) {
    ++launches_;
    return device_.check(
        "cuGraphLaunch",
        device_.driver().cuGraphLaunch(exec_, device_.stream()));
  }
  drop();
  if (!enabled_ || !haveLast_ || !(sig == last_))
    return enqueue();
  // The step before ran eagerly with these shapes and buffers and made
  // every buffer: capture once, replay from now on.
  DTF_RETURN_IF_ERROR(device_.capture(enqueue, &exec_));
  captured_ = sig;
  ++launches_;
  return device_.check("cuGraphLaunch",
                       device_.driver().cuGraphLaunch(exec_, device_.stream()));
}

// The op's work on the stream: copies up, the kernel's library calls,
// copies down (into pinned buffers).
Status GpuOp::enqueue() {
  DTF_RETURN_IF_ERROR(enqueueKernel());
  return enqueueDownloads(device_.stream());
}

bool GpuOp::reads(const Tensor *view) const {
  for (const Input &in : inputs_)
    if (in.device == view)
      return true;
  return false;
}

Status GpuOp::enqueueKernel() {
  CudaDriver &d = device_.driver();
  for (Input &in : inputs_)
    if (in.host && in.host->byteSize() > 0)
      DTF_RETURN_IF_ERROR(device_.check(
          "cuMemcpyHtoDAsync",
          d.cuMemcpyHtoDAsync(in.buffer.ptr, in.pinned, in.host->byteSize(),
                              device_.stream())));
  return callKernel(fn_, *ctx_);
}

Status GpuOp::enqueueDownloads(CUstream stream) {
  CudaDriver &d = device_.driver();
  for (size_t k = 0; k < download_.size(); ++k) {
    if (!download_[k])
      continue;
    const Tensor &o = ctx_->output(int(k));
    if (!o.defined())
      return errorStatus(ctx_->opName(), ": the GPU kernel left result ", k,
                         " undefined");
    DTF_RETURN_IF_ERROR(device_.reservePinned(
        &pinnedOut_[k], &pinnedOutCapacity_[k], o.byteSize()));
    if (o.byteSize() > 0)
      DTF_RETURN_IF_ERROR(
          device_.check("cuMemcpyDtoHAsync",
                        d.cuMemcpyDtoHAsync(pinnedOut_[k],
                                            CUdeviceptr(uintptr_t(o.rawData())),
                                            o.byteSize(), stream)));
  }
  return Status::ok();
}

Status GpuOp::stage(uint64_t step, uint64_t seed, Signature *sig) {
  ctx_->setStep(step, seed);
  views_.resize(inputs_.size());
  sig->shapes.reserve(sig->shapes.size() + inputs_.size());
  sig->pointers.reserve(sig->pointers.size() + inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    Input &in = inputs_[i];
    if (in.host) {
      const Tensor &h = *in.host;
      if (!h.defined())
        return errorStatus(ctx_->opName(), ": input ", i, " has no value");
      const size_t bytes = h.byteSize();
      DTF_RETURN_IF_ERROR(
          device_.reserve(in.buffer, std::max<size_t>(bytes, 1)));
      DTF_RETURN_IF_ERROR(
          device_.reservePinned(&in.pinned, &in.pinnedCapacity, bytes));
      // The pinned buffer is this input's alone, and the previous step's
      // copy out of it finished at that step's end.
      std::memcpy(in.pinned, h.rawData(), bytes);
      views_[i] =
          Tensor::view(h.dtype(), h.shape(),
                       reinterpret_cast<void *>(uintptr_t(in.buffer.ptr)));
      sig->pointers.push_back(in.pinned);
    } else {
      views_[i] = *in.device;
    }
    sig->shapes.push_back(views_[i].shape());
    sig->pointers.push_back(views_[i].rawData());
  }
  if (ctx_->numInputs() != int(views_.size())) {
    std::vector<Tensor *> ptrs;
    for (Tensor &t : views_)
      ptrs.push_back(&t);
    ctx_->setInputs(std::move(ptrs));
  }
  // A dropout kernel's key changes every step, replays too.
  if (auto *fused = dynamic_cast<GpuFusedContext *>(ctx_.get()))
    DTF_RETURN_IF_ERROR(fused->stageDropoutKey(sig));
  return Status::ok();
}

bool GpuOp::downloads() const {
  for (bool b : download_)
    if (b)
      return true;
  return false;
}

Status GpuOp::finishDownloads() {
  for (size_t k = 0; k < download_.size(); ++k) {
    if (!download_[k])
      continue;
    const Tensor &o = ctx_->output(int(k));
    Tensor &h = hostOutputs_[k];
    if (h.canHold(o.dtype(), o.shape()) && h.bufferUseCount() == 1)
      h.retype(o.dtype(), o.shape());
    else
      h = Tensor::allocate(o.dtype(), o.shape());
    if (!h.defined())
      return errorStatus("out of host memory for ", o.describe());
    std::memcpy(h.rawData(), pinnedOut_[k], o.byteSize());
  }
  return Status::ok();
}

Status GpuOp::run(uint64_t step, uint64_t seed) {
  DTF_RETURN_IF_ERROR(device_.makeCurrent());
  Signature sig;
  DTF_RETURN_IF_ERROR(stage(step, seed, &sig));
  DTF_RETURN_IF_ERROR(graph_.run(sig, [&] { return enqueue(); }));
  graph_.ran(std::move(sig));

  if (!downloads() && !reports())
    return Status::ok();
  DTF_RETURN_IF_ERROR(device_.synchronize());
  DTF_RETURN_IF_ERROR(finishReports());
  return finishDownloads();
}

bool GpuOp::reports() const {
  auto *fused = dynamic_cast<const GpuFusedContext *>(ctx_.get());
  return fused && fused->checksRowIndices();
}

Status GpuOp::finishReports() {
  auto *fused = dynamic_cast<GpuFusedContext *>(ctx_.get());
  return fused ? fused->rowIndexError() : Status::ok();
}

} // namespace dtf::gpu
