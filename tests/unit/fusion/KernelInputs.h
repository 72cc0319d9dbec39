// Tensors of the types a generated kernel's inputs declare (for the tests
// that run kernels on made-up inputs).
#pragma once

#include "runtime/core/Tensor.h"
#include "runtime/plan/PlanTypes.h"

#include "plan.pb.h"

namespace dtf::test {

/// Zeros of the type `kernel` declares for its input `i`, its -1 dims (the
/// batch) set to `batch`; an undefined tensor when the kernel does not
/// declare that input or its dtype is unknown.
inline Tensor kernelInputZeros(const plan::Kernel &kernel, int i,
                               int64_t batch = 1) {
  for (const plan::Value &v : kernel.values()) {
    if (i >= kernel.inputs_size() || v.id() != kernel.inputs(i))
      continue;
    DType dtype = DType::F32;
    if (!plan::toDType(v.type().dtype(), &dtype).isOk())
      return Tensor();
    std::vector<int64_t> dims = plan::dimsOf(v.type().shape());
    for (int64_t &d : dims)
      if (d < 0)
        d = batch;
    return Tensor::zeros(dtype, std::move(dims));
  }
  return Tensor();
}

} // namespace dtf::test
