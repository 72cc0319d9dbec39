// Between-graph replication: pulls, pushes, initialization, checkpoints and
// recovery of the ps tasks, for one worker (or tower, or stage 0).
#include "runtime/distributed/BetweenGraph.h"

#include "runtime/train/DynamicTable.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/plan/PlanTypes.h"

#include <cmath>
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

namespace dtf::dist {

PsDriver::PsDriver(const plan::Plan &plan, const plan::Placement &placement,
                   Links &links, bool sync, bool push,
                   const plan::Program *reads)
    : plan_(plan), links_(links), sync_(sync), push_(push) {
  const Roster &roster = links.config().roster;
  std::set<std::string> averages;
  for (size_t k = 0; k < roster.ps.size(); ++k) {
    PsLink l;
    l.task = roster.ps[k];
    l.connectAgain();
    // What the worker_step reads (and the global step, which says when
    // the job is done); the eval program's moving averages on demand.
    std::set<std::string> read;
    for (const plan::Op &op : (reads ? *reads : plan.worker_step()).ops())
      if (op.name() == "dtf.read_variable")
        read.insert(op.attrs().at("name").s());
    for (const plan::Variable &v : plan.variables()) {
      if (v.role() == "global_step")
        read.insert(v.name());
      if (v.role() == "moving_average")
        averages.insert(v.name());
    }
    // An evaluation also needs what only other stages read each step.
    for (const plan::Op &op : plan.eval().ops())
      if (op.name() == "dtf.read_variable" &&
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
  // The tables the worker_step looks up on the ps, and who holds them.
  for (const plan::Op &op : (reads ? *reads : plan.worker_step()).ops()) {
    if (op.name() != "dtf.ps_gather" || !op.attrs().count("variable"))
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

namespace {
// The ids of a tensor of any integer type as int64.
Status idsOf(const Tensor &ids, std::vector<int64_t> *out) {
  const int64_t n = ids.numElements();
  out->resize(size_t(n));
  if (ids.dtype() == DType::I64)
    std::memcpy(out->data(), ids.rawData(), size_t(n) * sizeof(int64_t));
  else if (ids.dtype() == DType::I32)
    for (int64_t i = 0; i < n; ++i)
      (*out)[size_t(i)] = ids.data<int32_t>()[i];
  else
    return errorStatus("ids of type ", ids.describe(),
                       "; an embedding takes int32 or int64 ids");
  return Status::ok();
}
// The ascending unique values of `ids`, and for each position the index of
// its value among them: one sort of (id, position) pairs.
void uniqueIds(const std::vector<int64_t> &ids, std::vector<int64_t> *unique,
               std::vector<uint32_t> *slot) {
  std::vector<std::pair<int64_t, uint32_t>> order(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    order[i] = {ids[i], uint32_t(i)};
  std::sort(order.begin(), order.end());
  unique->clear();
  slot->resize(ids.size());
  for (const auto &[id, at] : order) {
    if (unique->empty() || unique->back() != id)
      unique->push_back(id);
    (*slot)[at] = uint32_t(unique->size() - 1);
  }
}
} // namespace

Status PsDriver::lookup(const std::string &variable, const Tensor &ids,
                        bool create, Tensor *out) {
  auto found = tables_.find(variable);
  if (found == tables_.end())
    return errorStatus("'", plan::printable(variable),
                       "' is not a table this task looks up on the ps");
  const Table &table = found->second;
  std::vector<int64_t> all;
  DTF_RETURN_IF_ERROR(idsOf(ids, &all));
  for (size_t i = 0; i < all.size() && !table.dynamic; ++i)
    if (all[i] < 0 || all[i] >= table.rows)
      return errorStatus("id ", all[i], " at position ", i, " is outside [0, ",
                         table.rows, ") of '", plan::printable(variable), "'");
  std::vector<int64_t> unique;
  std::vector<uint32_t> slot; // of each position in `unique`
  uniqueIds(all, &unique, &slot);
  if (table.dynamic) {
    // By shard (then ascending), so that a shard's ids are one run again;
    // slot follows the reordering.
    std::vector<std::pair<int, size_t>> order(unique.size());
    for (size_t u = 0; u < unique.size(); ++u)
      order[u] = {train::dynamicShardOf(unique[u], table.parts), u};
    std::sort(order.begin(), order.end());
    std::vector<uint32_t> moved(unique.size());
    std::vector<int64_t> sorted(unique.size());
    for (size_t u = 0; u < order.size(); ++u) {
      sorted[u] = unique[order[u].second];
      moved[order[u].second] = uint32_t(u);
    }
    unique = std::move(sorted);
    for (uint32_t &s : slot)
      s = moved[s];
  }
  std::vector<int64_t> dims = ids.shape();
  dims.insert(dims.end(), table.rowDims.begin(), table.rowDims.end());
  if (!out->defined() || out->shape() != dims || out->dtype() != table.dtype)
    *out = Tensor::allocate(table.dtype, dims);
  size_t rowBytes = dtypeSize(table.dtype);
  for (int64_t d : table.rowDims)
    rowBytes *= size_t(d);
  std::vector<char> rows(unique.size() * rowBytes);
  // One call per shard that holds any of the ids, all in flight at once.
  struct Call {
    PsLink *link = nullptr;
    size_t first = 0, count = 0; // of the unique ids
    rpc::LookupRequest req;
    rpc::LookupReply reply;
    grpc::ClientContext ctx;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (const plan::PlacedShard &shard : table.shards) {
    // The unique ids are ascending (a dynamic table's: by shard first): a
    // shard's are one run of them.
    auto lo = std::lower_bound(unique.begin(), unique.end(), shard.rowOffset);
    auto hi = std::lower_bound(lo, unique.end(), shard.rowOffset + shard.rows);
    if (table.dynamic) {
      auto shardOf = [&](int64_t id) {
        return train::dynamicShardOf(id, table.parts);
      };
      lo = std::partition_point(unique.begin(), unique.end(), [&](int64_t id) {
        return shardOf(id) < shard.shard;
      });
      hi = std::partition_point(lo, unique.end(), [&](int64_t id) {
        return shardOf(id) == shard.shard;
      });
    }
    if (lo == hi)
      continue;
    if (shard.ps < 0 || size_t(shard.ps) >= ps_.size())
      return errorStatus("no ps holds rows ", shard.rowOffset, " to ",
                         shard.rowOffset + shard.rows, " of '",
                         plan::printable(variable), "'");
    auto call = std::make_unique<Call>();
    call->link = &ps_[size_t(shard.ps)];
    call->first = size_t(lo - unique.begin());
    call->count = size_t(hi - lo);
    *call->req.mutable_caller() = links_.caller();
    call->req.set_name(shard.shards > 1 ? variable + "/part_" +
                                              std::to_string(shard.shard)
                                        : variable);
    std::string *bytes = call->req.mutable_ids();
    bytes->resize(call->count * sizeof(int64_t));
    int64_t *rel = reinterpret_cast<int64_t *>(bytes->data());
    const int64_t base = table.dynamic ? 0 : shard.rowOffset;
    for (auto it = lo; it != hi; ++it)
      *rel++ = *it - base;
    call->req.set_create(create);
    setDeadline(&call->ctx, transferTimeout(call->count * rowBytes));
    calls.push_back(std::move(call));
  }
  std::mutex mu;
  std::condition_variable done;
  size_t pending = calls.size();
  for (auto &call : calls)
    call->link->stub->async()->Lookup(
        &call->ctx, &call->req, &call->reply,
        [&, c = call.get()](grpc::Status st) {
          std::lock_guard<std::mutex> lock(mu);
          c->status = std::move(st);
          if (--pending == 0)
            done.notify_one();
        });
  {
    std::unique_lock<std::mutex> lock(mu);
    done.wait(lock, [&] { return pending == 0; });
  }
  for (auto &call : calls) {
    if (!call->status.ok()) {
      lastRecoverable_ = recoverable(call->status);
      lookupFailed_ = true;
      return rpcError("a lookup of " + call->req.name(), call->link->task,
                      call->status);
    }
    const size_t want = call->count * rowBytes;
    if (call->reply.rows().size() != want)
      return errorStatus(call->link->task.name, " answered a lookup of ",
                         call->count, " rows of ", call->req.name(), " with ",
                         call->reply.rows().size(), " bytes instead of ",
                         want);
    std::memcpy(rows.data() + call->first * rowBytes,
                call->reply.rows().data(), want);
  }
  char *dst = static_cast<char *>(out->rawData());
  for (size_t i = 0; i < all.size(); ++i)
    std::memcpy(dst + i * rowBytes, rows.data() + size_t(slot[i]) * rowBytes,
                rowBytes);
  return Status::ok();
}

bool PsDriver::dropStep(const Status &failure) {
  if (!lookupFailed_)
    return false;
  lookupFailed_ = false;
  if (!lastRecoverable_ || !recoverInPlace_)
    return false;
  links_.say(failure.message() + "; step dropped, going on once the ps tasks "
                                 "are back");
  return true;
}

Status PsDriver::sumSparse(const plan::Transfer &send, const ValueOf &value,
                           SparseSum *out) const {
  const std::string &key = send.key();
  const std::string base = key.substr(0, key.rfind("/part_"));
  const Tensor *ids = value(base);
  const Tensor *rows = value(base + "#rows");
  if (!ids || !rows)
    return errorStatus("the step made no sparse gradient for '", base, "'");
  std::vector<int64_t> all;
  DTF_RETURN_IF_ERROR(idsOf(*ids, &all));
  const int64_t n = int64_t(all.size());
  if (rows->dtype() != DType::F32 && rows->dtype() != DType::F64)
    return errorStatus("the rows of '", base, "' are ", rows->describe());
  const int64_t width = n ? rows->numElements() / n : 0;
  if (width * n != rows->numElements())
    return errorStatus("the rows of '", base, "' (", rows->describe(),
                       ") do not match its ", n, " ids");
  std::vector<uint32_t> slot;
  uniqueIds(all, &out->ids, &slot);
  std::vector<int64_t> dims = {int64_t(out->ids.size())};
  dims.insert(dims.end(), rows->shape().begin() + ids->rank(),
              rows->shape().end());
  out->rows = Tensor::allocate(rows->dtype(), dims);
  auto sum = [&](auto tag) {
    using T = decltype(tag);
    const T *src = rows->data<T>();
    T *dst = out->rows.data<T>();
    std::fill(dst, dst + out->rows.numElements(), T(0));
    // In position order: a row's duplicates are summed in the order the
    // one-process kernel sums them.
    for (int64_t i = 0; i < n; ++i) {
      T *row = dst + int64_t(slot[size_t(i)]) * width;
      for (int64_t j = 0; j < width; ++j)
        row[j] += src[i * width + j];
    }
  };
  if (rows->dtype() == DType::F32)
    sum(float());
  else
    sum(double());
  return Status::ok();
}

Status PsDriver::connect() {
  return links_.connectPeers(ps_);
}

Status PsDriver::initializeOrWait(bool chief) {
  const std::string chiefName = links_.config().roster.workers[0].name;
  const Clock::time_point start = Clock::now();
  double lastSaid = -100;
  for (;;) {
    bool allReady = true;
    for (PsLink &l : ps_) {
      rpc::StatusReply reply;
      DTF_RETURN_IF_ERROR(status(l, &reply));
      if (reply.initialized())
        continue;
      allReady = false;
      if (chief) {
        DTF_RETURN_IF_ERROR(restoreAll(/*force=*/false));
        break;
      }
    }
    if (allReady)
      return Status::ok();
    if (chief)
      continue;
    const double waited = secondsSince(start);
    if (waited - lastSaid >= 5) {
      links_.say("waiting for the chief (" + chiefName +
                 ") to initialize the variables on the ps tasks");
      lastSaid = waited;
    }
    if (waited > links_.config().syncTimeoutSeconds)
      return errorStatus("the chief (", chiefName,
                         ") did not initialize the ps tasks within ",
                         links_.config().syncTimeoutSeconds, " s");
    if (links_.config().stop && links_.config().stop->load())
      return errorStatus("interrupted");
    std::this_thread::sleep_for(milliseconds(200));
  }
}

Status PsDriver::status(PsLink &l, rpc::StatusReply *reply) {
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

Status PsDriver::restoreAll(bool force) {
  const std::string &dir = links_.config().modelDir;
  int64_t step = -1;
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  if (!dir.empty()) {
    std::vector<std::string> skipped;
    DTF_RETURN_IF_ERROR(checkpoint::findLatest(dir, &step, &skipped));
    for (const std::string &why : skipped)
      links_.say("warning: skipping an incomplete checkpoint: " + why);
    if (step >= 0)
      DTF_RETURN_IF_ERROR(
          checkpoint::CheckpointReader::open(dir, step, &reader));
  }
  // Every ps starts at the stored global step (its updates so far in sync
  // mode), whatever step the checkpoint is named for.
  int64_t globalStep = reader ? step : 0;
  if (reader && reader->find("global_step")) {
    Tensor t;
    if (reader->read("global_step", &t).isOk() && t.dtype() == DType::I64 &&
        t.numElements() == 1)
      globalStep = t.data<int64_t>()[0];
  }
  for (size_t k = 0; k < ps_.size(); ++k) {
    PsLink &l = ps_[k];
    rpc::InitializeRequest req;
    *req.mutable_caller() = links_.caller();
    req.set_force(force);
    std::vector<Tensor> values;
    // A ps whose share is large reads it from the checkpoint itself (its
    // --model-dir is this one, which every task sees), straight into its
    // variables: neither this task nor the ps holds a second copy.
    uint64_t share = 0;
    if (reader)
      for (const plan::HeldTensor &h : heldBy_[k])
        if (const checkpoint::TensorInfo *info = reader->find(h.variable)) {
          uint64_t n = dtypeSize(info->dtype) * uint64_t(h.rows);
          for (size_t d = 1; d < info->shape.size(); ++d)
            n *= uint64_t(info->shape[d]);
          share += n;
        }
    // A dynamic table is stored as its live rows and their ids, which only
    // its ps can place: it always reads them itself.
    bool dynamic = false;
    for (const plan::HeldTensor &h : heldBy_[k])
      for (const plan::Variable &v : plan_.variables())
        dynamic |= v.name() == h.variable && v.dynamic().enabled();
    if (reader && (share >= kRestoreOnPsBytes || dynamic)) {
      req.set_restore(true);
      req.set_restore_step(step);
    } else if (reader) {
      for (const plan::HeldTensor &h : heldBy_[k]) {
        if (!reader->find(h.variable))
          return errorStatus(
              "the checkpoint ", checkpoint::checkpointName(step), " in ", dir,
              " has no variable '", h.variable,
              "' (is it another model's? --fresh sets it aside)");
        Tensor t;
        DTF_RETURN_IF_ERROR(h.partitioned
                                ? reader->readRows(h.variable, h.rowOffset,
                                                   h.rowOffset + h.rows, &t)
                                : reader->read(h.variable, &t));
        describeTensor(h.name, t, req.add_values());
        values.push_back(std::move(t));
      }
    }
    req.set_version(globalStep);
    uint64_t bytes = 0;
    for (const Tensor &t : values)
      bytes += t.byteSize();
    grpc::ClientContext ctx;
    setDeadline(&ctx, transferTimeout(bytes));
    rpc::InitializeReply reply;
    grpc::Status st;
    const size_t chunk = links_.config().chunkBytes;
    if (bytes > chunk) {
      // In chunks from the read tensors: no 2 GiB message limit.
      std::vector<const Tensor *> payload;
      for (const Tensor &t : values)
        payload.push_back(&t);
      grpc::ByteBuffer response;
      st = sendStream(*l.raw, &ctx, kInitializeStreamMethod,
                      packChunks(req, payload, chunk), &response);
      if (st.ok() && !parseMessage(response, &reply))
        return errorStatus(
            l.task.name, " answered an initialization with a malformed reply");
    } else {
      for (int i = 0; i < req.values_size(); ++i)
        toWire(req.values(i).name(), values[size_t(i)], req.mutable_values(i));
      st = l.stub->Initialize(&ctx, req, &reply);
    }
    if (!st.ok())
      return rpcError("initializing", l.task, st);
  }
  schedule_.saved(reader ? step : -1);
  if (reader)
    links_.say("restored checkpoint " + checkpoint::checkpointName(step) +
               " from " + dir + " onto " + std::to_string(ps_.size()) +
               " ps task" + (ps_.size() == 1 ? "" : "s") +
               "; continuing at step " + std::to_string(globalStep));
  else if (force)
    links_.say("no checkpoint yet: every ps starts again from the plan's "
               "initializers");
  return Status::ok();
}

Status PsDriver::recover(bool chief, const Status &why) {
  links_.say(why.message() + "; waiting for the ps tasks to come back " +
             "(the launcher restarts a lost one)");
  const Clock::time_point start = Clock::now();
  double lastSaid = 0;
  for (;;) {
    if (links_.config().stop && links_.config().stop->load())
      return errorStatus("interrupted");
    bool allUp = true, anyFresh = false;
    std::string down;
    for (PsLink &l : ps_) {
      rpc::StatusReply reply;
      if (!status(l, &reply).isOk()) {
        allUp = false;
        down = l.task.name + " at " + l.task.address;
        l.connectAgain();
        continue;
      }
      if (!reply.initialized())
        anyFresh = true;
    }
    // The chief restores a ps that lost its state; the others wait for it.
    if (allUp && (chief || !anyFresh)) {
      if (chief && anyFresh)
        DTF_RETURN_IF_ERROR(restoreAll(/*force=*/true));
      else
        links_.say("every ps answers again; going on");
      // What was pulled and pushed before belongs to the old state.
      for (PsLink &l : ps_) {
        l.incarnation = -1;
        l.pushedAt = -1;
      }
      return Status::ok();
    }
    const double waited = secondsSince(start);
    if (waited > links_.config().syncTimeoutSeconds)
      return errorStatus("gave up after ", int(waited), " s waiting for ",
                         down.empty()
                             ? std::string("the chief to restore the ps tasks")
                             : down);
    if (waited - lastSaid >= 5) {
      links_.say("still waiting for " +
                 (down.empty()
                      ? std::string("the chief to restore the ps tasks")
                      : down));
      lastSaid = waited;
    }
    std::this_thread::sleep_for(milliseconds(300));
  }
}

Status PsDriver::save(int64_t step) {
  const std::string &dir = links_.config().modelDir;
  if (!schedule_.unsaved(step))
    return Status::ok();
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
  DTF_RETURN_IF_ERROR(
      checkpoint::writeIndex(dir, step, int(ps_.size()), schedule_.keep()));
  schedule_.saved(step);
  links_.say("saved checkpoint " + checkpoint::checkpointName(step) + " in " +
             dir + " (" + std::to_string(ps_.size()) + " shard" +
             (ps_.size() == 1 ? "" : "s") + ")");
  return Status::ok();
}

Status PsDriver::pull(bool forEval, int64_t *globalStep) {
  for (PsLink &l : ps_) {
    // A ps that only serves lookups is asked too: in sync mode the pull
    // waits for the update the rows must reflect.
    if (l.pull.empty() && !(forEval && !l.evalPull.empty()) &&
        !l.servesLookups)
      continue;
    int64_t want = sync_ && l.pushedAt >= 0 ? l.pushedAt + 1 : 0;
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
    // The ps parks a pull that must wait (no thread of its waits) and
    // answers it when the update is applied or after this long; the loop
    // below repeats and reports.
    req.set_wait_ms(1000);
    // What the reply carries when ready: a stream when that is more than
    // one chunk.
    uint64_t bytes = 0;
    for (const auto &entry : byName)
      if (const plan::HeldTensor *h = entry.second;
          const Tensor *t = store_->find(h->variable))
        bytes += h->partitioned ? rowsOf(*t, h->rowOffset, h->rows).byteSize()
                                : t->byteSize();
    const bool stream = bytes > links_.config().chunkBytes;
    for (;;) {
      req.set_incarnation(l.incarnation);
      grpc::ClientContext ctx;
      setDeadline(&ctx, transferTimeout(bytes));
      rpc::PullReply reply;
      // Each value straight into the variable (or its shard's rows), as
      // its bytes arrive.
      ChunkReader reader(&reply, [&](std::vector<PayloadTarget> *targets) {
        for (const rpc::WireTensor &w : reply.values()) {
          auto h = byName.find(w.name());
          Tensor *t =
              h == byName.end() ? nullptr : store_->find(h->second->variable);
          if (!t)
            return errorStatus("'", plan::printable(w.name()),
                               "', which this task did not ask for");
          Tensor dst = h->second->partitioned
                           ? rowsOf(*t, h->second->rowOffset, h->second->rows)
                           : rowsOf(*t, 0, t->rank() ? t->dim(0) : 1);
          std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
          DType dtype = DType::F32;
          if (!plan::toDType(w.dtype(), &dtype).isOk() ||
              dtype != dst.dtype() || dims != dst.shape() ||
              w.size() != dst.byteSize())
            return errorStatus("'", plan::printable(w.name()), "' (", w.size(),
                               " bytes) for ", dst.describe());
          targets->push_back({dst.rawData(), w.size()});
        }
        return Status::ok();
      });
      Status refused = Status::ok();
      grpc::Status st;
      if (stream) {
        st = receiveStream(*l.raw, &ctx, kPullStreamMethod,
                           serializeMessage(req), &reader, &refused);
      } else {
        grpc::ByteBuffer response;
        st = rawCall(*l.raw, &ctx, kPullMethod, serializeMessage(req),
                     &response);
        if (st.ok())
          refused = reader.add(response);
      }
      if (refused.isOk() && st.ok())
        refused = reader.finish();
      if (!refused.isOk())
        return errorStatus(l.task.name, " answered a pull with ",
                           refused.message());
      if (!st.ok()) {
        lastRecoverable_ = recoverable(st);
        return rpcError("a pull", l.task, st);
      }
      if (reply.incarnation() != l.incarnation) {
        // Restored (or first seen): what this worker pushed before no
        // longer counts.
        l.incarnation = reply.incarnation();
        l.pushedAt = -1;
        req.set_min_version(0);
        if (!reply.ready())
          continue;
      }
      if (reply.ready()) {
        // The values are in place already (the reader put them there).
        l.pulledVersion = reply.version();
        break;
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
  if (const Tensor *t = store_->find("global_step"))
    *globalStep = t->data<int64_t>()[0];
  return Status::ok();
}

Status PsDriver::beforeStep(int64_t *globalStep, bool *done) {
  *done = false;
  for (;;) {
    lastRecoverable_ = false;
    Status s = pull(/*forEval=*/false, globalStep);
    if (s.isOk() || !lastRecoverable_ || !recoverInPlace_)
      return s;
    DTF_RETURN_IF_ERROR(recover(chief_, s));
  }
}

Status PsDriver::pushAll(const ValueOf &value) {
  // Each sparse gradient summed per unique id once (then cut per shard).
  std::map<std::string, SparseSum> sparse;
  std::vector<PsLink *> targets;
  for (PsLink &l : ps_) {
    if (l.keys.empty())
      continue;
    targets.push_back(&l);
    for (const plan::Transfer &r : l.keys) {
      const std::string base = r.key().substr(0, r.key().rfind("/part_"));
      if (!r.sparse() || sparse.count(base))
        continue;
      SparseSum sum;
      DTF_RETURN_IF_ERROR(sumSparse(r, value, &sum));
      sparse.emplace(base, std::move(sum));
    }
  }
  struct Outcome {
    Status status = Status::ok();
    bool recoverable = false;
    bool stale = false;
  };
  std::vector<Outcome> outcomes(targets.size());
  auto pushTo = [&](PsLink &l, Outcome &out) -> Status {
    rpc::PushRequest req;
    *req.mutable_caller() = links_.caller();
    req.set_version(l.pulledVersion);
    req.set_incarnation(l.incarnation);
    // Sent from the step's own outputs (or views of their rows): no copy.
    std::vector<Tensor> views;
    views.reserve(2 * l.keys.size());
    for (const plan::Transfer &r : l.keys) {
      const std::string &key = r.key();
      if (r.sparse()) {
        // The shard's ids (relative to its first row) and their rows.
        const SparseSum &sum =
            sparse.at(key.substr(0, key.rfind("/part_")));
        if (auto t = tables_.find(r.variable());
            t != tables_.end() && t->second.dynamic) {
          // A dynamic table's shard: its ids by hash, as they are.
          const size_t part = key.rfind("/part_");
          const int k = part == std::string::npos
                            ? 0
                            : std::atoi(key.c_str() + part + 6);
          std::vector<int64_t> at;
          for (size_t u = 0; u < sum.ids.size(); ++u)
            if (train::dynamicShardOf(sum.ids[u], t->second.parts) == k)
              at.push_back(int64_t(u));
          Tensor ids = Tensor::allocate(DType::I64, {int64_t(at.size())});
          std::vector<int64_t> dims = sum.rows.shape();
          dims[0] = int64_t(at.size());
          Tensor rows = Tensor::allocate(sum.rows.dtype(), dims);
          const size_t rowBytes =
              sum.rows.dim(0) ? sum.rows.byteSize() / size_t(sum.rows.dim(0))
                              : 0;
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
        const auto lo = std::lower_bound(sum.ids.begin(), sum.ids.end(),
                                         r.row_offset());
        const auto hi =
            std::lower_bound(lo, sum.ids.end(), r.row_offset() + r.rows());
        Tensor ids = Tensor::allocate(DType::I64, {int64_t(hi - lo)});
        int64_t *rel = ids.data<int64_t>();
        for (auto id = lo; id != hi; ++id)
          *rel++ = *id - r.row_offset();
        views.push_back(std::move(ids));
        describeTensor(key, views.back(), req.add_values());
        views.push_back(rowsOf(sum.rows, int64_t(lo - sum.ids.begin()),
                               int64_t(hi - lo)));
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
      out.recoverable = recoverable(st);
      return rpcError("a push", l.task, st);
    }
    rpc::PushReply reply;
    if (!parseMessage(response, &reply))
      return errorStatus(l.task.name,
                         " answered a push with a malformed reply");
    out.stale = reply.stale();
    if (!reply.stale())
      l.pushedAt = l.pulledVersion;
    if (sync_ && reply.stale())
      // Computed at an older version: the current update is open, join
      // it. At the current one (this replica already joined it, before a
      // restart): wait for it to complete.
      l.pushedAt = reply.version() == l.pulledVersion ? l.pulledVersion
                                                      : reply.version() - 1;
    return Status::ok();
  };
  // Every ps at once: a push waits for its ps to apply it.
  std::vector<std::thread> others;
  for (size_t i = 1; i < targets.size(); ++i)
    others.emplace_back([&, i] {
      outcomes[i].status = pushTo(*targets[i], outcomes[i]);
    });
  if (!targets.empty())
    outcomes[0].status = pushTo(*targets[0], outcomes[0]);
  for (std::thread &t : others)
    t.join();
  for (const Outcome &o : outcomes) {
    if (o.stale)
      ++stale_;
    if (!o.status.isOk()) {
      lastRecoverable_ = o.recoverable;
      return o.status;
    }
  }
  return Status::ok();
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
  lastRecoverable_ = false;
  Status s = pushAll(value);
  if (!s.isOk()) {
    if (!lastRecoverable_)
      return s;
    return recover(chief_, s);
  }
  const int64_t step = lastStep() + 1;
  if (chief_ && checkpointDue(step)) {
    lastRecoverable_ = false;
    s = save(step);
    if (!s.isOk() && lastRecoverable_)
      return recover(chief_, s);
    return s;
  }
  return Status::ok();
}

Status PsDriver::beforeEval() {
  int64_t step = 0;
  // The eval program reads the moving averages, which no step pulls.
  const bool wasSync = sync_;
  sync_ = false;
  Status s = pull(/*forEval=*/true, &step);
  sync_ = wasSync;
  return s;
}

Status PsDriver::done(int *workersDone) {
  if (ps_.empty()) {
    *workersDone = 0;
    return Status::ok();
  }
  rpc::DoneRequest req;
  *req.mutable_caller() = links_.caller();
  grpc::ClientContext ctx;
  setDeadline(&ctx, kCallTimeout);
  rpc::DoneReply reply;
  grpc::Status st = ps_[0].stub->WorkerDone(&ctx, req, &reply);
  if (!st.ok())
    return rpcError("reporting this worker done", ps_[0].task, st);
  *workersDone = reply.workers_done();
  return Status::ok();
}

void PsDriver::shutdownAll(const std::string &reason) {
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
