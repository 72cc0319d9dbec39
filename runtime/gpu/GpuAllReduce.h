// The towers' gradient all-reduce: each tower's float32 gradients, weighted
// by its share of the batch, summed over the task's GPUs with NCCL (one
// ncclAllReduce per bucket, inside one ncclGroupStart/End over the GPUs), or
// on the host when NCCL is missing or the towers have no GPU.
#pragma once

#include "runtime/core/Status.h"
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

  /// out[i] = sum over towers k of weights[k] * values[k][i] (every tensor
  /// float32 with elements[i] elements). out[i] may be values[0][i].
  Status reduce(const std::vector<std::vector<const Tensor *>> &values,
                const std::vector<float> &weights,
                const std::vector<Tensor *> &out);

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

  CudaDriver *driver_ = nullptr;
  std::vector<int64_t> elements_;
  std::vector<Bucket> buckets_;
  std::vector<std::unique_ptr<GpuDevice>> devices_;
  std::vector<cuda::ncclComm_t> comms_;
  std::vector<DeviceBuffer> device_; // per tower: the largest bucket
  std::vector<void *> pinned_;       // per tower
  std::vector<size_t> pinnedCapacity_;
};

} // namespace dtf::gpu
