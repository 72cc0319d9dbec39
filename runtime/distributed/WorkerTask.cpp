#include "runtime/distributed/WorkerTask.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/core/ThreadPool.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "runtime/exec/Rendezvous.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/train/CheckpointSchedule.h"

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
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

// A transfer's deadline: the ordinary one plus a second per 20 MB, so that
// a gigabyte on a slow link is not cut off but a stuck call still ends.
milliseconds transferTimeout(uint64_t bytes) {
  return kCallTimeout + milliseconds(int64_t(bytes / 20000));
}

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
  /// `reads`: the program whose variable reads each step pulls (a stage of
  /// a model-parallel replica); null: the worker_step.
  PsDriver(const plan::Plan &plan, const plan::Placement &placement,
           Links &links, bool sync, bool push,
           const plan::Program *reads = nullptr)
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
      for (const plan::Op &op : (reads ? *reads : plan.worker_step()).ops())
        if (op.name() == "dtf.read_variable")
          read.insert(op.attrs().at("name").s());
      for (const plan::Variable &v : plan.variables()) {
        if (v.role() == "global_step")
          read.insert(v.name());
        if (v.role() == "moving_average")
          averages.insert(v.name());
      }
      // An evaluation also needs what only other stages read each step.
      for (const plan::Op &op : plan.eval().ops())
        if (op.name() == "dtf.read_variable" &&
            !read.count(op.attrs().at("name").s()))
          averages.insert(op.attrs().at("name").s());
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
  void say(const std::string &line) const { links_.say(line); }
  /// Per ps: the least version the next pulls take.
  void setMinVersions(std::vector<int64_t> v) { minVersions_ = std::move(v); }

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
      std::vector<Tensor> values;
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
          describeTensor(h.name, t, req.add_values());
          values.push_back(std::move(t));
        }
      }
      req.set_version(globalStep);
      uint64_t bytes = 0;
      for (const Tensor &t : values)
        bytes += t.byteSize();
      grpc::ClientContext ctx;
      setDeadline(&ctx, transferTimeout(bytes));
      rpc::InitializeReply reply;
      grpc::Status st;
      const size_t chunk = links_.config().chunkBytes;
      if (bytes > chunk) {
        // In chunks from the read tensors: no 2 GiB message limit.
        std::vector<const Tensor *> payload;
        for (const Tensor &t : values)
          payload.push_back(&t);
        grpc::ByteBuffer response;
        st = sendStream(*l.raw, &ctx, kInitializeStreamMethod,
                        packChunks(req, payload, chunk), &response);
        if (st.ok() && !parseMessage(response, &reply))
          return errorStatus(l.task.name,
                             " answered an initialization with a malformed reply");
      } else {
        for (int i = 0; i < req.values_size(); ++i)
          toWire(req.values(i).name(), values[size_t(i)], req.mutable_values(i));
        st = l.stub->Initialize(&ctx, req, &reply);
      }
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
      int64_t want = sync_ && l.pushedAt >= 0 ? l.pushedAt + 1 : 0;
      // A later stage of a model-parallel replica reads what stage 0 read.
      if (size_t k = size_t(&l - ps_.data()); k < minVersions_.size())
        want = std::max(want, minVersions_[k]);
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
      // The ps parks a pull that must wait (no thread of its waits) and
      // answers it when the update is applied or after this long; the loop
      // below repeats and reports.
      req.set_wait_ms(1000);
      // What the reply carries when ready: a stream when that is more than
      // one chunk.
      uint64_t bytes = 0;
      for (const auto &entry : byName)
        if (const plan::HeldTensor *h = entry.second;
            const Tensor *t = store_->find(h->variable))
          bytes += h->partitioned ? rowsOf(*t, h->rowOffset, h->rows).byteSize()
                                  : t->byteSize();
      const bool stream = bytes > links_.config().chunkBytes;
      for (;;) {
        req.set_incarnation(l.incarnation);
        grpc::ClientContext ctx;
        setDeadline(&ctx, transferTimeout(bytes));
        rpc::PullReply reply;
        // Each value straight into the variable (or its shard's rows), as
        // its bytes arrive.
        ChunkReader reader(&reply, [&](std::vector<PayloadTarget> *targets) {
          for (const rpc::WireTensor &w : reply.values()) {
            auto h = byName.find(w.name());
            Tensor *t = h == byName.end() ? nullptr
                                          : store_->find(h->second->variable);
            if (!t)
              return errorStatus("'", plan::printable(w.name()),
                                 "', which this task did not ask for");
            Tensor dst = h->second->partitioned
                             ? rowsOf(*t, h->second->rowOffset, h->second->rows)
                             : rowsOf(*t, 0, t->rank() ? t->dim(0) : 1);
            std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
            DType dtype = DType::F32;
            if (!plan::toDType(w.dtype(), &dtype).isOk() || dtype != dst.dtype() ||
                dims != dst.shape() || w.size() != dst.byteSize())
              return errorStatus("'", plan::printable(w.name()), "' (", w.size(),
                                 " bytes) for ", dst.describe());
            targets->push_back({dst.rawData(), w.size()});
          }
          return Status::ok();
        });
        Status refused = Status::ok();
        grpc::Status st;
        if (stream) {
          st = receiveStream(*l.raw, &ctx, kPullStreamMethod,
                             serializeMessage(req), &reader, &refused);
        } else {
          grpc::ByteBuffer response;
          st = rawCall(*l.raw, &ctx, kPullMethod, serializeMessage(req),
                       &response);
          if (st.ok())
            refused = reader.add(response);
        }
        if (refused.isOk() && st.ok())
          refused = reader.finish();
        if (!refused.isOk())
          return errorStatus(l.task.name, " answered a pull with ",
                             refused.message());
        if (!st.ok()) {
          lastRecoverable_ = recoverable(st);
          return rpcError("a pull", l.task, st);
        }
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
          // The values are in place already (the reader put them there).
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
      if (s.isOk() || !lastRecoverable_ || !recoverInPlace_)
        return s;
      DTF_RETURN_IF_ERROR(recover(chief_, s));
    }
  }

  /// An in-graph tower does not wait for a lost ps itself: its client (the
  /// chief) drops the step and recovers.
  void setRecoverInPlace(bool recover) { recoverInPlace_ = recover; }
  /// The last pull, push or save failed because a ps is gone or restarted.
  bool lastRecoverable() const { return lastRecoverable_; }

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
      uint64_t bytes = 0;
      for (const Tensor &v : views) {
        payload.push_back(&v);
        bytes += v.byteSize();
      }
      grpc::ClientContext ctx;
      setDeadline(&ctx, transferTimeout(bytes));
      grpc::ByteBuffer response;
      // More than one chunk: a stream, which the ps applies only once it is
      // complete.
      const size_t chunk = links_.config().chunkBytes;
      grpc::Status st =
          bytes > chunk
              ? sendStream(*l.raw, &ctx, kPushStreamMethod,
                           packChunks(req, payload, chunk), &response)
              : rawCall(*l.raw, &ctx, kPushMethod,
                        packTensors(req, payload, /*copy=*/false), &response);
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
  bool recoverInPlace_ = true;
  std::vector<std::vector<plan::HeldTensor>> heldBy_;
  train::CheckpointSchedule schedule_{plan::Training(), false, -1};
  exec::VariableStore *store_ = nullptr;
  std::vector<PsLink> ps_;
  std::map<std::string, int> sendIndex_;
  std::vector<int64_t> minVersions_;
  int64_t stale_ = 0;
};

// ---------------------------------------------------------------------------
// In-graph replication.

/// A worker that serves towers to the in-graph client.
class TowerService final : public rpc::Worker::Service {
public:
  TowerService(train::Trainer &trainer, Links &links, PsDriver &ps)
      : trainer_(trainer), links_(links), ps_(ps) {}

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
      // A lost ps is the client's to recover (ABORTED); anything else
      // is this tower's failure.
      return grpc::Status(ps_.lastRecoverable() ? grpc::StatusCode::ABORTED
                                                : grpc::StatusCode::INTERNAL,
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
  PsDriver &ps_;
  std::mutex mu_;
  bool shutdown_ = false;
  int64_t towers_ = 0;
};

/// The in-graph client (the chief): its own tower plus one per other
/// worker, the towers' sends averaged and pushed once.
class InGraphDriver : public train::StepDriver {
public:
  InGraphDriver(PsDriver &ps, Links &links) : ps_(ps), links_(links) {
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
    return ps_.beforeStep(globalStep, done);
  }
  Status startStep(int64_t globalStep) override {
    // The other towers run while this one does.
    for (Remote &r : remotes_) {
      r.reply = rpc::TowerReply();
      r.pending = std::async(std::launch::async, [this, &r, step = globalStep] {
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
    std::string lostPs; // a tower that lost a ps: the step is dropped
    for (Remote &r : remotes_) {
      grpc::Status st = r.pending.get();
      if (st.error_code() == grpc::StatusCode::ABORTED) {
        lostPs = st.error_message();
        continue;
      }
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
    if (!lostPs.empty()) {
      links_.say(lostPs + "; this step's update is dropped, and the next "
                          "pull waits for the ps tasks to come back");
      return Status::ok();
    }
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
  std::vector<Remote> remotes_;
};

int fail(const std::string &self, const Status &s, int code) {
  std::fflush(stdout);
  std::fprintf(stderr, "dtf-run: error: %s: %s\n", self.c_str(),
               s.message().c_str());
  return code;
}

// ---------------------------------------------------------------------------
// Model parallelism: the stages of one replica on several worker tasks.

/// What a stage's Worker service receives: BeginStep from stage 0, and the
/// tensors other stages send it (into its rendezvous table).
using StageBase = rpc::Worker::WithRawCallbackMethod_Transfer<rpc::Worker::Service>;

class StageService final : public StageBase {
public:
  /// `incarnation`: this process's, so that the other stages see a restart.
  /// `incarnation`: this process's, so that the other stages see a restart;
  /// `program`: the stage's, whose recvs say which keys it takes.
  StageService(Links &links, exec::RendezvousTable &table, int64_t incarnation,
               const plan::Program &program)
      : links_(links), table_(table), incarnation_(incarnation) {
    for (const plan::Op &op : program.ops())
      if (op.name() == "dtf.recv")
        keys_.insert(op.attrs().at("key").s());
  }

  /// This stage lost a ps in step `sequence`: stage 0 asks, and drops it.
  void setFailure(uint64_t sequence, const std::string &why) {
    std::lock_guard<std::mutex> lock(mu_);
    failedSequence_ = sequence;
    failure_ = why;
  }

  grpc::Status GetStatus(grpc::ServerContext *, const rpc::StatusRequest *,
                         rpc::StatusReply *reply) override {
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

  grpc::Status BeginStep(grpc::ServerContext *, const rpc::BeginStepRequest *req,
                         rpc::BeginStepReply *) override {
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

  grpc::ServerUnaryReactor *Transfer(grpc::CallbackServerContext *ctx,
                                     const grpc::ByteBuffer *request,
                                     grpc::ByteBuffer *response) override {
    grpc::ServerUnaryReactor *reactor = ctx->DefaultReactor();
    grpc::Status st = transfer(*request);
    if (st.ok())
      *response = serializeMessage(rpc::TransferReply());
    reactor->Finish(st);
    return reactor;
  }

  grpc::Status Shutdown(grpc::ServerContext *, const rpc::ShutdownRequest *,
                        rpc::ShutdownReply *) override {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    cv_.notify_all();
    return grpc::Status::OK;
  }

  /// Waits up to `timeout` for stage 0's next BeginStep.
  bool nextBegin(rpc::BeginStepRequest *out, milliseconds timeout) {
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
  bool hasBeginAfter(uint64_t sequence) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const rpc::BeginStepRequest &b : begins_)
      if (b.sequence() > sequence || b.done())
        return true;
    return false;
  }
  /// True once stage 0 restarted during the current step.
  bool abandoned() {
    std::lock_guard<std::mutex> lock(mu_);
    return abandoned_;
  }

private:
  grpc::Status checkCaller(const rpc::Caller &caller) const {
    if (caller.plan_fingerprint() != links_.config().planFingerprint)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          caller.task() + " runs a different plan than " +
                              links_.self());
    return grpc::Status::OK;
  }

  grpc::Status transfer(const grpc::ByteBuffer &request) {
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
                              std::to_string(w.size()) + " bytes, more than "
                              "the message holds");
    DType dtype = DType::F32;
    Status s = plan::toDType(w.dtype(), &dtype);
    std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
    const int64_t n =
        s.isOk() ? plan::staticElements(dims, int64_t(1) << 40) : -1;
    if (n < 0 || size_t(n) * dtypeSize(dtype) != w.size())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          links_.self() + ": transferred value '" +
                              plan::printable(w.name()) +
                              "' does not fit its size");
    Tensor t = Tensor::allocate(dtype, dims);
    if (!t.defined())
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          links_.self() + ": out of memory for '" +
                              plan::printable(w.name()) + "'");
    s = reader.read(t.rawData(), w.size());
    if (!s.isOk())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          links_.self() + ": " + s.message());
    table_.put(w.name(), req.sequence(), std::move(t));
    return grpc::Status::OK;
  }

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

/// Starts a worker's Worker service (a stage's, or an in-graph tower's) on
/// its address.
Status serveWorker(grpc::Service &service, const TaskRef &task,
                  std::unique_ptr<grpc::Server> *out) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listenAddress(task.address),
                           grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  *out = builder.BuildAndStart();
  if (!*out || port == 0)
    return errorStatus("cannot listen on ", task.address,
                       " (is the port in use by another process?)");
  return Status::ok();
}

/// The other stages of this task's replica, and the rendezvous the
/// executor's dtf.send and dtf.recv ops use: a send is a Transfer call to
/// the receiving stage; a recv waits in this stage's table.
class StageLinks final : public exec::Rendezvous {
public:
  StageLinks(Links &links, exec::RendezvousTable &table, int replica,
             int stage, int span)
      : links_(links), table_(table), stage_(stage) {
    const Roster &roster = links.config().roster;
    for (int k = 0; k < span; ++k) {
      Peer p;
      p.task = roster.workers[size_t(replica * span + k)];
      if (k != stage) {
        p.channel = makeChannel(p.task.address);
        p.stub = rpc::Worker::NewStub(p.channel);
        p.raw = std::make_unique<grpc::GenericStub>(p.channel);
      }
      peers_.push_back(std::move(p));
    }
  }

  /// Waits until every other stage answers, and notes which process each is.
  Status connect() {
    std::vector<std::shared_ptr<grpc::Channel>> channels;
    std::vector<TaskRef> tasks;
    for (Peer &p : peers_)
      if (p.channel) {
        channels.push_back(p.channel);
        tasks.push_back(p.task);
      }
    DTF_RETURN_IF_ERROR(links_.connect(channels, tasks));
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

  /// The run (stage 0's process) and step that transfers belong to.
  /// Starts step `sequence` of stage 0's run `run` (global step `step`):
  /// the previous step's sends must have arrived, and what was left of a
  /// dropped step is let go.
  Status setStep(uint64_t run, uint64_t sequence, int64_t step) {
    Status drained = drainSends();
    run_ = run;
    sequence_ = sequence;
    step_ = step;
    lostPeer_ = false;
    stepDropped_ = false;
    table_.dropBefore(sequence);
    return drained;
  }
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
              const Tensor &value) override {
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
    p.raw->UnaryCall(&c->ctx, kTransferMethod, grpc::StubOptions(),
                     &c->request, &c->response,
                     [this, key, task = p.task](grpc::Status st) {
                       std::lock_guard<std::mutex> lock(sendMu_);
                       if (!st.ok() && sendFailed_.isOk()) {
                         sendFailed_ = rpcError("sending '" + key + "'", task, st);
                         sendLost_ = st.error_code() ==
                                     grpc::StatusCode::UNAVAILABLE;
                       }
                       --inFlight_;
                       sendCv_.notify_all();
                     });
    return Status::ok();
  }

  /// Waits for every send still on its way; the first that failed.
  Status drainSends() {
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
  ~StageLinks() override { (void)drainSends(); }

  Status recv(const std::string &key, int peer, uint64_t,
              Tensor *out) override {
    if (peer < 0 || size_t(peer) >= peers_.size() || peer == stage_)
      return errorStatus("a recv of '", key, "' from stage ", peer,
                         ", which this replica does not have");
    Peer &sender = peers_[size_t(peer)];
    const TaskRef &from = sender.task;
    double lastSaid = 0, lastChecked = 0;
    lostPeer_ = false;
    return table_.take(
        key, sequence_, out, milliseconds(200),
        [&](double waited, Status *why) {
          if (links_.config().stop && links_.config().stop->load()) {
            *why = errorStatus("interrupted");
            return false;
          }
          if (abandoned_ && abandoned_()) {
            *why = errorStatus("step ", step_, " abandoned: ",
                               peers_[0].task.name, " started again");
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
                               from.name, " at ", from.address, " to send '",
                               key, "' of step ", step_,
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
                                 "for '", key, "' of step ", step_);
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

  /// True when the last recv or send failed because its peer is gone.
  bool lostPeer() const { return lostPeer_; }

  /// Stage 0: starts the step set by setStep on every other stage (or ends
  /// them); every stage is told, the first failure returned.
  Status begin(bool done, const std::vector<int64_t> &versions) {
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

  grpc::Status status(Peer &p, rpc::StatusReply *reply) {
    grpc::ClientContext ctx;
    setDeadline(&ctx, milliseconds(2000));
    rpc::StatusRequest req;
    *req.mutable_caller() = links_.caller();
    return p.stub->GetStatus(&ctx, req, reply);
  }
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
  Status afterStep(exec::Executor &e, int firstSend) override {
    return ps_.afterStep(e, firstSend);
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
  std::set<std::string> reads;
  for (const plan::Op &op : program.ops())
    if (op.name() == "dtf.read_variable")
      reads.insert(op.attrs().at("name").s());
  for (const plan::Variable &v : plan.variables()) {
    if (!reads.count(v.name()) && v.role() != "global_step")
      continue;
    DType dtype = DType::F32;
    Status s = plan::toDType(v.type().dtype(), &dtype);
    Tensor t = s.isOk() ? Tensor::allocate(dtype, plan::dimsOf(v.type().shape()))
                        : Tensor();
    if (!t.defined())
      return fail(self, errorStatus("cannot hold variable '", v.name(), "'"), 4);
    std::memset(t.rawData(), 0, t.byteSize());
    (void)store.add(v.name(), std::move(t));
  }
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
  Status s = serveWorker(service, me, &server);
  if (!s.isOk())
    return fail(self, s, 4);
  StageLinks stages(links, table, replica, stage, span);
  stages.setAbandoned([&] {
    return service.abandoned() || service.shutdown() ||
           service.hasBeginAfter(stages.sequence());
  });

  int threads = base.threads > 0 ? base.threads : plan.session().intra_op_threads();
  if (threads > 0)
    train::setOpenMpThreadCount(threads);
  else
    threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::unique_ptr<ThreadPool> pool;
  if (threads > 1)
    pool = std::make_unique<ThreadPool>(threads);
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
            std::to_string(executor->numRunOps()) + " ops each step); " +
            lead + " starts the steps");

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
  // Model parallelism: a replica spans `span` worker tasks, its stages.
  const int span = plan::replicaSpan(plan);
  int numReplicas = 1;
  if (Status s = plan::replicasFor(plan, numWorkers, &numReplicas); !s.isOk())
    return fail(self, s, 2);
  const int stage = replica % span;
  const int group = replica / span; // the replica this task is a stage of
  plan::Program stageProgram;
  if (span > 1) {
    Status split = plan::stageProgramFor(plan, stage, &stageProgram);
    if (!split.isOk())
      return fail(self, split, 4);
    if (stage > 0)
      return runLaterStage(plan, placement, stageProgram, group, stage, span,
                           base, config, sync);
  }

  Links links(config, self);
  PsDriver ps(plan, placement, links, sync, /*push=*/!inGraph || chief,
              span > 1 ? &stageProgram : nullptr);
  ps.setRecoverInPlace(!inGraph || chief);
  train::TrainOptions options = base;
  options.taskName = std::getenv("DTF_RESTART_COUNT") ? "" : self;
  options.summaryTask = self; // one directory (and log) per task
  options.evaluate = chief;
  options.seedOffset = uint64_t(group);
  options.shardIndex = size_t(group);
  options.shardCount = size_t(numReplicas);
  if (inGraph) {
    const int64_t batch = base.batch > 0 ? base.batch : t.batch();
    options.batch = std::max<int64_t>(batch / numWorkers, 1);
  }
  std::unique_ptr<InGraphDriver> client;
  options.driver = &ps;
  // Stage 0 of a model-parallel replica: serves the transfers sent to it,
  // and starts each step on the other stages.
  exec::RendezvousTable table;
  std::unique_ptr<StageService> stageService;
  std::unique_ptr<grpc::Server> stageServer;
  std::unique_ptr<StageLinks> stages;
  std::unique_ptr<StageLeadDriver> lead;
  if (span > 1) {
    std::random_device entropy;
    const uint64_t run = (uint64_t(entropy()) << 32) ^ entropy() ^ 1;
    stageService = std::make_unique<StageService>(
        links, table, int64_t(run >> 1) | 1, stageProgram);
    Status served = serveWorker(*stageService, roster.workers[replica], &stageServer);
    if (!served.isOk())
      return fail(self, served, 4);
    stages = std::make_unique<StageLinks>(links, table, group, 0, span);
    stages->setAbandoned([&] {
      return config.stop && config.stop->load();
    });
    lead = std::make_unique<StageLeadDriver>(ps, *stages, run);
    stageService->setRun(run);
    (void)stages->setStep(run, 0, 0);
    options.driver = lead.get();
    options.workerProgram = &stageProgram;
    options.rendezvous = stages.get();
  }
  if (inGraph && chief) {
    client = std::make_unique<InGraphDriver>(ps, links);
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
    TowerService service(*trainer, links, ps);
    std::unique_ptr<grpc::Server> server;
    s = serveWorker(service, roster.workers[replica], &server);
    if (!s.isOk())
      return fail(self, s, 4);
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
  if (stages) {
    s = stages->connect();
    if (!s.isOk())
      return fail(self, s, 6);
    std::string others;
    for (int k = 1; k < span; ++k)
      others += (k > 1 ? ", " : "") + stages->task(k).name;
    links.say("stage 0 of replica " + std::to_string(group) + ", with " +
              others);
  }

  train::TrainReport report;
  s = trainer->run(&report, &kind);
  if (stages) // the other stages stop with this one
    (void)stages->begin(/*done=*/true, {});
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
