// The parameter-server service's calls: admission, pulls (parked until
// their update), pushes, checkpoints, lookups (initialization:
// PsInitialize.cpp); the held tensors, the update and the sync sums are
// PsStore's, PsUpdate's and SyncAggregator's.
#include "runtime/distributed/PsService.h"

#include "runtime/distributed/Wire.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <future>

namespace dtf::dist::ps {
namespace {

grpc::Status fail(grpc::StatusCode code, const std::string &message) {
  return grpc::Status(code, message);
}

bool syncUpdates(const plan::Plan &plan) {
  const plan::Training &t = plan.training();
  return t.update() == "sync" && t.replication() != "in_graph";
}

int64_t replicasToAggregate(const plan::Plan &plan) {
  return syncUpdates(plan)
             ? std::max<int64_t>(plan.training().replicas_to_aggregate(), 1)
             : 1;
}

} // namespace

PsService::PsService(const plan::Plan &plan, const plan::Placement &placement,
                     int index, const TaskConfig &config)
    : config_(config), name_(config.roster.ps[index].name),
      sync_(syncUpdates(plan)),
      span_(size_t(std::max(plan::replicaSpan(plan), 1))), plan_(plan),
      placement_(placement), index_(index), store_(plan, placement, index),
      // Only where its callers' names are checked (TLS): a plaintext ps
      // takes calls from anyone.
      regions_(config.transport.tls && config.transport.sharedMemory
                   ? config.transport.regionDirectory()
                   : std::string(),
               name_),
      update_(name_),
      aggregator_(replicasToAggregate(plan),
                  config.modelDir.empty()
                      ? std::string()
                      : config.modelDir + "/" + name_ + ".sync.log"),
      members_(config.leaseTimeoutSeconds),
      streams_(name_, config.stallTimeoutSeconds, config.out) {}

Status PsService::setUp() {
  {
    std::vector<std::string> expected;
    const std::vector<TaskRef> &w = config_.roster.workers;
    const size_t n = config_.startWorkers > 0
                         ? std::min(w.size(), size_t(config_.startWorkers))
                         : w.size();
    for (size_t i = 0; i < n; i += span_)
      expected.push_back(w[i].name);
    std::lock_guard<std::mutex> lock(mu_);
    members_.expect(expected, Membership::Clock::now());
  }
  parker_ = std::thread([this] { parkLoop(); });
  // This ps's variables (or shards), initialized from the plan; the chief
  // may replace them with a checkpoint's in Initialize.
  DTF_RETURN_IF_ERROR(store_.setUp());
  uint64_t held = 0;
  for (const std::string &n : store_.names())
    held += store_.variables().find(n)->byteSize();
  buffers_ = std::make_unique<TransferBuffers>(
      config_.reuseTransferBuffers ? TransferBuffers::boundFor(held) : 0);
  update_.lendFrom(buffers_.get());
  DTF_RETURN_IF_ERROR(update_.setUp(plan_, placement_, index_, store_));
  return setUpReplica();
}

grpc::Status PsService::GetStatus(grpc::ServerContext *ctx,
                                  const rpc::StatusRequest *,
                                  rpc::StatusReply *reply) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kMember, "ask for its status", &who);
      !bad.ok())
    return bad;
  std::lock_guard<std::mutex> lock(mu_);
  if (!who.empty()) // a worker waiting for the chief's initialization
    seen(who);
  fillStatus(reply);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor *PsService::Pull(grpc::CallbackServerContext *ctx,
                                          const grpc::ByteBuffer *request,
                                          grpc::ByteBuffer *response) {
  grpc::ServerUnaryReactor *reactor = ctx->DefaultReactor();
  rpc::PullRequest req;
  if (!parseMessage(*request, &req)) {
    reactor->Finish(fail(grpc::StatusCode::INVALID_ARGUMENT,
                         name_ + ": a malformed pull request"));
    return reactor;
  }
  startPull(
      ctx, std::move(req),
      [response](const rpc::PullReply &reply,
                 const std::vector<Tensor> &snapshot) {
        *response = packShared(reply, snapshot);
      },
      [reactor](const grpc::Status &st) { reactor->Finish(st); });
  return reactor;
}

void PsService::startPull(grpc::CallbackServerContext *ctx,
                          rpc::PullRequest req, PullEmit emit,
                          PullFinish finish) {
  std::string who;
  grpc::Status st = admit(*ctx, Role::kMember, "pull", &who);
  if (st.ok())
    st = checkCaller(req.caller());
  if (st.ok())
    st = checkPullNames(req);
  if (st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string peer = named(who, req.caller());
    seen(peer);
    if (mustWait(req) && req.wait_ms() > 0 && !parkerStop_) {
      // A bounded number of waiting pulls, in all and per caller: a
      // worker has one at a time per ps.
      if (parked_.size() >= kMaxParked ||
          parkedBy_[peer] >= kMaxParkedPerPeer) {
        st = fail(grpc::StatusCode::RESOURCE_EXHAUSTED,
                  name_ + ": too many waiting pulls from " + peer);
      } else {
        const auto until = std::min(
            ctx->deadline(), std::chrono::system_clock::now() +
                                 std::chrono::milliseconds(req.wait_ms()));
        ++parkedBy_[peer];
        parked_.push_back({ctx, std::move(req), std::move(emit),
                           std::move(finish), until, std::move(peer)});
        return;
      }
    } else {
      st = answerPull(req, peer, emit);
    }
  }
  finish(st);
}

grpc::Status PsService::checkPullNames(const rpc::PullRequest &req) const {
  if (size_t(req.names_size()) > store_.names().size())
    return fail(grpc::StatusCode::INVALID_ARGUMENT,
                name_ + ": a pull names " + std::to_string(req.names_size()) +
                    " variables; it holds " +
                    std::to_string(store_.names().size()));
  std::set<std::string> seen;
  for (const std::string &n : req.names())
    if (!seen.insert(n).second)
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + ": a pull names '" + plan::printable(n) + "' twice");
  return grpc::Status::OK;
}

grpc::Status PsService::answerPull(const rpc::PullRequest &request,
                                   const std::string &peer,
                                   const PullEmit &emit) {
  const rpc::PullRequest *req = &request;
  rpc::PullReply replyMessage;
  rpc::PullReply *reply = &replyMessage;
  if (!initialized_)
    return fail(grpc::StatusCode::FAILED_PRECONDITION,
                name_ + " is not initialized yet (the chief does it)");
  reply->set_version(version_);
  reply->set_incarnation(incarnation_);
  if (req->incarnation() == incarnation_ && version_ < req->min_version()) {
    reply->set_ready(false);
    reply->set_waiting_for(
        aggregator_.waitingFor(version_, needed(),
                               members_.live(Membership::Clock::now())));
    emit(*reply, {});
    return grpc::Status::OK;
  }
  reply->set_ready(true);
  if (req->has_reply_into()) {
    bool done = false;
    grpc::Status st = pullIntoRegion(*req, peer, reply, &done);
    if (!st.ok())
      return st;
    if (done) {
      emit(*reply, {});
      return grpc::Status::OK;
    }
  }
  // --wire bf16: the f32 variables as bfloat16 (a copy already).
  const bool narrow = req->wire_dtype() == plan::BF16;
  std::vector<Tensor> snapshot;
  for (const std::string &n : req->names()) {
    const Tensor *t = store_.variables().find(n);
    if (!t)
      return fail(grpc::StatusCode::NOT_FOUND,
                  name_ + " does not hold variable '" + n + "'");
    const bool toBf16 = narrow && t->dtype() == DType::F32;
    snapshot.push_back(toBf16 ? narrowToBf16(*t)
                              : buffers_->allocate(t->dtype(), t->shape()));
    if (!snapshot.back().defined())
      return fail(grpc::StatusCode::RESOURCE_EXHAUSTED,
                  name_ + ": out of memory for a pull of '" + n + "'");
    if (!toBf16)
      std::memcpy(snapshot.back().rawData(), t->rawData(), t->byteSize());
    describeTensor(n, snapshot.back(), reply->add_values());
    payloadOut_ += snapshot.back().byteSize();
  }
  emit(*reply, snapshot);
  return grpc::Status::OK;
}

void PsService::parkLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!parkerStop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(20));
    // A parked pull is a worker waiting for an update: live all the while.
    for (const ParkedPull &p : parked_)
      if (!p.ctx->IsCancelled())
        seen(p.peer);
    followMembership();
    retryMirror();
    releaseParked(lock, /*all=*/false);
    lock.unlock(); // a cancelled stream may end (and lock mu_) at once
    streams_.cutStalled();
    lock.lock();
  }
}

void PsService::releaseParked(std::unique_lock<std::mutex> &lock, bool all) {
  std::vector<std::pair<PullFinish, grpc::Status>> answered;
  const auto now = std::chrono::system_clock::now();
  for (auto it = parked_.begin(); it != parked_.end();) {
    const bool cancelled = it->ctx->IsCancelled();
    if (!all && !cancelled && mustWait(it->req) && now < it->until) {
      ++it;
      continue;
    }
    if (--parkedBy_[it->peer] <= 0)
      parkedBy_.erase(it->peer);
    answered.emplace_back(std::move(it->finish),
                          cancelled ? grpc::Status(grpc::StatusCode::CANCELLED,
                                                   "the pull was cancelled")
                                    : answerPull(it->req, it->peer, it->emit));
    it = parked_.erase(it);
  }
  if (answered.empty())
    return;
  lock.unlock(); // Finish may run callbacks of its own
  for (auto &[finish, st] : answered)
    finish(st);
  lock.lock();
}

grpc::Status PsService::openStream(grpc::CallbackServerContext *ctx) {
  const bool tls = config_.transport.tls;
  return streams_.open(
      ctx, tls ? config_.transport.peerTask(*ctx) : std::string(ctx->peer()),
      tls);
}

void PsService::stopParking() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    parkerStop_ = true;
  }
  cv_.notify_all();
  if (parker_.joinable())
    parker_.join();
  std::unique_lock<std::mutex> lock(mu_);
  releaseParked(lock, /*all=*/true);
}

std::string PsService::waitForShutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutdown_ && !(config_.stop && config_.stop->load()))
    cv_.wait_for(lock, std::chrono::milliseconds(200));
  return shutdown_ ? shutdownReason_ : std::string("interrupted");
}

grpc::ServerWriteReactor<grpc::ByteBuffer> *
PsService::PullStream(grpc::CallbackServerContext *ctx,
                      const grpc::ByteBuffer *request) {
  auto *writer = new PullWriter(&streams_, ctx);
  if (grpc::Status st = openStream(ctx); !st.ok()) {
    writer->start(st);
    return writer;
  }
  ++streamedPulls_;
  rpc::PullRequest req;
  if (!parseMessage(*request, &req)) {
    writer->start(fail(grpc::StatusCode::INVALID_ARGUMENT,
                       name_ + ": a malformed pull request"));
    return writer;
  }
  startPull(
      ctx, std::move(req),
      [writer, chunk = config_.chunkBytes](const rpc::PullReply &reply,
                                           const std::vector<Tensor> &snapshot) {
        writer->send(reply, snapshot, chunk);
      },
      [writer](const grpc::Status &st) { writer->start(st); });
  return writer;
}

grpc::ServerUnaryReactor *PsService::Push(grpc::CallbackServerContext *ctx,
                                          const grpc::ByteBuffer *request,
                                          grpc::ByteBuffer *response) {
  grpc::ServerUnaryReactor *reactor = ctx->DefaultReactor();
  rpc::PushReply reply;
  std::string who;
  grpc::Status st = admit(*ctx, Role::kPusher, "push", &who);
  if (st.ok())
    st = push(*request, &reply, who);
  if (st.ok())
    *response = serializeMessage(reply);
  reactor->Finish(st);
  return reactor;
}

grpc::ServerReadReactor<grpc::ByteBuffer> *
PsService::PushStream(grpc::CallbackServerContext *ctx,
                      grpc::ByteBuffer *response) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kPusher, "push", &who); !bad.ok())
    return new RefusedStream(bad);
  if (auto bad = openStream(ctx); !bad.ok())
    return new RefusedStream(bad);
  ++streamedPushes_;
  return new StreamReader<rpc::PushRequest, rpc::PushReply>(
      &streams_, ctx, response,
      name_ + ": refused a push stream: ", "nothing applied",
      [this, who](const rpc::PushRequest &req, std::vector<Tensor> *values,
                  std::vector<PayloadTarget> *targets) {
        return preparePush(req, who, values, targets);
      },
      [this, who](const rpc::PushRequest &req, std::vector<Tensor> &values,
                  rpc::PushReply *reply) {
        return applyPush(req, values, reply, named(who, req.caller()));
      });
}

grpc::Status PsService::preparePush(const rpc::PushRequest &req,
                                    const std::string &who,
                                    std::vector<Tensor> *values,
                                    std::vector<PayloadTarget> *targets) {
  if (auto bad = checkCaller(req.caller()); !bad.ok())
    return bad;
  Status s = update_.prepare(req, values, targets);
  if (!s.isOk())
    return fail(grpc::StatusCode::INVALID_ARGUMENT, s.message());
  // The bytes are in the caller's shared-memory slot: read there or copied
  // out now.
  return req.has_values_in()
             ? pushFromRegion(req, named(who, req.caller()), values, targets)
             : grpc::Status::OK;
}

grpc::Status PsService::push(const grpc::ByteBuffer &request,
                             rpc::PushReply *reply, const std::string &who) {
  rpc::PushRequest req;
  std::vector<Tensor> values;
  Refusal refusal;
  ChunkReader reader(&req, [&](std::vector<PayloadTarget> *targets) {
    return refusal.note(preparePush(req, who, &values, targets));
  });
  Status s = reader.add(request);
  if (s.isOk())
    s = reader.finish();
  if (!s.isOk())
    return refusal.orElse(grpc::StatusCode::INVALID_ARGUMENT,
                          name_ + ": refused a push: ", s);
  return applyPush(req, values, reply, named(who, req.caller()));
}

grpc::Status PsService::applyPush(const rpc::PushRequest &request,
                                  std::vector<Tensor> &values,
                                  rpc::PushReply *reply,
                                  const std::string &who) {
  const rpc::PushRequest *req = &request;
  std::string refused;
  uint64_t sparseRows = 0, wireBytes = 0;
  for (const Tensor &v : values)
    wireBytes += v.byteSize();
  if (Status d = update_.decode(*req, &values); !d.isOk())
    return fail(grpc::StatusCode::INVALID_ARGUMENT, d.message());
  update_.widen(&values);
  Status checked = update_.checkValues(values, who, &refused, &sparseRows);
  sparseRowsPushed_ += sparseRows;
  if (!refused.empty())
    refusal(refused);
  if (!checked.isOk())
    return fail(grpc::StatusCode::INVALID_ARGUMENT, checked.message());
  payloadIn_ += wireBytes;
  std::unique_lock<std::mutex> lock(mu_);
  waitWhileSaving(lock); // a checkpoint reads the variables in place
  if (!initialized_)
    return fail(grpc::StatusCode::FAILED_PRECONDITION,
                name_ + " is not initialized yet");
  seen(who);
  if (!sync_) {
    if (req->incarnation() != incarnation_) {
      ledgerDropped(*req, who);
      reply->set_stale(true); // computed before a restore
      reply->set_version(version_);
      return grpc::Status::OK;
    }
    if (!ledgerAdmits(*req, who, reply))
      return grpc::Status::OK;
    Status s = apply(values);
    if (!s.isOk())
      return fail(grpc::StatusCode::INTERNAL, s.message());
    ledgerApplied(req->data_batches());
    reply->set_applied(true);
    reply->set_version(version_);
    return grpc::Status::OK;
  }
  return joinSyncUpdate(*req, values, reply, who);
}

// Sync: the push joins the open update, which is applied once
// replicas_to_aggregate replicas joined (mu_ held).
grpc::Status PsService::joinSyncUpdate(const rpc::PushRequest &req,
                                       std::vector<Tensor> &values,
                                       rpc::PushReply *reply,
                                       const std::string &who) {
  // Gradients computed at an older version (or before a restore) are stale;
  // so is a second gradient of a replica for one update (a restarted worker
  // that pushes again for the update its dead self already joined).
  if (req.version() != version_ || req.incarnation() != incarnation_ ||
      aggregator_.joined(who)) {
    aggregator_.dropStale();
    ledgerDropped(req, who);
    reply->set_stale(true);
    reply->set_version(version_);
    return grpc::Status::OK;
  }
  if (!ledgerAdmits(req, who, reply))
    return grpc::Status::OK;
  ledgerJoined(req.data_batches());
  aggregator_.add(values, who, update_.concat());
  if (!aggregator_.complete(needed())) {
    reply->set_version(version_);
    return grpc::Status::OK;
  }
  const int64_t at = version_;
  Status s = apply(aggregator_.average());
  if (!s.isOk())
    return fail(grpc::StatusCode::INTERNAL, s.message());
  aggregator_.applied(at);
  ledgerUpdateApplied();
  reply->set_applied(true);
  reply->set_version(version_);
  return grpc::Status::OK;
}

Status PsService::apply(std::vector<Tensor> &values) {
  // --ps-replicas 2: the mirror applies the update while this ps does (a
  // copy of the values goes); the push is answered once both have.
  const int64_t at = version_;
  std::future<grpc::Status> mirrored;
  std::vector<grpc::ByteBuffer> chunks;
  if (mirrorSynced_) {
    uint64_t bytes = 0;
    chunks = updateChunks(values, at, &bytes);
    mirrored = std::async(std::launch::async, [this, &chunks, bytes] {
      return callMirror(chunks, bytes);
    });
  }
  Status s = update_.run(values, version_);
  const grpc::Status st = mirrored.valid() ? mirrored.get() : grpc::Status();
  if (!s.isOk()) {
    // The replica may hold an update this ps does not: a snapshot mends it.
    if (!chunks.empty())
      mirrorSynced_ = false;
    return s;
  }
  ++version_;
  store_.dynamic().sweep(version_);
  if (!chunks.empty())
    forwarded(st, at);
  cv_.notify_all();
  return Status::ok();
}

grpc::Status PsService::Shutdown(grpc::ServerContext *ctx,
                                 const rpc::ShutdownRequest *req,
                                 rpc::ShutdownReply *) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kChief, "shut it down", &who); !bad.ok())
    return bad;
  if (auto bad = checkCaller(req->caller()); !bad.ok())
    return bad;
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  shutdownReason_ =
      named(who, req->caller()) + ": " + plan::printable(req->reason());
  cv_.notify_all();
  return grpc::Status::OK;
}

std::string PsService::summary() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string s = std::to_string(version_) + " updates applied";
  if (sync_)
    s += " (each averaging " + std::to_string(aggregator_.replicas()) +
         " gradients" +
         (aggregator_.shortUpdates()
              ? "; " + std::to_string(aggregator_.shortUpdates()) +
                    " of them fewer, with fewer live workers"
              : std::string()) +
         "), " + std::to_string(aggregator_.stale()) +
         " stale gradients dropped";
  if (streamedPulls_ + streamedPushes_ + streamedInits_ > 0)
    s += "; streamed in chunks of " + std::to_string(config_.chunkBytes) +
         " bytes: " + std::to_string(streamedPulls_) + " pulls, " +
         std::to_string(streamedPushes_) + " pushes, " +
         std::to_string(streamedInits_) + " initializations";
  s += "; tensor bytes received " + std::to_string(payloadIn_.load()) +
       ", sent " + std::to_string(payloadOut_.load());
  if (lookups_ > 0 || sparseRowsPushed_ > 0)
    s += "; embedding rows: " + std::to_string(rowsLookedUp_.load()) +
         " looked up in " + std::to_string(lookups_.load()) + " lookups, " +
         std::to_string(sparseRowsPushed_.load()) + " updated";
  if (!store_.dynamic().empty())
    s += "; dynamic tables: " + store_.dynamic().describe();
  if (mirror_ >= 0)
    s += "; " + replicaSummary();
  if (index_ == 0 && ledger_.configured()) {
    // The job's data at a glance (the per-epoch lines came as they ended).
    const LedgerShape &shape = ledger_.shape();
    const int64_t n = ledger_.consumed();
    s += "; data (exactly-once): " + std::to_string(n) + " of " +
         std::to_string(shape.totalBatches) + " batches applied (" +
         std::to_string(n / shape.batchesPerEpoch) + " whole epochs of " +
         std::to_string(shape.batchesPerEpoch) + "), re-sent " +
         std::to_string(ledger_.resent(SplitLedger::kDeadWorker)) +
         " of dead or departed workers, " +
         std::to_string(ledger_.resent(SplitLedger::kDroppedGradient)) +
         " of dropped gradients, " +
         std::to_string(ledger_.resent(SplitLedger::kLostUpdate)) +
         " lost with a ps";
  }
  return s;
}

std::string PsService::regionSummary() const {
  if (regionPulls_ + regionPushes_ == 0)
    return std::string();
  return "through shared memory: " + std::to_string(regionPulls_) +
         " pulls, " + std::to_string(regionPushes_) + " pushes (" +
         std::to_string(regions_.mapped()) +
         " regions mapped at the end); " + std::to_string(inPlacePushValues_) +
         " pushed values read where they lay";
}

grpc::Status PsService::admit(const grpc::ServerContextBase &ctx, Role role,
                              const char *what, std::string *who) {
  if (!config_.transport.tls)
    return grpc::Status::OK;
  *who = config_.transport.peerTask(ctx);
  const Roster &r = config_.roster;
  int worker = -1;
  bool member = false;
  for (size_t i = 0; i < r.workers.size(); ++i)
    if (r.workers[i].name == *who)
      worker = int(i);
  for (const TaskRef &p : r.ps)
    member = member || p.name == *who;
  if (who->empty() || (worker < 0 && !member))
    return fail(grpc::StatusCode::PERMISSION_DENIED,
                "refused: not a task of this job");
  const bool allowed =
      role == Role::kMember || (role == Role::kWorker && worker >= 0) ||
      (role == Role::kPusher && worker >= 0 && size_t(worker) % span_ == 0) ||
      (role == Role::kChief && worker == 0) ||
      (role == Role::kMirrored && replica_.of >= 0 &&
       *who == r.ps[size_t(replica_.of)].name);
  if (allowed)
    return grpc::Status::OK;
  const std::string why =
      role == Role::kChief ? "only the chief (" + r.workers[0].name + ") may"
      : role == Role::kMirrored
          ? (replica_.of < 0
                 ? std::string("it holds no replica (no --ps-replicas 2)")
                 : "only " + r.ps[size_t(replica_.of)].name +
                       ", whose shard it mirrors, may")
          : std::string("only a worker that pushes may");
  refusal(*who + " may not " + what + ": " + why);
  return fail(grpc::StatusCode::PERMISSION_DENIED,
              name_ + ": " + *who + " may not " + what + " (" + why + ")");
}

void PsService::refusal(const std::string &line) {
  std::lock_guard<std::mutex> lock(logMu_);
  ++refusals_;
  const auto now = Clock::now();
  if (now - lastRefusalLog_ < std::chrono::seconds(1))
    return;
  lastRefusalLog_ = now;
  log("refused: " + line + " (" + std::to_string(refusals_) +
      " refused calls so far)");
}

grpc::Status PsService::checkCaller(const rpc::Caller &caller) {
  if (caller.plan_fingerprint() != config_.planFingerprint)
    return fail(grpc::StatusCode::FAILED_PRECONDITION,
                plan::printable(caller.task()) +
                    " runs a different plan than " + name_ +
                    "; every task of a job must run the same plan.bin");
  return grpc::Status::OK;
}

grpc::Status PsService::checkSaveDir(const std::string &dir) {
  if (config_.modelDir.empty())
    return fail(grpc::StatusCode::FAILED_PRECONDITION,
                name_ + " was started without --model-dir: it saves no "
                        "checkpoints");
  char *mine = ::realpath(config_.modelDir.c_str(), nullptr);
  char *theirs = ::realpath(dir.c_str(), nullptr);
  const bool same = mine && theirs && std::string(mine) == theirs;
  std::free(mine);
  std::free(theirs);
  if (!same)
    return fail(grpc::StatusCode::PERMISSION_DENIED,
                name_ + " saves checkpoints only into its --model-dir " +
                    config_.modelDir + ", not into " + plan::printable(dir));
  return grpc::Status::OK;
}

void PsService::fillStatus(rpc::StatusReply *reply) {
  reply->set_task(name_);
  reply->set_plan_fingerprint(config_.planFingerprint);
  reply->set_initialized(initialized_);
  reply->set_incarnation(incarnation_);
  reply->set_version(version_);
  reply->set_global_step(store_.globalStep());
  for (const std::string &n : store_.names())
    reply->add_variables(n);
  reply->set_payload_bytes_in(payloadIn_.load());
  reply->set_payload_bytes_out(payloadOut_.load());
  reply->set_rows_looked_up(rowsLookedUp_.load());
  reply->set_sparse_rows_pushed(sparseRowsPushed_.load());
  std::lock_guard<std::mutex> lock(replica_.mu); // after mu_, never before
  reply->set_replica_of(replica_.of);
  reply->set_replica_version(replica_.version);
}

} // namespace dtf::dist::ps
