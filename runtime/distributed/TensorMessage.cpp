#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"

#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <cstring>
#include <limits>

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
      slices.emplace_back(t->rawData(), t->byteSize(),
                          grpc::Slice::STATIC_SLICE);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

namespace {
// A slice over [p, p + n) of `owner`'s buffer, which it keeps alive (a
// tensor copy shares the buffer) until gRPC releases the slice.
grpc::Slice sharedSlice(const Tensor &owner, const char *p, size_t n) {
  return grpc::Slice(
      const_cast<char *>(p), n,
      [](void *keep) { delete static_cast<Tensor *>(keep); },
      new Tensor(owner));
}
} // namespace

grpc::ByteBuffer packShared(const google::protobuf::MessageLite &header,
                            const std::vector<Tensor> &payloads) {
  std::vector<grpc::ByteBuffer> one =
      packChunksShared(header, payloads, std::numeric_limits<size_t>::max());
  return one.empty() ? grpc::ByteBuffer() : one[0];
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
  // The calling thread waits on a queue of its own and polls the channel
  // there, as a synchronous stub's call does: the reply wakes this thread
  // directly, not one of gRPC's callback threads that would then wake it.
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(ctx, method, request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(response, &status, &status);
  void *tag = nullptr;
  bool ok = false;
  const bool got = cq.Next(&tag, &ok);
  cq.Shutdown();
  for (void *t; cq.Next(&t, &ok);) {
  }
  if (!got || tag != &status)
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the call's completion queue ended without it");
  return status;
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

namespace dtf::dist {

namespace {
// The packed message cut into chunks: the header copied (it is a local),
// each payload referenced where it lies, statically or sharing its tensor.
std::vector<grpc::ByteBuffer>
cutChunks(const google::protobuf::MessageLite &header,
          const std::vector<const Tensor *> &payloads, bool share,
          size_t chunkBytes) {
  chunkBytes = std::max<size_t>(chunkBytes, 1);
  std::string head(4, '\0');
  const uint32_t size = uint32_t(header.ByteSizeLong());
  std::memcpy(head.data(), &size, 4); // little-endian on every target
  header.AppendToString(&head);
  std::vector<grpc::ByteBuffer> chunks;
  std::vector<grpc::Slice> slices;
  size_t fill = 0;
  auto put = [&](const char *p, size_t n, const Tensor *owner, bool copy) {
    while (n > 0) {
      const size_t len = std::min(n, chunkBytes - fill);
      if (copy)
        slices.emplace_back(p, len);
      else if (owner)
        slices.push_back(sharedSlice(*owner, p, len));
      else
        slices.emplace_back(const_cast<char *>(p), len,
                            grpc::Slice::STATIC_SLICE);
      p += len;
      n -= len;
      fill += len;
      if (fill == chunkBytes) {
        chunks.emplace_back(slices.data(), slices.size());
        slices.clear();
        fill = 0;
      }
    }
  };
  put(head.data(), head.size(), nullptr, /*copy=*/true);
  for (const Tensor *t : payloads)
    put(static_cast<const char *>(t->rawData()), t->byteSize(),
        share ? t : nullptr, false);
  if (!slices.empty())
    chunks.emplace_back(slices.data(), slices.size());
  return chunks;
}
} // namespace

std::vector<grpc::ByteBuffer>
asTensorChunks(const std::vector<grpc::ByteBuffer> &chunks) {
  std::vector<grpc::ByteBuffer> out;
  for (const grpc::ByteBuffer &b : chunks) {
    std::vector<grpc::Slice> slices;
    rpc::TensorChunk chunk;
    if (b.Dump(&slices).ok())
      for (const grpc::Slice &s : slices)
        chunk.mutable_data()->append(
            reinterpret_cast<const char *>(s.begin()), s.size());
    out.push_back(serializeMessage(chunk));
  }
  return out;
}

std::vector<grpc::ByteBuffer>
packChunks(const google::protobuf::MessageLite &header,
           const std::vector<const Tensor *> &payloads, size_t chunkBytes) {
  return cutChunks(header, payloads, /*share=*/false, chunkBytes);
}

std::vector<grpc::ByteBuffer>
packChunksShared(const google::protobuf::MessageLite &header,
                 const std::vector<Tensor> &payloads, size_t chunkBytes) {
  std::vector<const Tensor *> refs;
  for (const Tensor &t : payloads)
    refs.push_back(&t);
  return cutChunks(header, refs, /*share=*/true, chunkBytes);
}

ChunkReader::ChunkReader(google::protobuf::MessageLite *header,
                         OnHeader onHeader)
    : header_(header), onHeader_(std::move(onHeader)) {}

Status ChunkReader::add(const grpc::ByteBuffer &chunk) {
  std::vector<grpc::Slice> slices;
  if (!chunk.Dump(&slices).ok())
    return errorStatus("an unreadable chunk");
  for (const grpc::Slice &s : slices)
    DTF_RETURN_IF_ERROR(
        take(reinterpret_cast<const char *>(s.begin()), s.size()));
  return Status::ok();
}

Status ChunkReader::take(const char *p, size_t n) {
  for (;;) {
    if (!sized_) {
      if (n == 0)
        return Status::ok();
      const size_t want = std::min(n, 4 - head_.size());
      head_.append(p, want);
      p += want;
      n -= want;
      bytes_ += want;
      if (head_.size() < 4)
        continue;
      std::memcpy(&headerSize_, head_.data(), 4);
      if (headerSize_ > kMaxHeaderBytes)
        return errorStatus("a header of ", headerSize_, " bytes (at most ",
                           kMaxHeaderBytes,
                           " are taken): not a dtf tensor message");
      head_.clear();
      sized_ = true;
      continue;
    }
    if (!headerDone_) {
      const size_t want = std::min<size_t>(n, headerSize_ - head_.size());
      head_.append(p, want);
      p += want;
      n -= want;
      bytes_ += want;
      if (head_.size() < headerSize_)
        return Status::ok();
      if (!header_->ParseFromString(head_))
        return errorStatus("a malformed header (", headerSize_, " bytes)");
      std::string().swap(head_);
      headerDone_ = true;
      targets_.clear();
      DTF_RETURN_IF_ERROR(onHeader_(&targets_));
      for (const PayloadTarget &t : targets_)
        payloadTotal_ += t.size;
      continue;
    }
    if (n == 0)
      return Status::ok();
    if (payload_ == payloadTotal_)
      return errorStatus(n, " bytes more than the ", payloadTotal_,
                         " payload bytes its header announces");
    while (targets_[target_].size == offset_) {
      ++target_;
      offset_ = 0;
    }
    PayloadTarget &t = targets_[target_];
    const size_t len = std::min(n, t.size - offset_);
    if (t.data)
      std::memcpy(static_cast<char *>(t.data) + offset_, p, len);
    p += len;
    n -= len;
    offset_ += len;
    payload_ += len;
    bytes_ += len;
  }
}

Status ChunkReader::finish() const {
  if (!headerDone_)
    return errorStatus("it ended inside its header (after ", bytes_, " bytes)");
  if (payload_ < payloadTotal_)
    return errorStatus("it ended after ", payload_, " of the ", payloadTotal_,
                       " payload bytes its header announces");
  return Status::ok();
}

RawStream::RawStream(grpc::GenericStub &stub, grpc::ClientContext *ctx,
                     const std::string &method)
    : ctx_(ctx) {
  call_ = stub.PrepareCall(ctx, method, &cq_);
  call_->StartCall(this);
  started_ = wait();
}

RawStream::~RawStream() {
  if (!finished_) {
    ctx_->TryCancel();
    (void)finish();
  }
  cq_.Shutdown();
  void *tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
  }
}

bool RawStream::wait() {
  void *tag = nullptr;
  bool ok = false;
  return cq_.Next(&tag, &ok) && ok;
}

bool RawStream::write(const grpc::ByteBuffer &chunk) {
  if (!started_)
    return false;
  call_->Write(chunk, this);
  return wait();
}

bool RawStream::writesDone() {
  if (!started_)
    return false;
  call_->WritesDone(this);
  return wait();
}

bool RawStream::read(grpc::ByteBuffer *chunk) {
  if (!started_)
    return false;
  call_->Read(chunk, this);
  return wait();
}

grpc::Status RawStream::finish() {
  grpc::Status status;
  call_->Finish(&status, this);
  (void)wait();
  finished_ = true;
  return status;
}

grpc::Status sendStream(grpc::GenericStub &stub, grpc::ClientContext *ctx,
                        const std::string &method,
                        const std::vector<grpc::ByteBuffer> &chunks,
                        grpc::ByteBuffer *response) {
  RawStream call(stub, ctx, method);
  bool ok = true;
  for (const grpc::ByteBuffer &c : chunks)
    if (!(ok = call.write(c)))
      break;
  // A refusal ends the call early: its status says why.
  const bool answered = ok && call.writesDone() && call.read(response);
  grpc::Status status = call.finish();
  if (status.ok() && !answered)
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the stream ended without a reply");
  return status;
}

grpc::Status receiveStream(grpc::GenericStub &stub, grpc::ClientContext *ctx,
                           const std::string &method,
                           const grpc::ByteBuffer &request, ChunkReader *reader,
                           Status *refused) {
  *refused = Status::ok();
  RawStream call(stub, ctx, method);
  if (call.write(request) && call.writesDone()) {
    grpc::ByteBuffer chunk;
    while (call.read(&chunk)) {
      *refused = reader->add(chunk);
      chunk.Clear();
      if (!refused->isOk()) {
        ctx->TryCancel();
        break;
      }
    }
  }
  return call.finish();
}

} // namespace dtf::dist
