// The membership part of a ps task (docs/elastic.md): which workers are
// live, the sync rule that follows them, and WorkerDone (finished, or
// leaving the job).
#include "runtime/distributed/PsService.h"

namespace dtf::dist::ps {

void PsService::seen(const std::string &name) {
  const std::vector<TaskRef> &workers = config_.roster.workers;
  for (size_t i = 0; i < workers.size(); ++i)
    if (workers[i].name == name) {
      if (i % span_ == 0) // only stage 0 of a model-parallel replica pushes
        members_.seen(name, Membership::Clock::now());
      return;
    }
}

int64_t PsService::needed() {
  return members_.replicasToAggregate(aggregator_.replicas(),
                                      Membership::Clock::now());
}

void PsService::followMembership() {
  // Who went silent is noted (and said) now, in async mode too, where no
  // update asks.
  members_.live(Membership::Clock::now());
  if (sync_ && initialized_ && !saving_ && aggregator_.complete(needed())) {
    const int64_t at = version_;
    Status s = apply(aggregator_.average());
    if (!s.isOk()) {
      log(name_ + ": the update after a change of membership failed: " +
          s.message());
      aggregator_.clear();
      if (index_ == 0)
        ledger_.loseUpdate();
    } else {
      aggregator_.applied(at);
      ledgerUpdateApplied();
    }
  }
  for (const std::string &line : members_.takeChanges())
    log(line);
}

grpc::Status PsService::WorkerDone(grpc::ServerContext *ctx,
                                   const rpc::DoneRequest *req,
                                   rpc::DoneReply *reply) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kWorker, "report a worker done", &who);
      !bad.ok())
    return bad;
  if (auto bad = checkCaller(req->caller()); !bad.ok())
    return bad;
  std::lock_guard<std::mutex> lock(mu_);
  const std::string name = named(who, req->caller());
  regions_.forget(name); // its regions go with it
  if (req->leaving()) {
    members_.left(name);
    if (index_ == 0 && ledger_.configured())
      ledger_.leave(name);
  } else {
    members_.finished(name);
    done_.insert(name);
  }
  followMembership();
  reply->set_workers_done(int(done_.size()));
  reply->set_workers_live(
      int(members_.live(Membership::Clock::now()).size()));
  cv_.notify_all();
  return grpc::Status::OK;
}

} // namespace dtf::dist::ps
