// Pull replies and Push requests as raw gRPC byte buffers: a small protobuf
// header, then the tensors' bytes as slices of their own. A sender's tensors
// go out from their own memory (no copy into a protobuf message and none
// when it is serialized); a receiver copies each straight into its
// destination (the variable, a feed) instead of parsing a copy first.
#pragma once

#include "runtime/core/Status.h"
#include "runtime/core/Tensor.h"

#include "service.grpc.pb.h"

#include <google/protobuf/message_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

namespace dtf::dist {

/// Fills `w`'s name, dtype, dims and payload size for `t`.
void describeTensor(const std::string &name, const Tensor &t,
                    rpc::WireTensor *w);

/// [u32 header size][header][payloads...]. With `copy`, each payload is
/// copied into a slice the buffer owns (a snapshot of memory that changes
/// after the call); without, the slices point at the caller's memory, which
/// must stay unchanged until the call completes.
grpc::ByteBuffer packTensors(const google::protobuf::MessageLite &header,
                             const std::vector<const Tensor *> &payloads,
                             bool copy);

/// Reads a packed buffer: the header, then each payload in order.
class TensorReader {
public:
  /// Parses the header; an error when the buffer is not a packed message.
  Status open(const grpc::ByteBuffer &buffer,
              google::protobuf::MessageLite *header);
  /// Copies the next `n` payload bytes to `dst`.
  Status read(void *dst, size_t n);
  /// Skips the next `n` payload bytes.
  Status skip(size_t n);
  /// Every payload byte was read.
  bool done() const;

private:
  std::vector<grpc::Slice> slices_;
  size_t slice_ = 0, offset_ = 0;
};

/// A unary call with raw buffers on a generic stub, waited for.
grpc::Status rawCall(grpc::GenericStub &stub, grpc::ClientContext *ctx,
                     const std::string &method, const grpc::ByteBuffer &request,
                     grpc::ByteBuffer *response);

/// A protobuf message as a byte buffer, and back.
grpc::ByteBuffer serializeMessage(const google::protobuf::MessageLite &m);
bool parseMessage(const grpc::ByteBuffer &buffer,
                  google::protobuf::MessageLite *m);

/// The full method names of the raw calls.
inline constexpr const char *kPullMethod = "/dtf.rpc.ParameterServer/Pull";
inline constexpr const char *kPushMethod = "/dtf.rpc.ParameterServer/Push";
inline constexpr const char *kTransferMethod = "/dtf.rpc.Worker/Transfer";

} // namespace dtf::dist
