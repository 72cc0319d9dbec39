// TransferBuffers: the idle buffers of a task's transfers, lent out as
// tensors and taken back when the last tensor over one goes.
#include "runtime/distributed/TransferBuffers.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace dtf::dist {

struct TransferBuffers::Idle {
  struct Buffer {
    void *data;
    uint64_t released; // a stamp: the least recently released go first
  };
  std::mutex mu;
  bool open = true;
  size_t maxBytes = 0, bytes = 0;
  uint64_t clock = 0;
  std::multimap<size_t, Buffer> byCapacity;
  std::atomic<uint64_t> reused{0}, fresh{0};

  ~Idle() {
    for (auto &[capacity, b] : byCapacity)
      std::free(b.data);
  }

  // Takes back a released buffer, or frees it when it cannot stay.
  void put(void *data, size_t capacity) {
    std::lock_guard<std::mutex> lock(mu);
    if (!open || capacity > maxBytes) {
      std::free(data);
      return;
    }
    while (bytes + capacity > maxBytes) {
      auto oldest = std::min_element(
          byCapacity.begin(), byCapacity.end(), [](const auto &a, const auto &b) {
            return a.second.released < b.second.released;
          });
      bytes -= oldest->first;
      std::free(oldest->second.data);
      byCapacity.erase(oldest);
    }
    byCapacity.insert({capacity, {data, ++clock}});
    bytes += capacity;
  }
};

TransferBuffers::TransferBuffers(size_t maxIdleBytes)
    : idle_(std::make_shared<Idle>()) {
  idle_->maxBytes = maxIdleBytes;
}

TransferBuffers::~TransferBuffers() {
  std::lock_guard<std::mutex> lock(idle_->mu);
  idle_->open = false; // buffers still lent out are freed when released
}

Tensor TransferBuffers::allocate(DType dtype, std::vector<int64_t> shape) {
  const size_t bytes = size_t(numElementsOf(shape)) * dtypeSize(dtype);
  if (idle_->maxBytes == 0 || bytes < kMinBytes)
    return Tensor::allocate(dtype, std::move(shape));
  const size_t want =
      (bytes + Tensor::kAlignment - 1) / Tensor::kAlignment * Tensor::kAlignment;
  void *data = nullptr;
  size_t capacity = want;
  {
    std::lock_guard<std::mutex> lock(idle_->mu);
    auto it = idle_->byCapacity.lower_bound(want);
    if (it != idle_->byCapacity.end() && it->first <= 2 * want) {
      data = it->second.data;
      capacity = it->first;
      idle_->bytes -= capacity;
      idle_->byCapacity.erase(it);
    }
  }
  if (data) {
    ++idle_->reused;
  } else {
    data = std::aligned_alloc(Tensor::kAlignment, capacity);
    if (!data)
      return Tensor();
    ++idle_->fresh;
  }
  std::weak_ptr<Idle> home = idle_;
  std::shared_ptr<void> buffer(data, [home, capacity](void *p) {
    if (std::shared_ptr<Idle> idle = home.lock())
      idle->put(p, capacity);
    else
      std::free(p);
  });
  return Tensor::adopt(dtype, std::move(shape), std::move(buffer), capacity);
}

size_t TransferBuffers::idleBytes() const {
  std::lock_guard<std::mutex> lock(idle_->mu);
  return idle_->bytes;
}

uint64_t TransferBuffers::reused() const { return idle_->reused.load(); }
uint64_t TransferBuffers::fresh() const { return idle_->fresh.load(); }

size_t TransferBuffers::boundFor(uint64_t variableBytes) {
  return size_t(std::min<uint64_t>(2 * variableBytes, uint64_t(1) << 30));
}

} // namespace dtf::dist
