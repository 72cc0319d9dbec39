// The streams of a ps task: the bound on open streams per caller and the cut
// of stalled ones (StreamLimits), and the gRPC reactors that send a pull in
// chunks (PullWriter) and take a push or an initialization in chunks
// (StreamReader).
#pragma once

#include "runtime/distributed/TensorMessage.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace dtf::dist::ps {

using Clock = std::chrono::steady_clock;

/// The open streams of a ps (keyed by their context): at most
/// kMaxStreamsPerPeer per caller and kMaxStreams in all, since each holds a
/// header and a chunk in memory; one that moves nothing for the stall
/// timeout is cut.
class StreamLimits {
public:
  /// `self`: the ps's name; `out`: its log.
  StreamLimits(std::string self, double stallSeconds, std::FILE *out)
      : self_(std::move(self)), stallSeconds_(stallSeconds), out_(out) {}

  /// Registers a stream of `peer`; `named`: the refusal names the peer.
  grpc::Status open(grpc::CallbackServerContext *ctx, const std::string &peer,
                    bool named);
  void moved(grpc::CallbackServerContext *ctx) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    auto it = streams_.find(ctx);
    if (it != streams_.end())
      it->second.moved = Clock::now();
  }
  void close(grpc::CallbackServerContext *ctx);
  /// Cancels the streams that moved no chunk for the stall timeout: a caller
  /// that stops sending (or reading) mid-stream holds memory for nothing.
  /// Under the lock, so that no stream ends (and its context goes)
  /// meanwhile; the lock is recursive because a cancel may end the call at
  /// once.
  void cutStalled();

private:
  struct OpenStream {
    std::string peer;
    Clock::time_point moved;
    bool cut = false;
  };
  static constexpr size_t kMaxStreams = 64;
  static constexpr int kMaxStreamsPerPeer = 8;
  const std::string self_;
  const double stallSeconds_;
  std::FILE *out_;
  std::recursive_mutex mu_;
  std::map<grpc::CallbackServerContext *, OpenStream> streams_;
  std::map<std::string, int> streamsBy_;
};

// A refusal as a dtf Status for ChunkReader, its gRPC status kept aside (a
// caller from another plan is FAILED_PRECONDITION, not a malformed stream).
struct Refusal {
  grpc::Status status;
  Status note(grpc::Status st) {
    status = std::move(st);
    return status.ok() ? Status::ok() : errorStatus(status.error_message());
  }
  // The refusal, else `code` with `prefix` and the reader's message.
  grpc::Status orElse(grpc::StatusCode code, const std::string &prefix,
                      const Status &s) const {
    return !status.ok() ? status : grpc::Status(code, prefix + s.message());
  }
};

/// A pull reply in chunks over the snapshot the ps took under its lock
/// (buffers of its TransferBuffers): each chunk's slices share the
/// snapshot's buffers, which go back to the pool once sent.
class PullWriter final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
public:
  PullWriter(StreamLimits *streams, grpc::CallbackServerContext *ctx)
      : streams_(streams), ctx_(ctx) {}
  void send(const rpc::PullReply &reply, const std::vector<Tensor> &snapshot,
            size_t chunkBytes) {
    chunks_ = packChunksShared(reply, snapshot, chunkBytes);
  }
  void start(const grpc::Status &status) {
    if (!status.ok() || chunks_.empty())
      end(status);
    else
      StartWrite(&chunks_[0]);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      end(grpc::Status(grpc::StatusCode::CANCELLED, "the pull stream broke"));
      return;
    }
    chunks_[next_].Clear();
    streams_->moved(ctx_);
    if (++next_ < chunks_.size())
      StartWrite(&chunks_[next_]);
    else
      end(grpc::Status::OK);
  }
  void OnDone() override {
    streams_->close(ctx_);
    delete this;
  }

private:
  // The stream stops counting against its caller when this ps ends it,
  // before the caller can see the end: gRPC runs OnDone later.
  void end(const grpc::Status &status) {
    streams_->close(ctx_);
    Finish(status);
  }
  StreamLimits *streams_;
  grpc::CallbackServerContext *ctx_;
  std::vector<grpc::ByteBuffer> chunks_;
  size_t next_ = 0;
};

/// A stream of chunks from a worker (a push; the chief's initial values):
/// each chunk is copied straight into the tensors `prepare` allocated from
/// the header, and `complete` runs only once the stream ended whole, so a
/// broken or cancelled stream changes nothing.
template <typename Request, typename Reply>
class StreamReader final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
public:
  using Prepare = std::function<grpc::Status(
      const Request &, std::vector<Tensor> *, std::vector<PayloadTarget> *)>;
  using Complete = std::function<grpc::Status(const Request &,
                                              std::vector<Tensor> &, Reply *)>;

  /// `what`: "ps.0: refused a push stream: "; `unchanged`: "nothing
  /// applied".
  StreamReader(StreamLimits *streams, grpc::CallbackServerContext *ctx,
               grpc::ByteBuffer *response, std::string what,
               std::string unchanged, Prepare prepare, Complete complete)
      : streams_(streams), ctx_(ctx), response_(response),
        what_(std::move(what)), unchanged_(std::move(unchanged)),
        prepare_(std::move(prepare)), complete_(std::move(complete)),
        reader_(&req_, [this](std::vector<PayloadTarget> *targets) {
          return refusal_.note(prepare_(req_, &values_, targets));
        }) {
    StartRead(&chunk_);
  }
  void OnReadDone(bool ok) override {
    if (ok) {
      streams_->moved(ctx_);
      Status s = reader_.add(chunk_);
      chunk_.Clear();
      if (s.isOk())
        StartRead(&chunk_);
      else
        end(refusal_.orElse(grpc::StatusCode::INVALID_ARGUMENT, what_, s));
      return;
    }
    if (ctx_->IsCancelled()) {
      end(grpc::Status(grpc::StatusCode::CANCELLED,
                       what_ + "the stream was cancelled (" + unchanged_ +
                           ")"));
      return;
    }
    Status s = reader_.finish();
    if (!s.isOk()) {
      end(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       what_ + "incomplete (" + unchanged_ +
                           "): " + s.message()));
      return;
    }
    Reply reply;
    grpc::Status st = complete_(req_, values_, &reply);
    if (st.ok())
      *response_ = serializeMessage(reply);
    end(st);
  }
  void OnDone() override {
    streams_->close(ctx_);
    delete this;
  }

private:
  void end(const grpc::Status &status) {
    streams_->close(ctx_);
    Finish(status);
  }
  StreamLimits *streams_;
  grpc::CallbackServerContext *ctx_;
  grpc::ByteBuffer *response_;
  const std::string what_, unchanged_;
  Prepare prepare_;
  Complete complete_;
  Request req_;
  std::vector<Tensor> values_;
  Refusal refusal_;
  ChunkReader reader_;
  grpc::ByteBuffer chunk_;
};

/// A stream refused before its first byte is read.
class RefusedStream final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
public:
  explicit RefusedStream(const grpc::Status &status) { Finish(status); }
  void OnDone() override { delete this; }
};

} // namespace dtf::dist::ps
