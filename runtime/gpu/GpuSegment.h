// GpuSegment: a run of consecutive GPU ops of a program on one device,
// executed as one unit: the host values they read are uploaded once on the
// device's copy stream, their kernels go on its compute stream in program
// order (each upload's first reader waits for it by an event; copies down go
// back on the copy stream after their op's event), and after the first
// steps it is captured as one CUDA graph and replayed with one cuGraphLaunch;
// the CUDA device::Graph.
#pragma once

#include "runtime/device/Graph.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuOp.h"

#include <memory>
#include <vector>

namespace dtf::gpu {

class GpuSegment : public device::Graph {
public:
  explicit GpuSegment(GpuDevice &device);
  ~GpuSegment() override;
  GpuSegment(const GpuSegment &) = delete;
  GpuSegment &operator=(const GpuSegment &) = delete;

  /// The device view through which the segment's ops read the host value
  /// `host` (a fed batch, a variable, a CPU op's result): copied up once per
  /// step, however many of the segment's ops read it. The view lives as long
  /// as the segment.
  const Tensor *upload(const Tensor *host) override;
  /// Appends an op (program order), a GpuOp of this device. Its inputs are
  /// device views: outputs of GPU ops on this device or upload() views.
  void add(device::DeviceOp *op) override {
    ops_.push_back(static_cast<GpuOp *>(op));
  }

  /// Runs every op of the segment: eagerly while shapes or buffers change,
  /// then captured once as one graph and replayed. On failure, failedOp()
  /// is the index of the op that failed (-1: the segment's own work).
  Status run(uint64_t step, uint64_t seed) override;
  int failedOp() const override { return failed_; }
  /// Late: run() leaves its copies down and label reports to finishLate()
  /// (the step's fetches read one step late; device::Graph).
  void setLate() override { late_ = true; }
  Status finishLate(int slot) override;
  /// Each op timed on the compute stream between two events (no CUDA graph
  /// then), waited for at the end of run().
  bool setProfile() override;
  std::vector<double> opSeconds() const override { return opSeconds_; }

  int numOps() const { return int(ops_.size()); }
  int numUploads() const override { return int(uploads_.size()); }
  /// cuGraphLaunch calls so far.
  uint64_t graphLaunches() const { return graph_.launches(); }

private:
  struct Upload {
    const Tensor *host = nullptr;
    Tensor view; // the device copy, as the ops read it
    DeviceBuffer buffer;
    PinnedSlots pinned;             // one staging buffer per slot
    cuda::CUevent copied = nullptr; // recorded on the copy stream after it
  };
  Status createEvents();
  Status stageUploads(GpuOp::Signature *sig);
  Status bindOps(uint64_t step, uint64_t seed, GpuOp::Signature *sig);
  Status enqueue(uint64_t step, uint64_t seed);
  // Each op's label report, then its copies down (into the host outputs),
  // from slot `slot`'s pinned buffers; failed_ names an op that fails.
  Status finishOps(int slot);

  GpuDevice &device_;
  std::vector<std::unique_ptr<Upload>> uploads_; // stable view addresses
  std::vector<GpuOp *> ops_;
  GraphReplay graph_;
  // Ordering the two streams: the copy stream forks off the compute stream
  // (fork_), copies an op's results after it (ran_), the compute stream
  // waits for pending copies before an in-place write (copied_) and for
  // all of them at the end (joined_).
  cuda::CUevent fork_ = nullptr, ran_ = nullptr, copied_ = nullptr,
                joined_ = nullptr;
  int failed_ = -1;
  bool late_ = false;
  // With setProfile(): an event before the first op and one after each op
  // on the compute stream, and each op's seconds between its two.
  bool profile_ = false;
  std::vector<cuda::CUevent> timing_;
  std::vector<double> opSeconds_;
  Status addOpTimes();
};

} // namespace dtf::gpu
