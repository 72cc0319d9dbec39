// The parameter-server service of one ps task (PsService): the gRPC calls
// over its store (PsStore: the held tensors), its apply core (PsUpdate: the
// update program) and its sync core (SyncAggregator), with pulls parked in
// sync mode until their update is applied, bounded streams (PsStreams.h),
// and the checks on every caller (roles from its certificate).
// runParameterServer (ParameterServer.cpp) serves it.
#pragma once

#include "runtime/distributed/Cluster.h"
#include "runtime/distributed/Membership.h"
#include "runtime/distributed/PsStore.h"
#include "runtime/distributed/PsStreams.h"
#include "runtime/distributed/PsUpdate.h"
#include "runtime/distributed/SharedRegion.h"
#include "runtime/distributed/SplitLedger.h"
#include "runtime/distributed/SyncAggregator.h"
#include "runtime/distributed/TransferBuffers.h"
#include "runtime/plan/PlanTypes.h"

#include "service.grpc.pb.h"

#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace dtf::dist::ps {

// Pull and Push carry tensors as raw byte buffers (TensorMessage.h), and
// so do their streams, InitializeStream and ReplicaStream; the other calls
// are plain protobuf (MirrorStream: TensorChunk messages).
using PsBase = rpc::ParameterServer::WithRawCallbackMethod_Pull<
    rpc::ParameterServer::WithRawCallbackMethod_Push<
        rpc::ParameterServer::WithRawCallbackMethod_PullStream<
            rpc::ParameterServer::WithRawCallbackMethod_PushStream<
                rpc::ParameterServer::WithRawCallbackMethod_InitializeStream<
                    rpc::ParameterServer::WithRawCallbackMethod_ReplicaStream<
                        rpc::ParameterServer::Service>>>>>>;

class PsService final : public PsBase {
public:
  PsService(const plan::Plan &plan, const plan::Placement &placement, int index,
            const TaskConfig &config);
  ~PsService() override { stopParking(); }

  Status setUp();

  grpc::Status GetStatus(grpc::ServerContext *ctx, const rpc::StatusRequest *,
                         rpc::StatusReply *reply) override;
  grpc::Status Initialize(grpc::ServerContext *ctx,
                          const rpc::InitializeRequest *req,
                          rpc::InitializeReply *reply) override;
  /// The chief's initial values, staged in tensors of the variables' own
  /// shapes and copied in under the lock once complete.
  grpc::ServerReadReactor<grpc::ByteBuffer> *
  InitializeStream(grpc::CallbackServerContext *ctx,
                   grpc::ByteBuffer *response) override;
  /// The rows of an embedding table (or shard) at the caller's ids.
  grpc::Status Lookup(grpc::ServerContext *ctx, const rpc::LookupRequest *req,
                      rpc::LookupReply *reply) override;
  grpc::ServerUnaryReactor *Pull(grpc::CallbackServerContext *ctx,
                                 const grpc::ByteBuffer *request,
                                 grpc::ByteBuffer *response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer> *
  PullStream(grpc::CallbackServerContext *ctx,
             const grpc::ByteBuffer *request) override;
  grpc::ServerUnaryReactor *Push(grpc::CallbackServerContext *ctx,
                                 const grpc::ByteBuffer *request,
                                 grpc::ByteBuffer *response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer> *
  PushStream(grpc::CallbackServerContext *ctx,
             grpc::ByteBuffer *response) override;
  grpc::Status Save(grpc::ServerContext *ctx, const rpc::SaveRequest *req,
                    rpc::SaveReply *reply) override;
  grpc::Status WorkerDone(grpc::ServerContext *ctx, const rpc::DoneRequest *req,
                          rpc::DoneReply *reply) override;
  grpc::Status Shutdown(grpc::ServerContext *ctx,
                        const rpc::ShutdownRequest *req,
                        rpc::ShutdownReply *) override;
  /// Exactly-once data (ps 0): the caller's next split (PsLedger.cpp).
  grpc::Status LeaseData(grpc::ServerContext *ctx, const rpc::LeaseRequest *req,
                         rpc::LeaseReply *reply) override;
  /// --ps-replicas 2 (PsReplica.cpp): from the previous ps on the ring, a
  /// snapshot of its shard or one update it applied, into the replica.
  /// Served by gRPC's synchronous API: that ps sends it holding its lock,
  /// and so may this one to it; on the callback threads (all of them may
  /// wait for this ps's lock) the two would wait on each other.
  grpc::Status MirrorStream(grpc::ServerContext *ctx,
                            grpc::ServerReader<rpc::TensorChunk> *reader,
                            rpc::MirrorReply *reply) override;
  /// --ps-replicas 2: the replica, to the ps whose shard it is (restarted).
  grpc::ServerWriteReactor<grpc::ByteBuffer> *
  ReplicaStream(grpc::CallbackServerContext *ctx,
                const grpc::ByteBuffer *request) override;

  /// Answers every parked pull and stops parking new ones (before the
  /// server shuts down, which waits for every call to finish).
  void stopParking();

  /// Blocks until Shutdown or the stop flag; returns the reason.
  std::string waitForShutdown();

  std::string summary();
  /// The pulls and pushes whose tensors went through shared memory (a line
  /// of its own after the summary); "" when none did.
  std::string regionSummary() const;

  void log(const std::string &line) {
    // Under the launcher every line already carries the task's name.
    std::fprintf(config_.out, "%s\n", line.c_str());
    std::fflush(config_.out);
  }

private:
  // Who may make which calls: any task of the job (status, pulls), a
  // worker (done), a worker that pushes (stage 0 of its replica), the chief
  // (initialize, save, shut down), the ps whose shard this ps mirrors
  // (--ps-replicas 2: its snapshots and updates, and its replica back).
  enum class Role { kMember, kWorker, kPusher, kChief, kMirrored };

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
  /// A checkpoint goes into the job's model directory (--model-dir of this
  /// ps), nowhere else.
  grpc::Status checkSaveDir(const std::string &dir);
  /// Registers a stream of the caller (StreamLimits).
  grpc::Status openStream(grpc::CallbackServerContext *ctx);

  // The values (a checkpoint's) either in the request's `data` or, from a
  // stream, in `staged` (one per value, checked to fit its variable).
  grpc::Status initialize(const rpc::InitializeRequest &request,
                          const std::vector<Tensor> *staged,
                          rpc::InitializeReply *reply, const std::string &who);
  grpc::Status checkInitialValues(const rpc::InitializeRequest &req,
                                  bool staged);
  /// Initialize(restore): every tensor this ps holds read from checkpoint
  /// `step` in its --model-dir, straight into its variables (mu_ held).
  /// `version`: the updates the restored variables have seen.
  grpc::Status restoreInPlace(int64_t step, int64_t version);
  // Each value must be one of this ps's variables, of its type; the staging
  // tensors are the variables' own size (the set of variables is fixed
  // after setUp, so no lock is needed to look them up).
  grpc::Status prepareInitialize(const rpc::InitializeRequest &req,
                                 std::vector<Tensor> *staged,
                                 std::vector<PayloadTarget> *targets);
  // Staging tensors for `values`, each checked to be one of `vars`, of its
  // type and size (an initialization's, a snapshot for the replica).
  grpc::Status
  stageValues(const exec::VariableStore &vars,
              const google::protobuf::RepeatedPtrField<rpc::WireTensor> &values,
              std::vector<Tensor> *staged, std::vector<PayloadTarget> *targets);

  // The reply to a pull: its header and the variables, copied under the
  // lock (the values between two updates) into buffers of buffers_.
  using PullEmit = std::function<void(const rpc::PullReply &,
                                      const std::vector<Tensor> &)>;
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
  // The reply to a pull of `peer` as things are (mu_ held): not ready
  // while it must wait, else a snapshot of the variables (into the
  // caller's shared-memory slot when it names one they fit).
  grpc::Status answerPull(const rpc::PullRequest &request,
                          const std::string &peer, const PullEmit &emit);
  // The values straight into the request's reply_into slot (mu_ held;
  // PsRegions.cpp); *done false when they do not fit it (they go as bytes
  // then).
  grpc::Status pullIntoRegion(const rpc::PullRequest &req,
                              const std::string &peer, rpc::PullReply *reply,
                              bool *done);
  // The parked pulls' thread: every change of state (cv_) and every 20 ms,
  // answers those that need not wait any longer.
  void parkLoop();
  void releaseParked(std::unique_lock<std::mutex> &lock, bool all);

  // A whole push in one message: the same reader as a stream's, one chunk.
  grpc::Status push(const grpc::ByteBuffer &request, rpc::PushReply *reply,
                    const std::string &who);
  // The tensors a push's header announces (PsUpdate::prepare), after the
  // caller's plan is checked; with values_in, copied out of the caller's
  // shared-memory slot at once (no payload follows then).
  grpc::Status preparePush(const rpc::PushRequest &req, const std::string &who,
                           std::vector<Tensor> *values,
                           std::vector<PayloadTarget> *targets);
  // A push's values out of `caller`'s slot (PsRegions.cpp; each checked to
  // lie inside it first): an async push's floating-point values become
  // tensors over the slot, the others are copied into their places;
  // *targets cleared: no payload.
  grpc::Status pushFromRegion(const rpc::PushRequest &req,
                              const std::string &caller,
                              std::vector<Tensor> *values,
                              std::vector<PayloadTarget> *targets);
  // A complete push, applied (async) or summed (sync).
  grpc::Status applyPush(const rpc::PushRequest &request,
                         std::vector<Tensor> &values, rpc::PushReply *reply,
                         const std::string &who);
  grpc::Status joinSyncUpdate(const rpc::PushRequest &req,
                              std::vector<Tensor> &values,
                              rpc::PushReply *reply, const std::string &who);
  // Runs the update and counts it (mu_ held); with --ps-replicas 2 the
  // mirror applies it too before this returns.
  Status apply(std::vector<Tensor> &values);

  // --ps-replicas 2 (PsReplica.cpp). This ps's shard on its mirror: every
  // applied update forwarded under mu_ (so that no pull sees an update the
  // replica lacks, and they arrive in the order applied), a snapshot after
  // each initialization and whenever the mirror lost step; while it cannot
  // be reached, updates are applied without it (degraded), and the parked
  // pulls' thread sends a snapshot once it is back.
  Status setUpReplica();
  // An update's values (or a snapshot's tensors) as the chunks of a
  // MirrorStream, copied: the update runs while they cross.
  std::vector<grpc::ByteBuffer> updateChunks(const std::vector<Tensor> &values,
                                             int64_t at, uint64_t *bytes) const;
  std::vector<grpc::ByteBuffer>
  mirrorChunks(const rpc::MirrorRequest &header,
               const std::vector<const Tensor *> &payloads,
               uint64_t *bytes) const;
  grpc::Status callMirror(const std::vector<grpc::ByteBuffer> &chunks,
                          uint64_t bytes);
  // The mirror's answer to update `at`: counted, or a snapshot sent.
  void forwarded(const grpc::Status &st, int64_t at);
  bool sendSnapshot(const std::string &why);
  void retryMirror();
  // Initialize with from_replica: this ps's shard from its mirror's
  // replica, straight into the variables; *version: the updates it saw.
  grpc::Status takeReplica(int64_t *version);
  grpc::Status prepareMirror(const rpc::MirrorRequest &req,
                             std::vector<Tensor> *values,
                             std::vector<PayloadTarget> *targets);
  grpc::Status completeMirror(const rpc::MirrorRequest &req,
                              std::vector<Tensor> &values,
                              rpc::MirrorReply *reply);
  std::string replicaSummary();

  // The split ledger's part in pushes (ps 0, mu_ held; a push without
  // data_batches, or to another ps, is none of its business). Admits: every
  // batch a push carries is leased to its caller, else the push is dropped
  // (stale, lease_lost). Applied (async) / joined and the update applied
  // (sync): consumed. Dropped: pending again.
  using Batches = google::protobuf::RepeatedField<int64_t>;
  bool ledgerAdmits(const rpc::PushRequest &req, const std::string &who,
                    rpc::PushReply *reply);
  void ledgerApplied(const Batches &batches);
  void ledgerJoined(const Batches &batches);
  void ledgerUpdateApplied();
  void ledgerDropped(const rpc::PushRequest &req, const std::string &who);
  // Initialize: the checkpoint's ledger (ps 0), checked into *ledger before
  // anything changes.
  grpc::Status restoreLedger(const rpc::InitializeRequest &req,
                             SplitLedger *ledger);
  void logEpochs();

  // Membership (PsMembership.cpp, mu_ held): `name` called this ps (only
  // the workers that push count: stage 0 of a model-parallel replica).
  void seen(const std::string &name);
  // Gradients the open sync update needs now: min(replicas_to_aggregate,
  // live workers), at least 1.
  int64_t needed();
  // Applies the open sync update once it has what it needs (after a
  // worker left or went silent, nobody else would push to complete it), and
  // logs who joined and went.
  void followMembership();

  void fillStatus(rpc::StatusReply *reply);
  // A checkpoint is being written from the variables themselves: nothing
  // may change them until it is done.
  void waitWhileSaving(std::unique_lock<std::mutex> &lock) {
    cv_.wait(lock, [this] { return !saving_; });
  }

  const TaskConfig &config_;
  const std::string name_;
  bool sync_ = false;
  size_t span_ = 1; // workers per replica: only each replica's first pushes
  const plan::Plan &plan_;
  const plan::Placement &placement_;
  const int index_;

  PsStore store_;
  // The shared-memory regions of the workers on this host (mapped on
  // first sight, checked; docs/protocol.md, "Shared memory").
  MappedRegions regions_;
  // Pull snapshots and pushed values (docs/protocol.md, "Buffers").
  std::unique_ptr<TransferBuffers> buffers_;
  PsUpdate update_;
  SyncAggregator aggregator_;
  SplitLedger ledger_; // ps 0, exactly-once data; under mu_
  Membership members_; // under mu_
  StreamLimits streams_;

  std::mutex logMu_;
  int64_t refusals_ = 0;
  Clock::time_point lastRefusalLog_{};

  std::mutex mu_;
  std::condition_variable cv_;
  bool saving_ = false;
  bool initialized_ = false;
  // Unique per process: a restarted ps never reuses an incarnation its
  // dead predecessor handed out, so stale state is always recognized.
  int64_t incarnation_ =
      int64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count()) &
      ((int64_t(1) << 52) - 1);
  int64_t version_ = 0;
  std::set<std::string> done_;
  bool shutdown_ = false;
  std::string shutdownReason_;

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
  bool parkerStop_ = false;
  std::thread parker_;

  // --ps-replicas 2: the replica of the previous ps's shard (its own lock,
  // never held while calling out, so that two ps tasks forwarding to each
  // other under their mu_ cannot wait on each other), and this ps's mirror.
  struct Replica {
    std::mutex mu;
    int of = -1; // the ps whose shard it is; -1: no replicas
    std::unique_ptr<PsStore> store;
    std::unique_ptr<PsUpdate> update;
    int64_t version = -1; // -1: none yet (no snapshot since this start)
    int64_t snapshots = 0, updates = 0;
  };
  Replica replica_;
  int mirror_ = -1; // the ps holding this one's replica; -1: none
  std::unique_ptr<grpc::GenericStub> mirrorStub_;    // under mu_; null: anew
  bool mirrorSynced_ = false, degradedSaid_ = false; // under mu_
  Clock::time_point nextMirrorTry_{};
  int64_t forwarded_ = 0, snapshotsSent_ = 0, degradedTimes_ = 0;

  std::atomic<int64_t> streamedPulls_{0}, streamedPushes_{0}, streamedInits_{0};
  std::atomic<int64_t> regionPulls_{0}, regionPushes_{0};
  std::atomic<int64_t> inPlacePushValues_{0}; // read in the caller's slot
  // Tensor bytes taken by pushes and given by pulls and lookups; embedding
  // rows served and pushed (GetStatus, and the summary at exit).
  std::atomic<uint64_t> payloadIn_{0}, payloadOut_{0}, rowsLookedUp_{0},
      sparseRowsPushed_{0}, lookups_{0};
};

} // namespace dtf::dist::ps
