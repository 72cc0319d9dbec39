// The towers' gradient all-reduce: each tower's float32 gradients, weighted
// by its share of the batch, summed over the task's GPUs with NCCL (one
// ncclAllReduce per bucket, inside one ncclGroupStart/End over the GPUs), or
// on the host when NCCL is missing or the towers have no GPU.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"
#include "runtime/gpu/GpuDevice.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtf::gpu {

/// Gradients are packed, in order, into buckets of at most this many bytes
/// (PyTorch DDP's default); a larger tensor is a bucket of its own.
inline constexpr size_t kAllReduceBucketBytes = size_t(25) << 20;

class TowerAllReduce {
public:
  /// Over GPUs `gpus` (tower k's GPU is gpus[k]), for tensors of these
  /// element counts (the towers' float32 sends, in order). Without a driver,
  /// with fewer GPUs than towers or without NCCL, the sum runs on the host;
  /// *note says how the sum runs, in one line, for dtf-run to print once.
  static Status create(const std::vector<int> &gpus,
                       const std::vector<int64_t> &elements,
                       std::unique_ptr<TowerAllReduce> *out, std::string *note,
                       size_t bucketBytes = kAllReduceBucketBytes);
  ~TowerAllReduce();

  /// Whether create() over `gpus` will sum on the GPUs with NCCL (a driver
  /// with that many GPUs, and NCCL loads): the towers then keep their
  /// gradients in device memory for reduce().
  static bool sumsOnGpus(const std::vector<int> &gpus);

  /// out[i] = sum over towers k of weights[k] * values[k][i] (every tensor
  /// float32 with elements[i] elements). out[i] may be values[0][i].
  Status reduce(const std::vector<std::vector<const Tensor *>> &values,
                const std::vector<float> &weights,
                const std::vector<Tensor *> &out);
  /// The same where tower k's tensor i may be in device memory on its GPU:
  /// onDevice[k][i] (a device view), else values[k][i] on the host. With
  /// NCCL, a device value is weighted and packed into its bucket on its GPU
  /// (cublasSgeam, no host copy), a host value is weighted on the host and
  /// copied up; the sum stays on the first tower's GPU (sumOnGpu(i)), and
  /// comes down into out[i] only where out[i] is not null. Without NCCL
  /// every value must be on the host.
  Status reduce(const std::vector<std::vector<const Tensor *>> &values,
                const std::vector<std::vector<const Tensor *>> &onDevice,
                const std::vector<float> &weights,
                const std::vector<Tensor *> &out);
  /// Tensor i's sum on the first tower's GPU after a reduce() with NCCL
  /// (stable from step to step); 0 without NCCL.
  cuda::CUdeviceptr sumOnGpu(size_t i) const;

  /// With NCCL: copies `bytes` at roots[0] (on the first tower's GPU) to
  /// roots[k] on tower k's GPU, for every buffer in one ncclBroadcast group
  /// (the variables the update wrote on the first GPU, to the other
  /// towers). buffers[j][k] is buffer j's pointer on tower k's GPU.
  Status broadcast(const std::vector<std::vector<uint64_t>> &buffers,
                   const std::vector<size_t> &bytes);

  /// With NCCL: an event that follows the stream work of the last reduce()
  /// or broadcast() on tower k's GPU (null before the first). Neither waits
  /// for its work on the host unless a sum comes down: a stream that reads
  /// the sums, or writes what they read (tower k's next gradients, the
  /// update of tower 0's variables), waits for this event first.
  /// (A device::Event: the executor's waitOnGpu takes it.)
  const GpuEvent *finished(size_t k) const {
    return k < finished_.size() && recorded_ ? &finished_[k] : nullptr;
  }
  /// Tower k's GPU.
  int gpu(size_t k) const { return devices_[k]->index(); }

  int buckets() const { return static_cast<int>(buckets_.size()); }
  bool usesNccl() const { return !comms_.empty(); }

private:
  TowerAllReduce() = default;
  struct Bucket {
    size_t first = 0, end = 0; // tensors [first, end)
    size_t elements = 0;
  };
  Status reduceOnHost(const std::vector<std::vector<const Tensor *>> &values,
                      const std::vector<float> &weights,
                      const std::vector<Tensor *> &out);
  Status check(const char *call, int r) const;
  // Records finished_ on every tower's stream.
  Status recordFinished();
  // Before the host rewrites tower k's pinned buffer: the copies from it
  // that the last step queued are done.
  Status pinnedFree(size_t k);

  CudaDriver *driver_ = nullptr;
  std::vector<int64_t> elements_;
  std::vector<Bucket> buckets_;
  std::vector<std::unique_ptr<GpuDevice>> devices_;
  std::vector<cuda::ncclComm_t> comms_;
  std::vector<size_t> offset_;       // per tensor: its float offset
  std::vector<DeviceBuffer> device_; // per tower: every bucket
  std::vector<void *> pinned_;       // per tower
  std::vector<size_t> pinnedCapacity_;
  std::vector<GpuEvent> finished_; // per tower
  bool recorded_ = false;
  std::vector<bool> pinnedPending_; // per tower: copies from pinned_ queued
};

} // namespace dtf::gpu
