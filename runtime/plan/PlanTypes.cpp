// Conversions between the plan's protobuf types and the runtime's.
#include "runtime/plan/PlanTypes.h"

#include <cstring>

namespace dtf::plan {

Status toDType(int planDType, ::dtf::DType *out) {
  switch (planDType) {
  case F32:
    *out = ::dtf::DType::F32;
    return Status::ok();
  case F64:
    *out = ::dtf::DType::F64;
    return Status::ok();
  case F16:
    *out = ::dtf::DType::F16;
    return Status::ok();
  case BF16:
    *out = ::dtf::DType::BF16;
    return Status::ok();
  case I32:
    *out = ::dtf::DType::I32;
    return Status::ok();
  case I64:
    *out = ::dtf::DType::I64;
    return Status::ok();
  case BOOL:
    *out = ::dtf::DType::Bool;
    return Status::ok();
  case DTYPE_UNSPECIFIED:
    return errorStatus("no dtype given");
  default:
    return errorStatus("unknown dtype number ", planDType);
  }
}

std::string typeString(::dtf::DType dtype, const std::vector<int64_t> &dims) {
  return dtypeName(dtype) + dimsString(dims);
}

Status checkTensorValue(const TensorValue &value, ::dtf::DType *dtypeOut,
                        std::vector<int64_t> *dimsOut) {
  ::dtf::DType dtype = ::dtf::DType::F32;
  Status s = toDType(value.type().dtype(), &dtype);
  if (!s.isOk())
    return errorStatus("a constant has ", s.message());
  std::vector<int64_t> dims = dimsOf(value.type().shape());
  const std::string &data = value.data();
  int64_t elements = staticElements(dims, int64_t(data.size()) + 1);
  if (elements < 0)
    return errorStatus("a constant of type ", typeString(value.type()),
                       " needs a static shape no larger than its data (",
                       data.size(), " bytes)");
  if (size_t(elements) * dtypeSize(dtype) != data.size())
    return errorStatus("a constant of type ", typeString(value.type()),
                       " needs ", size_t(elements) * dtypeSize(dtype),
                       " bytes of data, got ", data.size());
  *dtypeOut = dtype;
  *dimsOut = std::move(dims);
  return Status::ok();
}

Status tensorFromValue(const TensorValue &value, Tensor *out) {
  ::dtf::DType dtype = ::dtf::DType::F32;
  std::vector<int64_t> dims;
  DTF_RETURN_IF_ERROR(checkTensorValue(value, &dtype, &dims));
  const std::string &data = value.data();
  Tensor t = Tensor::allocate(dtype, dims);
  if (!t.defined())
    return errorStatus("out of memory for a constant of type ",
                       typeString(value.type()));
  // The plan is little-endian, as is every machine dtf runs on.
  if (!data.empty())
    std::memcpy(t.rawData(), data.data(), data.size());
  *out = std::move(t);
  return Status::ok();
}

} // namespace dtf::plan
