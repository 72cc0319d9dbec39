// Between-graph replication: a worker's steps over the ps tasks (pull,
// push, checkpoints when due, recovery when a ps is lost).
#include "runtime/distributed/BetweenGraph.h"

#include "runtime/checkpoint/Checkpoint.h"

namespace dtf::dist {

PsDriver::PsDriver(const plan::Plan &plan, const plan::Placement &placement,
                   Links &links, bool sync, bool push,
                   const plan::Program *reads)
    : client_(plan, placement, links, reads),
      recovery_(plan, client_, schedule_), sync_(sync), push_(push) {}

bool PsDriver::dropStep(const Status &failure) {
  if (!client_.takeLookupFailure())
    return false;
  if (!client_.lastRecoverable() || !recoverInPlace_)
    return false;
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

Status PsDriver::beforeStep(int64_t *globalStep, bool *done) {
  *done = false;
  if (prefetched_) {
    prefetched_ = false;
    *globalStep = prefetchedStep_;
    return Status::ok();
  }
  for (;;) {
    client_.clearRecoverable();
    Status s = client_.pull(/*forEval=*/false, sync_, globalStep);
    if (s.isOk() || !client_.lastRecoverable() || !recoverInPlace_)
      return s;
    DTF_RETURN_IF_ERROR(recovery_.recover(chief_, s));
  }
}

Status PsDriver::afterStep(exec::Executor &e, int firstSend) {
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
    return recovery_.recover(chief_, s);
  }
  prefetched_ = overlap_ && !sync_;
  if (chief_ && checkpointDue(step)) {
    client_.clearRecoverable();
    s = save(step);
    if (!s.isOk() && client_.lastRecoverable())
      return recovery_.recover(chief_, s);
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
