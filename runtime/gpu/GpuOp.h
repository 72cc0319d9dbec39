// GpuOp: one op of a program on a GPU (copies up, kernel, copies down;
// a CUDA graph after the first steps); the CUDA device::DeviceOp.
#pragma once

#include "runtime/device/DeviceOp.h"
#include "runtime/gpu/GpuKernelContext.h"
#include "runtime/gpu/GraphReplay.h"

#include <memory>
#include <vector>

namespace dtf::gpu {

/// One op of a program placed on a GPU. Its inputs come from the host (fed
/// batches, variables, CPU ops' results: copied up through pinned buffers
/// each step) or from another GpuOp on the same device (read in place); the
/// outputs that host code reads are copied down through pinned buffers.
/// The first step runs eagerly, the second is captured as a CUDA graph, and
/// later steps replay it while the inputs' shapes and buffers stay the same.
class GpuOp : public device::DeviceOp {
public:
  GpuOp(GpuDevice &device, KernelFn fn, std::unique_ptr<GpuKernelContext> ctx);
  ~GpuOp() override;
  GpuKernelContext &context() { return *ctx_; }
  /// Inputs in order: a host tensor, or another GpuOp's output (a device
  /// view that outlives this op).
  void addHostInput(const Tensor *host);
  void addDeviceInput(const Tensor *device) override;
  /// Output k is read on the host: copied down into hostOutput(k).
  void setDownload(int k) override;
  Tensor *hostOutput(int k) override { return &hostOutputs_[k]; }
  const Tensor &deviceOutput(int k) override { return ctx_->output(k); }
  void setBatchOffset(int64_t first, int64_t rows) override {
    ctx_->setBatchOffset(first, rows);
  }
  /// A dropout kernel's (GpuFusedContext::stageDropoutKey).
  bool uploadsStepKey() const override;
  void setNumOutputs(int n);
  /// Launches (and graph launches) so far, for the step's count.
  uint64_t graphLaunches() const { return graph_.launches(); }

  Status run(uint64_t step, uint64_t seed);

  using Signature = GraphSignature;
  /// The pieces of run() that a GpuSegment (GpuSegment.h) runs for its ops:
  /// binds the inputs as they are now (host ones staged into their pinned
  /// buffers) and appends them to `sig`; puts the op's work on the stream
  /// (copies up, kernel, copies down into pinned buffers); after the stream
  /// is synchronized, copies the downloads into the host outputs.
  Status stage(uint64_t step, uint64_t seed, Signature *sig);
  Status enqueue();
  /// enqueue() in two parts: the copies up and the kernel on the compute
  /// stream; the copies down on `stream` (a segment's copy stream).
  Status enqueueKernel();
  Status enqueueDownloads(cuda::CUstream stream);
  /// Whether the op reads the device view `view` (a segment's upload).
  bool reads(const Tensor *view) const;
  /// The op writes some input in place (an optimizer update): a copy down
  /// still reading device memory must finish first.
  void setWritesInputs() override { writesInputs_ = true; }
  bool writesInputs() const { return writesInputs_; }
  bool downloads() const;
  /// Copies the downloads of the step staged in slot `slot` (after that
  /// step's end) from their pinned buffers into the host outputs.
  Status finishDownloads(int slot = 0);
  /// Whether the op's work reports a bad input through device memory (a row
  /// kernel's row-index-error word), and, after the step staged in `slot`
  /// has ended, that report as an error.
  bool reports() const;
  Status finishReports(int slot = 0);

private:
  struct Input {
    const Tensor *host = nullptr;
    const Tensor *device = nullptr;
    DeviceBuffer buffer; // host inputs: the device copy
    void *pinned = nullptr;
    size_t pinnedCapacity = 0;
  };

  GpuDevice &device_;
  KernelFn fn_;
  std::unique_ptr<GpuKernelContext> ctx_;
  std::vector<Input> inputs_;
  std::vector<Tensor> views_; // what the kernel sees as its inputs
  std::vector<Tensor> hostOutputs_;
  std::vector<bool> download_;
  std::vector<PinnedSlots> pinnedOut_; // per output, one per staging slot
  // Per slot and output: what its pinned buffer holds after that slot's
  // step (a view over it, of the result's type), read by finishDownloads
  // when later steps may have other shapes.
  std::vector<Tensor> downloaded_[2];
  void noteDownload(int slot, size_t k);
  bool writesInputs_ = false;
  GraphReplay graph_;
};

} // namespace dtf::gpu
