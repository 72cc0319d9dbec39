// PsRecovery: initializing the ps tasks, restoring them from a checkpoint,
// and waiting out a lost ps.
#include "runtime/distributed/Recovery.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/distributed/TensorMessage.h"

#include <memory>
#include <thread>

namespace dtf::dist {

// Asks ps `l` how it is, and checks it runs this task's plan.
Status PsRecovery::status(PsLink &l, rpc::StatusReply *reply) {
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

Status PsRecovery::initializeOrWait(bool chief) {
  const std::string chiefName = links_.config().roster.workers[0].name;
  const Clock::time_point start = Clock::now();
  double lastSaid = -100;
  for (;;) {
    bool allReady = true;
    for (PsLink &l : client_.ps()) {
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

Status PsRecovery::restoreAll(bool force) {
  const std::string &dir = links_.config().modelDir;
  int64_t step = -1;
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  checkpointRefused_ = false;
  if (!dir.empty()) {
    // The chief decides for every ps: the checkpoint is checked whole here,
    // before any ps is told to take it.
    checkpoint::RestoreChoice choice;
    Status s = checkpoint::chooseCheckpoint(dir, links_.config().restore,
                                            "--fresh", &choice);
    for (const std::string &why : choice.warnings())
      links_.say("warning: " + why);
    // The job saves those steps again: their damaged files move aside.
    std::string movedTo;
    if (s.isOk())
      s = checkpoint::moveDamagedAside(dir, choice.passedOverSteps, &movedTo);
    if (!movedTo.empty())
      links_.say("warning: moved the damaged checkpoints' files to " + movedTo);
    if (s.isOk() && choice.step >= 0)
      s = checkpoint::CheckpointReader::open(dir, choice.step, &reader);
    if (!s.isOk()) {
      checkpointRefused_ = true;
      return s;
    }
    step = choice.step;
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
  for (size_t k = 0; k < client_.ps().size(); ++k) {
    PsLink &l = client_.ps()[k];
    rpc::InitializeRequest req;
    *req.mutable_caller() = links_.caller();
    req.set_force(force);
    std::vector<Tensor> values;
    // A ps whose share is large reads it from the checkpoint itself (its
    // --model-dir is this one, which every task sees), straight into its
    // variables: neither this task nor the ps holds a second copy.
    uint64_t share = 0;
    if (reader)
      for (const plan::HeldTensor &h : client_.heldBy(k))
        if (const checkpoint::TensorInfo *info = reader->find(h.variable)) {
          uint64_t n = dtypeSize(info->dtype) * uint64_t(h.rows);
          for (size_t d = 1; d < info->shape.size(); ++d)
            n *= uint64_t(info->shape[d]);
          share += n;
        }
    // A dynamic table is stored as its live rows and their ids, which only
    // its ps can place: it always reads them itself.
    bool dynamic = false;
    for (const plan::HeldTensor &h : client_.heldBy(k))
      for (const plan::Variable &v : plan_.variables())
        dynamic |= v.name() == h.variable && v.dynamic().enabled();
    if (reader && (share >= kRestoreOnPsBytes || dynamic)) {
      req.set_restore(true);
      req.set_restore_step(step);
    } else if (reader) {
      for (const plan::HeldTensor &h : client_.heldBy(k)) {
        // Another model's checkpoint, or one changed since it was checked:
        // neither is fixed by a restart.
        checkpointRefused_ = true;
        if (!reader->find(h.variable))
          return errorStatus(
              "the checkpoint ", checkpoint::checkpointName(step), " in ", dir,
              " has no variable '", h.variable,
              "' (is it another model's? --fresh sets it aside)");
        Tensor t;
        DTF_RETURN_IF_ERROR(h.partitioned
                                ? reader->readRows(h.variable, h.rowOffset,
                                                   h.rowOffset + h.rows, &t)
                                : reader->read(h.variable, &t));
        checkpointRefused_ = false;
        describeTensor(h.name, t, req.add_values());
        values.push_back(std::move(t));
      }
    }
    // Exactly-once data: the batches the checkpoint's variables saw, for
    // ps 0's split ledger (absent from a static run's checkpoint).
    if (k == 0 && reader && reader->find("dtf/data_ledger")) {
      Tensor ledger;
      if (!reader->read("dtf/data_ledger", &ledger).isOk() ||
          ledger.dtype() != DType::I64 || ledger.rank() != 1) {
        checkpointRefused_ = true;
        return errorStatus("the checkpoint ", checkpoint::checkpointName(step),
                           " in ", dir, " has a malformed dtf/data_ledger");
      }
      req.mutable_data_ledger()->Add(ledger.data<int64_t>(),
                                     ledger.data<int64_t>() + ledger.dim(0));
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
        return errorStatus(
            l.task.name, " answered an initialization with a malformed reply");
    } else {
      for (int i = 0; i < req.values_size(); ++i)
        toWire(req.values(i).name(), values[size_t(i)], req.mutable_values(i));
      st = l.stub->Initialize(&ctx, req, &reply);
    }
    if (!st.ok()) {
      // The ps found the checkpoint damaged as it read its share.
      checkpointRefused_ |=
          req.restore() &&
          st.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
      return rpcError("initializing", l.task, st);
    }
  }
  schedule_.saved(reader ? step : -1);
  if (reader)
    links_.say("restored checkpoint " + checkpoint::checkpointName(step) +
               " from " + dir + " onto " + std::to_string(client_.ps().size()) +
               " ps task" + (client_.ps().size() == 1 ? "" : "s") +
               "; continuing at step " + std::to_string(globalStep));
  else if (force)
    links_.say("no checkpoint yet: every ps starts again from the plan's "
               "initializers");
  return Status::ok();
}

bool PsRecovery::restoreFromReplicas(
    const std::vector<rpc::StatusReply> &replies) {
  const size_t n = client_.ps().size();
  if (links_.config().psReplicas < 2 || n < 2)
    return false;
  // Every lost ps must have a replica that holds at least what this task
  // saw of it, or the job would go back: then all go back together.
  for (size_t k = 0; k < n; ++k) {
    if (replies[k].initialized())
      continue;
    const size_t m = size_t(mirrorOf(int(k), int(n)));
    const rpc::StatusReply &r = replies[m];
    const std::string &lost = client_.ps()[k].task.name;
    const std::string &mirror = client_.ps()[m].task.name;
    std::string why;
    if (!r.initialized())
      why = mirror + ", its mirror, lost its state too";
    else if (r.replica_of() != int(k) || r.replica_version() < 0)
      why = mirror +
            " holds no replica of its shard (it started again "
            "since, or " +
            lost + " could not reach it)";
    else if (r.replica_version() < client_.ps()[k].pulledVersion)
      why = "the replica on " + mirror + " is at update " +
            std::to_string(r.replica_version()) + ", behind update " +
            std::to_string(client_.ps()[k].pulledVersion) +
            " this task pulled from " + lost;
    if (!why.empty()) {
      links_.say("cannot restore " + lost + " from its replica: " + why +
                 "; setting every ps back to the last checkpoint instead");
      return false;
    }
  }
  for (size_t k = 0; k < n; ++k) {
    if (replies[k].initialized())
      continue;
    PsLink &l = client_.ps()[k];
    const std::string &mirror =
        client_.ps()[size_t(mirrorOf(int(k), int(n)))].task.name;
    rpc::InitializeRequest req;
    *req.mutable_caller() = links_.caller();
    req.set_force(true);
    req.set_from_replica(true);
    grpc::ClientContext ctx;
    setDeadline(&ctx, kCallTimeout);
    rpc::InitializeReply reply;
    grpc::Status st = l.stub->Initialize(&ctx, req, &reply);
    if (!st.ok()) {
      links_.say("cannot restore " + l.task.name + " from its replica on " +
                 mirror + " (" +
                 rpcError("initializing", l.task, st).message() +
                 "); setting every ps back to the last checkpoint instead");
      return false;
    }
    rpc::StatusReply after;
    const bool known = status(l, &after).isOk();
    links_.say("restored " + l.task.name + " from its replica on " + mirror +
               (known ? " at update " + std::to_string(after.version()) +
                            (after.global_step() >= 0
                                 ? " (global step " +
                                       std::to_string(after.global_step()) + ")"
                                 : std::string())
                      : std::string()) +
               ": the other ps tasks keep their state, nothing rolled back");
  }
  return true;
}

Status PsRecovery::recover(bool chief, const Status &why) {
  // A call a ps cut for memory: the ps is up, the step goes on without it.
  const bool cut = why.message().find(kCutForMemory) != std::string::npos;
  links_.say(why.message() +
             (cut ? std::string("; going on")
                  : std::string("; waiting for the ps tasks to come back "
                                "(the launcher restarts a lost one)")));
  const Clock::time_point start = Clock::now();
  double lastSaid = 0;
  for (;;) {
    if (links_.config().stop && links_.config().stop->load())
      return errorStatus("interrupted");
    bool allUp = true, anyFresh = false;
    std::string down;
    std::vector<rpc::StatusReply> replies(client_.ps().size());
    for (size_t k = 0; k < client_.ps().size(); ++k) {
      PsLink &l = client_.ps()[k];
      rpc::StatusReply &reply = replies[k];
      if (!status(l, &reply).isOk()) {
        allUp = false;
        down = l.task.name + " at " + l.task.address;
        l.connectAgain(links_.config().transport);
        continue;
      }
      if (!reply.initialized())
        anyFresh = true;
    }
    // The chief restores a ps that lost its state; the others wait for it.
    if (allUp && (chief || !anyFresh)) {
      if (chief && anyFresh && !restoreFromReplicas(replies))
        DTF_RETURN_IF_ERROR(restoreAll(/*force=*/true));
      else if (!cut)
        links_.say("every ps answers again; going on");
      // What was pulled and pushed before belongs to the old state.
      client_.forgetVersions();
      return Status::ok();
    }
    const double waited = secondsSince(start);
    if (waited > links_.config().syncTimeoutSeconds)
      return errorStatus("gave up after ", int(waited), " s waiting for ",
                         down.empty()
                             ? std::string("the chief to restore the ps tasks")
                             : down);
    if (waited - lastSaid >= 5) {
      links_.say("still waiting for " +
                 (down.empty()
                      ? std::string("the chief to restore the ps tasks")
                      : down));
      lastSaid = waited;
    }
    std::this_thread::sleep_for(milliseconds(300));
  }
}

} // namespace dtf::dist
