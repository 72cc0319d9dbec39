// GpuOp: one op on a GPU: copies up, kernel, copies down.
#include "runtime/gpu/GpuOp.h"
#include "runtime/gpu/GpuFusedContext.h"

#include <cstring>

namespace dtf::gpu {

using namespace cuda;

GpuOp::GpuOp(GpuDevice &device, KernelFn fn,
             std::unique_ptr<GpuKernelContext> ctx)
    : device_(device), fn_(fn), ctx_(std::move(ctx)), graph_(device) {}

GpuOp::~GpuOp() {
  (void)device_.makeCurrent();
  (void)device_.synchronize();
  for (Input &in : inputs_)
    device_.releaseStaged(in.buffer, in.pinned);
  for (PinnedSlots &p : pinnedOut_)
    device_.memory().freePinned(p);
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
  pinnedOut_.assign(size_t(n), PinnedSlots());
  for (std::vector<Tensor> &d : downloaded_)
    d.assign(size_t(n), Tensor());
  ctx_->setNumOutputs(n);
}

void GpuOp::setDownload(int k) { download_[size_t(k)] = true; }

// The op's work on the stream: copies up, the kernel's library calls,
// copies down (into pinned buffers).
Status GpuOp::enqueue() {
  DTF_RETURN_IF_ERROR(enqueueKernel());
  return enqueueDownloads(device_.computeStream());
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
                              device_.computeStream())));
  return callKernel(fn_, *ctx_);
}

Status GpuOp::enqueueDownloads(CUstream stream) {
  CudaDriver &d = device_.driver();
  const int slot = device_.stagingSlot();
  for (size_t k = 0; k < download_.size(); ++k) {
    if (!download_[k])
      continue;
    const Tensor &o = ctx_->output(int(k));
    if (!o.defined())
      return errorStatus(ctx_->opName(), ": the GPU kernel left result ", k,
                         " undefined");
    DTF_RETURN_IF_ERROR(
        device_.memory().reservePinned(pinnedOut_[k], slot, o.byteSize()));
    noteDownload(slot, k);
    if (o.byteSize() > 0)
      DTF_RETURN_IF_ERROR(
          device_.check("cuMemcpyDtoHAsync",
                        d.cuMemcpyDtoHAsync(pinnedOut_[k].slot[slot],
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
  // This slot's buffers for the copies down, as large as the last step's
  // results: a capture (which must not allocate) finds them, even when the
  // step before staged into the other slot. An eager step grows them.
  const int slot = device_.stagingSlot();
  for (size_t k = 0; k < download_.size(); ++k)
    if (download_[k] && ctx_->output(int(k)).defined()) {
      DTF_RETURN_IF_ERROR(device_.memory().reservePinned(
          pinnedOut_[k], slot, ctx_->output(int(k)).byteSize()));
      noteDownload(slot, k); // a replay keeps the shapes it was staged with
    }
  return Status::ok();
}

void GpuOp::noteDownload(int slot, size_t k) {
  const Tensor &o = ctx_->output(int(k));
  Tensor &v = downloaded_[slot][k];
  if (v.dtype() != o.dtype() || v.shape() != o.shape() ||
      v.rawData() != pinnedOut_[k].slot[slot])
    v = Tensor::view(o.dtype(), o.shape(), pinnedOut_[k].slot[slot]);
}

bool GpuOp::downloads() const {
  for (bool b : download_)
    if (b)
      return true;
  return false;
}

Status GpuOp::finishDownloads(int slot) {
  for (size_t k = 0; k < download_.size(); ++k) {
    if (!download_[k])
      continue;
    const Tensor &o = downloaded_[slot][k];
    if (!o.defined())
      return errorStatus(ctx_->opName(), ": result ", k,
                         " was not copied down");
    Tensor &h = hostOutputs_[k];
    if (h.canHold(o.dtype(), o.shape()) && h.bufferUseCount() == 1)
      h.retype(o.dtype(), o.shape());
    else
      h = Tensor::allocate(o.dtype(), o.shape());
    if (!h.defined())
      return errorStatus("out of host memory for ", o.describe());
    std::memcpy(h.rawData(), o.rawData(), o.byteSize());
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
  DTF_RETURN_IF_ERROR(finishReports(device_.stagingSlot()));
  return finishDownloads(device_.stagingSlot());
}

bool GpuOp::uploadsStepKey() const {
  auto *fused = dynamic_cast<const GpuFusedContext *>(ctx_.get());
  return fused && isDropoutKernel(fused->kernels().info(fused->kernel()));
}

bool GpuOp::reports() const {
  auto *fused = dynamic_cast<const GpuFusedContext *>(ctx_.get());
  return fused && fused->checksRowIndices();
}

Status GpuOp::finishReports(int slot) {
  auto *fused = dynamic_cast<GpuFusedContext *>(ctx_.get());
  return fused ? fused->rowIndexError(slot) : Status::ok();
}

} // namespace dtf::gpu
