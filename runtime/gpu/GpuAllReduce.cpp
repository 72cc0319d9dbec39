// The towers' gradient all-reduce over NCCL, or on the host.
#include "runtime/gpu/GpuAllReduce.h"

#include <algorithm>
#include <cstring>

namespace dtf::gpu {

using namespace cuda;

Status TowerAllReduce::check(const char *call, int r) const {
  if (r == ncclSuccess)
    return Status::ok();
  return errorStatus(driver_->ncclErrorText(call, r));
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
  Status nccl = driver->loadNccl();
  if (!nccl.isOk()) {
    *note =
        strCat("the towers' gradients (", what,
               ") are summed through the host, without NCCL: ", nccl.message());
    *out = std::move(a);
    return Status::ok();
  }
  for (int g : gpus) {
    std::unique_ptr<GpuDevice> d;
    DTF_RETURN_IF_ERROR(GpuDevice::create(*driver, g, &d));
    a->devices_.push_back(std::move(d));
  }
  a->comms_.assign(gpus.size(), nullptr);
  DTF_RETURN_IF_ERROR(a->check(
      "ncclCommInitAll", driver->ncclCommInitAll(
                             a->comms_.data(), int(gpus.size()), gpus.data())));
  a->device_.resize(gpus.size());
  a->pinned_.assign(gpus.size(), nullptr);
  a->pinnedCapacity_.assign(gpus.size(), 0);
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
  }
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
  for (const auto &tower : values)
    for (size_t i = 0; i < elements_.size(); ++i)
      if (tower[i]->dtype() != DType::F32 ||
          tower[i]->numElements() != elements_[i])
        return errorStatus("a tower's gradient ", i, " is not float32 of ",
                           elements_[i], " elements");
  if (comms_.empty())
    return reduceOnHost(values, weights, out);
  const size_t towers = devices_.size();
  for (const Bucket &b : buckets_) {
    const size_t bytes = b.elements * sizeof(float);
    // Each tower's share, weighted, packed into its pinned buffer and
    // copied up to its GPU.
    for (size_t k = 0; k < towers; ++k) {
      GpuDevice &d = *devices_[k];
      DTF_RETURN_IF_ERROR(d.makeCurrent());
      DTF_RETURN_IF_ERROR(d.reserve(device_[k], bytes));
      DTF_RETURN_IF_ERROR(
          d.reservePinned(&pinned_[k], &pinnedCapacity_[k], bytes));
      float *p = static_cast<float *>(pinned_[k]);
      for (size_t i = b.first; i < b.end; ++i) {
        const float *v = values[k][i]->data<float>();
        for (int64_t j = 0; j < elements_[i]; ++j)
          *p++ = weights[k] * v[j];
      }
      DTF_RETURN_IF_ERROR(
          d.check("cuMemcpyHtoDAsync",
                  driver_->cuMemcpyHtoDAsync(device_[k].ptr, pinned_[k], bytes,
                                             d.stream())));
    }
    DTF_RETURN_IF_ERROR(check("ncclGroupStart", driver_->ncclGroupStart()));
    for (size_t k = 0; k < towers; ++k) {
      DTF_RETURN_IF_ERROR(devices_[k]->makeCurrent());
      const int r = driver_->ncclAllReduce(
          reinterpret_cast<const void *>(device_[k].ptr),
          reinterpret_cast<void *>(device_[k].ptr), b.elements, ncclFloat32,
          ncclSum, comms_[k], devices_[k]->stream());
      if (r != ncclSuccess) {
        (void)driver_->ncclGroupEnd();
        return check("ncclAllReduce", r);
      }
    }
    DTF_RETURN_IF_ERROR(check("ncclGroupEnd", driver_->ncclGroupEnd()));
    // The sum, from the first tower's GPU.
    GpuDevice &first = *devices_[0];
    DTF_RETURN_IF_ERROR(first.makeCurrent());
    DTF_RETURN_IF_ERROR(
        first.check("cuMemcpyDtoHAsync",
                    driver_->cuMemcpyDtoHAsync(pinned_[0], device_[0].ptr,
                                               bytes, first.stream())));
    for (size_t k = 0; k < towers; ++k) {
      DTF_RETURN_IF_ERROR(devices_[k]->makeCurrent());
      DTF_RETURN_IF_ERROR(devices_[k]->synchronize());
    }
    const float *p = static_cast<const float *>(pinned_[0]);
    for (size_t i = b.first; i < b.end; ++i) {
      std::memcpy(out[i]->data<float>(), p,
                  size_t(elements_[i]) * sizeof(float));
      p += elements_[i];
    }
  }
  return Status::ok();
}

} // namespace dtf::gpu
