// The parameter-server service's calls, checks and updates.
#include "runtime/distributed/PsService.h"

namespace dtf::dist::ps {

// Whether the recv'd value `value` is what the ps's update adds to the
// global step (the operand of an assign_add to the global_step variable).
bool feedsGlobalStep(const plan::Plan &plan, const plan::Program &program,
                     int32_t value) {
  std::set<std::string> steps;
  for (const plan::Variable &v : plan.variables())
    if (v.role() == "global_step")
      steps.insert(v.name());
  std::set<int32_t> stepReads;
  for (const plan::Op &op : program.ops())
    if (op.name() == "dtf.read_variable" && op.outputs_size() == 1) {
      auto name = op.attrs().find("name");
      if (name != op.attrs().end() && steps.count(name->second.s()))
        stepReads.insert(op.outputs(0));
    }
  for (const plan::Op &op : program.ops())
    if (op.name() == "dtf.assign_add" && op.inputs_size() == 2 &&
        stepReads.count(op.inputs(0)) && op.inputs(1) == value)
      return true;
  return false;
}

PsService::PsService(const plan::Plan &plan, const plan::Placement &placement,
                     int index, const TaskConfig &config)
    : plan_(plan), placement_(placement), index_(index), config_(config) {
  name_ = config.roster.ps[index].name;
  const plan::Training &t = plan.training();
  sync_ = t.update() == "sync" && t.replication() != "in_graph";
  replicas_ = sync_ ? std::max<int64_t>(t.replicas_to_aggregate(), 1) : 1;
  span_ = size_t(std::max(plan::replicaSpan(plan), 1));
}

Status PsService::setUp() {
  parker_ = std::thread([this] { parkLoop(); });
  // This ps's variables (or shards), initialized from the plan: each shard
  // holds the rows the whole variable would have on one machine (so that
  // any placement starts from the same values), made without the whole in
  // memory. The chief may replace them with a checkpoint's in Initialize.
  held_ = plan::heldBy(plan_, placement_, index_);
  for (const plan::HeldTensor &h : held_) {
    Tensor part;
    DTF_RETURN_IF_ERROR(initialShard(h, &part));
    DTF_RETURN_IF_ERROR(variables_.add(h.name, std::move(part)));
    names_.push_back(h.name);
    if (h.variable == "global_step")
      holdsStep_ = true;
  }
  // Dynamic tables: each held shard with the shards of its slots.
  for (const plan::HeldTensor &h : held_) {
    const plan::Variable *var = nullptr;
    for (const plan::Variable &v : plan_.variables())
      if (v.name() == h.variable && v.dynamic().enabled() &&
          v.slot_of().empty())
        var = &v;
    if (!var)
      continue;
    const std::string suffix = h.name.substr(h.variable.size());
    const int part = suffix.empty() ? 0 : std::atoi(suffix.c_str() + 6);
    std::vector<std::pair<const plan::Variable *, Tensor *>> slots;
    for (const plan::Variable &v : plan_.variables())
      if (v.slot_of() == var->name()) {
        Tensor *t = variables_.find(v.name() + suffix);
        if (!t)
          return errorStatus("the slot '", plan::printable(v.name()),
                             "' of the dynamic table '",
                             plan::printable(var->name()),
                             "' is not on the ps that holds its shard ", part);
        slots.push_back({&v, t});
      }
    auto table = std::make_unique<train::DynamicTable>(
        *var, uint64_t(plan_.training().seed()), variables_.find(h.name),
        std::move(slots), std::vector<int>{part}, std::vector<int64_t>{0},
        std::vector<int64_t>{h.rows});
    dynamicByName_[h.name] = table.get();
    dynamic_.add(std::move(table), h.name);
  }
  plan::Program program;
  DTF_RETURN_IF_ERROR(plan::psProgramFor(plan_, placement_, index_, &program));
  // The updates here run on shards: one reserved row each.
  for (plan::Op &op : *program.mutable_ops())
    if (auto it = op.mutable_attrs()->find("dynamic_shards");
        it != op.mutable_attrs()->end())
      it->second.set_i(1);
  if (program.ops_size() > 0) {
    exec::ExecutorOptions o;
    o.seed = uint64_t(plan_.training().seed());
    o.programName = name_ + ": ps_update";
    exec::applySessionOptions(plan_, &o);
    o.device =
        "/job:ps/replica:0/task:" + std::to_string(index_) + "/device:CPU:0";
    DTF_RETURN_IF_ERROR(exec::Executor::create(
        program, variables_, train::cpuKernelRegistry(), o, &update_));
    auto typeOf = [&](int32_t id) {
      plan::TensorType type;
      for (const plan::Value &v : program.values())
        if (v.id() == id)
          type = v.type();
      return type;
    };
    for (const plan::Transfer &r : program.recvs()) {
      keys_.push_back(r.key());
      // What the update takes under the key: a push must fit it before
      // anything is allocated for it.
      expected_.push_back(typeOf(r.value()));
      stepKey_.push_back(!r.sparse() &&
                         feedsGlobalStep(plan_, program, r.value()));
      concat_.push_back(r.sparse());
      idRows_.push_back(r.sparse() ? r.rows() : -1);
      {
        const std::string part = r.key().rfind("/part_") != std::string::npos
                                     ? r.key().substr(r.key().rfind("/part_"))
                                     : std::string();
        auto d = dynamicByName_.find(r.variable() + part);
        dynamicKey_.push_back(
            r.sparse() && d != dynamicByName_.end() ? d->second : nullptr);
      }
      if (r.sparse()) { // its rows follow its ids
        dynamicKey_.push_back(nullptr);
        keys_.push_back(r.key() + "#rows");
        expected_.push_back(typeOf(r.rows_value()));
        stepKey_.push_back(false);
        concat_.push_back(true);
        idRows_.push_back(-1);
      }
    }
  }
  return Status::ok();
}

grpc::Status PsService::restoreInPlace(int64_t step, int64_t version) {
  if (config_.modelDir.empty())
    return fail(grpc::StatusCode::FAILED_PRECONDITION,
                name_ + " was started without --model-dir: it cannot read "
                        "a checkpoint itself");
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  Status s =
      checkpoint::CheckpointReader::open(config_.modelDir, step, &reader);
  // Everything is checked before any variable changes.
  for (const plan::HeldTensor &h : held_) {
    if (!s.isOk())
      break;
    if (dynamic_.holdsVariable(h.variable))
      continue; // its live rows, by DynamicTable::restore
    const checkpoint::TensorInfo *info = reader->find(h.variable);
    const Tensor *t = variables_.find(h.name);
    if (!info || !t || info->shape != h.fullDims || info->dtype != t->dtype())
      s = errorStatus("checkpoint ", checkpoint::checkpointName(step),
                      " has no variable '", h.variable, "' of ",
                      t ? dtypeName(t->dtype()) : "its", " ",
                      shapeString(h.fullDims));
  }
  if (!s.isOk())
    return fail(grpc::StatusCode::FAILED_PRECONDITION,
                name_ + ": " + s.message() + " (nothing changed)");
  for (const plan::HeldTensor &h : held_) {
    s = dynamic_.holdsVariable(h.variable)
            ? Status::ok()
            : reader->readRowsInto(h.variable, h.rowOffset,
                                   variables_.find(h.name));
    if (s.isOk() && &h == &held_.back())
      s = dynamic_.restore(*reader, version);
    if (!s.isOk()) {
      // Half restored: not usable until the chief initializes it again.
      initialized_ = false;
      return fail(grpc::StatusCode::INTERNAL, name_ + ": " + s.message());
    }
  }
  return grpc::Status::OK;
}

Status PsService::initialShard(const plan::HeldTensor &h, Tensor *out) const {
  // A moving average starts at its variable's first value.
  const plan::Variable *var = nullptr;
  for (const plan::Variable &v : plan_.variables())
    if (v.name() == h.variable)
      var = &v;
  if (var && var->role() == "moving_average" && !var->slot_of().empty())
    for (const plan::Variable &v : plan_.variables())
      if (v.name() == var->slot_of())
        var = &v;
  if (!var)
    return errorStatus("the plan does not declare '",
                       plan::printable(h.variable), "'");
  return train::initializeRows(*var, uint64_t(plan_.training().seed()),
                               h.rowOffset, h.partitioned ? h.rows : -1, out);
}

grpc::Status PsService::GetStatus(grpc::ServerContext *ctx,
                                  const rpc::StatusRequest *,
                                  rpc::StatusReply *reply) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kMember, "ask for its status", &who);
      !bad.ok())
    return bad;
  std::lock_guard<std::mutex> lock(mu_);
  fillStatus(reply);
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
  for (int i = 0; i < req->values_size(); ++i) {
    const rpc::WireTensor &w = req->values(i);
    const Tensor *t = variables_.find(w.name());
    if (!t)
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + " does not hold variable '" +
                      plan::printable(w.name()) + "' (nothing changed)");
    if (staged)
      continue; // checked against the variable as the stream arrived
    DType dtype = DType::F32;
    std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
    if (!plan::toDType(w.dtype(), &dtype).isOk() || dtype != t->dtype() ||
        dims != t->shape() || w.data().size() != t->byteSize())
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  "variable '" + plan::printable(w.name()) + "' does not fit " +
                      t->describe() + " on " + name_ + " (nothing changed)");
  }
  if (req->restore()) {
    if (auto bad = restoreInPlace(req->restore_step(), req->version());
        !bad.ok())
      return bad;
  } else if (req->values_size() == 0 && initialized_) {
    // Back to the plan's initializers (no checkpoint yet), made again.
    dynamic_.clear(); // rows are made again as ids come
    for (const plan::HeldTensor &h : held_) {
      if (dynamic_.holdsVariable(h.variable))
        continue;
      Tensor t;
      Status made = initialShard(h, &t);
      Tensor *v = variables_.find(h.name);
      if (!made.isOk() || !v || v->byteSize() != t.byteSize())
        return fail(grpc::StatusCode::INTERNAL, name_ + ": cannot reset '" +
                                                    h.name +
                                                    "': " + made.message());
      std::memcpy(v->rawData(), t.rawData(), t.byteSize());
    }
  }
  for (int i = 0; i < req->values_size(); ++i) {
    const rpc::WireTensor &w = req->values(i);
    Tensor *t = variables_.find(w.name());
    if (!t)
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + " does not hold variable '" + w.name() + "'");
    if (staged) {
      std::memcpy(t->rawData(), (*staged)[size_t(i)].rawData(), t->byteSize());
      continue;
    }
    Status s = copyFromWire(w, t);
    if (!s.isOk())
      return fail(grpc::StatusCode::INVALID_ARGUMENT, s.message());
  }
  version_ = req->version();
  initialized_ = true;
  ++incarnation_;
  sums_.clear();
  contributors_.clear();
  reply->set_incarnation(incarnation_);
  log(std::string(req->force() ? "re-initialized" : "initialized") + " by " +
      who +
      (req->restore() ? " from checkpoint " +
                            checkpoint::checkpointName(req->restore_step()) +
                            ", read by this ps from " + config_.modelDir
       : req->values_size()
           ? " from a checkpoint at step " + std::to_string(req->version())
           : std::string(" (the plan's initializers)")));
  cv_.notify_all();
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
                 const std::vector<const Tensor *> &payload) {
        *response = packTensors(reply, payload, /*copy=*/true);
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
      st = answerPull(req, emit);
    }
  }
  finish(st);
}

grpc::Status PsService::checkPullNames(const rpc::PullRequest &req) const {
  if (size_t(req.names_size()) > names_.size())
    return fail(grpc::StatusCode::INVALID_ARGUMENT,
                name_ + ": a pull names " + std::to_string(req.names_size()) +
                    " variables; it holds " + std::to_string(names_.size()));
  std::set<std::string> seen;
  for (const std::string &n : req.names())
    if (!seen.insert(n).second)
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + ": a pull names '" + plan::printable(n) + "' twice");
  return grpc::Status::OK;
}

grpc::Status PsService::answerPull(const rpc::PullRequest &request,
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
    reply->set_waiting_for(waitingFor());
    emit(*reply, {});
    return grpc::Status::OK;
  }
  reply->set_ready(true);
  std::vector<const Tensor *> payload;
  for (const std::string &n : req->names()) {
    const Tensor *t = variables_.find(n);
    if (!t)
      return fail(grpc::StatusCode::NOT_FOUND,
                  name_ + " does not hold variable '" + n + "'");
    describeTensor(n, *t, reply->add_values());
    payload.push_back(t);
    payloadOut_ += t->byteSize();
  }
  emit(*reply, payload);
  return grpc::Status::OK;
}

void PsService::parkLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!parkerStop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(20));
    releaseParked(lock, /*all=*/false);
    lock.unlock(); // a cancelled stream may end (and lock mu_) at once
    cutStalledStreams();
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
                                    : answerPull(it->req, it->emit));
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
  const std::string peer = config_.transport.tls
                               ? config_.transport.peerTask(*ctx)
                               : std::string(ctx->peer());
  std::lock_guard<std::recursive_mutex> lock(streamsMu_);
  if (streams_.size() >= kMaxStreams || streamsBy_[peer] >= kMaxStreamsPerPeer)
    return fail(grpc::StatusCode::RESOURCE_EXHAUSTED,
                name_ + ": too many open streams" +
                    (config_.transport.tls ? " from " + peer : std::string()));
  ++streamsBy_[peer];
  streams_[ctx] = {peer, Clock::now()};
  return grpc::Status::OK;
}

void PsService::closeStream(grpc::CallbackServerContext *ctx) {
  std::lock_guard<std::recursive_mutex> lock(streamsMu_);
  auto it = streams_.find(ctx);
  if (it == streams_.end())
    return;
  if (--streamsBy_[it->second.peer] <= 0)
    streamsBy_.erase(it->second.peer);
  streams_.erase(it);
}

void PsService::cutStalledStreams() {
  const auto limit = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config_.stallTimeoutSeconds));
  std::lock_guard<std::recursive_mutex> lock(streamsMu_);
  std::vector<grpc::CallbackServerContext *> stalled;
  for (auto &[ctx, stream] : streams_)
    if (Clock::now() - stream.moved > limit && !stream.cut)
      stalled.push_back(ctx);
  for (grpc::CallbackServerContext *ctx : stalled) {
    auto it = streams_.find(ctx);
    if (it == streams_.end())
      continue;
    it->second.cut = true;
    log("cut a stream of " + it->second.peer + " that moved nothing for " +
        std::to_string(int(config_.stallTimeoutSeconds)) +
        " s (--stall-timeout)");
    ctx->TryCancel();
  }
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

grpc::ServerWriteReactor<grpc::ByteBuffer> *
PsService::PullStream(grpc::CallbackServerContext *ctx,
                      const grpc::ByteBuffer *request) {
  auto *writer = new PullWriter(this, ctx);
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
      [writer,
       chunk = config_.chunkBytes](const rpc::PullReply &reply,
                                   const std::vector<const Tensor *> &payload) {
        writer->snapshot(reply, payload, chunk);
      },
      [writer](const grpc::Status &st) { writer->start(st); });
  return writer;
}

grpc::ServerReadReactor<grpc::ByteBuffer> *
PsService::InitializeStream(grpc::CallbackServerContext *ctx,
                            grpc::ByteBuffer *response) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kChief, "initialize it", &who); !bad.ok())
    return new Refused(bad);
  if (auto bad = openStream(ctx); !bad.ok())
    return new Refused(bad);
  ++streamedInits_;
  return new StreamReader<rpc::InitializeRequest, rpc::InitializeReply>(
      this, ctx, response, "an initialization stream", "nothing changed",
      &PsService::prepareInitialize,
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
  for (const rpc::WireTensor &w : req.values()) {
    const Tensor *t = variables_.find(w.name());
    if (!t)
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + " does not hold variable '" +
                      plan::printable(w.name()) + "'");
    DType dtype = DType::F32;
    Status s = plan::toDType(w.dtype(), &dtype);
    std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
    if (!s.isOk() || dtype != t->dtype() || dims != t->shape() ||
        w.size() != t->byteSize())
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  "variable '" + plan::printable(w.name()) + "' arrived as " +
                      (s.isOk() ? plan::typeString(dtype, dims)
                                : std::string("an unknown dtype")) +
                      " (" + std::to_string(w.size()) + " bytes), but " +
                      name_ + " holds it as " + t->describe());
    staged->push_back(Tensor::allocate(t->dtype(), t->shape()));
    targets->push_back({staged->back().rawData(), t->byteSize()});
  }
  return grpc::Status::OK;
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

grpc::Status PsService::push(const grpc::ByteBuffer &request,
                             rpc::PushReply *reply, const std::string &who) {
  rpc::PushRequest req;
  std::vector<Tensor> values;
  Refusal refusal;
  ChunkReader reader(&req, [&](std::vector<PayloadTarget> *targets) {
    return refusal.note(preparePush(req, &values, targets));
  });
  Status s = reader.add(request);
  if (s.isOk())
    s = reader.finish();
  if (!s.isOk())
    return refusal.orElse(grpc::StatusCode::INVALID_ARGUMENT,
                          name_ + ": refused a push: ", s);
  return applyPush(req, values, reply, named(who, req.caller()));
}

grpc::Status PsService::preparePush(const rpc::PushRequest &req,
                                    std::vector<Tensor> *values,
                                    std::vector<PayloadTarget> *targets) {
  if (auto bad = checkCaller(req.caller()); !bad.ok())
    return bad;
  values->assign(keys_.size(), Tensor());
  for (const rpc::WireTensor &w : req.values()) {
    int k = keyIndex(w.name());
    if (k < 0)
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + " takes no value under key '" +
                      plan::printable(w.name()) + "'");
    if ((*values)[size_t(k)].defined())
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + ": a push carries '" + plan::printable(w.name()) +
                      "' twice");
    DType dtype = DType::F32;
    std::vector<int64_t> dims;
    if (!declaredType(w, w.size(), &dtype, &dims))
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + ": pushed value '" + plan::printable(w.name()) +
                      "' does not fit its size");
    const plan::TensorType &want = expected_[size_t(k)];
    DType wantType = DType::F32;
    if (want.dtype() != plan::DTYPE_UNSPECIFIED &&
        (!plan::toDType(want.dtype(), &wantType).isOk() || wantType != dtype ||
         !plan::shapeFits(plan::dimsOf(want.shape()), dims)))
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + ": pushed value '" + plan::printable(w.name()) +
                      "' is " + plan::typeString(dtype, dims) +
                      ", but the update takes " +
                      plan::typeString(wantType, plan::dimsOf(want.shape())));
    (*values)[size_t(k)] = Tensor::allocate(dtype, dims);
    targets->push_back({(*values)[size_t(k)].rawData(), w.size()});
  }
  for (size_t k = 0; k < keys_.size(); ++k)
    if (!(*values)[k].defined())
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  "a push to " + name_ + " lacks '" + keys_[k] + "'");
  return grpc::Status::OK;
}

grpc::Status PsService::applyPush(const rpc::PushRequest &request,
                                  std::vector<Tensor> &values,
                                  rpc::PushReply *reply,
                                  const std::string &who) {
  const rpc::PushRequest *req = &request;
  if (auto bad = checkPushValues(values, who); !bad.ok())
    return bad;
  for (const Tensor &v : values)
    payloadIn_ += v.byteSize();
  std::unique_lock<std::mutex> lock(mu_);
  waitWhileSaving(lock); // a checkpoint reads the variables in place
  if (!initialized_)
    return fail(grpc::StatusCode::FAILED_PRECONDITION,
                name_ + " is not initialized yet");
  if (!sync_) {
    if (req->incarnation() != incarnation_) {
      reply->set_stale(true); // computed before a restore
      reply->set_version(version_);
      return grpc::Status::OK;
    }
    Status s = apply(values);
    if (!s.isOk())
      return fail(grpc::StatusCode::INTERNAL, s.message());
    reply->set_applied(true);
    reply->set_version(version_);
    return grpc::Status::OK;
  }
  // Sync: gradients computed at an older version (or before a restore)
  // are stale.
  if (req->version() != version_ || req->incarnation() != incarnation_) {
    ++stale_;
    reply->set_stale(true);
    reply->set_version(version_);
    return grpc::Status::OK;
  }
  // One gradient per replica and update: a restarted worker that pushes
  // again for the update its dead self already joined is dropped.
  if (std::find(contributors_.begin(), contributors_.end(), who) !=
      contributors_.end()) {
    ++stale_;
    reply->set_stale(true);
    reply->set_version(version_);
    return grpc::Status::OK;
  }
  if (sums_.empty()) {
    sums_ = std::move(values);
    contributors_.clear();
  } else {
    for (size_t k = 0; k < keys_.size(); ++k)
      if (concat_[k])
        sums_[k] = concatRows(sums_[k], values[k]);
      else
        accumulate(sums_[k], values[k]);
  }
  contributors_.push_back(who);
  if (int64_t(contributors_.size()) < replicas_) {
    reply->set_version(version_);
    return grpc::Status::OK;
  }
  for (Tensor &t : sums_)
    scale(t, 1.0 / double(replicas_));
  const int64_t at = version_;
  Status s = apply(sums_);
  if (!s.isOk())
    return fail(grpc::StatusCode::INTERNAL, s.message());
  traceSync(at);
  sums_.clear();
  contributors_.clear();
  reply->set_applied(true);
  reply->set_version(version_);
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
  {
    std::unique_lock<std::mutex> lock(mu_);
    waitWhileSaving(lock); // one checkpoint at a time
    saving_ = true;
  }
  std::vector<checkpoint::SavedTensor> tensors;
  for (const plan::HeldTensor &h : held_)
    if (!dynamic_.holdsVariable(h.variable))
      tensors.push_back(
          {h.variable, h.fullDims, h.rowOffset, variables_.find(h.name)});
  std::vector<std::unique_ptr<Tensor>> dynamicRows; // alive until written
  if (!dynamic_.empty()) {
    // Compacted under the lock, so that no lookup copies a row as it
    // moves; lookups afterwards make rows only past the live ones.
    std::lock_guard<std::mutex> lock(mu_);
    dynamic_.save(&tensors, &dynamicRows);
  }
  Status s = checkpoint::writeShard(req->dir(), req->step(), req->shard(),
                                    req->num_shards(), tensors);
  {
    std::lock_guard<std::mutex> lock(mu_);
    saving_ = false;
  }
  cv_.notify_all();
  if (!s.isOk())
    return fail(grpc::StatusCode::INTERNAL, name_ + ": " + s.message());
  reply->set_tensors(int64_t(tensors.size()));
  return grpc::Status::OK;
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
  done_.insert(named(who, req->caller()));
  reply->set_workers_done(int(done_.size()));
  cv_.notify_all();
  return grpc::Status::OK;
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
    s += " (each averaging " + std::to_string(replicas_) + " gradients), " +
         std::to_string(stale_) + " stale gradients dropped";
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
  if (!dynamic_.empty())
    s += "; dynamic tables: " + dynamic_.describe();
  return s;
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
      (role == Role::kChief && worker == 0);
  if (allowed)
    return grpc::Status::OK;
  const std::string why = role == Role::kChief
                              ? "only the chief (" + r.workers[0].name + ") may"
                              : "only a worker that pushes may";
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

grpc::Status PsService::checkPushValues(const std::vector<Tensor> &values,
                                        const std::string &who) {
  for (size_t k = 0; k < values.size() && k < keys_.size(); ++k) {
    const Tensor &t = values[k];
    if (idRows_[k] >= 0) {
      // A sparse gradient: ids inside this shard, one row each.
      const Tensor &rows = values[k + 1];
      if (t.dtype() != DType::I64 || t.rank() != 1 || rows.rank() < 1 ||
          rows.dim(0) != t.dim(0))
        return fail(grpc::StatusCode::INVALID_ARGUMENT,
                    name_ + ": the sparse gradient '" + keys_[k] + "' from " +
                        who + " has " + rows.describe() + " for ids " +
                        t.describe());
      const int64_t *id = t.data<int64_t>();
      if (train::DynamicTable *table = dynamicKey_[k]) {
        // A dynamic table's ids as they are: each must be of this shard.
        for (int64_t i = 0; i < t.numElements(); ++i)
          if (!table->holdsShardOf(id[i]))
            return fail(grpc::StatusCode::INVALID_ARGUMENT,
                        name_ + ": the sparse gradient '" + keys_[k] +
                            "' from " + who + " has id " +
                            std::to_string(id[i]) +
                            ", which belongs to another shard");
        sparseRowsPushed_ += uint64_t(t.numElements());
        continue;
      }
      for (int64_t i = 0; i < t.numElements(); ++i)
        if (id[i] < 0 || id[i] >= idRows_[k])
          return fail(grpc::StatusCode::INVALID_ARGUMENT,
                      name_ + ": the sparse gradient '" + keys_[k] + "' from " +
                          who + " has id " + std::to_string(id[i]) +
                          ", outside [0, " + std::to_string(idRows_[k]) + ")");
      sparseRowsPushed_ += uint64_t(t.numElements());
      continue;
    }
    bool bad = false;
    if (t.dtype() == DType::F32) {
      const float *a = t.data<float>();
      for (int64_t i = 0; i < t.numElements() && !bad; ++i)
        bad = !std::isfinite(a[i]);
    } else if (t.dtype() == DType::F64) {
      const double *a = t.data<double>();
      for (int64_t i = 0; i < t.numElements() && !bad; ++i)
        bad = !std::isfinite(a[i]);
    } else if (stepKey_[k]) {
      for (int64_t i = 0; i < t.numElements() && !bad; ++i)
        bad = (t.dtype() == DType::I64 ? t.data<int64_t>()[i]
                                       : int64_t(t.data<int32_t>()[i])) != 1;
      if (bad) {
        refusal("a push from " + who +
                " moves the global step by other "
                "than 1 under '" +
                keys_[k] + "'");
        return fail(grpc::StatusCode::INVALID_ARGUMENT,
                    name_ + " refused the push of " + who +
                        ": the global step advances by 1 per update, "
                        "not by what '" +
                        keys_[k] + "' holds (nothing applied)");
      }
      continue;
    }
    if (bad) {
      refusal("a push from " + who + " holds non-finite values in '" +
              keys_[k] + "'");
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + " refused the push of " + who + ": '" + keys_[k] +
                      "' holds non-finite values (NaN or Inf; nothing "
                      "applied)");
    }
  }
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
  int64_t step = -1;
  if (holdsStep_)
    if (const Tensor *t = variables_.find("global_step"))
      step = t->data<int64_t>()[0];
  reply->set_global_step(step);
  for (const std::string &n : names_)
    reply->add_variables(n);
  reply->set_payload_bytes_in(payloadIn_.load());
  reply->set_payload_bytes_out(payloadOut_.load());
  reply->set_rows_looked_up(rowsLookedUp_.load());
  reply->set_sparse_rows_pushed(sparseRowsPushed_.load());
}

grpc::Status PsService::Lookup(grpc::ServerContext *ctx,
                               const rpc::LookupRequest *req,
                               rpc::LookupReply *reply) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kMember, "look up rows", &who); !bad.ok())
    return bad;
  if (auto bad = checkCaller(req->caller()); !bad.ok())
    return bad;
  if (req->ids().size() % sizeof(int64_t) != 0)
    return fail(grpc::StatusCode::INVALID_ARGUMENT,
                name_ + ": a lookup's ids are " +
                    std::to_string(req->ids().size()) +
                    " bytes, not a whole number of int64s");
  const size_t n = req->ids().size() / sizeof(int64_t);
  std::vector<int64_t> ids(n);
  if (n)
    std::memcpy(ids.data(), req->ids().data(), req->ids().size());
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialized_)
    return fail(grpc::StatusCode::FAILED_PRECONDITION,
                name_ + " is not initialized yet (the chief does it)");
  const Tensor *t = variables_.find(req->name());
  if (!t || t->rank() < 1)
    return fail(grpc::StatusCode::NOT_FOUND, name_ + " holds no table '" +
                                                 plan::printable(req->name()) +
                                                 "'");
  const int64_t rows = t->dim(0);
  const size_t rowBytes = rows ? t->byteSize() / size_t(rows) : 0;
  if (auto d = dynamicByName_.find(req->name()); d != dynamicByName_.end()) {
    // A dynamic table's ids: their rows (made for the ids admitted when a
    // training step asks; an id without a row reads the reserved zeros).
    if (n > size_t(std::max<int64_t>(rows, 1)))
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + ": a lookup of " + std::to_string(n) + " ids in '" +
                      plan::printable(req->name()) + "', which holds at most " +
                      std::to_string(rows) + " rows");
    Status s = d->second->rows(ids.data(), int64_t(n), req->create(), version_,
                               ids.data());
    if (!s.isOk())
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + ": " + s.message());
  }
  // The reply is at most the table: a lookup cannot ask for more bytes
  // than the ps holds (repeated ids are each answered, up to that bound).
  if (n > size_t(std::max<int64_t>(rows, 1)))
    return fail(grpc::StatusCode::INVALID_ARGUMENT,
                name_ + ": a lookup of " + std::to_string(n) + " ids in '" +
                    plan::printable(req->name()) + "', which has " +
                    std::to_string(rows) + " rows");
  std::string *out = reply->mutable_rows();
  out->resize(n * rowBytes);
  const char *src = static_cast<const char *>(t->rawData());
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= rows)
      return fail(grpc::StatusCode::INVALID_ARGUMENT,
                  name_ + ": id " + std::to_string(ids[i]) + " at position " +
                      std::to_string(i) + " is outside [0, " +
                      std::to_string(rows) + ") of '" +
                      plan::printable(req->name()) + "'");
    std::memcpy(out->data() + i * rowBytes, src + size_t(ids[i]) * rowBytes,
                rowBytes);
  }
  reply->set_version(version_);
  payloadOut_ += out->size();
  rowsLookedUp_ += n;
  ++lookups_;
  return grpc::Status::OK;
}

Tensor PsService::concatRows(const Tensor &a, const Tensor &b) {
  std::vector<int64_t> dims = a.shape();
  if (dims.empty() || a.dtype() != b.dtype() || b.rank() != a.rank())
    return a;
  dims[0] += b.shape()[0];
  Tensor out = Tensor::allocate(a.dtype(), dims);
  if (a.byteSize())
    std::memcpy(out.rawData(), a.rawData(), a.byteSize());
  if (b.byteSize())
    std::memcpy(static_cast<char *>(out.rawData()) + a.byteSize(), b.rawData(),
                b.byteSize());
  return out;
}

void PsService::accumulate(Tensor &sum, const Tensor &t) {
  if (sum.dtype() != t.dtype() || sum.numElements() != t.numElements())
    return;
  if (t.dtype() == DType::F32)
    addInto<float>(sum, t);
  else if (t.dtype() == DType::F64)
    addInto<double>(sum, t);
  // Integer operands (assign_add's 1) are the same from every replica:
  // the first one's stands.
}

void PsService::scale(Tensor &t, double f) {
  if (t.dtype() == DType::F64) {
    double *a = t.data<double>();
    for (int64_t i = 0; i < t.numElements(); ++i)
      a[i] *= f;
    return;
  }
  if (t.dtype() != DType::F32)
    return;
  float *a = t.data<float>();
  for (int64_t i = 0; i < t.numElements(); ++i)
    a[i] = float(a[i] * f);
}

Status PsService::apply(std::vector<Tensor> &values) {
  if (update_) {
    // A dynamic table's ids become its rows (the reserved one, which the
    // update skips, for ids without a row: not admitted, or evicted since
    // the worker looked them up).
    for (size_t k = 0; k < keys_.size() && k < dynamicKey_.size(); ++k)
      if (dynamicKey_[k] && values[k].dtype() == DType::I64)
        DTF_RETURN_IF_ERROR(dynamicKey_[k]->rows(
            values[k].data<int64_t>(), values[k].numElements(), false, version_,
            values[k].data<int64_t>()));
    for (size_t k = 0; k < keys_.size(); ++k) {
      int feed = update_->findFeed(keys_[k]);
      DTF_RETURN_IF_ERROR(update_->setFeed(feed, values[k]));
    }
    DTF_RETURN_IF_ERROR(update_->run(uint64_t(version_)));
  }
  ++version_;
  dynamic_.sweep(version_);
  cv_.notify_all();
  return Status::ok();
}

std::string PsService::waitingFor() const {
  std::string s = std::to_string(contributors_.size()) + " of " +
                  std::to_string(replicas_) + " gradients for update " +
                  std::to_string(version_ + 1) + "; not yet from:";
  // Only stage 0 of a model-parallel replica pushes.
  const size_t span = span_;
  for (size_t i = 0; i < config_.roster.workers.size(); i += span) {
    const TaskRef &w = config_.roster.workers[i];
    if (std::find(contributors_.begin(), contributors_.end(), w.name) ==
        contributors_.end())
      s += " " + w.name;
  }
  return s;
}

void PsService::traceSync(int64_t at) {
  if (config_.modelDir.empty())
    return;
  if (!trace_) {
    std::string path = config_.modelDir + "/" + name_ + ".sync.log";
    trace_ = std::fopen(path.c_str(), "a");
    if (!trace_)
      return;
  }
  std::fprintf(trace_, "update %lld averaged %zu gradients computed at %lld:",
               (long long)(at + 1), contributors_.size(), (long long)at);
  for (const std::string &c : contributors_)
    std::fprintf(trace_, " %s", c.c_str());
  std::fputc('\n', trace_);
  std::fflush(trace_);
}
} // namespace dtf::dist::ps
