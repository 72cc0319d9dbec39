// PsDriver's job-level calls to the ps tasks, beside its steps
// (BetweenGraph.cpp): the chief's checkpoints (every ps saves its shard, then
// the index), a worker's done or leaving, the chief's shutdown and its
// settling before a pause, and the exactly-once data leases from ps 0's
// split ledger.
#include "runtime/distributed/BetweenGraph.h"

#include "runtime/checkpoint/Checkpoint.h"

#include <chrono>
#include <thread>

namespace dtf::dist {

Status PsDriver::save(int64_t step) {
  const std::string &dir = client_.links().config().modelDir;
  if (!schedule_.unsaved(step))
    return Status::ok();
  DTF_RETURN_IF_ERROR(saveShards(dir, step));
  const size_t shards = client_.ps().size();
  DTF_RETURN_IF_ERROR(
      checkpoint::writeIndex(dir, step, int(shards), schedule_.keep()));
  schedule_.saved(step);
  say("saved checkpoint " + checkpoint::checkpointName(step) + " in " + dir +
      " (" + std::to_string(shards) + " shard" + (shards == 1 ? "" : "s") +
      ")");
  return Status::ok();
}

Status PsDriver::saveShards(const std::string &dir, int64_t step) {
  for (size_t k = 0; k < client_.ps().size(); ++k) {
    rpc::SaveRequest req;
    *req.mutable_caller() = client_.links().caller();
    req.set_dir(dir);
    req.set_step(step);
    req.set_shard(int(k));
    req.set_num_shards(int(client_.ps().size()));
    grpc::ClientContext ctx;
    setDeadline(&ctx, kCallTimeout);
    rpc::SaveReply reply;
    grpc::Status st = client_.ps()[k].stub->Save(&ctx, req, &reply);
    if (!st.ok()) {
      saveLost_ = recoverable(st);
      return rpcError("saving a checkpoint", client_.ps()[k].task, st);
    }
  }
  return Status::ok();
}

Status PsDriver::done(int *workersDone, int *workersLive, bool leaving) {
  client_.dropPrefetch();
  int doneCount = 0, liveCount = 0;
  // Every ps follows the live workers for its sync updates; ps 0 counts.
  for (size_t i = 0; i < client_.ps().size(); ++i) {
    rpc::DoneRequest req;
    *req.mutable_caller() = client_.links().caller();
    req.set_leaving(leaving);
    grpc::ClientContext ctx;
    setDeadline(&ctx, kCallTimeout);
    rpc::DoneReply reply;
    grpc::Status st = client_.ps()[i].stub->WorkerDone(&ctx, req, &reply);
    if (i > 0)
      continue; // another ps that is gone times this worker out itself
    if (!st.ok())
      return rpcError(leaving ? "telling it this worker leaves"
                              : "reporting this worker done",
                      client_.ps()[0].task, st);
    doneCount = reply.workers_done();
    liveCount = reply.workers_live();
  }
  if (workersDone)
    *workersDone = doneCount;
  if (workersLive)
    *workersLive = liveCount;
  return Status::ok();
}

void PsDriver::shutdownAll(const std::string &reason) {
  for (PsLink &l : client_.ps()) {
    rpc::ShutdownRequest req;
    *req.mutable_caller() = client_.links().caller();
    req.set_reason(reason);
    grpc::ClientContext ctx;
    setDeadline(&ctx, milliseconds(3000));
    rpc::ShutdownReply reply;
    (void)l.stub->Shutdown(&ctx, req, &reply);
  }
}

Status PsDriver::settle(double timeoutSeconds, int64_t *step) {
  client_.dropPrefetch();
  const Clock::time_point start = Clock::now();
  for (;;) {
    clearRecoverable();
    Status s = client_.pull(/*forEval=*/false, sync_, step);
    // The ps parks a sync pull for up to a second; a stop request (why the
    // chief settles) then ends the pull, not the wait.
    if (s.isOk() || s.message() != "interrupted" ||
        secondsSince(start) > timeoutSeconds)
      return s;
  }
}

Status PsDriver::nextDataBatch(int64_t examples, int64_t batch,
                               int64_t batchesPerEpoch, int64_t steps,
                               int64_t *number, bool *done) {
  *done = false;
  // Ps 0 dropped a push of ours whose batches it no longer leases to us
  // (restored, or our lease expired): the rest of the split went too.
  if (leaseLost_) {
    leaseLost_ = false;
    split_.clear();
  }
  if (split_.empty()) {
    if (client_.ps().empty() || client_.ps()[0].keys.empty())
      return errorStatus(
          "--data exactly-once needs ps.0 to take every update (it holds the "
          "split ledger and applies what each batch carries), but this "
          "step's updates do not go to ps.0; place a variable the step "
          "updates there, or leave --data exactly-once out");
    rpc::LeaseRequest req;
    *req.mutable_caller() = client_.links().caller();
    req.set_run(run_);
    // Sync: one batch at a time. An update takes replicas_to_aggregate
    // replicas' batches; a worker holding several at the end of the job
    // would leave the others none to pair with.
    req.set_max_batches(sync_ ? 1 : client_.links().config().splitBatches);
    req.set_examples(examples);
    req.set_batch(batch);
    req.set_batches_per_epoch(batchesPerEpoch);
    req.set_total_batches(steps * replicas_);
    DTF_RETURN_IF_ERROR(leaseSplit(req, done));
    if (*done)
      return Status::ok();
  }
  *number = split_.front();
  split_.pop_front();
  batches_ = {*number};
  return Status::ok();
}

Status PsDriver::leaseSplit(const rpc::LeaseRequest &req, bool *done) {
  const TaskConfig &config = client_.links().config();
  const auto start = std::chrono::steady_clock::now();
  auto said = start;
  for (;;) {
    if (config.stop && config.stop->load())
      return errorStatus("interrupted");
    PsLink &l = client_.ps()[0];
    grpc::ClientContext ctx;
    setDeadline(&ctx, kCallTimeout);
    rpc::LeaseReply reply;
    grpc::Status st = l.stub->LeaseData(&ctx, req, &reply);
    if (!st.ok()) {
      Status s = rpcError("leasing data", l.task, st);
      if (!recoverable(st) || !recoverInPlace_)
        return s;
      // Ps 0 is gone: once the ps tasks are back (ps 0's ledger restored
      // with them), ask again.
      DTF_RETURN_IF_ERROR(recover(s));
      continue;
    }
    if (reply.done()) {
      *done = true;
      return Status::ok();
    }
    if (reply.batches_size() > 0) {
      split_.assign(reply.batches().begin(), reply.batches().end());
      return Status::ok();
    }
    // Every batch left is leased to others or in the open update.
    const auto now = std::chrono::steady_clock::now();
    const double waited = std::chrono::duration<double>(now - start).count();
    if (waited > config.syncTimeoutSeconds)
      return errorStatus("waited ", int(waited), " s for data from ",
                         l.task.name, " (", reply.waiting_for(), ")");
    if (now - said > std::chrono::seconds(5)) {
      say("waiting for data: " + reply.waiting_for());
      said = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

} // namespace dtf::dist
