// Tensors on the wire, the plan fingerprint, failed calls and deadlines.
#include "runtime/distributed/Wire.h"
#include "runtime/core/Bf16.h"

#include "runtime/plan/PlanTypes.h"

#include <cstring>

namespace dtf::dist {
int planDTypeOf(DType d) {
  switch (d) {
  case DType::F32:
    return plan::F32;
  case DType::F64:
    return plan::F64;
  case DType::F16:
    return plan::F16;
  case DType::BF16:
    return plan::BF16;
  case DType::I32:
    return plan::I32;
  case DType::I64:
    return plan::I64;
  case DType::Bool:
    return plan::BOOL;
  }
  return plan::DTYPE_UNSPECIFIED;
}

void toWire(const std::string &name, const Tensor &t, rpc::WireTensor *out) {
  out->set_name(name);
  out->set_dtype(plan::DType(planDTypeOf(t.dtype())));
  out->clear_dims();
  for (int64_t d : t.shape())
    out->add_dims(d);
  out->set_data(static_cast<const char *>(t.rawData()), t.byteSize());
}

bool declaredType(const rpc::WireTensor &w, size_t bytes, DType *dtype,
                  std::vector<int64_t> *dims) {
  dims->assign(w.dims().begin(), w.dims().end());
  if (!plan::toDType(w.dtype(), dtype).isOk())
    return false;
  const int64_t n = plan::staticElements(*dims, int64_t(1) << 40);
  return n >= 0 && size_t(n) * dtypeSize(*dtype) == bytes;
}

Status fromWire(const rpc::WireTensor &w, Tensor *out) {
  DType dtype = DType::F32;
  Status s = plan::toDType(w.dtype(), &dtype);
  if (!s.isOk())
    return errorStatus("tensor '", plan::printable(w.name()),
                       "': ", s.message());
  std::vector<int64_t> dims;
  if (!declaredType(w, w.data().size(), &dtype, &dims))
    return errorStatus("tensor '", plan::printable(w.name()), "' of type ",
                       plan::typeString(dtype, dims), " carries ",
                       w.data().size(), " bytes");
  *out = Tensor::allocate(dtype, std::move(dims));
  if (!w.data().empty())
    std::memcpy(out->rawData(), w.data().data(), w.data().size());
  return Status::ok();
}

Status copyFromWire(const rpc::WireTensor &w, Tensor *dst) {
  DType dtype = DType::F32;
  Status s = plan::toDType(w.dtype(), &dtype);
  std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
  if (!s.isOk() || dtype != dst->dtype() || dims != dst->shape() ||
      w.data().size() != dst->byteSize())
    return errorStatus("variable '", plan::printable(w.name()), "' arrived as ",
                       s.isOk() ? plan::typeString(dtype, dims)
                                : std::string("an unknown dtype"),
                       " (", w.data().size(), " bytes), but it is ",
                       dst->describe());
  if (!w.data().empty())
    std::memcpy(dst->rawData(), w.data().data(), w.data().size());
  return Status::ok();
}

Status copyRowsFromWire(const rpc::WireTensor &w, Tensor *dst,
                        int64_t rowOffset) {
  if (dst->rank() == 0)
    return copyFromWire(w, dst);
  std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
  std::vector<int64_t> rest(dst->shape().begin() + 1, dst->shape().end());
  const size_t rowBytes =
      dst->shape()[0] == 0 ? 0 : dst->byteSize() / size_t(dst->shape()[0]);
  if (dims.empty() ||
      std::vector<int64_t>(dims.begin() + 1, dims.end()) != rest ||
      rowOffset < 0 || rowOffset + dims[0] > dst->shape()[0] ||
      w.data().size() != size_t(dims[0]) * rowBytes)
    return errorStatus("shard '", plan::printable(w.name()), "' arrived as ",
                       plan::typeString(dst->dtype(), dims), " (",
                       w.data().size(), " bytes) for rows from ", rowOffset,
                       " of ", dst->describe());
  std::memcpy(static_cast<char *>(dst->rawData()) +
                  size_t(rowOffset) * rowBytes,
              w.data().data(), w.data().size());
  return Status::ok();
}

Tensor narrowToBf16(const Tensor &t) {
  Tensor out = Tensor::allocate(DType::BF16, t.shape());
  dtf::narrowToBf16(t.data<float>(), t.numElements(),
                    static_cast<uint16_t *>(out.rawData()));
  return out;
}

void widenFromBf16(const uint16_t *bf16, int64_t n, float *dst) {
  dtf::widenFromBf16(bf16, n, dst);
}

Tensor rowsOf(const Tensor &t, int64_t rowOffset, int64_t rows) {
  std::vector<int64_t> dims = t.shape();
  if (dims.empty())
    return Tensor::view(t.dtype(), dims, const_cast<void *>(t.rawData()));
  const size_t rowBytes = dims[0] == 0 ? 0 : t.byteSize() / size_t(dims[0]);
  dims[0] = rows;
  return Tensor::view(t.dtype(), dims,
                      static_cast<char *>(const_cast<void *>(t.rawData())) +
                          size_t(rowOffset) * rowBytes);
}

uint64_t fingerprint(const std::string &bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string describe(const grpc::Status &status) {
  static const char *names[] = {"OK",
                                "CANCELLED",
                                "UNKNOWN",
                                "INVALID_ARGUMENT",
                                "DEADLINE_EXCEEDED",
                                "NOT_FOUND",
                                "ALREADY_EXISTS",
                                "PERMISSION_DENIED",
                                "RESOURCE_EXHAUSTED",
                                "FAILED_PRECONDITION",
                                "ABORTED",
                                "OUT_OF_RANGE",
                                "UNIMPLEMENTED",
                                "INTERNAL",
                                "UNAVAILABLE",
                                "DATA_LOSS",
                                "UNAUTHENTICATED"};
  int code = int(status.error_code());
  std::string s = code >= 0 && code <= 16 ? names[code] : "ERROR";
  if (!status.error_message().empty())
    s += ": " + status.error_message();
  return s;
}

void setDeadline(grpc::ClientContext *ctx, std::chrono::milliseconds timeout) {
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
}

} // namespace dtf::dist
