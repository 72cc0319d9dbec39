// The parameter-server calls that write or hand out what an update consumed:
// LeaseData (exactly-once data, ps 0's split ledger), the ledger's part in
// pushes and restores, and Save (the ledger goes into ps 0's shard).
#include "runtime/distributed/PsService.h"

#include <algorithm>

namespace dtf::dist::ps {
namespace {

// The name of the ledger in ps 0's shard of a checkpoint (no variable's
// name: a plan's names have no '/' but in a partition's `/part_N`).
constexpr const char *kLedgerTensor = "dtf/data_ledger";
constexpr int kMaxSplitBatches = 1024;

std::vector<int64_t>
toVector(const google::protobuf::RepeatedField<int64_t> &r) {
  return std::vector<int64_t>(r.begin(), r.end());
}

} // namespace

grpc::Status PsService::LeaseData(grpc::ServerContext *ctx,
                                  const rpc::LeaseRequest *req,
                                  rpc::LeaseReply *reply) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kPusher, "lease data", &who); !bad.ok())
    return bad;
  if (auto bad = checkCaller(req->caller()); !bad.ok())
    return bad;
  if (index_ != 0)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        name_ + " holds no split ledger: ps.0 does");
  if (req->max_batches() < 1 || req->max_batches() > kMaxSplitBatches)
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        name_ + ": a split is 1 to " + std::to_string(kMaxSplitBatches) +
            " batches, not " + std::to_string(req->max_batches()));
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialized_)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        name_ + " is not initialized yet");
  const std::string refused =
      ledger_.configure({req->examples(), req->batch(),
                         req->batches_per_epoch(), req->total_batches()});
  if (!refused.empty())
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        name_ + ": refused the lease of " +
                            named(who, req->caller()) + ": " + refused);
  const auto now = SplitLedger::Clock::now();
  seen(named(who, req->caller()));
  ledger_.expire(now, config_.leaseTimeoutSeconds);
  std::vector<int64_t> batches;
  ledger_.lease(named(who, req->caller()), req->run(), req->max_batches(), now,
                &batches);
  for (int64_t b : batches)
    reply->add_batches(b);
  reply->set_done(ledger_.done());
  if (batches.empty() && !reply->done())
    reply->set_waiting_for(ledger_.waitingFor());
  return grpc::Status::OK;
}

bool PsService::ledgerAdmits(const rpc::PushRequest &req,
                             const std::string &who, rpc::PushReply *reply) {
  if (index_ != 0 || req.data_batches().empty())
    return true;
  const std::vector<int64_t> batches = toVector(req.data_batches());
  if (ledger_.holds(who, req.worker_run(), batches)) {
    ledger_.touch(who, req.worker_run(), SplitLedger::Clock::now());
    return true;
  }
  // Its lease expired (another worker has the batches now) or ps 0 was
  // restored since: applying it would count its examples twice.
  ledger_.release(who, req.worker_run(), batches,
                  SplitLedger::kDroppedGradient);
  reply->set_stale(true);
  reply->set_lease_lost(true);
  reply->set_version(version_);
  return false;
}

void PsService::ledgerApplied(const Batches &batches) {
  if (index_ != 0 || batches.empty())
    return;
  ledger_.consume(toVector(batches));
  logEpochs();
}

void PsService::ledgerJoined(const Batches &batches) {
  if (index_ == 0 && !batches.empty())
    ledger_.join(toVector(batches));
}

void PsService::ledgerUpdateApplied() {
  if (index_ != 0)
    return;
  ledger_.applyUpdate();
  logEpochs();
}

void PsService::ledgerDropped(const rpc::PushRequest &req,
                              const std::string &who) {
  if (index_ == 0 && !req.data_batches().empty())
    ledger_.release(who, req.worker_run(), toVector(req.data_batches()),
                    SplitLedger::kDroppedGradient);
}

void PsService::logEpochs() {
  for (const std::string &line : ledger_.takeEpochLines())
    log(line);
}

grpc::Status PsService::restoreLedger(const rpc::InitializeRequest &req,
                                      SplitLedger *ledger) {
  if (index_ != 0)
    return grpc::Status::OK;
  // A ledger restored with the variables, or none (the plan's initializers,
  // or a checkpoint of a static run): nothing consumed.
  const std::string refused = ledger->restore(toVector(req.data_ledger()));
  if (!refused.empty())
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        name_ + ": " + refused + " (nothing changed)");
  return grpc::Status::OK;
}

grpc::Status PsService::Save(grpc::ServerContext *ctx,
                             const rpc::SaveRequest *req,
                             rpc::SaveReply *reply) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kChief, "save a checkpoint", &who);
      !bad.ok())
    return bad;
  if (auto bad = checkCaller(req->caller()); !bad.ok())
    return bad;
  if (auto bad = checkSaveDir(req->dir()); !bad.ok())
    return bad;
  // The variables as they are between two updates, written from where
  // they are (no second copy of a large table): updates and restores wait
  // until the shard is written, pulls and lookups (which only read) go on.
  Tensor ledger;
  {
    std::unique_lock<std::mutex> lock(mu_);
    waitWhileSaving(lock); // one checkpoint at a time
    saving_ = true;
    // The batches the saved variables have seen: a restore goes on with
    // the others.
    if (index_ == 0 && ledger_.configured()) {
      const std::vector<int64_t> words = ledger_.save();
      ledger = Tensor::allocate(DType::I64, {int64_t(words.size())});
      std::copy(words.begin(), words.end(), ledger.data<int64_t>());
    }
  }
  std::vector<checkpoint::SavedTensor> tensors;
  store_.listForSave(&tensors);
  if (ledger.defined())
    tensors.push_back(checkpoint::SavedTensor::whole(kLedgerTensor, ledger));
  std::vector<std::unique_ptr<Tensor>> dynamicRows; // alive until written
  if (!store_.dynamic().empty()) {
    // Compacted under the lock, so that no lookup copies a row as it
    // moves; lookups afterwards make rows only past the live ones.
    std::lock_guard<std::mutex> lock(mu_);
    store_.dynamic().save(&tensors, &dynamicRows);
  }
  Status s = checkpoint::writeShard(req->dir(), req->step(), req->shard(),
                                    req->num_shards(), tensors);
  {
    std::lock_guard<std::mutex> lock(mu_);
    saving_ = false;
  }
  cv_.notify_all();
  if (!s.isOk())
    return grpc::Status(grpc::StatusCode::INTERNAL, name_ + ": " + s.message());
  reply->set_tensors(int64_t(tensors.size()));
  return grpc::Status::OK;
}

} // namespace dtf::dist::ps
