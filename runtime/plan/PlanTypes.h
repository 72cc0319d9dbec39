// Conversions between the plan's protobuf types and the runtime's: dtypes,
// shapes with a batch dimension, and constant tensors.
#pragma once

#include "runtime/core/Status.h"
#include "runtime/core/Tensor.h"

#include "plan.pb.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtf::plan {

/// The runtime dtype of a plan dtype; an error for DTYPE_UNSPECIFIED or a
/// number this runtime does not know.
Status toDType(int planDType, ::dtf::DType *out);

/// The dims of a plan shape; -1 stands for the batch.
std::vector<int64_t> dimsOf(const Shape &shape);

/// "[B,784]": dims with B for the batch (-1).
std::string dimsString(const std::vector<int64_t> &dims);
/// "f32[B,784]": the plan type as the model language writes it, with B for
/// the batch (-1) dimension.
std::string typeString(const TensorType &type);
std::string typeString(::dtf::DType dtype, const std::vector<int64_t> &dims);

/// True when `actual` (a concrete shape) fits `declared`, where a declared -1
/// matches any size.
bool shapeFits(const std::vector<int64_t> &declared,
               const std::vector<int64_t> &actual);

/// The element count of a static shape, or -1 when a dim is negative or the
/// product would exceed `limit`.
int64_t staticElements(const std::vector<int64_t> &dims, int64_t limit);

/// `text` with control bytes and bytes >= 0x7f written as \xNN, for names
/// from a plan in messages (a corrupted plan may hold anything).
std::string printable(std::string_view text);

/// Checks that a TensorValue is well formed (see tensorFromValue) and gives
/// its dtype and dims, without copying its data.
Status checkTensorValue(const TensorValue &value, ::dtf::DType *dtype,
                        std::vector<int64_t> *dims);

/// A new tensor holding a TensorValue's bytes (little-endian, row-major). Fails
/// when the type has a batch dim, the dtype is unknown or the byte count is not
/// the element count times the element size.
Status tensorFromValue(const TensorValue &value, Tensor *out);

} // namespace dtf::plan
