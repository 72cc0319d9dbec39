// The towers' gradient all-reduce over NCCL, or on the host.
#include "runtime/gpu/GpuAllReduce.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace dtf::gpu {

using namespace cuda;

Status TowerAllReduce::check(const char *call, int r) const {
  if (r == ncclSuccess)
    return Status::ok();
  return errorStatus(driver_->ncclErrorText(call, r));
}

bool TowerAllReduce::sumsOnGpus(const std::vector<int> &gpus) {
  CudaDriver *driver = processDriver(nullptr);
  return driver && !gpus.empty() &&
         driver->deviceCount() > *std::max_element(gpus.begin(), gpus.end()) &&
         driver->loadNccl().isOk();
}

cuda::CUdeviceptr TowerAllReduce::sumOnGpu(size_t i) const {
  if (comms_.empty() || !device_[0].ptr)
    return 0;
  return device_[0].ptr + offset_[i] * sizeof(float);
}

Status TowerAllReduce::create(const std::vector<int> &gpus,
                              const std::vector<int64_t> &elements,
                              std::unique_ptr<TowerAllReduce> *out,
                              std::string *note, size_t bucketBytes) {
  std::unique_ptr<TowerAllReduce> a(new TowerAllReduce());
  a->elements_ = elements;
  Bucket b;
  for (size_t i = 0; i < elements.size(); ++i) {
    const size_t bytes = size_t(elements[i]) * sizeof(float);
    if (b.end > b.first && b.elements * sizeof(float) + bytes > bucketBytes) {
      a->buckets_.push_back(b);
      b = Bucket{i, i, 0};
    }
    b.end = i + 1;
    b.elements += size_t(elements[i]);
  }
  if (b.end > b.first)
    a->buckets_.push_back(b);
  size_t offset = 0;
  for (int64_t e : elements) {
    a->offset_.push_back(offset);
    offset += size_t(e);
  }
  int64_t total = 0;
  for (int64_t e : elements)
    total += e;
  const std::string what = strCat(
      elements.size(), " float32 tensors (", total * 4, " bytes) in ",
      a->buckets_.size(), a->buckets_.size() == 1 ? " bucket" : " buckets");

  std::string whyNot;
  CudaDriver *driver = processDriver(&whyNot);
  if (!driver ||
      driver->deviceCount() <= *std::max_element(gpus.begin(), gpus.end())) {
    *note =
        strCat("the towers' gradients (", what, ") are summed on the host: ",
               driver ? strCat("this machine has ", driver->deviceCount(),
                               driver->deviceCount() == 1 ? " GPU" : " GPUs",
                               " for ", gpus.size(), " towers")
                      : whyNot);
    *out = std::move(a);
    return Status::ok();
  }
  a->driver_ = driver;
  // The packing before NCCL's sum weighs each tower's share with cuBLAS.
  Status nccl = driver->missing(CudaDriver::Library::kCublas).empty()
                    ? driver->loadNccl()
                    : errorStatus("cuBLAS is not usable: ",
                                  driver->missing(CudaDriver::Library::kCublas));
  if (!nccl.isOk()) {
    *note =
        strCat("the towers' gradients (", what,
               ") are summed through the host, without NCCL: ", nccl.message());
    *out = std::move(a);
    return Status::ok();
  }
  // Sized first: the destructor reads them per device if a step below fails.
  a->device_.resize(gpus.size());
  a->pinned_.assign(gpus.size(), nullptr);
  a->pinnedCapacity_.assign(gpus.size(), 0);
  a->pinnedPending_.assign(gpus.size(), false);
  for (int g : gpus) {
    std::unique_ptr<GpuDevice> d;
    DTF_RETURN_IF_ERROR(GpuDevice::create(*driver, g, &d));
    a->finished_.emplace_back();
    DTF_RETURN_IF_ERROR(d->createEvent(&a->finished_.back().event));
    a->devices_.push_back(std::move(d));
  }
  a->comms_.assign(gpus.size(), nullptr);
  DTF_RETURN_IF_ERROR(a->check(
      "ncclCommInitAll", driver->ncclCommInitAll(
                             a->comms_.data(), int(gpus.size()), gpus.data())));
  *note = strCat("the towers' gradients (", what, ") are summed with ",
                 driver->ncclDescription(),
                 ": one ncclAllReduce per bucket "
                 "and step over GPU ");
  for (size_t k = 0; k < gpus.size(); ++k)
    *note += strCat(k ? ", " : "", gpus[k]);
  *out = std::move(a);
  return Status::ok();
}

TowerAllReduce::~TowerAllReduce() {
  if (!driver_)
    return;
  for (size_t k = 0; k < devices_.size(); ++k) {
    (void)devices_[k]->makeCurrent();
    (void)devices_[k]->synchronize();
    if (k < comms_.size() && comms_[k])
      driver_->ncclCommDestroy(comms_[k]);
    devices_[k]->release(device_[k]);
    if (pinned_[k])
      driver_->cuMemFreeHost(pinned_[k]);
    if (k < finished_.size() && finished_[k].event)
      driver_->cuEventDestroy(finished_[k].event);
  }
}

Status TowerAllReduce::recordFinished() {
  for (size_t k = 0; k < devices_.size(); ++k) {
    DTF_RETURN_IF_ERROR(devices_[k]->makeCurrent());
    DTF_RETURN_IF_ERROR(devices_[k]->check(
        "cuEventRecord", driver_->cuEventRecord(finished_[k].event,
                                                devices_[k]->computeStream())));
  }
  recorded_ = true;
  return Status::ok();
}

Status TowerAllReduce::pinnedFree(size_t k) {
  if (!pinnedPending_[k])
    return Status::ok();
  pinnedPending_[k] = false;
  return devices_[k]->check("cuEventSynchronize",
                            driver_->cuEventSynchronize(finished_[k].event));
}

Status TowerAllReduce::reduceOnHost(
    const std::vector<std::vector<const Tensor *>> &values,
    const std::vector<float> &weights, const std::vector<Tensor *> &out) {
  std::vector<float> sum;
  for (size_t i = 0; i < elements_.size(); ++i) {
    sum.assign(size_t(elements_[i]), 0.0f);
    for (size_t k = 0; k < values.size(); ++k) {
      const float *v = values[k][i]->data<float>();
      for (size_t j = 0; j < sum.size(); ++j)
        sum[j] += weights[k] * v[j];
    }
    std::memcpy(out[i]->data<float>(), sum.data(), sum.size() * sizeof(float));
  }
  return Status::ok();
}

Status
TowerAllReduce::reduce(const std::vector<std::vector<const Tensor *>> &values,
                       const std::vector<float> &weights,
                       const std::vector<Tensor *> &out) {
  return reduce(values, {}, weights, out);
}

Status
TowerAllReduce::reduce(const std::vector<std::vector<const Tensor *>> &values,
                       const std::vector<std::vector<const Tensor *>> &onDevice,
                       const std::vector<float> &weights,
                       const std::vector<Tensor *> &out) {
  auto deviceValue = [&](size_t k, size_t i) -> const Tensor * {
    return k < onDevice.size() && i < onDevice[k].size() ? onDevice[k][i]
                                                         : nullptr;
  };
  for (size_t k = 0; k < values.size(); ++k)
    for (size_t i = 0; i < elements_.size(); ++i) {
      const Tensor *t = deviceValue(k, i) ? deviceValue(k, i) : values[k][i];
      if (t->dtype() != DType::F32 || t->numElements() != elements_[i])
        return errorStatus("a tower's gradient ", i, " is not float32 of ",
                           elements_[i], " elements");
      if (deviceValue(k, i) && comms_.empty())
        return errorStatus("a tower's gradient ", i,
                           " is in device memory, but the sum runs on the "
                           "host (no NCCL)");
    }
  if (comms_.empty())
    return reduceOnHost(values, weights, out);
  const size_t towers = devices_.size();
  size_t total = 0;
  for (int64_t e : elements_)
    total += size_t(e);
  const size_t totalBytes = std::max<size_t>(total * sizeof(float), 1);
  for (const Bucket &b : buckets_) {
    // Each tower's share, weighted, into its GPU's copy of the bucket: a
    // gradient already on the GPU by cublasSgeam (C = w * A + 0 * A), one
    // from the host weighted into the pinned buffer and copied up.
    for (size_t k = 0; k < towers; ++k) {
      GpuDevice &d = *devices_[k];
      DTF_RETURN_IF_ERROR(d.makeCurrent());
      DTF_RETURN_IF_ERROR(d.reserve(device_[k], totalBytes));
      for (size_t i = b.first; i < b.end; ++i) {
        const CUdeviceptr dst = device_[k].ptr + offset_[i] * sizeof(float);
        if (const Tensor *v = deviceValue(k, i)) {
          if (elements_[i] > int64_t(INT_MAX))
            return errorStatus("a gradient of ", elements_[i],
                               " elements is too large for cublasSgeam");
          const int n = int(elements_[i]);
          const float w = weights[k], zero = 0.0f;
          const float *src = v->data<float>();
          const int r = driver_->cublasSgeam(
              d.blas(), CUBLAS_OP_N, CUBLAS_OP_N, n, 1, &w, src, n, &zero, src,
              n, reinterpret_cast<float *>(uintptr_t(dst)), n);
          if (r != CUBLAS_STATUS_SUCCESS)
            return errorStatus(
                "packing a tower's gradient: cublasSgeam failed with cuBLAS "
                "status ",
                r,
                driver_->emulated()
                    ? " (" + driver_->errorText("cublasSgeam", 0) + ")"
                    : std::string());
          continue;
        }
        DTF_RETURN_IF_ERROR(pinnedFree(k));
        DTF_RETURN_IF_ERROR(
            d.reservePinned(&pinned_[k], &pinnedCapacity_[k], totalBytes));
        pinnedPending_[k] = true;
        float *p = static_cast<float *>(pinned_[k]) + offset_[i];
        const float *v = values[k][i]->data<float>();
        for (int64_t j = 0; j < elements_[i]; ++j)
          p[j] = weights[k] * v[j];
        DTF_RETURN_IF_ERROR(d.check(
            "cuMemcpyHtoDAsync",
            driver_->cuMemcpyHtoDAsync(dst, p,
                                       size_t(elements_[i]) * sizeof(float),
                                       d.computeStream())));
      }
    }
    DTF_RETURN_IF_ERROR(check("ncclGroupStart", driver_->ncclGroupStart()));
    for (size_t k = 0; k < towers; ++k) {
      DTF_RETURN_IF_ERROR(devices_[k]->makeCurrent());
      const CUdeviceptr at = device_[k].ptr + offset_[b.first] * sizeof(float);
      const int r = driver_->ncclAllReduce(
          reinterpret_cast<const void *>(at), reinterpret_cast<void *>(at),
          b.elements, ncclFloat32, ncclSum, comms_[k],
          devices_[k]->computeStream());
      if (r != ncclSuccess) {
        (void)driver_->ncclGroupEnd();
        return check("ncclAllReduce", r);
      }
    }
    DTF_RETURN_IF_ERROR(check("ncclGroupEnd", driver_->ncclGroupEnd()));
  }
  // The sums wanted on the host come down from the first tower's GPU, one
  // copy per run of consecutive wanted tensors.
  GpuDevice &first = *devices_[0];
  DTF_RETURN_IF_ERROR(first.makeCurrent());
  bool anyDown = false;
  for (size_t i = 0; i < elements_.size();) {
    if (i >= out.size() || !out[i]) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < elements_.size() && end < out.size() && out[end])
      ++end;
    const size_t bytes =
        (offset_[end - 1] + size_t(elements_[end - 1]) - offset_[i]) *
        sizeof(float);
    DTF_RETURN_IF_ERROR(pinnedFree(0));
    DTF_RETURN_IF_ERROR(
        first.reservePinned(&pinned_[0], &pinnedCapacity_[0], totalBytes));
    DTF_RETURN_IF_ERROR(first.check(
        "cuMemcpyDtoHAsync", driver_->cuMemcpyDtoHAsync(
                                 static_cast<float *>(pinned_[0]) + offset_[i],
                                 device_[0].ptr + offset_[i] * sizeof(float),
                                 bytes, first.computeStream())));
    anyDown = true;
    i = end;
  }
  // No host wait unless a sum comes down: the streams that read the sums
  // or write what the all-reduce reads wait for finished(k).
  DTF_RETURN_IF_ERROR(recordFinished());
  if (!anyDown)
    return Status::ok();
  for (size_t k = 0; k < towers; ++k) {
    DTF_RETURN_IF_ERROR(devices_[k]->makeCurrent());
    DTF_RETURN_IF_ERROR(devices_[k]->synchronize());
    pinnedPending_[k] = false;
  }
  for (size_t i = 0; i < elements_.size() && i < out.size(); ++i)
    if (out[i])
      std::memcpy(out[i]->data<float>(),
                  static_cast<const float *>(pinned_[0]) + offset_[i],
                  size_t(elements_[i]) * sizeof(float));
  return Status::ok();
}

Status
TowerAllReduce::broadcast(const std::vector<std::vector<uint64_t>> &buffers,
                          const std::vector<size_t> &bytes) {
  if (comms_.empty())
    return errorStatus("the towers' variables are broadcast with NCCL only");
  const size_t towers = devices_.size();
  if (buffers.empty())
    return Status::ok();
  DTF_RETURN_IF_ERROR(check("ncclGroupStart", driver_->ncclGroupStart()));
  for (size_t j = 0; j < buffers.size(); ++j)
    for (size_t k = 0; k < towers; ++k) {
      Status s = devices_[k]->makeCurrent();
      const int r =
          s.isOk()
              ? driver_->ncclBroadcast(
                    reinterpret_cast<const void *>(uintptr_t(buffers[j][0])),
                    reinterpret_cast<void *>(uintptr_t(buffers[j][k])),
                    bytes[j], ncclUint8, 0, comms_[k],
                    devices_[k]->computeStream())
              : ncclInvalidUsage;
      if (r != ncclSuccess) {
        (void)driver_->ncclGroupEnd();
        return s.isOk() ? check("ncclBroadcast", r) : s;
      }
    }
  DTF_RETURN_IF_ERROR(check("ncclGroupEnd", driver_->ncclGroupEnd()));
  // Each tower's next step waits for finished(k) on its GPU: no host wait.
  return recordFinished();
}

} // namespace dtf::gpu
