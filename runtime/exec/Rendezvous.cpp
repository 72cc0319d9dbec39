#include "runtime/exec/Rendezvous.h"

#include <cstring>

namespace dtf::exec {

void RendezvousTable::put(const std::string &key, uint64_t step, Tensor value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    arrived_[{step, key}] = std::move(value);
  }
  cv_.notify_all();
}

Status RendezvousTable::take(
    const std::string &key, uint64_t step, Tensor *out,
    std::chrono::milliseconds every,
    const std::function<bool(double, Status *)> &waiting) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = arrived_.find({step, key});
    if (it != arrived_.end()) {
      *out = std::move(it->second);
      arrived_.erase(it);
      return Status::ok();
    }
    if (cv_.wait_for(lock, every) == std::cv_status::timeout) {
      const double waited = std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count();
      Status why = Status::ok();
      lock.unlock();
      const bool goOn = !waiting || waiting(waited, &why);
      lock.lock();
      if (!goOn)
        return why.isOk() ? errorStatus("gave up waiting for '", key,
                                        "' of step ", step)
                          : why;
    }
  }
}

void RendezvousTable::dropBefore(uint64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  arrived_.erase(arrived_.begin(), arrived_.lower_bound({step, std::string()}));
}

size_t RendezvousTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arrived_.size();
}

Status LocalRendezvous::send(const std::string &key, int peer, uint64_t step,
                             const Tensor &value) {
  if (peer < 0 || size_t(peer) >= tables_.size() || !tables_[peer])
    return errorStatus("send of '", key, "' to stage ", peer,
                       ", which this replica does not have");
  Tensor copy = Tensor::allocate(value.dtype(), value.shape());
  if (!copy.defined())
    return errorStatus("out of memory for '", key, "' (", value.describe(), ")");
  if (value.byteSize())
    std::memcpy(copy.rawData(), value.rawData(), value.byteSize());
  tables_[peer]->put(key, step, std::move(copy));
  return Status::ok();
}

Status LocalRendezvous::recv(const std::string &key, int peer, uint64_t step,
                             Tensor *out) {
  (void)peer;
  return tables_[self_]->take(
      key, step, out, std::chrono::milliseconds(200),
      [&](double waited, Status *why) {
        if (waited < timeout_)
          return true;
        *why = errorStatus("stage ", self_, " waited ", int(waited),
                           " s for '", key, "' of step ", step,
                           " from stage ", peer);
        return false;
      });
}

} // namespace dtf::exec
