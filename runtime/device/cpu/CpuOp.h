// CpuOp and CpuGraph: an op on the host device (its CPU kernel called in
// place: device memory is host memory, so nothing is copied) and a run of
// them in order.
#pragma once

#include "runtime/device/DeviceOp.h"
#include "runtime/device/Graph.h"

#include <memory>
#include <vector>

namespace dtf::device {

/// Outputs a CPU kernel may make beyond those the op declares (the norm of
/// global_norm_clip, say): reserved, so that the others never move.
inline constexpr int kSpareOutputs = 8;

class CpuOp : public DeviceOp {
public:
  CpuOp(KernelFn fn, std::unique_ptr<KernelContext> ctx)
      : fn_(fn), ctx_(std::move(ctx)) {}
  void addDeviceInput(const Tensor *view) override;
  /// Host code reads the output where the kernel left it (a stable
  /// address: room for kSpareOutputs more is reserved).
  void setDownload(int) override {}
  Tensor *hostOutput(int k) override { return &ctx_->output(k); }
  const Tensor &deviceOutput(int k) override { return ctx_->output(k); }
  void setWritesInputs() override {}
  void setBatchOffset(int64_t first, int64_t rows) override {
    ctx_->setBatchOffset(first, rows);
  }
  bool uploadsStepKey() const override { return false; }
  /// Calls the kernel on the inputs as they are now. Inline and not
  /// virtual: the executor's hot path calls it once per CPU op, and it costs
  /// what calling the kernel directly did (one indirect call).
  Status run(uint64_t step, uint64_t seed) {
    if (!bound_) {
      ctx_->setInputs(inputs_);
      bound_ = true;
    }
    ctx_->setStep(step, seed);
    return callKernel(fn_, *ctx_);
  }
  KernelContext &context() { return *ctx_; }

private:
  KernelFn fn_;
  std::unique_ptr<KernelContext> ctx_;
  bool bound_ = false;
  std::vector<Tensor *> inputs_;
};

/// The host's graph: its ops run in order; an upload is the host value
/// itself.
class CpuGraph : public Graph {
public:
  const Tensor *upload(const Tensor *host) override { return host; }
  void add(DeviceOp *op) override { ops_.push_back(static_cast<CpuOp *>(op)); }
  Status run(uint64_t step, uint64_t seed) override;
  int failedOp() const override { return failed_; }
  int numUploads() const override { return 0; }

private:
  std::vector<CpuOp *> ops_;
  int failed_ = -1;
};

} // namespace dtf::device
