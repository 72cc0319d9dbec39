// CpuOp and CpuGraph: CPU kernels run in order through the device layer.
#include "runtime/device/cpu/CpuOp.h"

namespace dtf::device {

void CpuOp::addDeviceInput(const Tensor *view) {
  // Kernels take their inputs as Tensor * and never write through an
  // input they do not update in place, as the executor's own contexts.
  inputs_.push_back(const_cast<Tensor *>(view));
}

Status CpuGraph::run(uint64_t step, uint64_t seed) {
  failed_ = -1;
  for (size_t k = 0; k < ops_.size(); ++k) {
    Status s = ops_[k]->run(step, seed);
    if (!s.isOk()) {
      failed_ = int(k);
      return s;
    }
  }
  return Status::ok();
}

} // namespace dtf::device
