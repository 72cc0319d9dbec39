// Model parallelism: the stages of one replica on several worker tasks.
// Stage 0 pulls, starts each step on the other stages, runs its part and
// pushes; a later stage runs its part of each step stage 0 starts. Tensors
// cross between stages as dtf.send/dtf.recv pairs over the Worker service's
// Transfer call.
#pragma once

#include "runtime/distributed/BetweenGraph.h"
#include "runtime/exec/Rendezvous.h"
#include "dtf/OpNames.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>

namespace dtf::dist {

/// What a stage's Worker service receives: BeginStep from stage 0, and the
/// tensors other stages send it (into its rendezvous table).
using StageBase =
    rpc::Worker::WithRawCallbackMethod_Transfer<rpc::Worker::Service>;

class StageService final : public StageBase {
public:
  /// `incarnation`: this process's, so that the other stages see a restart;
  /// `program`: the stage's, whose recvs say which keys it takes.
  StageService(Links &links, exec::RendezvousTable &table, int64_t incarnation,
               const plan::Program &program)
      : links_(links), table_(table), incarnation_(incarnation) {
    for (const plan::Op &op : program.ops())
      if (op.name() == dtf::ops::kRecv)
        keys_.insert(op.attrs().at("key").s());
  }

  /// This stage lost a ps in step `sequence`: stage 0 asks, and drops it.
  void setFailure(uint64_t sequence, const std::string &why) {
    std::lock_guard<std::mutex> lock(mu_);
    failedSequence_ = sequence;
    failure_ = why;
  }

  grpc::Status GetStatus(grpc::ServerContext *, const rpc::StatusRequest *,
                         rpc::StatusReply *reply) override;

  grpc::Status BeginStep(grpc::ServerContext *,
                         const rpc::BeginStepRequest *req,
                         rpc::BeginStepReply *) override;

  grpc::ServerUnaryReactor *Transfer(grpc::CallbackServerContext *ctx,
                                     const grpc::ByteBuffer *request,
                                     grpc::ByteBuffer *response) override;

  grpc::Status Shutdown(grpc::ServerContext *ctx, const rpc::ShutdownRequest *,
                        rpc::ShutdownReply *) override {
    std::string who;
    if (auto bad = links_.config().transport.admitTask(*ctx, &who); !bad.ok())
      return bad;
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    cv_.notify_all();
    return grpc::Status::OK;
  }

  /// Waits up to `timeout` for stage 0's next BeginStep.
  bool nextBegin(rpc::BeginStepRequest *out, milliseconds timeout);
  bool shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    return shutdown_;
  }
  /// Stage 0: its own run, which the transfers sent to it carry.
  void setRun(uint64_t run) {
    std::lock_guard<std::mutex> lock(mu_);
    run_ = run;
  }
  /// True when stage 0 already started a step after `sequence` (it dropped
  /// that one).
  bool hasBeginAfter(uint64_t sequence);
  /// True once stage 0 restarted during the current step.
  bool abandoned() {
    std::lock_guard<std::mutex> lock(mu_);
    return abandoned_;
  }

private:
  grpc::Status checkCaller(const rpc::Caller &caller) const;

  grpc::Status transfer(const grpc::ByteBuffer &request);

  Links &links_;
  exec::RendezvousTable &table_;
  const int64_t incarnation_;
  std::set<std::string> keys_;
  uint64_t failedSequence_ = 0;
  std::string failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<rpc::BeginStepRequest> begins_;
  uint64_t run_ = 0;
  bool abandoned_ = false;
  bool shutdown_ = false;
};

/// The other stages of this task's replica, and the rendezvous the
/// executor's dtf.send and dtf.recv ops use: a send is a Transfer call to
/// the receiving stage; a recv waits in this stage's table.
class StageLinks final : public exec::Rendezvous {
public:
  StageLinks(Links &links, exec::RendezvousTable &table, int replica, int stage,
             int span);

  /// Waits until every other stage answers, and notes which process each is.
  Status connect();

  /// The run (stage 0's process) and step that transfers belong to.
  /// Starts step `sequence` of stage 0's run `run` (global step `step`):
  /// the previous step's sends must have arrived, and what was left of a
  /// dropped step is let go.
  Status setStep(uint64_t run, uint64_t sequence, int64_t step);
  uint64_t sequence() const { return sequence_; }
  /// True when the last recv failed because a stage could not run the step
  /// (it lost a ps): the step is dropped, not the job.
  bool stepDropped() const { return stepDropped_; }
  /// Stops a waiting recv (stage 0 restarted, or stop asked).
  void setAbandoned(std::function<bool()> abandoned) {
    abandoned_ = std::move(abandoned);
  }

  /// Sends without waiting for the call: the value is copied into the
  /// request (small next to the step's work), so the stage goes on while it
  /// travels; drainSends() collects the calls' results.
  Status send(const std::string &key, int peer, uint64_t,
              const Tensor &value) override;

  /// Waits for every send still on its way; the first that failed.
  Status drainSends();
  ~StageLinks() override { (void)drainSends(); }

  Status recv(const std::string &key, int peer, uint64_t, Tensor *out) override;

  /// True when the last recv or send failed because its peer is gone.
  bool lostPeer() const { return lostPeer_; }

  /// Stage 0: starts the step set by setStep on every other stage (or ends
  /// them); every stage is told, the first failure returned.
  Status begin(bool done, const std::vector<int64_t> &versions);

  const TaskRef &task(int stage) const { return peers_[size_t(stage)].task; }

private:
  struct Peer {
    TaskRef task;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<rpc::Worker::Stub> stub;
    std::unique_ptr<grpc::GenericStub> raw;
    int64_t incarnation = 0; // of its process, as connect() found it
  };
  struct PendingSend {
    grpc::ClientContext ctx;
    grpc::ByteBuffer request, response;
  };

  grpc::Status status(Peer &p, rpc::StatusReply *reply);
  Links &links_;
  exec::RendezvousTable &table_;
  int stage_;
  std::vector<Peer> peers_;
  uint64_t run_ = 0;
  uint64_t sequence_ = 0;
  int64_t step_ = 0;
  std::function<bool()> abandoned_;
  bool lostPeer_ = false;
  bool stepDropped_ = false;
  // The sends on their way (this step's), and the first that failed.
  std::mutex sendMu_;
  std::condition_variable sendCv_;
  int inFlight_ = 0;
  std::vector<std::unique_ptr<PendingSend>> sends_;
  Status sendFailed_ = Status::ok();
  bool sendLost_ = false;
};

/// Stage 0 of a model-parallel replica: pulls, starts the step on the other
/// stages (with the versions it pulled), runs its part, pushes.
class StageLeadDriver : public train::StepDriver {
public:
  StageLeadDriver(PsDriver &ps, StageLinks &stages, uint64_t run)
      : ps_(ps), stages_(stages), run_(run) {}

  Status beforeStep(int64_t *globalStep, bool *done) override {
    return ps_.beforeStep(globalStep, done);
  }
  Status startStep(int64_t globalStep) override {
    std::vector<int64_t> versions;
    for (const PsLink &l : ps_.ps())
      versions.push_back(l.pulledVersion);
    DTF_RETURN_IF_ERROR(stages_.setStep(run_, ++sequence_, globalStep));
    return stages_.begin(/*done=*/false, versions);
  }
  bool dropStep(const Status &failure) override {
    if (!stages_.stepDropped())
      return false;
    ps_.say(failure.message() + "; step dropped, going on once the ps tasks "
                                "are back");
    return true;
  }
  Status afterStep(exec::Executor &e, int firstSend, bool withhold) override {
    return ps_.afterStep(e, firstSend, withhold);
  }
  Status beforeEval() override { return ps_.beforeEval(); }

private:
  PsDriver &ps_;
  StageLinks &stages_;
  uint64_t run_;
  uint64_t sequence_ = 0;
};

/// A later stage of a model-parallel replica: runs its part of each step
/// stage 0 starts, until stage 0 says the job is done.
int runLaterStage(const plan::Plan &plan, const plan::Placement &placement,
                  const plan::Program &program, int replica, int stage,
                  int span, const train::TrainOptions &base,
                  const TaskConfig &config, bool sync);

} // namespace dtf::dist
