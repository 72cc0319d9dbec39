// PsClient's calls to one ps: a Pull (one message or a stream of chunks,
// straight into the variables, repeated while the ps parks it) and a Push
// (the step's values or views of their rows, compressed or narrowed when
// asked). PsClient.cpp slices them over the ps tasks. What a pull learns of
// each ps (incarnation, version) is kept aside in a PullOutcome until the
// pull is taken, so that a prefetched pull may run beside a push.
#include "runtime/distributed/PsClient.h"

#include "runtime/distributed/TensorMessage.h"
#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace dtf::dist {
namespace {
// A pulled value the ps wrote into this call's region before it answered
// (the region is this call's until it is given back): into `dst`, widened
// from bfloat16 when `narrow`.
Status copyOutOfRegion(const rpc::WireTensor &w,
                       const RegionPool::Lease &region, uint64_t capacity,
                       bool narrow, Tensor *dst) {
  if (!region || !insideSlot(w.offset(), w.size(), capacity))
    return errorStatus("'", plan::printable(w.name()), "' (", w.size(),
                       " bytes at offset ", w.offset(),
                       ") outside the shared-memory slot it was given");
  const char *src = region.region().data() + w.offset();
  if (narrow)
    widenFromBf16(reinterpret_cast<const uint16_t *>(src), dst->numElements(),
                  dst->data<float>());
  else if (w.size())
    std::memcpy(dst->rawData(), src, w.size());
  return Status::ok();
}

// A push's values in a region at `base`, each at the next multiple of
// kRegionAlignment in the request's order (its offset set in `req`), copied
// unless its op made it there already (a push home); how many were.
size_t putInRegion(char *base, const std::vector<Tensor> &views,
                   rpc::PushRequest *req) {
  size_t inPlace = 0;
  uint64_t at = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    at = alignRegion(at);
    const size_t n = views[i].byteSize();
    if (views[i].rawData() == base + at)
      ++inPlace; // a value made in its own slot: no copy overwrites another's
    else if (n)
      std::memcpy(base + at, views[i].rawData(), n);
    req->mutable_values(int(i))->set_offset(at);
    at += n;
  }
  return inPlace;
}

// The names a pull of `l`'s values asks for (before an evaluation, those
// it reads too), each with what it fills in `into`; their bytes.
uint64_t askFor(const PsLink &l, bool forEval, exec::VariableStore &into,
                rpc::PullRequest *req,
                std::map<std::string, const plan::HeldTensor *> *byName) {
  for (const plan::HeldTensor &h : l.pull) {
    req->add_names(h.name);
    (*byName)[h.name] = &h;
  }
  if (forEval)
    for (const plan::HeldTensor &h : l.evalPull) {
      req->add_names(h.name);
      (*byName)[h.name] = &h;
    }
  uint64_t bytes = 0;
  for (const auto &entry : *byName)
    if (const plan::HeldTensor *h = entry.second;
        const Tensor *t = into.find(h->variable))
      bytes += h->partitioned ? rowsOf(*t, h->rowOffset, h->rows).byteSize()
                              : t->byteSize();
  return bytes;
}

// A pulled value the ps wrote into the variables' home region: where `dst`
// lives already, or noted in *moved (offset, variable) to go there.
Status placedInHome(const rpc::WireTensor &w, const SharedRegion &home,
                    const Tensor &dst,
                    std::vector<std::pair<uint64_t, Tensor>> *moved) {
  if (!insideSlot(w.offset(), w.size(), home.size()))
    return errorStatus("'", plan::printable(w.name()), "' (", w.size(),
                       " bytes at offset ", w.offset(),
                       ") outside the shared-memory slot it was given");
  if (dst.rawData() != home.data() + w.offset())
    moved->emplace_back(w.offset(), dst);
  return Status::ok();
}

// The values placedInHome noted, each read out before any is written (one
// may lie where another's variable does), then put in their variables.
Status moveIntoVariables(const SharedRegion &home,
                         std::vector<std::pair<uint64_t, Tensor>> *moved) {
  std::vector<Tensor> values;
  for (auto &[offset, dst] : *moved) {
    values.push_back(Tensor::allocate(dst.dtype(), dst.shape()));
    if (!values.back().defined())
      return errorStatus("out of memory for a pulled value of ",
                         dst.describe());
    std::memcpy(values.back().rawData(), home.data() + offset, dst.byteSize());
  }
  for (size_t i = 0; i < moved->size(); ++i)
    std::memcpy((*moved)[i].second.rawData(), values[i].rawData(),
                values[i].byteSize());
  moved->clear();
  return Status::ok();
}
} // namespace

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

RegionPool::Lease PsClient::takeRegion(const PsLink &l, uint64_t bytes) const {
  if (!l.regions || bytes == 0)
    return RegionPool::Lease();
  std::string failure;
  RegionPool::Lease lease = l.regions->take(bytes, &failure);
  sayNoRegion(l, failure);
  return lease;
}

void PsClient::sayNoRegion(const PsLink &l, const std::string &failure) const {
  if (!failure.empty())
    links_.say(links_.self() + ": no shared memory for " + l.task.name + " (" +
               failure + "): its tensors go through the socket");
}

std::shared_ptr<SharedRegion> PsClient::makeHome(const PsLink &l,
                                                 uint64_t bytes) const {
  std::string failure;
  std::shared_ptr<SharedRegion> made = l.regions->makeHome(bytes, &failure);
  sayNoRegion(l, failure);
  return made;
}

bool PsClient::regionRefused(const PsLink &l, const grpc::Status &st) const {
  if (!l.regions || st.error_details() != kRegionRefused)
    return false;
  bool first = false;
  l.regions->turnOff(&first);
  if (first)
    links_.say(links_.self() + ": " + describe(st) +
               "; the tensors to and from " + l.task.name +
               " go through the socket from now on");
  return true;
}

std::shared_ptr<SharedRegion> PsClient::homeFor(const PsLink &l,
                                                exec::VariableStore &into,
                                                bool forEval) const {
  if (forEval || &into != store_ || !l.regions || l.regions->off() ||
      links_.config().wireBf16 || l.pull.empty())
    return nullptr;
  const size_t k = size_t(&l - ps_.data());
  if (homes_.size() < ps_.size()) {
    homes_.resize(ps_.size());
    homeMisses_.resize(ps_.size());
  }
  std::shared_ptr<SharedRegion> &home = homes_[k];
  // Each pulled variable at the place the ps writes it into a region: the
  // next multiple of kRegionAlignment, in the order asked. fn(t, offset)
  // false stops; false when a variable is a shard (its rows are other ps'
  // too) or missing.
  auto layout = [&](auto &&fn) {
    uint64_t end = 0;
    for (const plan::HeldTensor &h : l.pull) {
      Tensor *t = h.partitioned ? nullptr : into.find(h.variable);
      const uint64_t offset = alignRegion(end);
      if (!t || !fn(t, offset))
        return false;
      end = offset + t->byteSize();
    }
    return true;
  };
  // Every step: the variables are where the last pull left them.
  if (home && layout([&](Tensor *t, uint64_t offset) {
        return offset + t->byteSize() <= home->size() &&
               t->rawData() == home->data() + offset;
      }))
    return home;
  // A region made (again: the variables were put elsewhere, another store
  // bound) or not made counts; after 3 this ps's pulls copy as before. A
  // region left after a failed pull does not count.
  if (homeMisses_[k] >= 3)
    return nullptr;
  std::vector<std::pair<Tensor *, uint64_t>> at;
  std::set<const Tensor *> seen; // a variable asked for twice: no home
  uint64_t end = 0;
  if (!layout([&](Tensor *t, uint64_t offset) {
        at.emplace_back(t, offset);
        end = offset + t->byteSize();
        return seen.insert(t).second;
      }))
    return nullptr;
  if (home)
    ++homeMisses_[k];
  std::shared_ptr<SharedRegion> made = makeHome(l, end);
  if (!made) {
    ++homeMisses_[k];
    return nullptr;
  }
  for (auto &[t, offset] : at) {
    char *p = made->data() + offset;
    if (t->byteSize())
      std::memcpy(p, t->rawData(), t->byteSize());
    *t = Tensor::adopt(t->dtype(), t->shape(), std::shared_ptr<void>(made, p),
                       t->byteSize());
  }
  home = std::move(made);
  return home;
}

void PsClient::leaveHome(const PsLink &l, exec::VariableStore &into) const {
  const size_t k = size_t(&l - ps_.data());
  if (k >= homes_.size() || !homes_[k])
    return;
  const SharedRegion &home = *homes_[k];
  for (const plan::HeldTensor &h : l.pull) {
    Tensor *t = into.find(h.variable);
    const char *p = t ? static_cast<const char *>(t->rawData()) : nullptr;
    if (!p || p < home.data() || p >= home.data() + home.size())
      continue;
    Tensor own = Tensor::allocate(t->dtype(), t->shape());
    if (!own.defined())
      continue; // out of memory: it stays where it is
    std::memcpy(own.rawData(), p, t->byteSize());
    *t = std::move(own);
  }
  homes_[k].reset();
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
  // What the reply carries when ready: a stream when that is more than
  // one chunk.
  const uint64_t bytes = askFor(l, forEval, into, &req, &byName);
  req.set_min_version(want);
  if (links_.config().wireBf16)
    req.set_wire_dtype(plan::BF16);
  // The ps parks a pull that must wait (no thread of its waits) and
  // answers it when the update is applied or after this long; the loop
  // below repeats and reports.
  req.set_wait_ms(1000);
  // On this host: the ps writes the values into a shared-memory region and
  // answers with their headers; into the variables themselves where they
  // live in one (homeFor), else into a region of this call's.
  std::shared_ptr<SharedRegion> home = homeFor(l, into, forEval);
  RegionPool::Lease region = home ? RegionPool::Lease() : takeRegion(l, bytes);
  if (home || region)
    *req.mutable_reply_into() = home ? home->slice() : region.slice();
  // Values the ps wrote into the home region elsewhere than where their
  // variable lives (offset, variable): moved there once all are read.
  std::vector<std::pair<uint64_t, Tensor>> moved;
  for (;;) {
    const bool stream = !region && !home && bytes > links_.config().chunkBytes;
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
        if (reply.in_region()) {
          DTF_RETURN_IF_ERROR(
              home ? placedInHome(w, *home, dst, &moved)
                   : copyOutOfRegion(w, region, req.reply_into().capacity(),
                                     narrow, &dst));
          continue;
        }
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
    if (!refused.isOk() || !st.ok()) {
      region.retire(); // the ps may still answer into it
      if (home)
        leaveHome(l, into); // as into the variables' region
    }
    if (!refused.isOk())
      return errorStatus(l.task.name, " answered a pull with ",
                         refused.message());
    if (!st.ok() && (region || home) && regionRefused(l, st)) {
      region = RegionPool::Lease(); // the same pull again, as bytes
      home.reset();
      moved.clear();
      req.clear_reply_into();
      continue;
    }
    if (!st.ok()) {
      o->recoverable = recoverable(st);
      return rpcError("a pull", l.task, st);
    }
    if (!moved.empty())
      DTF_RETURN_IF_ERROR(moveIntoVariables(*home, &moved));
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
                        const PushOptions &options, PushOutcome *out) {
  const bool sync = options.sync;
  rpc::PushRequest req;
  *req.mutable_caller() = links_.caller();
  req.set_version(version);
  req.set_incarnation(incarnation);
  if (&l == &ps_[0] && !options.dataBatches.empty()) {
    req.mutable_data_batches()->Add(options.dataBatches.begin(),
                                    options.dataBatches.end());
    req.set_worker_run(options.run);
  }
  // Sent from the step's own outputs (or views of their rows): no copy.
  std::vector<Tensor> views;
  views.reserve(2 * l.keys.size());
  // Per value: its send's name when it is that output whole (one the push
  // home can hold from the next step on), else empty.
  std::vector<std::string> whole;
  for (const plan::Transfer &r : l.keys) {
    const std::string &key = r.key();
    if (withhold_ && r.skippable())
      continue; // the ps takes the push without it: its flag says why
    if (r.sparse()) {
      // The shard's ids (relative to its first row) and their rows.
      Tensor ids, rows;
      cutForShard(r, sparse.at(key.substr(0, key.rfind("/part_"))), tables_,
                  &ids, &rows);
      views.push_back(std::move(ids));
      describeTensor(key, views.back(), req.add_values());
      views.push_back(std::move(rows));
      describeTensor(key + "#rows", views.back(), req.add_values());
      whole.resize(views.size());
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
    whole.push_back(r.rows() > 0 ? std::string() : key);
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
  uint64_t bytes = 0, slotBytes = 0;
  for (const Tensor &v : views) {
    payload.push_back(&v);
    bytes += v.byteSize();
    slotBytes = alignRegion(slotBytes) + v.byteSize();
  }
  // On this host: the values in a shared-memory region, the request only
  // their headers; the ps copies them out before it answers. In this ps'
  // push home, where the step made them (no copy) once they were placed
  // there; else copied into a region of this call's.
  PushHome *home = pushHomeFor(l, req, views);
  RegionPool::Lease region =
      home ? RegionPool::Lease() : takeRegion(l, slotBytes);
  if (home || region) {
    const SharedRegion &r = home ? *home->region : region.region();
    const size_t inPlace = putInRegion(r.data(), views, &req);
    *req.mutable_values_in() = r.slice();
    pushedInPlace_ += int64_t(inPlace);
    pushedCopied_ += int64_t(views.size() - inPlace);
  }
  grpc::Status st;
  grpc::ByteBuffer response;
  for (;;) {
    grpc::ClientContext ctx;
    setDeadline(&ctx, transferTimeout(bytes));
    // More than one chunk: a stream, which the ps applies only once it is
    // complete.
    const size_t chunk = links_.config().chunkBytes;
    st = region || home
             ? rawCall(*l.raw, &ctx, kPushMethod,
                       packTensors(req, {}, /*copy=*/false), &response)
         : bytes > chunk
             ? sendStream(*l.raw, &ctx, kPushStreamMethod,
                          packChunks(req, payload, chunk), &response)
             : rawCall(*l.raw, &ctx, kPushMethod,
                       packTensors(req, payload, /*copy=*/false), &response);
    if (home && !st.ok()) {
      leavePushHome(*home, views, whole, out); // the ps may still read it
      home = nullptr;
      if (regionRefused(l, st)) {
        req.clear_values_in(); // refused before anything was applied
        continue;
      }
    }
    if (st.ok() || !region || !regionRefused(l, st))
      break;
    region = RegionPool::Lease(); // refused before anything was applied
    req.clear_values_in();
  }
  if (home)
    placeInPushHome(*home, req, views, whole, out);
  if (!st.ok()) {
    region.retire(); // the ps may still read it
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

} // namespace dtf::dist
