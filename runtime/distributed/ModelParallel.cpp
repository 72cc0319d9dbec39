// Model parallelism: a stage's service and links to the other stages of its
// replica, stage 0's driver, and the loop of a later stage.
#include "runtime/distributed/ModelParallel.h"
#include "dtf/OpNames.h"

#include "runtime/core/ThreadPool.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/plan/PlanTypes.h"

#include <cstring>
#include <random>
#include <thread>

namespace dtf::dist {

// Only the tasks of this job reach a stage (their certificates say so).
grpc::Status StageService::GetStatus(grpc::ServerContext *ctx,
                                     const rpc::StatusRequest *,
                                     rpc::StatusReply *reply) {
  std::string who;
  if (auto bad = links_.config().transport.admitTask(*ctx, &who); !bad.ok())
    return bad;
  reply->set_task(links_.self());
  reply->set_plan_fingerprint(links_.config().planFingerprint);
  reply->set_initialized(true);
  reply->set_incarnation(incarnation_);
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.empty()) {
    reply->set_failed_sequence(failedSequence_);
    reply->set_step_failure(failure_);
  }
  return grpc::Status::OK;
}

grpc::Status StageService::BeginStep(grpc::ServerContext *ctx,
                                     const rpc::BeginStepRequest *req,
                                     rpc::BeginStepReply *) {
  std::string who;
  if (auto bad = links_.config().transport.admitTask(*ctx, &who); !bad.ok())
    return bad;
  if (auto bad = checkCaller(req->caller()); !bad.ok())
    return bad;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (req->run() != run_) {
      // Stage 0 restarted: what its earlier run sent is void, and a step
      // of it that this stage is in is abandoned.
      run_ = req->run();
      table_.dropBefore(UINT64_MAX);
      abandoned_ = true;
    }
    begins_.push_back(*req);
  }
  cv_.notify_all();
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor *
StageService::Transfer(grpc::CallbackServerContext *ctx,
                       const grpc::ByteBuffer *request,
                       grpc::ByteBuffer *response) {
  grpc::ServerUnaryReactor *reactor = ctx->DefaultReactor();
  std::string who;
  grpc::Status st = links_.config().transport.admitTask(*ctx, &who);
  if (st.ok())
    st = transfer(*request);
  if (st.ok())
    *response = serializeMessage(rpc::TransferReply());
  reactor->Finish(st);
  return reactor;
}

bool StageService::nextBegin(rpc::BeginStepRequest *out, milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout,
                    [&] { return !begins_.empty() || shutdown_; }))
    return false;
  if (begins_.empty())
    return false;
  *out = begins_.front();
  begins_.pop_front();
  abandoned_ = false;
  return true;
}

bool StageService::hasBeginAfter(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const rpc::BeginStepRequest &b : begins_)
    if (b.sequence() > sequence || b.done())
      return true;
  return false;
}

grpc::Status StageService::checkCaller(const rpc::Caller &caller) const {
  if (caller.plan_fingerprint() != links_.config().planFingerprint)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        caller.task() + " runs a different plan than " +
                            links_.self());
  return grpc::Status::OK;
}

grpc::Status StageService::transfer(const grpc::ByteBuffer &request) {
  rpc::TransferRequest req;
  TensorReader reader;
  Status opened = reader.open(request, &req);
  if (!opened.isOk())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        links_.self() + ": a transfer that is " +
                            opened.message());
  if (auto bad = checkCaller(req.caller()); !bad.ok())
    return bad;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (req.run() != run_)
      return grpc::Status::OK; // from a run of stage 0 that is over
  }
  const rpc::WireTensor &w = req.value();
  if (!keys_.count(w.name()))
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        links_.self() + " receives nothing under '" +
                            plan::printable(w.name()) + "' (from " +
                            req.caller().task() + ")");
  if (w.size() > request.Length())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        links_.self() + ": transferred value '" +
                            plan::printable(w.name()) + "' announces " +
                            std::to_string(w.size()) +
                            " bytes, more than "
                            "the message holds");
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  if (!declaredType(w, w.size(), &dtype, &dims))
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        links_.self() + ": transferred value '" +
                            plan::printable(w.name()) +
                            "' does not fit its size");
  Tensor t = Tensor::allocate(dtype, dims);
  if (!t.defined())
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        links_.self() + ": out of memory for '" +
                            plan::printable(w.name()) + "'");
  Status s = reader.read(t.rawData(), w.size());
  if (!s.isOk())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        links_.self() + ": " + s.message());
  table_.put(w.name(), req.sequence(), std::move(t));
  return grpc::Status::OK;
}
StageLinks::StageLinks(Links &links, exec::RendezvousTable &table, int replica,
                       int stage, int span)
    : links_(links), table_(table), stage_(stage) {
  const Roster &roster = links.config().roster;
  for (int k = 0; k < span; ++k) {
    Peer p;
    p.task = roster.workers[size_t(replica * span + k)];
    if (k != stage) {
      p.channel = links.config().transport.channel(p.task.address);
      p.stub = rpc::Worker::NewStub(p.channel);
      p.raw = std::make_unique<grpc::GenericStub>(p.channel);
    }
    peers_.push_back(std::move(p));
  }
}

Status StageLinks::connect() {
  DTF_RETURN_IF_ERROR(links_.connectPeers(peers_));
  for (Peer &p : peers_)
    if (p.stub) {
      rpc::StatusReply reply;
      grpc::Status st = status(p, &reply);
      if (!st.ok())
        return rpcError("a status call", p.task, st);
      if (reply.plan_fingerprint() != links_.config().planFingerprint)
        return errorStatus(p.task.name, " at ", p.task.address,
                           " runs a different plan than this task (",
                           links_.config().planPath,
                           "); every task of a job must run the same plan.bin");
      p.incarnation = reply.incarnation();
    }
  return Status::ok();
}

Status StageLinks::setStep(uint64_t run, uint64_t sequence, int64_t step) {
  Status drained = drainSends();
  run_ = run;
  sequence_ = sequence;
  step_ = step;
  lostPeer_ = false;
  stepDropped_ = false;
  table_.dropBefore(sequence);
  return drained;
}

Status StageLinks::send(const std::string &key, int peer, uint64_t,
                        const Tensor &value) {
  if (peer < 0 || size_t(peer) >= peers_.size() || peer == stage_)
    return errorStatus("a send of '", key, "' to stage ", peer,
                       ", which this replica does not have");
  Peer &p = peers_[size_t(peer)];
  rpc::TransferRequest req;
  *req.mutable_caller() = links_.caller();
  req.set_run(run_);
  req.set_sequence(sequence_);
  describeTensor(key, value, req.mutable_value());
  auto call = std::make_unique<PendingSend>();
  setDeadline(&call->ctx, kCallTimeout);
  call->request = packTensors(req, {&value}, /*copy=*/true);
  PendingSend *c = call.get();
  {
    std::lock_guard<std::mutex> lock(sendMu_);
    if (!sendFailed_.isOk())
      return sendFailed_;
    ++inFlight_;
    sends_.push_back(std::move(call));
  }
  p.raw->UnaryCall(&c->ctx, kTransferMethod, grpc::StubOptions(), &c->request,
                   &c->response, [this, key, task = p.task](grpc::Status st) {
                     std::lock_guard<std::mutex> lock(sendMu_);
                     if (!st.ok() && sendFailed_.isOk()) {
                       sendFailed_ =
                           rpcError("sending '" + key + "'", task, st);
                       sendLost_ =
                           st.error_code() == grpc::StatusCode::UNAVAILABLE;
                     }
                     --inFlight_;
                     sendCv_.notify_all();
                   });
  return Status::ok();
}

Status StageLinks::drainSends() {
  std::unique_lock<std::mutex> lock(sendMu_);
  sendCv_.wait(lock, [&] { return inFlight_ == 0; });
  sends_.clear();
  Status s = sendFailed_;
  if (!s.isOk())
    lostPeer_ = sendLost_;
  sendFailed_ = Status::ok();
  sendLost_ = false;
  return s;
}

Status StageLinks::recv(const std::string &key, int peer, uint64_t,
                        Tensor *out) {
  if (peer < 0 || size_t(peer) >= peers_.size() || peer == stage_)
    return errorStatus("a recv of '", key, "' from stage ", peer,
                       ", which this replica does not have");
  Peer &sender = peers_[size_t(peer)];
  const TaskRef &from = sender.task;
  double lastSaid = 0, lastChecked = 0;
  lostPeer_ = false;
  return table_.take(
      key, sequence_, out, milliseconds(200), [&](double waited, Status *why) {
        if (links_.config().stop && links_.config().stop->load()) {
          *why = errorStatus("interrupted");
          return false;
        }
        if (abandoned_ && abandoned_()) {
          *why =
              errorStatus("step ", step_, " abandoned: ", peers_[0].task.name,
                          " started again");
          return false;
        }
        {
          std::lock_guard<std::mutex> lock(sendMu_);
          if (!sendFailed_.isOk()) {
            *why = sendFailed_;
            lostPeer_ = sendLost_;
            return false;
          }
        }
        if (waited > links_.config().syncTimeoutSeconds) {
          *why = errorStatus("gave up after ", int(waited), " s waiting for ",
                             from.name, " at ", from.address, " to send '", key,
                             "' of step ", step_,
                             " (--sync-timeout sets the wait)");
          return false;
        }
        // A sender that died does not make its receiver wait out the
        // timeout: ask it every second whether it is still there.
        if (sender.stub && waited - lastChecked >= 1) {
          lastChecked = waited;
          rpc::StatusReply reply;
          grpc::Status st = status(sender, &reply);
          if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
            lostPeer_ = true;
            *why = rpcError("waiting for '" + key + "' of step " +
                                std::to_string(step_),
                            from, st);
            return false;
          }
          if (st.ok() && !reply.step_failure().empty() &&
              reply.failed_sequence() == sequence_) {
            stepDropped_ = true;
            *why = errorStatus(from.name, " could not run step ", step_ + 1,
                               ": ", reply.step_failure());
            return false;
          }
          if (st.ok() && sender.incarnation != 0 &&
              reply.incarnation() != sender.incarnation) {
            // Restarted: what it would have sent is lost with it.
            lostPeer_ = true;
            sender.incarnation = reply.incarnation();
            *why = errorStatus(from.name, " at ", from.address,
                               " started again while this task waited "
                               "for '",
                               key, "' of step ", step_);
            return false;
          }
        }
        if (waited - lastSaid >= 5) {
          links_.say("waiting for " + from.name + " to send '" + key +
                     "' of step " + std::to_string(step_));
          lastSaid = waited;
        }
        return true;
      });
}

Status StageLinks::begin(bool done, const std::vector<int64_t> &versions) {
  Status first = Status::ok();
  for (Peer &p : peers_) {
    if (!p.stub)
      continue;
    rpc::BeginStepRequest req;
    *req.mutable_caller() = links_.caller();
    req.set_run(run_);
    req.set_sequence(sequence_);
    req.set_step(step_);
    req.set_done(done);
    for (int64_t v : versions)
      req.add_min_versions(v);
    grpc::ClientContext ctx;
    setDeadline(&ctx, kCallTimeout);
    rpc::BeginStepReply reply;
    grpc::Status st = p.stub->BeginStep(&ctx, req, &reply);
    if (!st.ok() && first.isOk())
      first = rpcError(done ? "ending the job" : "starting a step", p.task, st);
  }
  return first;
}

grpc::Status StageLinks::status(Peer &p, rpc::StatusReply *reply) {
  grpc::ClientContext ctx;
  setDeadline(&ctx, milliseconds(2000));
  rpc::StatusRequest req;
  *req.mutable_caller() = links_.caller();
  return p.stub->GetStatus(&ctx, req, reply);
}
// The variables a later stage's program reads, and the global step, zeroed
// in `store` (the ps holds them; the stage pulls them each step).
Status holdStageVariables(const plan::Plan &plan, const plan::Program &program,
                          exec::VariableStore *store) {
  std::set<std::string> reads;
  for (const plan::Op &op : program.ops())
    if (op.name() == dtf::ops::kReadVariable)
      reads.insert(op.attrs().at("name").s());
  for (const plan::Variable &v : plan.variables()) {
    if (!reads.count(v.name()) && v.role() != "global_step")
      continue;
    DType dtype = DType::F32;
    Status s = plan::toDType(v.type().dtype(), &dtype);
    Tensor t = s.isOk()
                   ? Tensor::allocate(dtype, plan::dimsOf(v.type().shape()))
                   : Tensor();
    if (!t.defined())
      return errorStatus("cannot hold variable '", v.name(), "'");
    std::memset(t.rawData(), 0, t.byteSize());
    (void)store->add(v.name(), std::move(t));
  }
  return Status::ok();
}

int runLaterStage(const plan::Plan &plan, const plan::Placement &placement,
                  const plan::Program &program, int replica, int stage,
                  int span, const train::TrainOptions &base,
                  const TaskConfig &config, bool sync) {
  const Roster &roster = config.roster;
  const TaskRef &me = roster.workers[size_t(replica * span + stage)];
  const std::string &self = me.name;
  const std::string &lead = roster.workers[size_t(replica * span)].name;
  Links links(config, self);

  // The variables this stage reads (the ps holds them; pulled each step).
  exec::VariableStore store;
  if (Status s = holdStageVariables(plan, program, &store); !s.isOk())
    return fail(self, s, 4);
  PsDriver ps(plan, placement, links, sync, /*push=*/false, &program);
  ps.bind(&store);
  // A lost ps fails the step here; stage 0 drops it and recovers.
  ps.setRecoverInPlace(false);

  exec::RendezvousTable table;
  std::random_device entropy;
  StageService service(links, table,
                       int64_t((uint64_t(entropy()) << 31) ^ entropy()) | 1,
                       program);
  std::unique_ptr<grpc::Server> server;
  Status s = serveWorker(service, me, links.config().transport, &server);
  if (!s.isOk())
    return fail(self, s, 4);
  StageLinks stages(links, table, replica, stage, span);
  stages.setAbandoned([&] {
    return service.abandoned() || service.shutdown() ||
           service.hasBeginAfter(stages.sequence());
  });

  int threads =
      base.threads > 0 ? base.threads : plan.session().intra_op_threads();
  if (threads > 0)
    train::setOpenMpThreadCount(threads);
  else
    threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::unique_ptr<ThreadPool> pool;
  if (threads > 1)
    pool = std::make_unique<ThreadPool>(threads, nullptr,
                                        ThreadPool::Workers::kOpenMp);
  exec::ExecutorOptions o;
  o.intraOpPool = pool.get();
  exec::applySessionOptions(plan, &o);
  o.seed = uint64_t(plan.training().seed()) + uint64_t(replica);
  o.programName = program.name();
  o.rendezvous = &stages;
  std::unique_ptr<exec::Executor> executor;
  s = exec::Executor::create(program, store, train::cpuKernelRegistry(), o,
                             &executor);
  if (!s.isOk())
    return fail(self, s, 4);

  s = ps.connect();
  if (s.isOk())
    s = stages.connect();
  if (s.isOk())
    s = ps.initializeOrWait(/*chief=*/false);
  if (!s.isOk())
    return fail(self, s, 6);
  links.say("stage " + std::to_string(stage) + " of replica " +
            std::to_string(replica) + " (" +
            std::to_string(executor->numRunOps()) + " ops each step); " + lead +
            " starts the steps");

  int64_t steps = 0;
  Clock::time_point lastBegin = Clock::now();
  double lastSaid = 0;
  for (;;) {
    rpc::BeginStepRequest begin;
    if (!service.nextBegin(&begin, milliseconds(500))) {
      if (config.stop && config.stop->load())
        return 130;
      if (service.shutdown())
        break;
      const double idle = secondsSince(lastBegin);
      if (idle - lastSaid >= 30) {
        links.say("no step from " + lead + " for " + std::to_string(int(idle)) +
                  " s; waiting");
        lastSaid = idle;
      }
      if (idle > config.syncTimeoutSeconds)
        return fail(self,
                    errorStatus(lead, " at ",
                                roster.workers[size_t(replica * span)].address,
                                " started no step in ", int(idle),
                                " s (--sync-timeout); giving up"),
                    6);
      continue;
    }
    lastBegin = Clock::now();
    lastSaid = 0;
    if (begin.done())
      break;
    s = stages.setStep(begin.run(), begin.sequence(), begin.step());
    if (!s.isOk())
      links.say(s.message() + " (in the step before); going on");
    ps.setMinVersions(std::vector<int64_t>(begin.min_versions().begin(),
                                           begin.min_versions().end()));
    int64_t globalStep = 0;
    bool done = false;
    s = ps.beforeStep(&globalStep, &done);
    const bool lostPs = !s.isOk() && ps.lastRecoverable();
    if (s.isOk())
      s = executor->run(uint64_t(begin.step()));
    if (!s.isOk()) {
      // A lost ps, or a stage that could not run the step: the step is
      // dropped (stage 0 is told, and recovers); stage 0 started again or
      // went on, or a stage of this replica is gone (the launcher restarts
      // it): wait for stage 0's next step.
      if (lostPs || stages.stepDropped())
        service.setFailure(begin.sequence(), s.message());
      if (lostPs || stages.stepDropped() || service.abandoned() ||
          stages.lostPeer() || service.hasBeginAfter(begin.sequence())) {
        links.say(s.message() + "; waiting for " + lead + "'s next step");
        lastBegin = Clock::now();
        continue;
      }
      return fail(self, s, config.stop && config.stop->load() ? 130 : 5);
    }
    ++steps;
  }
  (void)stages.drainSends();
  links.say("ran " + std::to_string(steps) + " steps as stage " +
            std::to_string(stage) + " of replica " + std::to_string(replica));
  int workersDone = 0;
  s = ps.done(&workersDone);
  server->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
  if (!s.isOk())
    return fail(self, s, 6);
  return 0;
}

} // namespace dtf::dist
