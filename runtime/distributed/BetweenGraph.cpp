// Between-graph replication: a worker's steps over the ps tasks (pull,
// push, checkpoints when due, recovery when a ps is lost).
#include "runtime/distributed/BetweenGraph.h"

#include "runtime/distributed/Wire.h"

#include <algorithm>
#include <chrono>
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
    clearRecoverable();
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
    clearRecoverable();
    Status s = client_.pull(/*forEval=*/false, sync_, globalStep);
    if (s.isOk() && saveAfterPull_) {
      // A sync checkpoint that came due at the last push: this pull waited
      // for the update that push joined, so the ps hold at least
      // *globalStep updates now.
      saveAfterPull_ = false;
      clearRecoverable();
      s = save(*globalStep);
    }
    if (s.isOk() && prefetch_)
      client_.startPrefetch();
    if (s.isOk() || !lostPs() || !recoverInPlace_)
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
  return pushAndSave(
      [&](const std::string &k) -> const Tensor * {
        auto it = sendIndex_.find(k);
        return it == sendIndex_.end() ? nullptr : &e.fetch(it->second);
      },
      // The gradients made in the push's region from the next step on.
      [&](const std::string &k, Tensor buffer) {
        auto it = sendIndex_.find(k);
        return it != sendIndex_.end() &&
               e.placeFetch(it->second, std::move(buffer));
      });
}

Status PsDriver::pushAndSave(
    const ValueOf &value,
    std::function<bool(const std::string &, Tensor)> place) {
  // The global step this push completes (an overlapped pull moves the
  // store's on).
  const int64_t step = lastStep() + 1;
  clearRecoverable();
  prefetched_ = false;
  PsClient::PushOptions options;
  options.sync = sync_;
  options.run = run_;
  options.dataBatches = batches_;
  options.place = std::move(place);
  PsClient::PushResult pushed;
  Status s = Status::ok();
  if (overlap_ && !sync_) {
    // The next step's pull beside this push: both ways of every link busy;
    // the pull may miss this worker's own push (staleness at most 1).
    const PsClient::Request request = client_.startPush(value, options);
    Status pulled = client_.pull(/*forEval=*/false, /*sync=*/false,
                                 &prefetchedStep_);
    s = client_.wait(request, &pushed);
    if (s.isOk())
      s = pulled;
  } else {
    s = client_.push(value, options, &pushed);
  }
  stale_ += pushed.stale;
  leaseLost_ |= pushed.leaseLost;
  if (!s.isOk()) {
    if (!lostPs())
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
    clearRecoverable();
    s = save(step);
    if (!s.isOk() && lostPs())
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

} // namespace dtf::dist
