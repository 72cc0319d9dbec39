// The ps calls that set its variables as a whole: Initialize and
// InitializeStream from the chief (the plan's initializers, a checkpoint's
// values sent or read by the ps in place, the replica of its shard on its
// mirror), each checked whole before anything changes.
#include "runtime/distributed/PsService.h"

#include "runtime/distributed/Wire.h"

#include <cstring>

namespace dtf::dist::ps {
namespace {

grpc::Status initFailure(grpc::StatusCode code, const std::string &message) {
  return grpc::Status(code, message);
}

} // namespace

grpc::Status PsService::restoreInPlace(int64_t step, int64_t version) {
  if (config_.modelDir.empty())
    return initFailure(grpc::StatusCode::FAILED_PRECONDITION,
                       name_ +
                           " was started without --model-dir: it cannot read "
                           "a checkpoint itself");
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  Status s =
      checkpoint::CheckpointReader::open(config_.modelDir, step, &reader);
  // Everything is checked before any variable changes.
  if (s.isOk())
    s = store_.checkRestorable(*reader);
  if (!s.isOk())
    return initFailure(grpc::StatusCode::FAILED_PRECONDITION,
                       name_ + ": " + s.message() + " (nothing changed)");
  s = store_.restore(*reader, version);
  if (!s.isOk()) {
    // Half restored: not usable until the chief initializes it again.
    initialized_ = false;
    return initFailure(grpc::StatusCode::INTERNAL, name_ + ": " + s.message());
  }
  return grpc::Status::OK;
}

grpc::Status PsService::Initialize(grpc::ServerContext *ctx,
                                   const rpc::InitializeRequest *req,
                                   rpc::InitializeReply *reply) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kChief, "initialize it", &who); !bad.ok())
    return bad;
  if (auto bad = checkCaller(req->caller()); !bad.ok())
    return bad;
  return initialize(*req, nullptr, reply, named(who, req->caller()));
}

grpc::Status PsService::initialize(const rpc::InitializeRequest &request,
                                   const std::vector<Tensor> *staged,
                                   rpc::InitializeReply *reply,
                                   const std::string &who) {
  const rpc::InitializeRequest *req = &request;
  std::unique_lock<std::mutex> lock(mu_);
  waitWhileSaving(lock); // a checkpoint reads the variables in place
  if (initialized_ && !req->force()) {
    reply->set_already(true);
    reply->set_incarnation(incarnation_);
    return grpc::Status::OK;
  }
  // All or nothing: every value is checked before any variable changes.
  if (auto bad = checkInitialValues(*req, staged != nullptr); !bad.ok())
    return bad;
  SplitLedger ledger = ledger_;
  if (auto bad = restoreLedger(*req, &ledger); !bad.ok())
    return bad;
  int64_t version = req->version();
  if (req->from_replica()) {
    if (auto bad = takeReplica(&version); !bad.ok())
      return bad;
  } else if (req->restore()) {
    if (auto bad = restoreInPlace(req->restore_step(), req->version());
        !bad.ok())
      return bad;
  } else if (req->values_size() == 0 && initialized_) {
    // Back to the plan's initializers (no checkpoint yet), made again.
    if (Status s = store_.resetToInitializers(); !s.isOk())
      return initFailure(grpc::StatusCode::INTERNAL,
                         name_ + ": " + s.message());
  }
  for (int i = 0; i < req->values_size(); ++i) {
    const rpc::WireTensor &w = req->values(i);
    Tensor *t = store_.variables().find(w.name());
    if (!t)
      return initFailure(grpc::StatusCode::INVALID_ARGUMENT,
                         name_ + " does not hold variable '" + w.name() + "'");
    if (staged) {
      std::memcpy(t->rawData(), (*staged)[size_t(i)].rawData(), t->byteSize());
      continue;
    }
    Status s = copyFromWire(w, t);
    if (!s.isOk())
      return initFailure(grpc::StatusCode::INVALID_ARGUMENT, s.message());
  }
  version_ = version;
  initialized_ = true;
  ++incarnation_;
  aggregator_.clear();
  ledger_ = std::move(ledger);
  reply->set_incarnation(incarnation_);
  // A restore says what its dynamic tables hold again: the live rows of
  // the checkpoint (a re-shard's, docs/elastic.md, may bring rows another
  // ps held).
  log(std::string(req->force() ? "re-initialized" : "initialized") + " by " +
      who +
      (req->from_replica()
           ? " from the replica of its shard on " +
                 config_.roster.ps[size_t(mirror_)].name + " (update " +
                 std::to_string(version_) +
                 (store_.globalStep() >= 0
                      ? "; global step " + std::to_string(store_.globalStep())
                      : std::string()) +
                 "): nothing rolled back"
       : req->restore() ? " from checkpoint " +
                              checkpoint::checkpointName(req->restore_step()) +
                              ", read by this ps from " + config_.modelDir
       : req->values_size()
           ? " from a checkpoint at step " + std::to_string(req->version())
           : std::string(" (the plan's initializers)")) +
      (req->restore() && !store_.dynamic().empty()
           ? "; dynamic tables: " + store_.dynamic().describe()
           : std::string()));
  // Its replica starts again from what it now holds.
  if (mirror_ >= 0)
    sendSnapshot("initialized");
  cv_.notify_all();
  return grpc::Status::OK;
}

grpc::Status
PsService::checkInitialValues(const rpc::InitializeRequest &request,
                              bool staged) {
  const rpc::InitializeRequest *req = &request;
  for (int i = 0; i < req->values_size(); ++i) {
    const rpc::WireTensor &w = req->values(i);
    const Tensor *t = store_.variables().find(w.name());
    if (!t)
      return initFailure(grpc::StatusCode::INVALID_ARGUMENT,
                         name_ + " does not hold variable '" +
                             plan::printable(w.name()) + "' (nothing changed)");
    if (staged)
      continue; // checked against the variable as the stream arrived
    DType dtype = DType::F32;
    std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
    if (!plan::toDType(w.dtype(), &dtype).isOk() || dtype != t->dtype() ||
        dims != t->shape() || w.data().size() != t->byteSize())
      return initFailure(grpc::StatusCode::INVALID_ARGUMENT,
                         "variable '" + plan::printable(w.name()) +
                             "' does not fit " + t->describe() + " on " +
                             name_ + " (nothing changed)");
  }
  return grpc::Status::OK;
}

grpc::ServerReadReactor<grpc::ByteBuffer> *
PsService::InitializeStream(grpc::CallbackServerContext *ctx,
                            grpc::ByteBuffer *response) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kChief, "initialize it", &who); !bad.ok())
    return new RefusedStream(bad);
  if (auto bad = openStream(ctx); !bad.ok())
    return new RefusedStream(bad);
  ++streamedInits_;
  return new StreamReader<rpc::InitializeRequest, rpc::InitializeReply>(
      &streams_, ctx, response,
      name_ + ": refused an initialization stream: ", "nothing changed",
      [this](const rpc::InitializeRequest &req, std::vector<Tensor> *staged,
             std::vector<PayloadTarget> *targets) {
        return prepareInitialize(req, staged, targets);
      },
      [this, who](const rpc::InitializeRequest &req,
                  std::vector<Tensor> &staged, rpc::InitializeReply *reply) {
        return initialize(req, &staged, reply, named(who, req.caller()));
      });
}

grpc::Status PsService::prepareInitialize(const rpc::InitializeRequest &req,
                                          std::vector<Tensor> *staged,
                                          std::vector<PayloadTarget> *targets) {
  if (auto bad = checkCaller(req.caller()); !bad.ok())
    return bad;
  return stageValues(store_.variables(), req.values(), staged, targets);
}

grpc::Status PsService::stageValues(
    const exec::VariableStore &vars,
    const google::protobuf::RepeatedPtrField<rpc::WireTensor> &values,
    std::vector<Tensor> *staged, std::vector<PayloadTarget> *targets) {
  for (const rpc::WireTensor &w : values) {
    const Tensor *t = vars.find(w.name());
    if (!t)
      return initFailure(grpc::StatusCode::INVALID_ARGUMENT,
                         name_ + " does not hold variable '" +
                             plan::printable(w.name()) + "'");
    DType dtype = DType::F32;
    Status s = plan::toDType(w.dtype(), &dtype);
    std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
    if (!s.isOk() || dtype != t->dtype() || dims != t->shape() ||
        w.size() != t->byteSize())
      return initFailure(grpc::StatusCode::INVALID_ARGUMENT,
                         "variable '" + plan::printable(w.name()) +
                             "' arrived as " +
                             (s.isOk() ? plan::typeString(dtype, dims)
                                       : std::string("an unknown dtype")) +
                             " (" + std::to_string(w.size()) + " bytes), but " +
                             name_ + " holds it as " + t->describe());
    staged->push_back(Tensor::allocate(t->dtype(), t->shape()));
    targets->push_back({staged->back().rawData(), t->byteSize()});
  }
  return grpc::Status::OK;
}

} // namespace dtf::dist::ps
