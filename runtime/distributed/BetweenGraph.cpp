// Between-graph replication: a worker's steps over the ps tasks (pull,
// push, checkpoints when due, recovery when a ps is lost).
#include "runtime/distributed/BetweenGraph.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/distributed/Wire.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <unistd.h>

namespace dtf::dist {

PsDriver::PsDriver(const plan::Plan &plan, const plan::Placement &placement,
                   Links &links, bool sync, bool push,
                   const plan::Program *reads)
    : client_(plan, placement, links, reads),
      recovery_(plan, client_, schedule_), sync_(sync), push_(push),
      replicas_(
          sync ? std::max<int64_t>(plan.training().replicas_to_aggregate(), 1)
               : 1),
      run_(uint64_t(
               std::chrono::system_clock::now().time_since_epoch().count()) ^
           (uint64_t(::getpid()) << 40)) {}

bool PsDriver::dropStep(const Status &failure) {
  if (!client_.takeLookupFailure())
    return false;
  if (!client_.lastRecoverable() || !recoverInPlace_)
    return false;
  // The next step pulls (and recovers) itself.
  client_.dropPrefetch();
  say(failure.message() + "; step dropped, going on once the ps tasks "
                          "are back");
  return true;
}

Status PsDriver::save(int64_t step) {
  const std::string &dir = client_.links().config().modelDir;
  if (!schedule_.unsaved(step))
    return Status::ok();
  DTF_RETURN_IF_ERROR(client_.saveShards(dir, step));
  const size_t shards = client_.ps().size();
  DTF_RETURN_IF_ERROR(
      checkpoint::writeIndex(dir, step, int(shards), schedule_.keep()));
  schedule_.saved(step);
  say("saved checkpoint " + checkpoint::checkpointName(step) + " in " + dir +
      " (" + std::to_string(shards) + " shard" + (shards == 1 ? "" : "s") +
      ")");
  return Status::ok();
}

Status PsDriver::recover(const Status &failure) {
  client_.dropPrefetch();
  pushedStep_ = -1; // the restored ps may be at an earlier step
  return recovery_.recover(chief_, failure);
}

Status PsDriver::beforeStep(int64_t *globalStep, bool *done) {
  *done = false;
  if (prefetched_) {
    prefetched_ = false;
    *globalStep = prefetchedStep_;
    return Status::ok();
  }
  if (prefetch_) {
    bool taken = false;
    client_.clearRecoverable();
    if (client_.takePrefetch(globalStep, &taken).isOk() && taken) {
      ++prefetchedPulls_;
      // Read before this worker's last push landed: the ps had applied at
      // least the step that push completed, so say that one (the job ends
      // at its step count, not one step later), the variables staying one
      // update behind.
      if (*globalStep < pushedStep_) {
        ++prefetchesBehind_;
        prefetchMaxLag_ = std::max(prefetchMaxLag_, pushedStep_ - *globalStep);
        *globalStep = pushedStep_;
        if (Tensor *t = client_.store()->find("global_step"))
          t->data<int64_t>()[0] = pushedStep_;
      }
      client_.startPrefetch();
      return Status::ok();
    }
    // None in flight, or it failed: pull now (recovering a lost ps).
  }
  for (;;) {
    client_.clearRecoverable();
    Status s = client_.pull(/*forEval=*/false, sync_, globalStep);
    if (s.isOk() && saveAfterPull_) {
      // A sync checkpoint that came due at the last push: this pull waited
      // for the update that push joined, so the ps hold at least
      // *globalStep updates now.
      saveAfterPull_ = false;
      client_.clearRecoverable();
      s = save(*globalStep);
    }
    if (s.isOk() && prefetch_)
      client_.startPrefetch();
    if (s.isOk() || !client_.lastRecoverable() || !recoverInPlace_)
      return s;
    DTF_RETURN_IF_ERROR(recover(s));
  }
}

Status PsDriver::afterStep(exec::Executor &e, int firstSend, bool withhold) {
  if (!push_)
    return Status::ok();
  if (sendIndex_.empty())
    for (int i = firstSend; i < e.numFetches(); ++i)
      sendIndex_[e.fetchInfo(i).name] = i;
  // A non-finite step (mixed_float16): only the flag and the global step's
  // increment go; every ps skips the update, the scale's ps halves it.
  client_.setWithhold(withhold);
  return pushAndSave([&](const std::string &k) -> const Tensor * {
    auto it = sendIndex_.find(k);
    return it == sendIndex_.end() ? nullptr : &e.fetch(it->second);
  });
}

Status PsDriver::pushAndSave(const ValueOf &value) {
  // The global step this push completes (an overlapped pull moves the
  // store's on).
  const int64_t step = lastStep() + 1;
  client_.clearRecoverable();
  prefetched_ = false;
  Status s = overlap_ && !sync_ ? client_.pushAndPull(value, &prefetchedStep_)
                                : client_.push(value, sync_);
  if (!s.isOk()) {
    if (!client_.lastRecoverable())
      return s;
    return recover(s);
  }
  prefetched_ = overlap_ && !sync_;
  pushedStep_ = step;
  if (chief_ && checkpointDue(step) && sync_) {
    // Sync: the update this push joined may still wait for other replicas'
    // gradients. Saved now, checkpoint `step` would hold the variables of
    // step - 1, and the end of the job, finding `step` saved, would not save
    // the last update (the counting model's rows lost that update's
    // batches). The next pull waits for that update; the save follows it.
    saveAfterPull_ = true;
    return Status::ok();
  }
  if (chief_ && checkpointDue(step)) {
    client_.clearRecoverable();
    s = save(step);
    if (!s.isOk() && client_.lastRecoverable())
      return recover(s);
    return s;
  }
  return Status::ok();
}

Status PsDriver::beforeEval() {
  // The eval program reads the moving averages, which no step pulls; it
  // waits for no update.
  int64_t step = 0;
  return client_.pull(/*forEval=*/true, /*sync=*/false, &step);
}

Status PsDriver::nextDataBatch(int64_t examples, int64_t batch,
                               int64_t batchesPerEpoch, int64_t steps,
                               int64_t *number, bool *done) {
  *done = false;
  // Ps 0 dropped a push of ours whose batches it no longer leases to us
  // (restored, or our lease expired): the rest of the split went too.
  if (client_.takeLeaseLost())
    split_.clear();
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
  client_.setDataBatches(run_, {*number});
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
