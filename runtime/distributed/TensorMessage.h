// Pull replies and Push requests as raw gRPC byte buffers: a small protobuf
// header, then the tensors' bytes as slices of their own. A sender's tensors
// go out from their own memory (no copy into a protobuf message and none
// when it is serialized); a receiver copies each straight into its
// destination (the variable, a feed) instead of parsing a copy first.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"

#include "service.grpc.pb.h"

#include <google/protobuf/message_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
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

/// As packTensors without a copy, each payload's slice sharing its tensor's
/// buffer (a pull's snapshot): the buffer lives until gRPC has sent it,
/// however soon the caller drops `payloads`.
grpc::ByteBuffer packShared(const google::protobuf::MessageLite &header,
                            const std::vector<Tensor> &payloads);

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
inline constexpr const char *kPullStreamMethod =
    "/dtf.rpc.ParameterServer/PullStream";
inline constexpr const char *kPushStreamMethod =
    "/dtf.rpc.ParameterServer/PushStream";
inline constexpr const char *kInitializeStreamMethod =
    "/dtf.rpc.ParameterServer/InitializeStream";
inline constexpr const char *kMirrorStreamMethod =
    "/dtf.rpc.ParameterServer/MirrorStream";
inline constexpr const char *kReplicaStreamMethod =
    "/dtf.rpc.ParameterServer/ReplicaStream";

// ---------------------------------------------------------------------------
// Streams: the packed message ([u32 header size][header][payloads]) cut into
// chunks at any byte, so that a transfer is bounded by neither gRPC's
// message size nor 2 GiB, and the receiver copies each chunk to its
// destination while the next one is on the wire.

/// The chunk size when none is set (dtf-run --chunk-bytes).
inline constexpr size_t kDefaultChunkBytes = size_t(4) << 20;
/// A header longer than this is refused before anything is allocated for
/// it (a header lists names and dims: kilobytes; 1 MiB holds some 10,000
/// tensors' names). With the ps's bound on open streams, this bounds the
/// header bytes it holds in flight.
inline constexpr size_t kMaxHeaderBytes = size_t(1) << 20;

/// The packed message in chunks of at most `chunkBytes` (> 0) each: the
/// first starts with the header, payloads are cut wherever a chunk ends.
/// The slices point at the payloads' memory, which must stay unchanged until
/// every chunk is sent.
std::vector<grpc::ByteBuffer>
packChunks(const google::protobuf::MessageLite &header,
           const std::vector<const Tensor *> &payloads, size_t chunkBytes);

/// As packChunks, each slice sharing its payload tensor's buffer (see
/// packShared).
std::vector<grpc::ByteBuffer>
packChunksShared(const google::protobuf::MessageLite &header,
                 const std::vector<Tensor> &payloads, size_t chunkBytes);

/// `chunks` each wrapped in a TensorChunk message (its `data`), for a
/// stream a ps serves with gRPC's synchronous API (MirrorStream: its
/// threads are not the callback threads that wait for the ps's lock).
std::vector<grpc::ByteBuffer>
asTensorChunks(const std::vector<grpc::ByteBuffer> &chunks);

/// Where one payload goes: `size` bytes to `data` (nullptr: dropped).
struct PayloadTarget {
  void *data = nullptr;
  size_t size = 0;
};

/// Reads a packed message as it arrives in chunks (one chunk: the whole
/// message of a unary call). Once the header is complete, `onHeader` gives
/// the payloads' destinations, in order; each byte after it is copied
/// straight to its place. Nothing is allocated from what the stream says
/// but the header, and that only up to kMaxHeaderBytes.
class ChunkReader {
public:
  using OnHeader = std::function<Status(std::vector<PayloadTarget> *targets)>;
  ChunkReader(google::protobuf::MessageLite *header, OnHeader onHeader);

  /// Takes the next chunk; an error when the bytes do not fit the header.
  Status add(const grpc::ByteBuffer &chunk);
  /// The stream ended: an error unless the header and every payload byte it
  /// announces arrived.
  Status finish() const;
  bool headerDone() const { return headerDone_; }
  /// Bytes taken so far.
  uint64_t bytes() const { return bytes_; }

private:
  Status take(const char *p, size_t n);

  google::protobuf::MessageLite *header_;
  OnHeader onHeader_;
  std::string head_; // the size word and the header as they arrive
  uint32_t headerSize_ = 0;
  bool sized_ = false, headerDone_ = false;
  std::vector<PayloadTarget> targets_;
  size_t target_ = 0, offset_ = 0;
  uint64_t bytes_ = 0, payload_ = 0, payloadTotal_ = 0;
};

/// A raw streaming call on a generic stub, one operation at a time, each
/// waited for (on the wire every gRPC call is a stream: this serves the
/// server-streaming PullStream and the client-streaming PushStream alike).
/// The context's deadline bounds every operation.
class RawStream {
public:
  RawStream(grpc::GenericStub &stub, grpc::ClientContext *ctx,
            const std::string &method);
  ~RawStream();
  RawStream(const RawStream &) = delete;
  RawStream &operator=(const RawStream &) = delete;

  /// false: the call broke; finish() says why.
  bool write(const grpc::ByteBuffer &chunk);
  bool writesDone();
  /// false at the end of the stream (or when it broke).
  bool read(grpc::ByteBuffer *chunk);
  grpc::Status finish();

private:
  bool wait();

  grpc::ClientContext *ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false, finished_ = false;
};

/// A client-streaming raw call: writes `chunks`, then waits for the one
/// reply. A refused stream answers with the callee's status.
grpc::Status sendStream(grpc::GenericStub &stub, grpc::ClientContext *ctx,
                        const std::string &method,
                        const std::vector<grpc::ByteBuffer> &chunks,
                        grpc::ByteBuffer *response);

/// A server-streaming raw call: sends `request`, gives each chunk of the
/// answer to `reader`. When the reader refuses a chunk the call is cancelled
/// and `refused` says why (the status is then CANCELLED); the caller checks
/// reader->finish() after an OK status.
grpc::Status receiveStream(grpc::GenericStub &stub, grpc::ClientContext *ctx,
                           const std::string &method,
                           const grpc::ByteBuffer &request, ChunkReader *reader,
                           Status *refused);

} // namespace dtf::dist
