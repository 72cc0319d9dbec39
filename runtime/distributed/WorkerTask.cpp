#include "runtime/distributed/WorkerTask.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/train/CheckpointSchedule.h"

#include <cmath>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <mutex>
#include <thread>

namespace dtf::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// An RPC deadline for calls that do not wait on purpose.
constexpr milliseconds kCallTimeout{30000};

struct PsLink {
  TaskRef task;
  std::unique_ptr<rpc::ParameterServer::Stub> stub;
  std::unique_ptr<grpc::GenericStub> raw; // Pull and Push: tensors as bytes
  std::shared_ptr<grpc::Channel> channel;
  std::vector<plan::HeldTensor> pull;     // pulled from it each step
  std::vector<plan::HeldTensor> evalPull; // and before an evaluation
  std::vector<plan::Transfer> keys;       // the sends it takes
  int64_t pulledVersion = 0;
  int64_t pushedAt = -1; // sync: the version the last accepted push was for
  int64_t incarnation = -1; // of the ps state the pulled values belong to
};

class Links {
public:
  Links(const TaskConfig &config, std::string self)
      : config_(config), self_(std::move(self)) {}

  rpc::Caller caller() const {
    rpc::Caller c;
    c.set_task(self_);
    c.set_plan_fingerprint(config_.planFingerprint);
    return c;
  }
  const std::string &self() const { return self_; }
  const TaskConfig &config() const { return config_; }

  void say(const std::string &line) const {
    // Under the launcher every line already carries the task's name.
    std::fprintf(config_.out, "%s\n", line.c_str());
    std::fflush(config_.out);
  }

  /// Waits until every task in `tasks` accepts a connection; an error naming
  /// the first that does not within the connect timeout.
  Status connect(const std::vector<std::shared_ptr<grpc::Channel>> &channels,
                 const std::vector<TaskRef> &tasks) const {
    const auto deadline =
        std::chrono::system_clock::now() +
        milliseconds(int64_t(config_.connectTimeoutSeconds * 1000));
    for (size_t i = 0; i < channels.size(); ++i) {
      bool said = false;
      while (!channels[i]->WaitForConnected(
          std::min(deadline, std::chrono::system_clock::now() +
                                 milliseconds(2000)))) {
        if (config_.stop && config_.stop->load())
          return errorStatus("interrupted");
        if (std::chrono::system_clock::now() >= deadline)
          return errorStatus(
              "cannot reach ", tasks[i].name, " at ", tasks[i].address,
              " (no answer within ", config_.connectTimeoutSeconds,
              " s): is it running, and is the address in the cluster file "
              "right? (--connect-timeout sets the wait)");
        if (!said)
          say("waiting for " + tasks[i].name + " at " + tasks[i].address);
        said = true;
      }
    }
    return Status::ok();
  }

private:
  const TaskConfig &config_;
  std::string self_;
};

Status rpcError(const std::string &what, const TaskRef &task,
                const grpc::Status &status) {
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
      status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
      status.error_code() == grpc::StatusCode::INTERNAL)
    return errorStatus(what, " on ", task.name, " failed: ",
                       status.error_message());
  return errorStatus("lost ", task.name, " at ", task.address, " (", what,
                     " failed: ", describe(status), ")");
}

// A lost or restarted ps: worth waiting for (the launcher restarts it and
// the chief restores the last checkpoint), not a reason to stop.
bool recoverable(const grpc::Status &status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::CANCELLED ||
         (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
          status.error_message().find("not initialized") != std::string::npos);
}

/// Pulls and pushes for one worker (or tower).
class PsDriver : public train::StepDriver {
public:
  PsDriver(const plan::Plan &plan, const plan::Placement &placement,
           Links &links, bool sync, bool push)
      : plan_(plan), links_(links), sync_(sync), push_(push) {
    const Roster &roster = links.config().roster;
    std::set<std::string> averages;
    for (size_t k = 0; k < roster.ps.size(); ++k) {
      PsLink l;
      l.task = roster.ps[k];
      l.channel = makeChannel(l.task.address);
      l.stub = rpc::ParameterServer::NewStub(l.channel);
      l.raw = std::make_unique<grpc::GenericStub>(l.channel);
      // What the worker_step reads (and the global step, which says when
      // the job is done); the eval program's moving averages on demand.
      std::set<std::string> read;
      for (const plan::Op &op : plan.worker_step().ops())
        if (op.name() == "dtf.read_variable")
          read.insert(op.attrs().at("name").s());
      for (const plan::Variable &v : plan.variables()) {
        if (v.role() == "global_step")
          read.insert(v.name());
        if (v.role() == "moving_average")
          averages.insert(v.name());
      }
      for (const plan::HeldTensor &h : plan::heldBy(plan, placement, int(k))) {
        if (read.count(h.variable))
          l.pull.push_back(h);
        else if (averages.count(h.variable))
          l.evalPull.push_back(h);
      }
      plan::Program p;
      if (plan::psProgramFor(plan, placement, int(k), &p).isOk())
        for (const plan::Transfer &r : p.recvs())
          l.keys.push_back(r);
      ps_.push_back(std::move(l));
    }
    for (size_t k = 0; k < ps_.size(); ++k)
      heldBy_.push_back(plan::heldBy(plan, placement, int(k)));
  }

  void setChief(bool chief) { chief_ = chief; }

  void bind(exec::VariableStore *store) { store_ = store; }
  std::vector<PsLink> &ps() { return ps_; }

  Status connect() {
    std::vector<std::shared_ptr<grpc::Channel>> channels;
    std::vector<TaskRef> tasks;
    for (PsLink &l : ps_) {
      channels.push_back(l.channel);
      tasks.push_back(l.task);
    }
    return links_.connect(channels, tasks);
  }

  /// The chief: initializes every ps that is not yet (from the latest
  /// checkpoint in the model dir when there is one). Others: wait for it.
  Status initializeOrWait(bool chief) {
    const std::string chiefName = links_.config().roster.workers[0].name;
    const Clock::time_point start = Clock::now();
    double lastSaid = -100;
    for (;;) {
      bool allReady = true;
      for (PsLink &l : ps_) {
        rpc::StatusReply reply;
        DTF_RETURN_IF_ERROR(status(l, &reply));
        if (reply.initialized())
          continue;
        allReady = false;
        if (chief) {
          DTF_RETURN_IF_ERROR(restoreAll(/*force=*/false));
          break;
        }
      }
      if (allReady)
        return Status::ok();
      if (chief)
        continue;
      const double waited = secondsSince(start);
      if (waited - lastSaid >= 5) {
        links_.say("waiting for the chief (" + chiefName +
                   ") to initialize the variables on the ps tasks");
        lastSaid = waited;
      }
      if (waited > links_.config().syncTimeoutSeconds)
        return errorStatus("the chief (", chiefName,
                           ") did not initialize the ps tasks within ",
                           links_.config().syncTimeoutSeconds, " s");
      if (links_.config().stop && links_.config().stop->load())
        return errorStatus("interrupted");
      std::this_thread::sleep_for(milliseconds(200));
    }
  }

  Status status(PsLink &l, rpc::StatusReply *reply) {
    grpc::ClientContext ctx;
    setDeadline(&ctx, milliseconds(5000));
    rpc::StatusRequest req;
    *req.mutable_caller() = links_.caller();
    grpc::Status st = l.stub->GetStatus(&ctx, req, reply);
    if (!st.ok())
      return rpcError("a status call", l.task, st);
    if (reply->plan_fingerprint() != links_.config().planFingerprint)
      return errorStatus(l.task.name, " at ", l.task.address,
                         " runs a different plan than this task (",
                         links_.config().planPath,
                         "); every task of a job must run the same plan.bin");
    return Status::ok();
  }

  /// The chief: (re)initializes every ps, from the latest checkpoint of the
  /// model dir when there is one, else from the plan's initializers. With
  /// force, also the ones that are initialized (after a ps was lost, all go
  /// back to the same checkpoint).
  Status restoreAll(bool force) {
    const std::string &dir = links_.config().modelDir;
    int64_t step = -1;
    std::unique_ptr<checkpoint::CheckpointReader> reader;
    if (!dir.empty()) {
      std::vector<std::string> skipped;
      DTF_RETURN_IF_ERROR(checkpoint::findLatest(dir, &step, &skipped));
      for (const std::string &why : skipped)
        links_.say("warning: skipping an incomplete checkpoint: " + why);
      if (step >= 0)
        DTF_RETURN_IF_ERROR(checkpoint::CheckpointReader::open(dir, step, &reader));
    }
    // Every ps starts at the stored global step (its updates so far in sync
    // mode), whatever step the checkpoint is named for.
    int64_t globalStep = reader ? step : 0;
    if (reader && reader->find("global_step")) {
      Tensor t;
      if (reader->read("global_step", &t).isOk() && t.dtype() == DType::I64 &&
          t.numElements() == 1)
        globalStep = t.data<int64_t>()[0];
    }
    for (size_t k = 0; k < ps_.size(); ++k) {
      PsLink &l = ps_[k];
      rpc::InitializeRequest req;
      *req.mutable_caller() = links_.caller();
      req.set_force(force);
      if (reader) {
        for (const plan::HeldTensor &h : heldBy_[k]) {
          if (!reader->find(h.variable))
            return errorStatus("the checkpoint ", checkpoint::checkpointName(step),
                               " in ", dir, " has no variable '", h.variable,
                               "' (is it another model's? --fresh sets it aside)");
          Tensor t;
          DTF_RETURN_IF_ERROR(
              h.partitioned
                  ? reader->readRows(h.variable, h.rowOffset,
                                     h.rowOffset + h.rows, &t)
                  : reader->read(h.variable, &t));
          toWire(h.name, t, req.add_values());
        }
      }
      req.set_version(globalStep);
      grpc::ClientContext ctx;
      setDeadline(&ctx, kCallTimeout);
      rpc::InitializeReply reply;
      grpc::Status st = l.stub->Initialize(&ctx, req, &reply);
      if (!st.ok())
        return rpcError("initializing", l.task, st);
    }
    schedule_.saved(reader ? step : -1);
    if (reader)
      links_.say("restored checkpoint " + checkpoint::checkpointName(step) +
                 " from " + dir + " onto " + std::to_string(ps_.size()) +
                 " ps task" + (ps_.size() == 1 ? "" : "s") +
                 "; continuing at step " + std::to_string(globalStep));
    else if (force)
      links_.say("no checkpoint yet: every ps starts again from the plan's "
                 "initializers");
    return Status::ok();
  }

  /// After a lost ps (or one that lost its state): waits until every ps
  /// answers again; the chief then sets them all back to the last
  /// checkpoint, the others wait until that happened.
  Status recover(bool chief, const Status &why) {
    links_.say(why.message() + "; waiting for the ps tasks to come back " +
               "(the launcher restarts a lost one)");
    const Clock::time_point start = Clock::now();
    double lastSaid = 0;
    for (;;) {
      if (links_.config().stop && links_.config().stop->load())
        return errorStatus("interrupted");
      bool allUp = true, anyFresh = false;
      std::string down;
      for (PsLink &l : ps_) {
        rpc::StatusReply reply;
        if (!status(l, &reply).isOk()) {
          allUp = false;
          down = l.task.name + " at " + l.task.address;
          continue;
        }
        if (!reply.initialized())
          anyFresh = true;
      }
      // The chief restores a ps that lost its state; the others wait for it.
      if (allUp && (chief || !anyFresh)) {
        if (chief && anyFresh)
          DTF_RETURN_IF_ERROR(restoreAll(/*force=*/true));
        else
          links_.say("every ps answers again; going on");
        // What was pulled and pushed before belongs to the old state.
        for (PsLink &l : ps_) {
          l.incarnation = -1;
          l.pushedAt = -1;
        }
        return Status::ok();
      }
      const double waited = secondsSince(start);
      if (waited > links_.config().syncTimeoutSeconds)
        return errorStatus("gave up after ", int(waited), " s waiting for ",
                           down.empty() ? std::string("the chief to restore the ps tasks")
                                        : down);
      if (waited - lastSaid >= 5) {
        links_.say("still waiting for " +
                   (down.empty() ? std::string("the chief to restore the ps tasks")
                                 : down));
        lastSaid = waited;
      }
      std::this_thread::sleep_for(milliseconds(300));
    }
  }

  /// The chief's checkpoint policy (the plan's `checkpoint every ...`).
  void setCheckpointPolicy(const plan::Training &t) {
    schedule_ = train::CheckpointSchedule(
        t, !links_.config().modelDir.empty(), -1);
  }
  bool checkpointDue(int64_t step) const { return schedule_.due(step); }

  /// The chief: every ps writes its shard of the checkpoint of `step`, then
  /// the chief writes the index (a checkpoint exists only once it does).
  Status save(int64_t step) {
    const std::string &dir = links_.config().modelDir;
    if (!schedule_.unsaved(step))
      return Status::ok();
    for (size_t k = 0; k < ps_.size(); ++k) {
      rpc::SaveRequest req;
      *req.mutable_caller() = links_.caller();
      req.set_dir(dir);
      req.set_step(step);
      req.set_shard(int(k));
      req.set_num_shards(int(ps_.size()));
      grpc::ClientContext ctx;
      setDeadline(&ctx, kCallTimeout);
      rpc::SaveReply reply;
      grpc::Status st = ps_[k].stub->Save(&ctx, req, &reply);
      if (!st.ok()) {
        lastRecoverable_ = recoverable(st);
        return rpcError("saving a checkpoint", ps_[k].task, st);
      }
    }
    DTF_RETURN_IF_ERROR(
        checkpoint::writeIndex(dir, step, int(ps_.size()), schedule_.keep()));
    schedule_.saved(step);
    links_.say("saved checkpoint " + checkpoint::checkpointName(step) + " in " +
               dir + " (" + std::to_string(ps_.size()) + " shard" +
               (ps_.size() == 1 ? "" : "s") + ")");
    return Status::ok();
  }

  Status pull(bool forEval, int64_t *globalStep) {
    for (PsLink &l : ps_) {
      if (l.pull.empty() && !(forEval && !l.evalPull.empty()))
        continue;
      const int64_t want = sync_ && l.pushedAt >= 0 ? l.pushedAt + 1 : 0;
      const Clock::time_point start = Clock::now();
      double lastSaid = 0;
      std::map<std::string, const plan::HeldTensor *> byName;
      rpc::PullRequest req;
      *req.mutable_caller() = links_.caller();
      for (const plan::HeldTensor &h : l.pull) {
        req.add_names(h.name);
        byName[h.name] = &h;
      }
      if (forEval)
        for (const plan::HeldTensor &h : l.evalPull) {
          req.add_names(h.name);
          byName[h.name] = &h;
        }
      req.set_min_version(want);
      // Short waits: the ps waits inside a gRPC callback thread, which a
      // push needs too; the loop below repeats and reports.
      req.set_wait_ms(200);
      for (;;) {
        req.set_incarnation(l.incarnation);
        grpc::ClientContext ctx;
        setDeadline(&ctx, kCallTimeout);
        rpc::PullReply reply;
        grpc::ByteBuffer response;
        grpc::Status st =
            rawCall(*l.raw, &ctx, kPullMethod, serializeMessage(req), &response);
        if (!st.ok()) {
          lastRecoverable_ = recoverable(st);
          return rpcError("a pull", l.task, st);
        }
        TensorReader reader;
        Status opened = reader.open(response, &reply);
        if (!opened.isOk())
          return errorStatus(l.task.name, " answered a pull with ",
                             opened.message());
        if (reply.incarnation() != l.incarnation) {
          // Restored (or first seen): what this worker pushed before no
          // longer counts.
          l.incarnation = reply.incarnation();
          l.pushedAt = -1;
          req.set_min_version(0);
          if (!reply.ready())
            continue;
        }
        if (reply.ready()) {
          for (const rpc::WireTensor &w : reply.values()) {
            auto h = byName.find(w.name());
            Tensor *t = h == byName.end() ? nullptr
                                          : store_->find(h->second->variable);
            if (!t)
              return errorStatus(l.task.name, " sent '",
                                 plan::printable(w.name()),
                                 "', which this task did not ask for");
            // Straight into the variable (or its shard's rows).
            Tensor dst = h->second->partitioned
                             ? rowsOf(*t, h->second->rowOffset, h->second->rows)
                             : rowsOf(*t, 0, t->rank() ? t->dim(0) : 1);
            std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
            DType dtype = DType::F32;
            if (!plan::toDType(w.dtype(), &dtype).isOk() || dtype != dst.dtype() ||
                dims != dst.shape() || w.size() != dst.byteSize())
              return errorStatus(l.task.name, " sent '",
                                 plan::printable(w.name()), "' (", w.size(),
                                 " bytes) for ", dst.describe());
            DTF_RETURN_IF_ERROR(reader.read(dst.rawData(), w.size()));
          }
          l.pulledVersion = reply.version();
          break;
        }
        const double waited = secondsSince(start);
        if (waited - lastSaid >= 5) {
          links_.say("waiting for " + l.task.name + ": " +
                     reply.waiting_for());
          lastSaid = waited;
        }
        if (waited > links_.config().syncTimeoutSeconds)
          return errorStatus(
              "gave up after ", int(waited), " s waiting for ", l.task.name,
              ": ", reply.waiting_for(),
              " (--sync-timeout sets the wait; a replica that died must be "
              "restarted or covered by a backup worker)");
        if (links_.config().stop && links_.config().stop->load())
          return errorStatus("interrupted");
      }
    }
    if (const Tensor *t = store_->find("global_step"))
      *globalStep = t->data<int64_t>()[0];
    return Status::ok();
  }

  Status beforeStep(int64_t *globalStep, bool *done) override {
    *done = false;
    for (;;) {
      lastRecoverable_ = false;
      Status s = pull(/*forEval=*/false, globalStep);
      if (s.isOk() || !lastRecoverable_)
        return s;
      DTF_RETURN_IF_ERROR(recover(chief_, s));
    }
  }

  /// Pushes the sends, `value(key)` giving each one's tensor.
  template <typename ValueOf> Status pushAll(ValueOf value) {
    for (PsLink &l : ps_) {
      if (l.keys.empty())
        continue;
      rpc::PushRequest req;
      *req.mutable_caller() = links_.caller();
      req.set_version(l.pulledVersion);
      req.set_incarnation(l.incarnation);
      // Sent from the step's own outputs (or views of their rows): no copy.
      std::vector<Tensor> views;
      views.reserve(l.keys.size());
      for (const plan::Transfer &r : l.keys) {
        // A shard's recv takes its rows of the worker's whole send.
        const std::string &key = r.key();
        const std::string base =
            r.rows() > 0 ? key.substr(0, key.rfind("/part_")) : key;
        const Tensor *t = value(base);
        if (!t)
          return errorStatus("the step made no value for '", base, "'");
        views.push_back(r.rows() > 0 ? rowsOf(*t, r.row_offset(), r.rows())
                                     : rowsOf(*t, 0, t->rank() ? t->dim(0) : 1));
        describeTensor(key, views.back(), req.add_values());
      }
      std::vector<const Tensor *> payload;
      for (const Tensor &v : views)
        payload.push_back(&v);
      grpc::ClientContext ctx;
      setDeadline(&ctx, kCallTimeout);
      grpc::ByteBuffer response;
      grpc::Status st = rawCall(*l.raw, &ctx, kPushMethod,
                                packTensors(req, payload, /*copy=*/false),
                                &response);
      if (!st.ok()) {
        lastRecoverable_ = recoverable(st);
        return rpcError("a push", l.task, st);
      }
      rpc::PushReply reply;
      if (!parseMessage(response, &reply))
        return errorStatus(l.task.name, " answered a push with a malformed reply");
      if (reply.stale())
        ++stale_;
      else
        l.pushedAt = l.pulledVersion;
      if (sync_ && reply.stale())
        // Computed at an older version: the current update is open, join
        // it. At the current one (this replica already joined it, before a
        // restart): wait for it to complete.
        l.pushedAt = reply.version() == l.pulledVersion ? l.pulledVersion
                                                        : reply.version() - 1;
    }
    return Status::ok();
  }

  Status afterStep(exec::Executor &e, int firstSend) override {
    if (!push_)
      return Status::ok();
    if (sendIndex_.empty())
      for (int i = firstSend; i < e.numFetches(); ++i)
        sendIndex_[e.fetchInfo(i).name] = i;
    return pushAndSave([&](const std::string &k) -> const Tensor * {
      auto it = sendIndex_.find(k);
      return it == sendIndex_.end() ? nullptr : &e.fetch(it->second);
    });
  }

  /// Pushes (a lost ps: this step's update is dropped, the pull of the next
  /// step waits for the restore), then the chief saves when due.
  template <typename ValueOf> Status pushAndSave(ValueOf value) {
    lastRecoverable_ = false;
    Status s = pushAll(value);
    if (!s.isOk()) {
      if (!lastRecoverable_)
        return s;
      return recover(chief_, s);
    }
    const int64_t step = lastStep() + 1;
    if (chief_ && checkpointDue(step)) {
      lastRecoverable_ = false;
      s = save(step);
      if (!s.isOk() && lastRecoverable_)
        return recover(chief_, s);
      return s;
    }
    return Status::ok();
  }

  /// The global step of the last pull.
  int64_t lastStep() const {
    const Tensor *t = store_ ? store_->find("global_step") : nullptr;
    return t ? t->data<int64_t>()[0] : 0;
  }

  Status beforeEval() override {
    int64_t step = 0;
    // The eval program reads the moving averages, which no step pulls.
    const bool wasSync = sync_;
    sync_ = false;
    Status s = pull(/*forEval=*/true, &step);
    sync_ = wasSync;
    return s;
  }

  /// Tells ps 0 this worker is done; returns how many are.
  Status done(int *workersDone) {
    if (ps_.empty()) {
      *workersDone = 0;
      return Status::ok();
    }
    rpc::DoneRequest req;
    *req.mutable_caller() = links_.caller();
    grpc::ClientContext ctx;
    setDeadline(&ctx, kCallTimeout);
    rpc::DoneReply reply;
    grpc::Status st = ps_[0].stub->WorkerDone(&ctx, req, &reply);
    if (!st.ok())
      return rpcError("reporting this worker done", ps_[0].task, st);
    *workersDone = reply.workers_done();
    return Status::ok();
  }

  void shutdownAll(const std::string &reason) {
    for (PsLink &l : ps_) {
      rpc::ShutdownRequest req;
      *req.mutable_caller() = links_.caller();
      req.set_reason(reason);
      grpc::ClientContext ctx;
      setDeadline(&ctx, milliseconds(3000));
      rpc::ShutdownReply reply;
      (void)l.stub->Shutdown(&ctx, req, &reply);
    }
  }

  int64_t stale() const { return stale_; }

private:
  const plan::Plan &plan_;
  Links &links_;
  bool sync_;
  bool push_;
  bool chief_ = false;
  bool lastRecoverable_ = false;
  std::vector<std::vector<plan::HeldTensor>> heldBy_;
  train::CheckpointSchedule schedule_{plan::Training(), false, -1};
  exec::VariableStore *store_ = nullptr;
  std::vector<PsLink> ps_;
  std::map<std::string, int> sendIndex_;
  int64_t stale_ = 0;
};

// ---------------------------------------------------------------------------
// In-graph replication.

/// A worker that serves towers to the in-graph client.
class TowerService final : public rpc::Worker::Service {
public:
  TowerService(train::Trainer &trainer, Links &links)
      : trainer_(trainer), links_(links) {}

  grpc::Status GetStatus(grpc::ServerContext *, const rpc::StatusRequest *,
                         rpc::StatusReply *reply) override {
    reply->set_task(links_.self());
    reply->set_plan_fingerprint(links_.config().planFingerprint);
    reply->set_initialized(true);
    return grpc::Status::OK;
  }

  grpc::Status RunTower(grpc::ServerContext *, const rpc::TowerRequest *req,
                        rpc::TowerReply *reply) override {
    if (req->caller().plan_fingerprint() != links_.config().planFingerprint)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          req->caller().task() + " runs a different plan than " +
                              links_.self());
    std::lock_guard<std::mutex> lock(mu_);
    int64_t step = 0, examples = 0;
    Status s = trainer_.runTowerStep(&step, &examples);
    if (!s.isOk())
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          links_.self() + ": " + s.message());
    exec::Executor &e = trainer_.trainExecutor();
    reply->set_version(step);
    reply->set_examples(examples);
    for (int i = 0; i < trainer_.numMetrics(); ++i)
      reply->add_metrics(train::meanValue(e.fetch(i)));
    for (int i = trainer_.numMetrics(); i < e.numFetches(); ++i)
      toWire(e.fetchInfo(i).name, e.fetch(i), reply->add_sends());
    ++towers_;
    return grpc::Status::OK;
  }

  grpc::Status Shutdown(grpc::ServerContext *, const rpc::ShutdownRequest *,
                        rpc::ShutdownReply *) override {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    return grpc::Status::OK;
  }

  bool shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    return shutdown_;
  }
  int64_t towers() {
    std::lock_guard<std::mutex> lock(mu_);
    return towers_;
  }

private:
  train::Trainer &trainer_;
  Links &links_;
  std::mutex mu_;
  bool shutdown_ = false;
  int64_t towers_ = 0;
};

/// The in-graph client (the chief): its own tower plus one per other
/// worker, the towers' sends averaged and pushed once.
class InGraphDriver : public train::StepDriver {
public:
  InGraphDriver(PsDriver &ps, Links &links, int64_t steps)
      : ps_(ps), links_(links), steps_(steps) {
    const Roster &roster = links.config().roster;
    for (size_t i = 1; i < roster.workers.size(); ++i) {
      Remote r;
      r.task = roster.workers[i];
      r.channel = makeChannel(r.task.address);
      r.stub = rpc::Worker::NewStub(r.channel);
      remotes_.push_back(std::move(r));
    }
  }

  Status connect() {
    std::vector<std::shared_ptr<grpc::Channel>> channels;
    std::vector<TaskRef> tasks;
    for (Remote &r : remotes_) {
      channels.push_back(r.channel);
      tasks.push_back(r.task);
    }
    return links_.connect(channels, tasks);
  }

  Status beforeStep(int64_t *globalStep, bool *done) override {
    DTF_RETURN_IF_ERROR(ps_.beforeStep(globalStep, done));
    if (*done || *globalStep >= steps_)
      return Status::ok();
    // The other towers run while this one does.
    for (Remote &r : remotes_) {
      r.reply = rpc::TowerReply();
      r.pending = std::async(std::launch::async, [this, &r, step = *globalStep] {
        rpc::TowerRequest req;
        *req.mutable_caller() = links_.caller();
        req.set_step(step);
        grpc::ClientContext ctx;
        setDeadline(&ctx, kCallTimeout);
        return r.stub->RunTower(&ctx, req, &r.reply);
      });
    }
    return Status::ok();
  }

  Status afterStep(exec::Executor &e, int firstSend) override {
    std::map<std::string, Tensor> sums;
    for (int i = firstSend; i < e.numFetches(); ++i) {
      const Tensor &t = e.fetch(i);
      Tensor copy = Tensor::allocate(t.dtype(), t.shape());
      std::memcpy(copy.rawData(), t.rawData(), t.byteSize());
      sums[e.fetchInfo(i).name] = std::move(copy);
    }
    Status failed = Status::ok();
    for (Remote &r : remotes_) {
      grpc::Status st = r.pending.get();
      if (!st.ok()) {
        if (failed.isOk())
          failed = errorStatus("tower on ", r.task.name, " at ", r.task.address,
                               " failed: ", describe(st));
        continue;
      }
      for (const rpc::WireTensor &w : r.reply.sends()) {
        auto it = sums.find(w.name());
        Tensor t;
        Status s = fromWire(w, &t);
        if (!s.isOk() || it == sums.end() ||
            t.numElements() != it->second.numElements())
          return errorStatus(r.task.name, " sent a tower value '",
                             plan::printable(w.name()), "' that does not fit");
        if (t.dtype() == DType::F32 && it->second.dtype() == DType::F32) {
          float *a = it->second.data<float>();
          const float *b = t.data<float>();
          for (int64_t j = 0; j < t.numElements(); ++j)
            a[j] += b[j];
        } else if (t.dtype() == DType::F64 &&
                   it->second.dtype() == DType::F64) {
          double *a = it->second.data<double>();
          const double *b = t.data<double>();
          for (int64_t j = 0; j < t.numElements(); ++j)
            a[j] += b[j];
        }
      }
    }
    DTF_RETURN_IF_ERROR(failed);
    const double towers = double(remotes_.size() + 1);
    for (auto &[key, t] : sums)
      if (t.dtype() == DType::F32) {
        float *a = t.data<float>();
        for (int64_t j = 0; j < t.numElements(); ++j)
          a[j] = float(a[j] / towers);
      } else if (t.dtype() == DType::F64) {
        double *a = t.data<double>();
        for (int64_t j = 0; j < t.numElements(); ++j)
          a[j] /= towers;
      }
    return ps_.pushAndSave([&](const std::string &k) -> const Tensor * {
      auto it = sums.find(k);
      return it == sums.end() ? nullptr : &it->second;
    });
  }

  Status beforeEval() override { return ps_.beforeEval(); }

  void shutdownTowers() {
    for (Remote &r : remotes_) {
      rpc::ShutdownRequest req;
      *req.mutable_caller() = links_.caller();
      req.set_reason("training finished");
      grpc::ClientContext ctx;
      setDeadline(&ctx, milliseconds(3000));
      rpc::ShutdownReply reply;
      (void)r.stub->Shutdown(&ctx, req, &reply);
    }
  }

private:
  struct Remote {
    TaskRef task;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<rpc::Worker::Stub> stub;
    rpc::TowerReply reply;
    std::future<grpc::Status> pending;
  };
  PsDriver &ps_;
  Links &links_;
  int64_t steps_;
  std::vector<Remote> remotes_;
};

int fail(const std::string &self, const Status &s, int code) {
  std::fflush(stdout);
  std::fprintf(stderr, "dtf-run: error: %s: %s\n", self.c_str(),
               s.message().c_str());
  return code;
}

} // namespace

int runWorker(const plan::Plan &plan, const plan::Placement &placement,
              int replica, const train::TrainOptions &base,
              const TaskConfig &config) {
  const Roster &roster = config.roster;
  const std::string self = roster.workers[replica].name;
  const bool chief = replica == 0;
  const plan::Training &t = plan.training();
  const bool inGraph = t.replication() == "in_graph";
  const bool sync = t.update() == "sync" && !inGraph;
  const int numWorkers = int(roster.workers.size());
  if (sync && t.replicas_to_aggregate() > numWorkers)
    return fail(self,
                errorStatus("the plan aggregates ", t.replicas_to_aggregate(),
                            " replicas per update, but the cluster has ",
                            numWorkers, " worker", numWorkers == 1 ? "" : "s",
                            "; add workers or lower replicas_to_aggregate"),
                2);

  Links links(config, self);
  PsDriver ps(plan, placement, links, sync, /*push=*/!inGraph || chief);
  train::TrainOptions options = base;
  options.taskName = std::getenv("DTF_RESTART_COUNT") ? "" : self;
  options.summaryTask = self; // one directory (and log) per task
  options.evaluate = chief;
  options.seedOffset = uint64_t(replica);
  options.shardIndex = size_t(replica);
  options.shardCount = size_t(numWorkers);
  if (inGraph) {
    const int64_t batch = base.batch > 0 ? base.batch : t.batch();
    options.batch = std::max<int64_t>(batch / numWorkers, 1);
  }
  std::unique_ptr<InGraphDriver> client;
  options.driver = &ps;
  if (inGraph && chief) {
    client = std::make_unique<InGraphDriver>(
        ps, links, base.steps >= 0 ? base.steps : t.steps());
    options.driver = client.get();
  }

  std::unique_ptr<train::Trainer> trainer;
  train::FailureKind kind = train::FailureKind::kNone;
  Status s = train::Trainer::create(plan, options, &trainer, &kind);
  if (!s.isOk())
    return fail(self, s, kind == train::FailureKind::kUsage ? 2 : 4);
  ps.bind(&trainer->variables());
  ps.setChief(chief);
  if (chief) {
    ps.setCheckpointPolicy(t);
    if (config.modelDir.empty())
      links.say("no --model-dir: this job writes no checkpoints");
    else if (base.fresh) {
      std::string moved;
      s = checkpoint::moveCheckpointsAside(config.modelDir, &moved);
      if (!s.isOk())
        return fail(self, s, 4);
      if (!moved.empty())
        links.say("--fresh: moved the earlier checkpoints to " + moved);
    }
  }

  s = ps.connect();
  if (s.isOk())
    s = ps.initializeOrWait(chief);
  if (!s.isOk())
    return fail(self, s, 6);

  if (inGraph && !chief) {
    // Serve towers until the client says the job is done.
    TowerService service(*trainer, links);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(listenAddress(roster.workers[replica].address),
                             grpc::InsecureServerCredentials(), &port);
    builder.SetMaxReceiveMessageSize(-1);
    builder.SetMaxSendMessageSize(-1);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0)
      return fail(self,
                  errorStatus("cannot listen on ",
                              roster.workers[replica].address,
                              " (is the port in use by another process?)"),
                  4);
    links.say("serving in-graph towers on " + roster.workers[replica].address +
              " for " + roster.workers[0].name);
    // No silent wait: say so when the client stops asking, and give up
    // after --sync-timeout without a tower (the chief is gone).
    int64_t seen = -1;
    Clock::time_point lastTower = Clock::now();
    double lastSaid = 0;
    while (!service.shutdown() && !(config.stop && config.stop->load())) {
      std::this_thread::sleep_for(milliseconds(100));
      const int64_t towers = service.towers();
      if (towers != seen) {
        seen = towers;
        lastTower = Clock::now();
        lastSaid = 0;
        continue;
      }
      const double idle = secondsSince(lastTower);
      if (idle - lastSaid >= 30) {
        links.say("no tower asked of this worker for " +
                  std::to_string(int(idle)) + " s; waiting for " +
                  roster.workers[0].name);
        lastSaid = idle;
      }
      if (idle > config.syncTimeoutSeconds) {
        server->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
        return fail(self,
                    errorStatus("the in-graph client ", roster.workers[0].name,
                                " at ", roster.workers[0].address,
                                " asked for no tower in ", int(idle),
                                " s (--sync-timeout); giving up"),
                    6);
      }
    }
    links.say("ran " + std::to_string(service.towers()) + " towers; done");
    server->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
    return config.stop && config.stop->load() ? 130 : 0;
  }
  if (client) {
    s = client->connect();
    if (!s.isOk())
      return fail(self, s, 6);
  }

  train::TrainReport report;
  s = trainer->run(&report, &kind);
  if (!s.isOk()) {
    if (client)
      client->shutdownTowers();
    return fail(self, s, kind == train::FailureKind::kRuntime ? 5 : 4);
  }
  if (report.interrupted)
    return 130;
  if (sync && ps.stale() > 0 && !options.quiet)
    links.say(std::to_string(ps.stale()) +
              " of this worker's gradients arrived after their update and "
              "were dropped (stale)");
  int workersDone = 0;
  s = ps.done(&workersDone);
  if (!s.isOk())
    return fail(self, s, 6);
  if (chief) {
    if (client)
      client->shutdownTowers();
    // The ps tasks stop when every worker is done (between-graph), so that
    // none of them loses its ps mid-step.
    const int expected = inGraph ? 1 : numWorkers;
    const Clock::time_point start = Clock::now();
    double lastSaid = -100;
    while (workersDone < expected && !(config.stop && config.stop->load())) {
      const double waited = secondsSince(start);
      if (waited > config.syncTimeoutSeconds) {
        links.say("gave up waiting for the other workers to finish");
        break;
      }
      if (waited - lastSaid >= 5) {
        links.say("waiting for " + std::to_string(expected - workersDone) +
                  " more worker(s) to finish");
        lastSaid = waited;
      }
      std::this_thread::sleep_for(milliseconds(200));
      s = ps.done(&workersDone);
      if (!s.isOk())
        break;
    }
    // The last checkpoint, of the state every worker's updates reached.
    s = ps.beforeEval(); // a plain pull: no wait for a sync update
    if (s.isOk())
      s = ps.save(ps.lastStep());
    if (!s.isOk()) {
      ps.shutdownAll("the final checkpoint failed");
      return fail(self, s, 6);
    }
    ps.shutdownAll("training finished");
  }
  return report.interrupted ? 130 : 0;
}

} // namespace dtf::dist
