// PsClient's embedding rows: lookups of a step's unique ids on the ps
// shards that hold them, and sparse gradients summed per unique id before
// pushTo cuts them per shard.
#include "runtime/distributed/PsClient.h"

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

Status PsClient::lookup(const std::string &variable, const Tensor &ids,
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
    call->req.set_name(shard.shards > 1
                           ? variable + "/part_" + std::to_string(shard.shard)
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
    call->link->stub->async()->Lookup(&call->ctx, &call->req, &call->reply,
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
                         call->reply.rows().size(), " bytes instead of ", want);
    std::memcpy(rows.data() + call->first * rowBytes, call->reply.rows().data(),
                want);
  }
  char *dst = static_cast<char *>(out->rawData());
  for (size_t i = 0; i < all.size(); ++i)
    std::memcpy(dst + i * rowBytes, rows.data() + size_t(slot[i]) * rowBytes,
                rowBytes);
  return Status::ok();
}

Status PsClient::sumSparse(const plan::Transfer &send, const ValueOf &value,
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

Status PsClient::addSparse(SparseSum *sum, const SparseSum &more) {
  const Tensor &a = sum->rows, &b = more.rows;
  if (a.dtype() != b.dtype() || a.rank() != b.rank())
    return errorStatus("sparse gradients of one table differ: ", a.describe(),
                       " and ", b.describe());
  const int64_t width = a.dim(0)   ? a.numElements() / a.dim(0)
                        : b.dim(0) ? b.numElements() / b.dim(0)
                                   : 0;
  std::vector<int64_t> ids;
  ids.reserve(sum->ids.size() + more.ids.size());
  std::set_union(sum->ids.begin(), sum->ids.end(), more.ids.begin(),
                 more.ids.end(), std::back_inserter(ids));
  std::vector<int64_t> dims = a.shape();
  dims[0] = int64_t(ids.size());
  Tensor rows = Tensor::allocate(a.dtype(), dims);
  auto merge = [&](auto tag) {
    using T = decltype(tag);
    const T *x = a.data<T>(), *y = b.data<T>();
    T *out = rows.data<T>();
    size_t i = 0, j = 0;
    for (size_t u = 0; u < ids.size(); ++u, out += width) {
      const bool inA = i < sum->ids.size() && sum->ids[i] == ids[u];
      const bool inB = j < more.ids.size() && more.ids[j] == ids[u];
      for (int64_t c = 0; c < width; ++c)
        out[c] = inA && inB
                     ? x[int64_t(i) * width + c] + y[int64_t(j) * width + c]
                 : inA ? x[int64_t(i) * width + c]
                       : y[int64_t(j) * width + c];
      i += inA;
      j += inB;
    }
  };
  if (a.dtype() == DType::F64)
    merge(double());
  else
    merge(float());
  sum->ids = std::move(ids);
  sum->rows = std::move(rows);
  return Status::ok();
}

// Each sparse gradient of the step summed per unique id once (then cut per
// shard by pushTo).
Status PsClient::sumSparseSends(const ValueOf &value,
                                SparseSums *sparseOut) const {
  SparseSums &sparse = *sparseOut;
  for (const PsLink &l : ps_) {
    for (const plan::Transfer &r : l.keys) {
      const std::string base = r.key().substr(0, r.key().rfind("/part_"));
      if (!r.sparse() || sparse.count(base))
        continue;
      SparseSum sum;
      DTF_RETURN_IF_ERROR(sumSparse(r, value, &sum));
      sparse.emplace(base, std::move(sum));
    }
  }
  // A table gathered more than once has a pair per gather ("emb:grad:0",
  // "emb:grad:1"): their rows go summed as the first pair (gather 0's
  // sum plus gather 1's, ...), the others empty. So every replica's
  // gradient reaches the ps whole, which (in sync mode) adds the replicas'
  // as it adds dense gradients: (A0 + A1) + (B0 + B1) for each row, the
  // order the dense path (and one process) sums in.
  std::map<std::string, std::vector<std::string>>
      pairsOf; // "emb:grad" -> bases
  for (const auto &[base, sum] : sparse)
    pairsOf[base.substr(0, base.rfind(':'))].push_back(base);
  for (auto &[stem, bases] : pairsOf) {
    if (bases.size() < 2)
      continue;
    std::sort(bases.begin(), bases.end(),
              [](const std::string &a, const std::string &b) {
                return std::atoi(a.c_str() + a.rfind(':') + 1) <
                       std::atoi(b.c_str() + b.rfind(':') + 1);
              });
    SparseSum merged = std::move(sparse.at(bases[0]));
    for (size_t k = 1; k < bases.size(); ++k) {
      SparseSum &next = sparse.at(bases[k]);
      DTF_RETURN_IF_ERROR(addSparse(&merged, next));
      next.ids.clear();
      std::vector<int64_t> dims = next.rows.shape();
      if (!dims.empty())
        dims[0] = 0;
      next.rows = Tensor::allocate(next.rows.dtype(), dims);
    }
    sparse.at(bases[0]) = std::move(merged);
  }
  return Status::ok();
}

} // namespace dtf::dist
