// GpuFusedContext: a dtf.fused op's kernel, label report and dropout key
// on a GPU.
#include "runtime/gpu/GpuFusedContext.h"

namespace dtf::gpu {

using namespace cuda;

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

Status GpuFusedContext::workspace(size_t bytes, size_t counterBytes,
                                  CUdeviceptr *out) {
  void *p = nullptr;
  DTF_RETURN_IF_ERROR(scratch(0, bytes, &p));
  *out = CUdeviceptr(uintptr_t(p));
  if (*out != zeroedWorkspace_ || counterBytes > zeroedCounterBytes_) {
    GpuDevice &dev = device();
    DTF_RETURN_IF_ERROR(dev.check(
        "cuMemsetD8Async", dev.driver().cuMemsetD8Async(
                               *out, 0, counterBytes, dev.computeStream())));
    zeroedWorkspace_ = *out;
    zeroedCounterBytes_ = counterBytes;
  }
  return Status::ok();
}

GpuFusedContext::~GpuFusedContext() {
  for (int64_t *word : errorWord_)
    if (word)
      device().driver().cuMemFreeHost(word);
  if (dropoutKeyDevice_.ptr)
    device().release(dropoutKeyDevice_);
  device().memory().freePinned(dropoutKeyPinned_);
}

Status GpuFusedContext::stageDropoutKey(GraphSignature *sig) {
  const GeneratedKernelInfo &info = kernels_->info(kernel_);
  if (!isDropoutKernel(info))
    return Status::ok();
  if (numInputs() < 1 || !input(0).defined())
    return Status::ok(); // bound later, before its launch (GpuSegment)
  constexpr size_t kBytes = 2 * sizeof(int64_t);
  // Every slot's word at once (a capture of either slot finds it).
  for (int slot = 0; slot < device().stagingSlots(); ++slot)
    DTF_RETURN_IF_ERROR(
        device().memory().reservePinned(dropoutKeyPinned_, slot, kBytes));
  DTF_RETURN_IF_ERROR(device().reserve(dropoutKeyDevice_, kBytes));
  // The last copy out of this slot's word was the step before last's,
  // which has ended (with one slot, every step ends synchronized).
  dropoutKeyWord(
      info, step(), seed(), input(0).shape(), batchOffset(), batchRows(),
      static_cast<int64_t *>(dropoutKeyPinned_.slot[device().stagingSlot()]));
  sig->pointers.push_back(dropoutKeyPinned_.slot[0]);
  sig->pointers.push_back(
      reinterpret_cast<const void *>(uintptr_t(dropoutKeyDevice_.ptr)));
  return Status::ok();
}

Status GpuFusedContext::enqueueDropoutKey(CUdeviceptr *device) {
  void *pinned = dropoutKeyPinned_.slot[this->device().stagingSlot()];
  if (!pinned || !dropoutKeyDevice_.ptr)
    return errorStatus(kernels_->info(kernel_).name,
                       ": its dropout-key word was not staged before the "
                       "launch");
  DTF_RETURN_IF_ERROR(this->device().check(
      "cuMemcpyHtoDAsync (a dropout kernel's key)",
      this->device().driver().cuMemcpyHtoDAsync(
          dropoutKeyDevice_.ptr, pinned, 2 * sizeof(int64_t),
          this->device().computeStream())));
  *device = dropoutKeyDevice_.ptr;
  return Status::ok();
}

Status GpuFusedContext::rowIndexErrorWord(CUdeviceptr *out) {
  CudaDriver &d = device().driver();
  const int current = device().stagingSlot();
  for (int slot = 0; slot < device().stagingSlots() || slot <= current;
       ++slot) {
    if (errorWord_[slot])
      continue;
    void *p = nullptr;
    DTF_RETURN_IF_ERROR(
        device().check("cuMemHostAlloc (a row kernel's label report)",
                       d.cuMemHostAlloc(&p, 2 * sizeof(int64_t),
                                        CU_MEMHOSTALLOC_PORTABLE |
                                            CU_MEMHOSTALLOC_DEVICEMAP)));
    errorWord_[slot] = static_cast<int64_t *>(p);
    errorWord_[slot][0] = errorWord_[slot][1] = 0;
    DTF_RETURN_IF_ERROR(device().check(
        "cuMemHostGetDevicePointer (a row kernel's label report)",
        d.cuMemHostGetDevicePointer(&errorWordDevice_[slot], p, 0)));
  }
  *out = errorWordDevice_[current];
  return Status::ok();
}

Status GpuFusedContext::rowIndexError(int slot) {
  if (!checksRowIndices_ || !errorWord_[slot])
    return Status::ok();
  // The kernel wrote through the mapping before the step's end.
  volatile int64_t *word = errorWord_[slot];
  const int64_t seen[2] = {word[0], word[1]};
  if (seen[0] == 0)
    return Status::ok();
  word[0] = word[1] = 0;
  return rowIndexErrorOf(kernels_->info(kernel_), seen, classes_);
}

} // namespace dtf::gpu
