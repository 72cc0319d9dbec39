// PsClient: pulls and pushes sliced over the ps shards, and the job-level
// calls to the ps tasks (lookups and sparse sums: PsClientRows.cpp).
#include "runtime/distributed/PsClient.h"
#include "dtf/OpNames.h"

#include "runtime/distributed/TensorMessage.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/train/DynamicTable.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <iterator>
#include <mutex>
#include <set>
#include <thread>

namespace dtf::dist {

PsClient::PsClient(const plan::Plan &plan, const plan::Placement &placement,
                   Links &links, const plan::Program *reads)
    : links_(links) {
  if (links.config().compressPush.enabled())
    compressor_ = std::make_unique<PushCompressor>(links.config().compressPush);
  const Roster &roster = links.config().roster;
  std::set<std::string> averages;
  for (size_t k = 0; k < roster.ps.size(); ++k) {
    PsLink l;
    l.task = roster.ps[k];
    l.connectAgain(links.config().transport);
    // What the worker_step reads (and the global step, which says when
    // the job is done); the eval program's moving averages on demand.
    std::set<std::string> read;
    for (const plan::Op &op : (reads ? *reads : plan.worker_step()).ops())
      if (op.name() == dtf::ops::kReadVariable)
        read.insert(op.attrs().at("name").s());
    for (const plan::Variable &v : plan.variables()) {
      if (v.role() == "global_step")
        read.insert(v.name());
      if (v.role() == "moving_average")
        averages.insert(v.name());
    }
    // An evaluation also needs what only other stages read each step.
    for (const plan::Op &op : plan.eval().ops())
      if (op.name() == dtf::ops::kReadVariable &&
          !read.count(op.attrs().at("name").s()))
        averages.insert(op.attrs().at("name").s());
    for (const plan::HeldTensor &h : plan::heldBy(plan, placement, int(k))) {
      if (read.count(h.variable))
        l.pull.push_back(h);
      else if (averages.count(h.variable))
        l.evalPull.push_back(h);
    }
    plan::Program p;
    if (plan::psProgramFor(plan, placement, int(k), &p).isOk())
      for (const plan::Transfer &r : p.recvs())
        l.keys.push_back(r);
    ps_.push_back(std::move(l));
  }
  for (size_t k = 0; k < ps_.size(); ++k)
    heldBy_.push_back(plan::heldBy(plan, placement, int(k)));
  findTables(plan, placement, reads ? *reads : plan.worker_step());
}

// The tables the step looks up on the ps, and who holds them.
void PsClient::findTables(const plan::Plan &plan,
                          const plan::Placement &placement,
                          const plan::Program &reads) {
  for (const plan::Op &op : reads.ops()) {
    if (op.name() != dtf::ops::kPsGather || !op.attrs().count("variable"))
      continue;
    const std::string &name = op.attrs().at("variable").s();
    for (const plan::Variable &v : plan.variables()) {
      if (v.name() != name || v.type().shape().dims_size() < 1)
        continue;
      Table t;
      t.shards = placement.shardsOf(plan, name);
      t.rows = v.type().shape().dims(0);
      t.rowDims.assign(v.type().shape().dims().begin() + 1,
                       v.type().shape().dims().end());
      (void)plan::toDType(v.type().dtype(), &t.dtype);
      t.dynamic = v.dynamic().enabled();
      t.parts = std::max<int64_t>(v.partitions(), 1);
      for (const plan::PlacedShard &sh : t.shards)
        if (sh.ps >= 0 && size_t(sh.ps) < ps_.size())
          ps_[size_t(sh.ps)].servesLookups = true;
      tables_[name] = std::move(t);
    }
  }
}

Status PsClient::connect() { return links_.connectPeers(ps_); }

Status PsClient::status(PsLink &l, rpc::StatusReply *reply) {
  grpc::ClientContext ctx;
  setDeadline(&ctx, milliseconds(5000));
  rpc::StatusRequest req;
  *req.mutable_caller() = links_.caller();
  grpc::Status st = l.stub->GetStatus(&ctx, req, reply);
  if (!st.ok())
    return rpcError("a status call", l.task, st);
  if (reply->plan_fingerprint() != links_.config().planFingerprint)
    return errorStatus(l.task.name, " at ", l.task.address,
                       " runs a different plan than this task (",
                       links_.config().planPath,
                       "); every task of a job must run the same plan.bin");
  return Status::ok();
}

Status PsClient::pull(bool forEval, bool sync, int64_t *globalStep) {
  std::vector<PullOutcome> outcomes = linkStates();
  Status s = pullAll(*store_, forEval, sync, &outcomes);
  applyPulls(outcomes);
  if (!s.isOk())
    return s;
  if (const Tensor *t = store_->find("global_step"))
    *globalStep = t->data<int64_t>()[0];
  return Status::ok();
}

Status PsClient::pullAll(exec::VariableStore &into, bool forEval, bool sync,
                         std::vector<PullOutcome> *outcomes) const {
  for (size_t k = 0; k < ps_.size(); ++k) {
    const PsLink &l = ps_[k];
    // A ps that only serves lookups is asked too: in sync mode the pull
    // waits for the update the rows must reflect.
    if (l.pull.empty() && !(forEval && !l.evalPull.empty()) && !l.servesLookups)
      continue;
    DTF_RETURN_IF_ERROR(pullFrom(l, into, forEval, sync, &(*outcomes)[k]));
  }
  return Status::ok();
}

std::vector<PsClient::PullOutcome> PsClient::linkStates() const {
  std::vector<PullOutcome> states;
  for (const PsLink &l : ps_)
    states.push_back({l.incarnation, l.pushedAt, l.pulledVersion, false});
  return states;
}

void PsClient::applyPulls(const std::vector<PullOutcome> &outcomes) {
  for (size_t k = 0; k < outcomes.size() && k < ps_.size(); ++k) {
    const PullOutcome &o = outcomes[k];
    PsLink &l = ps_[k];
    if (o.incarnation != l.incarnation) {
      // Restored (or first seen): what this worker pushed before no
      // longer counts.
      l.incarnation = o.incarnation;
      l.pushedAt = -1;
    }
    l.pulledVersion = o.version;
    if (o.recoverable)
      lastRecoverable_ = true;
  }
}

void PsClient::startPrefetch() {
  dropPrefetch();
  if (prefetchStore_.size() == 0)
    for (const PsLink &l : ps_)
      for (const plan::HeldTensor &h : l.pull)
        if (const Tensor *t = store_->find(h.variable);
            t && !prefetchStore_.find(h.variable))
          (void)prefetchStore_.add(h.variable,
                                   Tensor::allocate(t->dtype(), t->shape()));
  prefetchStatus_ = Status::ok();
  prefetchOutcomes_.clear();
  // The links' state as it is now, taken here: the push that runs
  // meanwhile writes the links (an async pull reads no pushedAt).
  prefetchOutcomes_ = linkStates();
  prefetch_ = std::thread([this] {
    prefetchStatus_ = pullAll(prefetchStore_, /*forEval=*/false,
                              /*sync=*/false, &prefetchOutcomes_);
  });
}

void PsClient::dropPrefetch() {
  if (prefetch_.joinable())
    prefetch_.join();
  prefetchOutcomes_.clear();
}

Status PsClient::takePrefetch(int64_t *globalStep, bool *taken) {
  *taken = prefetch_.joinable();
  if (!*taken)
    return Status::ok();
  prefetch_.join();
  std::vector<PullOutcome> outcomes = std::move(prefetchOutcomes_);
  prefetchOutcomes_.clear();
  if (!prefetchStatus_.isOk()) {
    // Nothing of it is kept: the caller pulls again (and recovers).
    for (const PullOutcome &o : outcomes)
      lastRecoverable_ |= o.recoverable;
    return prefetchStatus_;
  }
  // Into the variables the executor reads (which never move): the pulled
  // tensors, or a shard's rows of them.
  for (const PsLink &l : ps_)
    for (const plan::HeldTensor &h : l.pull) {
      Tensor *dst = store_->find(h.variable);
      Tensor *src = prefetchStore_.find(h.variable);
      if (!dst || !src)
        continue;
      Tensor to = h.partitioned ? rowsOf(*dst, h.rowOffset, h.rows) : *dst;
      const Tensor from =
          h.partitioned ? rowsOf(*src, h.rowOffset, h.rows) : *src;
      std::memcpy(to.rawData(), from.rawData(), from.byteSize());
    }
  applyPulls(outcomes);
  if (const Tensor *t = store_->find("global_step"))
    *globalStep = t->data<int64_t>()[0];
  return Status::ok();
}

// One ps's pull, repeated while the ps parks it (sync mode) and reporting
// what it waits for.
Status PsClient::pullFrom(const PsLink &l, exec::VariableStore &into,
                          bool forEval, bool sync, PullOutcome *o) const {
  int64_t want = sync && o->pushedAt >= 0 ? o->pushedAt + 1 : 0;
  // A later stage of a model-parallel replica reads what stage 0 read.
  if (size_t k = size_t(&l - ps_.data()); k < minVersions_.size())
    want = std::max(want, minVersions_[k]);
  const Clock::time_point start = Clock::now();
  double lastSaid = 0;
  std::map<std::string, const plan::HeldTensor *> byName;
  rpc::PullRequest req;
  *req.mutable_caller() = links_.caller();
  for (const plan::HeldTensor &h : l.pull) {
    req.add_names(h.name);
    byName[h.name] = &h;
  }
  if (forEval)
    for (const plan::HeldTensor &h : l.evalPull) {
      req.add_names(h.name);
      byName[h.name] = &h;
    }
  req.set_min_version(want);
  if (links_.config().wireBf16)
    req.set_wire_dtype(plan::BF16);
  // The ps parks a pull that must wait (no thread of its waits) and
  // answers it when the update is applied or after this long; the loop
  // below repeats and reports.
  req.set_wait_ms(1000);
  // What the reply carries when ready: a stream when that is more than
  // one chunk.
  uint64_t bytes = 0;
  for (const auto &entry : byName)
    if (const plan::HeldTensor *h = entry.second;
        const Tensor *t = into.find(h->variable))
      bytes += h->partitioned ? rowsOf(*t, h->rowOffset, h->rows).byteSize()
                              : t->byteSize();
  const bool stream = bytes > links_.config().chunkBytes;
  for (;;) {
    req.set_incarnation(o->incarnation);
    grpc::ClientContext ctx;
    setDeadline(&ctx, transferTimeout(bytes));
    rpc::PullReply reply;
    // Values that cross as bfloat16 (--wire bf16) and where they go.
    std::vector<std::pair<Tensor, Tensor>> narrowed;
    // Each value straight into the variable (or its shard's rows), as
    // its bytes arrive.
    ChunkReader reader(&reply, [&](std::vector<PayloadTarget> *targets) {
      for (const rpc::WireTensor &w : reply.values()) {
        auto h = byName.find(w.name());
        Tensor *t =
            h == byName.end() ? nullptr : into.find(h->second->variable);
        if (!t)
          return errorStatus("'", plan::printable(w.name()),
                             "', which this task did not ask for");
        Tensor dst = h->second->partitioned
                         ? rowsOf(*t, h->second->rowOffset, h->second->rows)
                         : rowsOf(*t, 0, t->rank() ? t->dim(0) : 1);
        std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
        DType dtype = DType::F32;
        const bool narrow = links_.config().wireBf16 &&
                            w.dtype() == plan::BF16 &&
                            dst.dtype() == DType::F32;
        if (!plan::toDType(w.dtype(), &dtype).isOk() ||
            (dtype != dst.dtype() && !narrow) || dims != dst.shape() ||
            w.size() != size_t(dst.numElements()) * dtypeSize(dtype))
          return errorStatus("'", plan::printable(w.name()), "' (", w.size(),
                             " bytes) for ", dst.describe());
        if (narrow) {
          narrowed.emplace_back(Tensor::allocate(DType::BF16, dims), dst);
          targets->push_back({narrowed.back().first.rawData(), w.size()});
          continue;
        }
        targets->push_back({dst.rawData(), w.size()});
      }
      return Status::ok();
    });
    Status refused = Status::ok();
    grpc::Status st;
    if (stream) {
      st = receiveStream(*l.raw, &ctx, kPullStreamMethod, serializeMessage(req),
                         &reader, &refused);
    } else {
      grpc::ByteBuffer response;
      st = rawCall(*l.raw, &ctx, kPullMethod, serializeMessage(req), &response);
      if (st.ok())
        refused = reader.add(response);
    }
    if (refused.isOk() && st.ok())
      refused = reader.finish();
    if (!refused.isOk())
      return errorStatus(l.task.name, " answered a pull with ",
                         refused.message());
    if (!st.ok()) {
      o->recoverable = recoverable(st);
      return rpcError("a pull", l.task, st);
    }
    for (auto &[bf16, dst] : narrowed)
      widenFromBf16(static_cast<const uint16_t *>(bf16.rawData()),
                    bf16.numElements(), dst.data<float>());
    if (reply.incarnation() != o->incarnation) {
      // Restored (or first seen): what this worker pushed before no
      // longer counts.
      o->incarnation = reply.incarnation();
      o->pushedAt = -1;
      req.set_min_version(0);
      if (!reply.ready())
        continue;
    }
    if (reply.ready()) {
      // The values are in place already (the reader put them there).
      o->version = reply.version();
      return Status::ok();
    }
    const double waited = secondsSince(start);
    if (waited - lastSaid >= 5) {
      links_.say("waiting for " + l.task.name + ": " + reply.waiting_for());
      lastSaid = waited;
    }
    if (waited > links_.config().syncTimeoutSeconds)
      return errorStatus(
          "gave up after ", int(waited), " s waiting for ", l.task.name, ": ",
          reply.waiting_for(),
          " (--sync-timeout sets the wait; a replica that died must be "
          "restarted or covered by a backup worker)");
    if (links_.config().stop && links_.config().stop->load())
      return errorStatus("interrupted");
  }
}

// One ps's push: its sends, from the step's own outputs (or views of their
// rows), in one message or a stream of chunks.
Status PsClient::pushTo(const PsLink &l, int64_t version, int64_t incarnation,
                        const SparseSums &sparse, const ValueOf &value,
                        bool sync, PushOutcome *out) {
  rpc::PushRequest req;
  *req.mutable_caller() = links_.caller();
  req.set_version(version);
  req.set_incarnation(incarnation);
  if (&l == &ps_[0] && !dataBatches_.empty()) {
    req.mutable_data_batches()->Add(dataBatches_.begin(), dataBatches_.end());
    req.set_worker_run(run_);
  }
  // Sent from the step's own outputs (or views of their rows): no copy.
  std::vector<Tensor> views;
  views.reserve(2 * l.keys.size());
  for (const plan::Transfer &r : l.keys) {
    const std::string &key = r.key();
    if (withhold_ && r.skippable())
      continue; // the ps takes the push without it: its flag says why
    if (r.sparse()) {
      // The shard's ids (relative to its first row) and their rows.
      const SparseSum &sum = sparse.at(key.substr(0, key.rfind("/part_")));
      if (auto t = tables_.find(r.variable());
          t != tables_.end() && t->second.dynamic) {
        // A dynamic table's shard: its ids by hash, as they are.
        const size_t part = key.rfind("/part_");
        const int k =
            part == std::string::npos ? 0 : std::atoi(key.c_str() + part + 6);
        std::vector<int64_t> at;
        for (size_t u = 0; u < sum.ids.size(); ++u)
          if (train::dynamicShardOf(sum.ids[u], t->second.parts) == k)
            at.push_back(int64_t(u));
        Tensor ids = Tensor::allocate(DType::I64, {int64_t(at.size())});
        std::vector<int64_t> dims = sum.rows.shape();
        dims[0] = int64_t(at.size());
        Tensor rows = Tensor::allocate(sum.rows.dtype(), dims);
        const size_t rowBytes =
            sum.rows.dim(0) ? sum.rows.byteSize() / size_t(sum.rows.dim(0)) : 0;
        for (size_t j = 0; j < at.size(); ++j) {
          ids.data<int64_t>()[j] = sum.ids[size_t(at[j])];
          std::memcpy(static_cast<char *>(rows.rawData()) + j * rowBytes,
                      static_cast<const char *>(sum.rows.rawData()) +
                          size_t(at[j]) * rowBytes,
                      rowBytes);
        }
        views.push_back(std::move(ids));
        describeTensor(key, views.back(), req.add_values());
        views.push_back(std::move(rows));
        describeTensor(key + "#rows", views.back(), req.add_values());
        continue;
      }
      const auto lo =
          std::lower_bound(sum.ids.begin(), sum.ids.end(), r.row_offset());
      const auto hi =
          std::lower_bound(lo, sum.ids.end(), r.row_offset() + r.rows());
      Tensor ids = Tensor::allocate(DType::I64, {int64_t(hi - lo)});
      int64_t *rel = ids.data<int64_t>();
      for (auto id = lo; id != hi; ++id)
        *rel++ = *id - r.row_offset();
      views.push_back(std::move(ids));
      describeTensor(key, views.back(), req.add_values());
      views.push_back(
          rowsOf(sum.rows, int64_t(lo - sum.ids.begin()), int64_t(hi - lo)));
      describeTensor(key + "#rows", views.back(), req.add_values());
      continue;
    }
    // A shard's recv takes its rows of the worker's whole send.
    const std::string base =
        r.rows() > 0 ? key.substr(0, key.rfind("/part_")) : key;
    const Tensor *t = value(base);
    if (!t)
      return errorStatus("the step made no value for '", base, "'");
    views.push_back(r.rows() > 0 ? rowsOf(*t, r.row_offset(), r.rows())
                                 : rowsOf(*t, 0, t->rank() ? t->dim(0) : 1));
    describeTensor(key, views.back(), req.add_values());
  }
  // --compress-push: each large dense gradient plus what earlier pushes
  // left of it, top-k or 1-bit; the rest stays behind for the next push.
  if (compressor_)
    for (size_t i = 0; i < views.size(); ++i) {
      rpc::WireTensor *w = req.mutable_values(int(i));
      Tensor encoded;
      rpc::PushEncoding encoding = rpc::PUSH_DENSE;
      if (compressor_->compress(w->name(), views[i], &encoded, &encoding)) {
        views[i] = std::move(encoded);
        w->set_size(views[i].byteSize());
        w->set_encoding(encoding);
      }
    }
  // --wire bf16: every f32 value crosses as bfloat16 (one per value,
  // in the order the header names them; not the compressed ones).
  if (links_.config().wireBf16)
    for (size_t i = 0; i < views.size(); ++i)
      if (views[i].dtype() == DType::F32) {
        views[i] = narrowToBf16(views[i]);
        const std::string name = req.values(int(i)).name();
        describeTensor(name, views[i], req.mutable_values(int(i)));
      }
  std::vector<const Tensor *> payload;
  uint64_t bytes = 0;
  for (const Tensor &v : views) {
    payload.push_back(&v);
    bytes += v.byteSize();
  }
  grpc::ClientContext ctx;
  setDeadline(&ctx, transferTimeout(bytes));
  grpc::ByteBuffer response;
  // More than one chunk: a stream, which the ps applies only once it is
  // complete.
  const size_t chunk = links_.config().chunkBytes;
  grpc::Status st =
      bytes > chunk
          ? sendStream(*l.raw, &ctx, kPushStreamMethod,
                       packChunks(req, payload, chunk), &response)
          : rawCall(*l.raw, &ctx, kPushMethod,
                    packTensors(req, payload, /*copy=*/false), &response);
  if (!st.ok()) {
    out->recoverable = recoverable(st);
    return rpcError("a push", l.task, st);
  }
  rpc::PushReply reply;
  if (!parseMessage(response, &reply))
    return errorStatus(l.task.name, " answered a push with a malformed reply");
  out->stale = reply.stale();
  out->leaseLost = reply.lease_lost();
  if (!reply.stale())
    out->pushedAt = version;
  if (sync && reply.stale())
    // Computed at an older version: the current update is open, join
    // it. At the current one (this replica already joined it, before a
    // restart): wait for it to complete.
    out->pushedAt = reply.version() == version ? version : reply.version() - 1;
  return Status::ok();
}

Status PsClient::push(const ValueOf &value, bool sync) {
  return pushAndMaybePull(value, sync, nullptr);
}

Status PsClient::pushAndPull(const ValueOf &value, int64_t *globalStep) {
  return pushAndMaybePull(value, /*sync=*/false, globalStep);
}

Status PsClient::pushAndMaybePull(const ValueOf &given, bool sync,
                                  int64_t *globalStep) {
  SparseSums sparse;
  DTF_RETURN_IF_ERROR(sumSparseSends(given, &sparse));
  const ValueOf &value = given;
  std::vector<PsLink *> targets;
  for (PsLink &l : ps_)
    if (!l.keys.empty())
      targets.push_back(&l);
  // What each push says it was computed at, taken before a pull that runs
  // meanwhile moves it on.
  std::vector<std::pair<int64_t, int64_t>> at;
  for (PsLink *l : targets)
    at.emplace_back(l->pulledVersion, l->incarnation);
  std::vector<PushOutcome> outcomes(targets.size());
  // Every ps at once: a push waits for its ps to apply it. With a pull,
  // the pushes run beside it (each link carries both ways at once).
  std::vector<std::thread> pushes;
  const size_t first = globalStep ? 0 : 1;
  for (size_t i = first; i < targets.size(); ++i)
    pushes.emplace_back([&, i] {
      outcomes[i].status = pushTo(*targets[i], at[i].first, at[i].second,
                                  sparse, value, sync, &outcomes[i]);
    });
  Status pulled = Status::ok();
  if (globalStep)
    pulled = pull(/*forEval=*/false, /*sync=*/false, globalStep);
  else if (!targets.empty())
    outcomes[0].status = pushTo(*targets[0], at[0].first, at[0].second, sparse,
                                value, sync, &outcomes[0]);
  for (std::thread &t : pushes)
    t.join();
  for (size_t i = 0; i < targets.size(); ++i) {
    const PushOutcome &o = outcomes[i];
    if (o.stale)
      ++stale_;
    leaseLost_ |= o.leaseLost;
    // A pull that found the ps restored meanwhile forgot what was pushed.
    if (o.pushedAt != PushOutcome::kUnchanged &&
        targets[i]->incarnation == at[i].second)
      targets[i]->pushedAt = o.pushedAt;
  }
  for (const PushOutcome &o : outcomes)
    if (!o.status.isOk()) {
      lastRecoverable_ = o.recoverable;
      return o.status;
    }
  return pulled;
}

Status PsClient::saveShards(const std::string &dir, int64_t step) {
  for (size_t k = 0; k < ps_.size(); ++k) {
    rpc::SaveRequest req;
    *req.mutable_caller() = links_.caller();
    req.set_dir(dir);
    req.set_step(step);
    req.set_shard(int(k));
    req.set_num_shards(int(ps_.size()));
    grpc::ClientContext ctx;
    setDeadline(&ctx, kCallTimeout);
    rpc::SaveReply reply;
    grpc::Status st = ps_[k].stub->Save(&ctx, req, &reply);
    if (!st.ok()) {
      lastRecoverable_ = recoverable(st);
      return rpcError("saving a checkpoint", ps_[k].task, st);
    }
  }
  return Status::ok();
}

void PsClient::forgetVersions() {
  for (PsLink &l : ps_) {
    l.incarnation = -1;
    l.pushedAt = -1;
  }
}

Status PsClient::done(int *workersDone, int *workersLive, bool leaving) {
  int doneCount = 0, liveCount = 0;
  // Every ps follows the live workers for its sync updates; ps 0 counts.
  for (size_t i = 0; i < ps_.size(); ++i) {
    rpc::DoneRequest req;
    *req.mutable_caller() = links_.caller();
    req.set_leaving(leaving);
    grpc::ClientContext ctx;
    setDeadline(&ctx, kCallTimeout);
    rpc::DoneReply reply;
    grpc::Status st = ps_[i].stub->WorkerDone(&ctx, req, &reply);
    if (i > 0)
      continue; // another ps that is gone times this worker out itself
    if (!st.ok())
      return rpcError(leaving ? "telling it this worker leaves"
                              : "reporting this worker done",
                      ps_[0].task, st);
    doneCount = reply.workers_done();
    liveCount = reply.workers_live();
  }
  if (workersDone)
    *workersDone = doneCount;
  if (workersLive)
    *workersLive = liveCount;
  return Status::ok();
}

void PsClient::shutdownAll(const std::string &reason) {
  for (PsLink &l : ps_) {
    rpc::ShutdownRequest req;
    *req.mutable_caller() = links_.caller();
    req.set_reason(reason);
    grpc::ClientContext ctx;
    setDeadline(&ctx, milliseconds(3000));
    rpc::ShutdownReply reply;
    (void)l.stub->Shutdown(&ctx, req, &reply);
  }
}

} // namespace dtf::dist
