#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"

#include "runtime/plan/PlanTypes.h"

#include <cstring>
#include <future>

namespace dtf::dist {

void describeTensor(const std::string &name, const Tensor &t,
                    rpc::WireTensor *w) {
  w->set_name(name);
  const int d = planDTypeOf(t.dtype());
  w->set_dtype(plan::DType(d));
  w->clear_dims();
  for (int64_t x : t.shape())
    w->add_dims(x);
  w->clear_data();
  w->set_size(t.byteSize());
}

grpc::ByteBuffer packTensors(const google::protobuf::MessageLite &header,
                             const std::vector<const Tensor *> &payloads,
                             bool copy) {
  std::string head(4, '\0');
  const uint32_t size = uint32_t(header.ByteSizeLong());
  std::memcpy(head.data(), &size, 4); // little-endian on every target
  header.AppendToString(&head);
  std::vector<grpc::Slice> slices;
  slices.reserve(payloads.size() + 1);
  slices.emplace_back(head);
  for (const Tensor *t : payloads) {
    if (t->byteSize() == 0)
      continue;
    if (copy)
      slices.emplace_back(t->rawData(), t->byteSize());
    else
      slices.emplace_back(t->rawData(), t->byteSize(), grpc::Slice::STATIC_SLICE);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

Status TensorReader::open(const grpc::ByteBuffer &buffer,
                          google::protobuf::MessageLite *header) {
  slices_.clear();
  slice_ = offset_ = 0;
  if (!buffer.Dump(&slices_).ok())
    return errorStatus("an unreadable message");
  uint32_t size = 0;
  DTF_RETURN_IF_ERROR(read(&size, 4));
  size_t left = 0;
  for (size_t i = slice_; i < slices_.size(); ++i)
    left += slices_[i].size() - (i == slice_ ? offset_ : 0);
  if (size > left)
    return errorStatus("a message whose header (", size,
                       " bytes) is longer than the message");
  std::string head(size, '\0');
  DTF_RETURN_IF_ERROR(read(head.data(), size));
  if (!header->ParseFromString(head))
    return errorStatus("a message with a malformed header");
  return Status::ok();
}

Status TensorReader::read(void *dst, size_t n) {
  auto *out = static_cast<char *>(dst);
  while (n > 0) {
    if (slice_ >= slices_.size())
      return errorStatus("a message shorter than its header says");
    const grpc::Slice &s = slices_[slice_];
    const size_t take = std::min(n, s.size() - offset_);
    if (out) {
      std::memcpy(out, s.begin() + offset_, take);
      out += take;
    }
    offset_ += take;
    n -= take;
    if (offset_ == s.size()) {
      ++slice_;
      offset_ = 0;
    }
  }
  return Status::ok();
}

Status TensorReader::skip(size_t n) { return read(nullptr, n); }

bool TensorReader::done() const {
  for (size_t i = slice_; i < slices_.size(); ++i)
    if (slices_[i].size() > (i == slice_ ? offset_ : 0))
      return false;
  return true;
}

grpc::Status rawCall(grpc::GenericStub &stub, grpc::ClientContext *ctx,
                     const std::string &method, const grpc::ByteBuffer &request,
                     grpc::ByteBuffer *response) {
  std::promise<grpc::Status> done;
  stub.UnaryCall(ctx, method, grpc::StubOptions(), &request, response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

grpc::ByteBuffer serializeMessage(const google::protobuf::MessageLite &m) {
  std::string bytes = m.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

bool parseMessage(const grpc::ByteBuffer &buffer,
                  google::protobuf::MessageLite *m) {
  grpc::Slice slice;
  if (!buffer.DumpToSingleSlice(&slice).ok())
    return false;
  return m->ParseFromArray(slice.begin(), int(slice.size()));
}

} // namespace dtf::dist
