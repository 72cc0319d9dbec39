// GpuFusedContext: the context of a dtf.fused op on a GPU: the plan's
// kernel, loaded once per device, its label report and its dropout key.
#pragma once

#include "runtime/gpu/GpuKernelContext.h"
#include "runtime/gpu/GraphReplay.h"
#include "runtime/kernels/GeneratedKernels.h"

#include <memory>

namespace dtf::gpu {

/// The context of a dtf.fused op on a GPU: the plan's loaded kernels (for
/// the parameters, and the CPU twin that the emulation runs), which one it
/// runs, its GPU code, and the module loaded from that code.
class GpuFusedContext : public GpuKernelContext {
public:
  GpuFusedContext(GpuDevice &device,
                  std::shared_ptr<const GeneratedKernels> kernels, int kernel,
                  const GpuKernelCode &code)
      : GpuKernelContext(device), kernels_(std::move(kernels)), kernel_(kernel),
        code_(code) {}
  ~GpuFusedContext() override;
  const GeneratedKernels &kernels() const { return *kernels_; }
  int kernel() const { return kernel_; }
  const GpuKernelCode &code() const { return code_; }
  /// The kernel in the plan's module on this device (loaded once per
  /// device, GpuDevice::loadModule).
  Status function(cuda::CUfunction *fn);

  /// A row kernel's "row-index-error" word (GeneratedKernels.h): pinned
  /// host memory mapped into the device's address space (`*device`, its
  /// device pointer), which the kernel writes only for a bad label: nothing
  /// is copied or cleared on the stream, so the op's CUDA graph holds the
  /// launch alone. One per staging slot (this step's is given), all made by
  /// the first (eager) call; a capture finds them.
  Status rowIndexErrorWord(cuda::CUdeviceptr *device);
  /// Whether the work last enqueued (and so every replay of its graph)
  /// reports in the word, and the class count C it checks against.
  void setRowIndexCheck(bool on, int64_t classes) {
    checksRowIndices_ = on;
    classes_ = classes;
  }
  bool checksRowIndices() const { return checksRowIndices_; }
  /// After the step staged in slot `slot` has ended: the bad label its
  /// launches reported (checkRowIndices' message), or ok; clears the word
  /// for the slot's next step (which is not queued yet).
  Status rowIndexError(int slot = 0);

  /// A dropout kernel's "dropout-key" word (GeneratedKernels.h): GpuOp's
  /// stage() calls this every step, replays too: it writes this step's key
  /// and first element (dropoutKeyWord, from the step, seed and batch
  /// offset set on this context, and input 0's shape) into a pinned buffer
  /// and appends that buffer and its device copy to `sig`. No-op for other
  /// kernels. The buffers are made at the first (eager) call.
  Status stageDropoutKey(GraphSignature *sig);
  /// Puts the copy of the staged word into its device buffer on the stream
  /// (inside a captured graph, so every replay copies that step's word) and
  /// gives the device buffer, which the launch passes.
  Status enqueueDropoutKey(cuda::CUdeviceptr *device);
  /// A split column tree's workspace of at least `bytes`, whose first
  /// `counterBytes` (the column groups' counters) are zero when the kernel
  /// starts: zeroed on the stream when the buffer is new or its counters
  /// grew; each launch's last blocks set them back to 0 themselves.
  Status workspace(size_t bytes, size_t counterBytes,
                   cuda::CUdeviceptr *out);

private:
  std::shared_ptr<const GeneratedKernels> kernels_;
  int kernel_;
  GpuKernelCode code_;
  cuda::CUfunction function_ = nullptr;
  // Per staging slot: mapped pinned memory (row + 1, label) and its device
  // pointer.
  int64_t *errorWord_[2] = {nullptr, nullptr};
  cuda::CUdeviceptr errorWordDevice_[2] = {0, 0};
  bool checksRowIndices_ = false;
  int64_t classes_ = 0;
  PinnedSlots dropoutKeyPinned_; // key, first element; one per slot
  DeviceBuffer dropoutKeyDevice_;
  cuda::CUdeviceptr zeroedWorkspace_ = 0; // the workspace whose counters
  size_t zeroedCounterBytes_ = 0;         // are known zero, and how many
};

} // namespace dtf::gpu
