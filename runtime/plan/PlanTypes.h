// Conversions between the plan's protobuf types and the runtime's: dtypes and
// constant tensors (the plan's own type helpers are in schema/PlanSchema.h).
#pragma once

#include "runtime/core/Tensor.h"
#include "schema/PlanSchema.h"
#include "schema/Status.h"

#include "plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtf::plan {

/// The runtime dtype of a plan dtype; an error for DTYPE_UNSPECIFIED or a
/// number this runtime does not know.
Status toDType(int planDType, ::dtf::DType *out);

/// "f32[B,784]" for a runtime dtype and dims, B for the batch (-1).
std::string typeString(::dtf::DType dtype, const std::vector<int64_t> &dims);

/// Checks that a TensorValue is well formed (see tensorFromValue) and gives
/// its dtype and dims, without copying its data.
Status checkTensorValue(const TensorValue &value, ::dtf::DType *dtype,
                        std::vector<int64_t> *dims);

/// A new tensor holding a TensorValue's bytes (little-endian, row-major). Fails
/// when the type has a batch dim, the dtype is unknown or the byte count is not
/// the element count times the element size.
Status tensorFromValue(const TensorValue &value, Tensor *out);

} // namespace dtf::plan
