// The parameter-server service of one ps task (PsService): its shard of the
// variables, pulls (parked in sync mode until their update is applied),
// pushes and their streams, sync aggregation, checkpoints, and the checks on
// every caller (roles from its certificate, bounded streams and parked
// pulls). runParameterServer (ParameterServer.cpp) serves it.
#pragma once

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/distributed/Cluster.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/VariableStore.h"
#include "schema/Placement.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/train/DynamicTable.h"
#include "runtime/train/Initializers.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace dtf::dist::ps {

using Clock = std::chrono::steady_clock;

inline grpc::Status fail(grpc::StatusCode code, const std::string &message) {
  return grpc::Status(code, message);
}

// Pull and Push carry tensors as raw byte buffers (TensorMessage.h), and
// so do their streams and InitializeStream; the other calls are plain
// protobuf.
using PsBase = rpc::ParameterServer::WithRawCallbackMethod_Pull<
    rpc::ParameterServer::WithRawCallbackMethod_Push<
        rpc::ParameterServer::WithRawCallbackMethod_PullStream<
            rpc::ParameterServer::WithRawCallbackMethod_PushStream<
                rpc::ParameterServer::WithRawCallbackMethod_InitializeStream<
                    rpc::ParameterServer::Service>>>>>;

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

// Whether the recv'd value `value` is what the ps's update adds to the
// global step (the operand of an assign_add to the global_step variable).
bool feedsGlobalStep(const plan::Plan &plan, const plan::Program &program,
                     int32_t value);

class PsService final : public PsBase {
public:
  PsService(const plan::Plan &plan, const plan::Placement &placement, int index,
            const TaskConfig &config);

  Status setUp();

  grpc::Status GetStatus(grpc::ServerContext *ctx, const rpc::StatusRequest *,
                         rpc::StatusReply *reply) override;

  grpc::Status Initialize(grpc::ServerContext *ctx,
                          const rpc::InitializeRequest *req,
                          rpc::InitializeReply *reply) override;

  // The values (a checkpoint's) either in the request's `data` or, from a
  // stream, in `staged` (one per value, checked to fit its variable).
  grpc::Status initialize(const rpc::InitializeRequest &request,
                          const std::vector<Tensor> *staged,
                          rpc::InitializeReply *reply, const std::string &who);

  /// The plan's initial value of a tensor this ps holds (rows of a shard
  /// made without the whole variable).
  Status initialShard(const plan::HeldTensor &h, Tensor *out) const;
  /// Initialize(restore): every tensor this ps holds read from checkpoint
  /// `step` in its --model-dir, straight into its variables (mu_ held).
  /// `version`: the updates the restored variables have seen (the step at
  /// which a dynamic table's restored rows count as last used).
  grpc::Status restoreInPlace(int64_t step, int64_t version);

  /// The rows of an embedding table (or shard) at the caller's ids.
  grpc::Status Lookup(grpc::ServerContext *ctx, const rpc::LookupRequest *req,
                      rpc::LookupReply *reply) override;

  grpc::ServerUnaryReactor *Pull(grpc::CallbackServerContext *ctx,
                                 const grpc::ByteBuffer *request,
                                 grpc::ByteBuffer *response) override;

  // The reply to a pull: its header and the variables, which `emit` copies
  // under the lock (the values between two updates).
  using PullEmit = std::function<void(const rpc::PullReply &,
                                      const std::vector<const Tensor *> &)>;
  using PullFinish = std::function<void(const grpc::Status &)>;

  /// Answers a pull now, or, when it asks for a version this ps has not
  /// reached yet, parks it until the version is there, its wait ends or the
  /// call is cancelled: no gRPC callback thread waits (a push needs one).
  void startPull(grpc::CallbackServerContext *ctx, rpc::PullRequest req,
                 PullEmit emit, PullFinish finish);

  // A pull names each variable once: a name repeated would multiply the
  // reply (a few bytes of request for megabytes of answer).
  grpc::Status checkPullNames(const rpc::PullRequest &req) const;

  // Whether a pull must wait for an update (mu_ held).
  bool mustWait(const rpc::PullRequest &req) const {
    return initialized_ && !shutdown_ && req.incarnation() == incarnation_ &&
           version_ < req.min_version();
  }

  // The reply to a pull as things are (mu_ held): not ready while it must
  // wait, else the variables, which `emit` copies.
  grpc::Status answerPull(const rpc::PullRequest &request,
                          const PullEmit &emit);

  // The parked pulls' thread: every change of state (cv_) and every 20 ms,
  // answers those that need not wait any longer.
  void parkLoop();
  void releaseParked(std::unique_lock<std::mutex> &lock, bool all);

public:
  /// Registers a stream (keyed by its context) of the caller: at most
  /// kMaxStreamsPerPeer per caller and kMaxStreams in all, since each holds
  /// a header and a chunk in memory.
  grpc::Status openStream(grpc::CallbackServerContext *ctx);
  void streamMoved(grpc::CallbackServerContext *ctx) {
    std::lock_guard<std::recursive_mutex> lock(streamsMu_);
    auto it = streams_.find(ctx);
    if (it != streams_.end())
      it->second.moved = Clock::now();
  }
  void closeStream(grpc::CallbackServerContext *ctx);
  /// Cancels the streams that moved no chunk for --stall-timeout: a caller
  /// that stops sending (or reading) mid-stream holds memory for nothing.
  /// Under the lock, so that no stream ends (and its context goes) meanwhile;
  /// the lock is recursive because a cancel may end the call at once.
  void cutStalledStreams();

  /// Answers every parked pull and stops parking new ones (before the
  /// server shuts down, which waits for every call to finish).
  void stopParking();
  ~PsService() override { stopParking(); }

private:
  struct ParkedPull {
    grpc::CallbackServerContext *ctx;
    rpc::PullRequest req;
    PullEmit emit;
    PullFinish finish;
    std::chrono::system_clock::time_point until;
    std::string peer;
  };
  static constexpr size_t kMaxParked = 1024;
  static constexpr int kMaxParkedPerPeer = 16;
  std::vector<ParkedPull> parked_;
  std::map<std::string, int> parkedBy_;
  struct OpenStream {
    std::string peer;
    Clock::time_point moved;
    bool cut = false;
  };
  static constexpr size_t kMaxStreams = 64;
  static constexpr int kMaxStreamsPerPeer = 8;
  std::recursive_mutex streamsMu_;
  std::map<grpc::CallbackServerContext *, OpenStream> streams_;
  std::map<std::string, int> streamsBy_;
  bool parkerStop_ = false;
  std::thread parker_;

public:
  /// A pull reply in chunks: the variables copied once under the lock into
  /// a snapshot the chunks point at, which lives until the call is done.
  class PullWriter final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
  public:
    PullWriter(PsService *ps, grpc::CallbackServerContext *ctx)
        : ps_(ps), ctx_(ctx) {}
    void snapshot(const rpc::PullReply &reply,
                  const std::vector<const Tensor *> &payload,
                  size_t chunkBytes) {
      std::vector<const Tensor *> copies;
      for (const Tensor *t : payload) {
        snapshot_.push_back(Tensor::allocate(t->dtype(), t->shape()));
        std::memcpy(snapshot_.back().rawData(), t->rawData(), t->byteSize());
      }
      for (const Tensor &t : snapshot_)
        copies.push_back(&t);
      chunks_ = packChunks(reply, copies, chunkBytes);
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
      ps_->streamMoved(ctx_);
      if (++next_ < chunks_.size())
        StartWrite(&chunks_[next_]);
      else
        end(grpc::Status::OK);
    }
    void OnDone() override {
      ps_->closeStream(ctx_);
      delete this;
    }

  private:
    // The stream stops counting against its caller when this ps ends it,
    // before the caller can see the end: gRPC runs OnDone later.
    void end(const grpc::Status &status) {
      ps_->closeStream(ctx_);
      Finish(status);
    }
    PsService *ps_;
    grpc::CallbackServerContext *ctx_;
    std::vector<Tensor> snapshot_;
    std::vector<grpc::ByteBuffer> chunks_;
    size_t next_ = 0;
  };

  grpc::ServerWriteReactor<grpc::ByteBuffer> *
  PullStream(grpc::CallbackServerContext *ctx,
             const grpc::ByteBuffer *request) override;

  /// A stream of chunks from a worker (a push; the chief's initial values):
  /// each chunk is copied straight into the tensors `prepare` allocated from
  /// the header, and `complete` runs only once the stream ended whole, so a
  /// broken or cancelled stream changes nothing.
  template <typename Request, typename Reply>
  class StreamReader final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
  public:
    using Prepare = grpc::Status (PsService::*)(const Request &,
                                                std::vector<Tensor> *,
                                                std::vector<PayloadTarget> *);
    using Complete = std::function<grpc::Status(
        const Request &, std::vector<Tensor> &, Reply *)>;

    /// `what`: "a push stream"; `unchanged`: "nothing applied".
    StreamReader(PsService *ps, grpc::CallbackServerContext *ctx,
                 grpc::ByteBuffer *response, const std::string &what,
                 std::string unchanged, Prepare prepare, Complete complete)
        : ps_(ps), ctx_(ctx), response_(response),
          what_(ps->name_ + ": refused " + what + ": "),
          unchanged_(std::move(unchanged)), complete_(std::move(complete)),
          reader_(&req_, [this, prepare](std::vector<PayloadTarget> *targets) {
            return refusal_.note((ps_->*prepare)(req_, &values_, targets));
          }) {
      StartRead(&chunk_);
    }
    void OnReadDone(bool ok) override {
      if (ok) {
        ps_->streamMoved(ctx_);
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
        end(fail(grpc::StatusCode::INVALID_ARGUMENT,
                 what_ + "incomplete (" + unchanged_ + "): " + s.message()));
        return;
      }
      Reply reply;
      grpc::Status st = complete_(req_, values_, &reply);
      if (st.ok())
        *response_ = serializeMessage(reply);
      end(st);
    }
    void OnDone() override {
      ps_->closeStream(ctx_);
      delete this;
    }

  private:
    void end(const grpc::Status &status) {
      ps_->closeStream(ctx_);
      Finish(status);
    }
    PsService *ps_;
    grpc::CallbackServerContext *ctx_;
    grpc::ByteBuffer *response_;
    const std::string what_, unchanged_;
    Complete complete_;
    Request req_;
    std::vector<Tensor> values_;
    Refusal refusal_;
    ChunkReader reader_;
    grpc::ByteBuffer chunk_;
  };

  grpc::ServerReadReactor<grpc::ByteBuffer> *
  PushStream(grpc::CallbackServerContext *ctx,
             grpc::ByteBuffer *response) override {
    std::string who;
    if (auto bad = admit(*ctx, Role::kPusher, "push", &who); !bad.ok())
      return new Refused(bad);
    if (auto bad = openStream(ctx); !bad.ok())
      return new Refused(bad);
    ++streamedPushes_;
    return new StreamReader<rpc::PushRequest, rpc::PushReply>(
        this, ctx, response, "a push stream", "nothing applied",
        &PsService::preparePush,
        [this, who](const rpc::PushRequest &req, std::vector<Tensor> &values,
                    rpc::PushReply *reply) {
          return applyPush(req, values, reply, named(who, req.caller()));
        });
  }

  /// A stream refused before its first byte is read.
  class Refused final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
  public:
    explicit Refused(const grpc::Status &status) { Finish(status); }
    void OnDone() override { delete this; }
  };

  /// The chief's initial values, staged in tensors of the variables' own
  /// shapes and copied in under the lock once complete.
  grpc::ServerReadReactor<grpc::ByteBuffer> *
  InitializeStream(grpc::CallbackServerContext *ctx,
                   grpc::ByteBuffer *response) override;

  // Each value must be one of this ps's variables, of its type; the staging
  // tensors are the variables' own size (the set of variables is fixed
  // after setUp, so no lock is needed to look them up).
  grpc::Status prepareInitialize(const rpc::InitializeRequest &req,
                                 std::vector<Tensor> *staged,
                                 std::vector<PayloadTarget> *targets);

  grpc::ServerUnaryReactor *Push(grpc::CallbackServerContext *ctx,
                                 const grpc::ByteBuffer *request,
                                 grpc::ByteBuffer *response) override;

  // A whole push in one message: the same reader as a stream's, one chunk.
  grpc::Status push(const grpc::ByteBuffer &request, rpc::PushReply *reply,
                    const std::string &who);

  // The tensors a push's header announces, one per key of the update, each
  // checked to be what the update takes before it is allocated; `targets`
  // gets where their bytes go.
  grpc::Status preparePush(const rpc::PushRequest &req,
                           std::vector<Tensor> *values,
                           std::vector<PayloadTarget> *targets);

  // A complete push, applied (async) or summed (sync).
  grpc::Status applyPush(const rpc::PushRequest &request,
                         std::vector<Tensor> &values, rpc::PushReply *reply,
                         const std::string &who);

  grpc::Status Save(grpc::ServerContext *ctx, const rpc::SaveRequest *req,
                    rpc::SaveReply *reply) override;

  grpc::Status WorkerDone(grpc::ServerContext *ctx, const rpc::DoneRequest *req,
                          rpc::DoneReply *reply) override;

  grpc::Status Shutdown(grpc::ServerContext *ctx,
                        const rpc::ShutdownRequest *req,
                        rpc::ShutdownReply *) override;

  /// Blocks until Shutdown or the stop flag; returns the reason.
  std::string waitForShutdown() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!shutdown_ && !(config_.stop && config_.stop->load()))
      cv_.wait_for(lock, std::chrono::milliseconds(200));
    return shutdown_ ? shutdownReason_ : std::string("interrupted");
  }

  std::string summary();

  void log(const std::string &line) {
    // Under the launcher every line already carries the task's name.
    std::fprintf(config_.out, "%s\n", line.c_str());
    std::fflush(config_.out);
  }

private:
  // Who may make which calls: any task of the job (status, pulls), a
  // worker (done), a worker that pushes (stage 0 of its replica), the chief
  // (initialize, save, shut down).
  enum class Role { kMember, kWorker, kPusher, kChief };

  /// The caller's task as its certificate names it (the request's own
  /// `caller.task` is never believed under TLS), and whether it may `what`.
  /// A caller that is no task of this job learns nothing from the refusal;
  /// a task of the job that oversteps its role is named, here and in the
  /// ps's log. With --insecure there is no identity: *who is "" and every
  /// caller is let in (docs/security.md).
  grpc::Status admit(const grpc::ServerContextBase &ctx, Role role,
                     const char *what, std::string *who);

  /// A refusal of a task of this job in the ps's log: at most one line a
  /// second, with how many were refused meanwhile.
  void refusal(const std::string &line);

  /// The caller's name: its certificate's, else (--insecure) its claim.
  static std::string named(const std::string &who, const rpc::Caller &caller) {
    return who.empty() ? plan::printable(caller.task()) : who;
  }

  grpc::Status checkCaller(const rpc::Caller &caller);

  /// A push's gradients must be finite, and its integer operands (the
  /// global step's increment) 1: one update advances the step by one.
  grpc::Status checkPushValues(const std::vector<Tensor> &values,
                               const std::string &who);

  /// A checkpoint goes into the job's model directory (--model-dir of this
  /// ps), nowhere else.
  grpc::Status checkSaveDir(const std::string &dir);

  void fillStatus(rpc::StatusReply *reply);

  int keyIndex(const std::string &key) const {
    for (size_t k = 0; k < keys_.size(); ++k)
      if (keys_[k] == key)
        return int(k);
    return -1;
  }

  template <typename T> static void addInto(Tensor &sum, const Tensor &t) {
    T *a = sum.data<T>();
    const T *b = t.data<T>();
    for (int64_t i = 0; i < sum.numElements(); ++i)
      a[i] += b[i];
  }
  static void accumulate(Tensor &sum, const Tensor &t);
  /// Sync mode, a sparse key: the replicas' ids (or rows) one after another.
  static Tensor concatRows(const Tensor &a, const Tensor &b);
  static void scale(Tensor &t, double f);

  Status apply(std::vector<Tensor> &values);

  std::string waitingFor() const;

  void traceSync(int64_t at);

  const plan::Plan &plan_;
  const plan::Placement &placement_;
  const int index_;
  const TaskConfig &config_;
  std::string name_;
  bool sync_ = false;
  int64_t replicas_ = 1;
  bool holdsStep_ = false;
  std::vector<plan::HeldTensor> held_;
  std::vector<std::string> names_;
  std::vector<std::string> keys_;
  std::vector<plan::TensorType> expected_; // what the update takes per key
  std::vector<bool> stepKey_; // the key feeds the global step's increment
  // Sparse gradients: a key whose values replicas concatenate (ids, rows)
  // rather than sum; for an ids key, the rows of the shard its ids index.
  std::vector<bool> concat_;
  std::vector<int64_t> idRows_;
  std::mutex logMu_;
  int64_t refusals_ = 0;
  Clock::time_point lastRefusalLog_{};

  std::mutex mu_;
  std::condition_variable cv_;
  size_t span_ = 1; // workers per replica: only each replica's first pushes
  exec::VariableStore variables_;
  // A checkpoint is being written from the variables themselves: nothing
  // may change them until it is done.
  bool saving_ = false;
  void waitWhileSaving(std::unique_lock<std::mutex> &lock) {
    cv_.wait(lock, [this] { return !saving_; });
  }
  std::unique_ptr<exec::Executor> update_;
  // The dynamic tables among the shards held (by their names here, "emb" or
  // "emb/part_1"), and for each push key the table its ids index (null
  // for the others).
  train::DynamicTables dynamic_;
  std::map<std::string, train::DynamicTable *> dynamicByName_;
  std::vector<train::DynamicTable *> dynamicKey_;
  bool initialized_ = false;
  // Unique per process: a restarted ps never reuses an incarnation its
  // dead predecessor handed out, so stale state is always recognized.
  int64_t incarnation_ =
      int64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count()) &
      ((int64_t(1) << 52) - 1);
  int64_t version_ = 0;
  std::vector<Tensor> sums_;
  std::vector<std::string> contributors_;
  int64_t stale_ = 0;
  std::atomic<int64_t> streamedPulls_{0}, streamedPushes_{0}, streamedInits_{0};
  // Tensor bytes taken by pushes and given by pulls and lookups; embedding
  // rows served and pushed (GetStatus, and the summary at exit).
  std::atomic<uint64_t> payloadIn_{0}, payloadOut_{0}, rowsLookedUp_{0},
      sparseRowsPushed_{0}, lookups_{0};
  std::set<std::string> done_;
  bool shutdown_ = false;
  std::string shutdownReason_;
  std::FILE *trace_ = nullptr;
};

} // namespace dtf::dist::ps
