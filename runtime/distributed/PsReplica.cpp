// --ps-replicas 2: each ps's shard mirrored on the next ps of the ring. The
// ps side of it: the replica this ps holds of the previous ps's shard
// (MirrorStream in, ReplicaStream out), and its own shard's updates and
// snapshots sent to its mirror (docs/elastic.md, "A replica of each ps's
// shard"; docs/protocol.md, "Replicas of the ps shards").
#include "runtime/distributed/PsService.h"

#include "runtime/distributed/Wire.h"
#include "runtime/distributed/WorkerLinks.h"

#include <cstring>

namespace dtf::dist::ps {
namespace {

// FNV-1a over the tensors' names and bytes: the summary's checksum of a
// shard and of its replica, equal when they are bit for bit.
uint64_t shardChecksum(const PsStore &store) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&h](const void *p, size_t n) {
    const auto *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; ++i)
      h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const std::string &n : store.names()) {
    add(n.data(), n.size());
    const Tensor *t = store.variables().find(n);
    add(t->rawData(), t->byteSize());
  }
  return h;
}

std::string checksumText(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

} // namespace

Status PsService::setUpReplica() {
  const int n = int(config_.roster.ps.size());
  if (config_.psReplicas < 2 || n < 2)
    return Status::ok();
  const int of = mirroredBy(index_, n);
  // The replica is the previous ps's store and update program, made as
  // that ps makes its own: the same kernels on the same inputs in the
  // same order give the same bits.
  auto store = std::make_unique<PsStore>(plan_, placement_, of);
  DTF_RETURN_IF_ERROR(store->setUp());
  auto update = std::make_unique<PsUpdate>(
      name_ + " (replica of " + config_.roster.ps[size_t(of)].name + ")");
  DTF_RETURN_IF_ERROR(update->setUp(plan_, placement_, of, *store));
  {
    std::lock_guard<std::mutex> lock(mu_); // the parked pulls' thread runs
    mirror_ = mirrorOf(index_, n);
  }
  std::lock_guard<std::mutex> lock(replica_.mu);
  replica_.of = of;
  replica_.store = std::move(store);
  replica_.update = std::move(update);
  return Status::ok();
}

// ---------------------------------------------------------------------------
// This ps's shard, sent to its mirror (mu_ held throughout).

std::vector<grpc::ByteBuffer>
PsService::mirrorChunks(const rpc::MirrorRequest &header,
                        const std::vector<const Tensor *> &payloads,
                        uint64_t *bytes) const {
  *bytes = 0;
  for (const Tensor *t : payloads)
    *bytes += t->byteSize();
  // A copy of the values: the update may run while they are on their way.
  return asTensorChunks(packChunks(header, payloads, config_.chunkBytes));
}

grpc::Status PsService::callMirror(const std::vector<grpc::ByteBuffer> &chunks,
                                   uint64_t bytes) {
  const TaskRef &m = config_.roster.ps[size_t(mirror_)];
  if (!mirrorStub_)
    mirrorStub_ = std::make_unique<grpc::GenericStub>(
        config_.transport.channel(m.address));
  grpc::ClientContext ctx;
  // Short: the ps holds its lock while it waits, and a lost mirror must
  // not stop it for long.
  setDeadline(&ctx, milliseconds(5000) + milliseconds(int64_t(bytes / 20000)));
  grpc::ByteBuffer response;
  grpc::Status st =
      sendStream(*mirrorStub_, &ctx, kMirrorStreamMethod, chunks, &response);
  rpc::MirrorReply reply;
  if (st.ok() && !parseMessage(response, &reply))
    st = grpc::Status(grpc::StatusCode::INTERNAL,
                      m.name + " answered with a malformed reply");
  if (!st.ok())
    mirrorStub_.reset(); // a restarted mirror is reached on a new channel
  return st;
}

std::vector<grpc::ByteBuffer>
PsService::updateChunks(const std::vector<Tensor> &values, int64_t at,
                        uint64_t *bytes) const {
  rpc::MirrorRequest header;
  header.mutable_caller()->set_task(name_);
  header.mutable_caller()->set_plan_fingerprint(config_.planFingerprint);
  header.set_version(at);
  std::vector<const Tensor *> payloads;
  for (size_t k = 0; k < values.size() && k < update_.keys().size(); ++k)
    if (values[k].defined()) { // absent: the mirror feeds zeros too
      describeTensor(update_.keys()[k], values[k], header.add_values());
      payloads.push_back(&values[k]);
    }
  return mirrorChunks(header, payloads, bytes);
}

void PsService::forwarded(const grpc::Status &st, int64_t at) {
  if (st.ok()) {
    ++forwarded_;
    return;
  }
  // The mirror lost step (restarted: no replica), or is gone: a snapshot,
  // which holds this update too, or degraded until it is back.
  sendSnapshot("its mirror did not take update " + std::to_string(at) + ": " +
               describe(st));
}

bool PsService::sendSnapshot(const std::string &why) {
  const std::string &m = config_.roster.ps[size_t(mirror_)].name;
  rpc::MirrorRequest header;
  header.mutable_caller()->set_task(name_);
  header.mutable_caller()->set_plan_fingerprint(config_.planFingerprint);
  header.set_snapshot(true);
  header.set_version(version_);
  std::vector<const Tensor *> payloads;
  // Sent from the variables themselves: nothing changes them while mu_
  // is held.
  for (const std::string &n : store_.names()) {
    const Tensor *t = store_.variables().find(n);
    describeTensor(n, *t, header.add_values());
    payloads.push_back(t);
  }
  uint64_t bytes = 0;
  std::vector<grpc::ByteBuffer> chunks = mirrorChunks(header, payloads, &bytes);
  grpc::Status st = callMirror(chunks, bytes);
  if (st.ok()) {
    mirrorSynced_ = true;
    ++snapshotsSent_;
    log("its shard mirrored on " + m + " from update " +
        std::to_string(version_) + " (a snapshot; " + why +
        "): every update it applies goes to " + m + " before it answers");
    degradedSaid_ = false;
    return true;
  }
  mirrorSynced_ = false;
  nextMirrorTry_ = Clock::now() + std::chrono::milliseconds(250);
  if (!degradedSaid_) {
    ++degradedTimes_;
    log("its mirror " + m + " cannot take a snapshot (" + describe(st) + "; " +
        why +
        "): applying updates without a replica (degraded) "
        "until it can; losing this ps meanwhile sets every ps back to the "
        "last checkpoint");
    degradedSaid_ = true;
  }
  return false;
}

void PsService::retryMirror() {
  if (mirror_ < 0 || mirrorSynced_ || !initialized_ || shutdown_ ||
      Clock::now() < nextMirrorTry_)
    return;
  sendSnapshot("its mirror was out of reach");
}

// ---------------------------------------------------------------------------
// The replica of the previous ps's shard.

grpc::Status
PsService::MirrorStream(grpc::ServerContext *ctx,
                        grpc::ServerReader<rpc::TensorChunk> *reader,
                        rpc::MirrorReply *reply) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kMirrored, "mirror its shard here", &who);
      !bad.ok())
    return bad;
  if (replica_.of < 0) // fixed after setUp
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        name_ + " holds no replica (every task of the job "
                                "takes --ps-replicas 2)");
  // As a push stream: each chunk straight into the tensors the header
  // announced (checked against the replica first), applied once whole.
  rpc::MirrorRequest req;
  std::vector<Tensor> values;
  Refusal refusal;
  ChunkReader chunks(&req, [&](std::vector<PayloadTarget> *targets) {
    return refusal.note(prepareMirror(req, &values, targets));
  });
  const std::string what = name_ + ": refused a mirror stream: ";
  rpc::TensorChunk chunk;
  while (reader->Read(&chunk)) {
    // The chunk's bytes as a slice without a copy (the reader copies them
    // once, into the staged tensors).
    auto *held = new std::string(std::move(*chunk.mutable_data()));
    grpc::Slice slice(
        held->data(), held->size(),
        [](void *p) { delete static_cast<std::string *>(p); }, held);
    Status s = chunks.add(grpc::ByteBuffer(&slice, 1));
    if (!s.isOk())
      return refusal.orElse(grpc::StatusCode::INVALID_ARGUMENT, what, s);
  }
  if (ctx->IsCancelled())
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        what + "the stream was cancelled (the replica "
                               "unchanged)");
  if (Status s = chunks.finish(); !s.isOk())
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        what + "incomplete (the replica unchanged): " + s.message());
  return completeMirror(req, values, reply);
}

grpc::Status PsService::prepareMirror(const rpc::MirrorRequest &req,
                                      std::vector<Tensor> *values,
                                      std::vector<PayloadTarget> *targets) {
  if (auto bad = checkCaller(req.caller()); !bad.ok())
    return bad;
  const std::string &of = config_.roster.ps[size_t(replica_.of)].name;
  if (!config_.transport.tls && req.caller().task() != of)
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        name_ + " mirrors " + of + "'s shard, not " +
                            plan::printable(req.caller().task()) + "'s");
  // The replica's store and update are fixed after setUp: no lock needed.
  if (req.snapshot()) {
    if (size_t(req.values_size()) != replica_.store->names().size())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          name_ + ": a snapshot of " + of + "'s shard has " +
                              std::to_string(req.values_size()) +
                              " tensors, not " +
                              std::to_string(replica_.store->names().size()));
    return stageValues(replica_.store->variables(), req.values(), values,
                       targets);
  }
  rpc::PushRequest push; // the update takes what a push carries, dense
  *push.mutable_values() = req.values();
  Status s = replica_.update->prepare(push, values, targets);
  return s.isOk()
             ? grpc::Status::OK
             : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message());
}

grpc::Status PsService::completeMirror(const rpc::MirrorRequest &req,
                                       std::vector<Tensor> &values,
                                       rpc::MirrorReply *reply) {
  std::lock_guard<std::mutex> lock(replica_.mu);
  const std::string &of = config_.roster.ps[size_t(replica_.of)].name;
  if (req.snapshot()) {
    for (int i = 0; i < req.values_size(); ++i) {
      Tensor *t = replica_.store->variables().find(req.values(i).name());
      std::memcpy(t->rawData(), values[size_t(i)].rawData(), t->byteSize());
    }
    replica_.version = req.version();
    ++replica_.snapshots;
    reply->set_version(replica_.version);
    return grpc::Status::OK;
  }
  if (replica_.version < 0 || req.version() != replica_.version)
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        name_ + ": the replica of " + of + "'s shard is at update " +
            std::to_string(replica_.version) + ", not " +
            std::to_string(req.version()) + " (send a snapshot)");
  Status s = replica_.update->run(values, req.version());
  if (!s.isOk()) {
    replica_.version = -1; // half applied: only a snapshot mends it
    return grpc::Status(grpc::StatusCode::INTERNAL, name_ + ": " + s.message());
  }
  ++replica_.version;
  ++replica_.updates;
  reply->set_version(replica_.version);
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<grpc::ByteBuffer> *
PsService::ReplicaStream(grpc::CallbackServerContext *ctx,
                         const grpc::ByteBuffer *request) {
  auto *writer = new PullWriter(&streams_, ctx);
  std::string who;
  grpc::Status st =
      admit(*ctx, Role::kMirrored, "take the replica of its shard", &who);
  if (st.ok())
    st = openStream(ctx);
  rpc::ReplicaRequest req;
  if (st.ok() && !parseMessage(*request, &req))
    st = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      name_ + ": a malformed replica request");
  if (st.ok())
    st = checkCaller(req.caller());
  if (st.ok() && replica_.of < 0)
    st = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      name_ + " holds no replica (no --ps-replicas 2)");
  if (!st.ok()) {
    writer->start(st);
    return writer;
  }
  rpc::PullReply header;
  std::vector<Tensor> snapshot;
  {
    std::lock_guard<std::mutex> lock(replica_.mu);
    if (replica_.version < 0) {
      writer->start(grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          name_ + " holds no replica of " +
              config_.roster.ps[size_t(replica_.of)].name +
              "'s shard (it started again since it last had one)"));
      return writer;
    }
    header.set_ready(true);
    header.set_version(replica_.version);
    for (const std::string &n : replica_.store->names()) {
      const Tensor *t = replica_.store->variables().find(n);
      snapshot.push_back(Tensor::allocate(t->dtype(), t->shape()));
      if (t->byteSize())
        std::memcpy(snapshot.back().rawData(), t->rawData(), t->byteSize());
      describeTensor(n, snapshot.back(), header.add_values());
    }
  }
  writer->send(header, snapshot, config_.chunkBytes);
  writer->start(grpc::Status::OK);
  return writer;
}

grpc::Status PsService::takeReplica(int64_t *version) {
  if (mirror_ < 0)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        name_ + " has no mirror (no --ps-replicas 2)");
  const TaskRef &m = config_.roster.ps[size_t(mirror_)];
  grpc::GenericStub stub(config_.transport.channel(m.address));
  rpc::ReplicaRequest req;
  req.mutable_caller()->set_task(name_);
  req.mutable_caller()->set_plan_fingerprint(config_.planFingerprint);
  rpc::PullReply header;
  // Straight into the variables: nothing reads them until this ps is
  // initialized, and a stream that breaks leaves it uninitialized.
  initialized_ = false;
  ChunkReader reader(&header, [&](std::vector<PayloadTarget> *targets) {
    if (size_t(header.values_size()) != store_.names().size())
      return errorStatus(m.name, "'s replica has ", header.values_size(),
                         " tensors; ", name_, " holds ", store_.names().size());
    for (const rpc::WireTensor &w : header.values()) {
      Tensor *t = store_.variables().find(w.name());
      std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
      if (!t || dims != t->shape() || w.size() != t->byteSize())
        return errorStatus(m.name, "'s replica holds '",
                           plan::printable(w.name()), "', which does not fit ",
                           name_, "'s variables");
      targets->push_back({t->rawData(), t->byteSize()});
    }
    return Status::ok();
  });
  uint64_t bytes = 0;
  for (const std::string &n : store_.names())
    bytes += store_.variables().find(n)->byteSize();
  grpc::ClientContext ctx;
  setDeadline(&ctx, transferTimeout(bytes));
  Status refused;
  grpc::Status st = receiveStream(stub, &ctx, kReplicaStreamMethod,
                                  serializeMessage(req), &reader, &refused);
  Status whole = st.ok() ? reader.finish() : Status::ok();
  if (!refused.isOk() || !st.ok() || !whole.isOk())
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        name_ +
                            " could not take its shard from the replica on " +
                            m.name + ": " +
                            (!refused.isOk() ? refused.message()
                             : !st.ok()      ? describe(st)
                                             : whole.message()));
  *version = header.version();
  return grpc::Status::OK;
}

std::string PsService::replicaSummary() {
  // mu_ held: this ps's shard does not change meanwhile.
  std::string s = "replicas: shard checksum " +
                  checksumText(shardChecksum(store_)) + " at update " +
                  std::to_string(version_) + ", mirrored on " +
                  config_.roster.ps[size_t(mirror_)].name + " (" +
                  std::to_string(snapshotsSent_) + " snapshots, " +
                  std::to_string(forwarded_) + " updates forwarded, " +
                  std::to_string(degradedTimes_) + " times degraded)";
  std::lock_guard<std::mutex> lock(replica_.mu);
  const std::string &of = config_.roster.ps[size_t(replica_.of)].name;
  if (replica_.version < 0)
    return s + "; holds no replica of " + of + "'s shard";
  return s + "; replica of " + of + "'s shard: checksum " +
         checksumText(shardChecksum(*replica_.store)) + " at update " +
         std::to_string(replica_.version) + " (" +
         std::to_string(replica_.snapshots) + " snapshots, " +
         std::to_string(replica_.updates) + " updates applied)";
}

} // namespace dtf::dist::ps
