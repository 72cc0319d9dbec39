// PsClient::lookup: the rows of a step's unique ids, one call per ps shard
// that holds any of them, all in flight at once.
#include "runtime/distributed/PsClient.h"

#include "runtime/plan/PlanTypes.h"
#include "runtime/train/DynamicTable.h"

#include <algorithm>
#include <cstring>

namespace dtf::dist {

Status PsClient::lookup(const std::string &variable, const Tensor &ids,
                        bool create, Tensor *out) {
  auto found = tables_.find(variable);
  if (found == tables_.end())
    return errorStatus("'", plan::printable(variable),
                       "' is not a table this task looks up on the ps");
  const PsTable &table = found->second;
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
    // --wire bf16: an f32 table's rows cross as bfloat16 (half the bytes).
    if (links_.config().wireBf16 && table.dtype == DType::F32)
      call->req.set_wire_dtype(plan::BF16);
    setDeadline(&call->ctx, transferTimeout(call->count * rowBytes));
    calls.push_back(std::move(call));
  }
  // Every shard's lookup at once, on a queue this thread waits on and polls
  // the channels from: a reply wakes it directly (no callback thread between).
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<grpc::ClientAsyncResponseReader<rpc::LookupReply>>>
      readers;
  for (auto &call : calls) {
    readers.push_back(
        call->link->stub->PrepareAsyncLookup(&call->ctx, call->req, &cq));
    readers.back()->StartCall();
    readers.back()->Finish(&call->reply, &call->status, call.get());
  }
  void *tag = nullptr;
  bool ok = false;
  for (size_t n = 0; n < calls.size() && cq.Next(&tag, &ok); ++n) {
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  for (auto &call : calls) {
    if (!call->status.ok()) {
      lastRecoverable_ = recoverable(call->status);
      lookupFailed_ = true;
      return rpcError("a lookup of " + call->req.name(), call->link->task,
                      call->status);
    }
    // Rows narrowed to bfloat16 only where this task asked for them, so that
    // a reply's dtype and size are both checked before anything is read.
    const bool bf16 = call->reply.rows_dtype() == plan::BF16;
    if (bf16 && call->req.wire_dtype() != plan::BF16)
      return errorStatus(call->link->task.name, " answered a lookup of ",
                         call->req.name(), " in bfloat16, which ",
                         links_.caller().task(), " did not ask for");
    const size_t want = call->count * rowBytes / (bf16 ? 2 : 1);
    if (call->reply.rows().size() != want)
      return errorStatus(call->link->task.name, " answered a lookup of ",
                         call->count, " rows of ", call->req.name(), " with ",
                         call->reply.rows().size(), " bytes instead of ", want);
    if (bf16)
      widenFromBf16(
          reinterpret_cast<const uint16_t *>(call->reply.rows().data()),
          int64_t(call->count * rowBytes / sizeof(float)),
          reinterpret_cast<float *>(rows.data() + call->first * rowBytes));
    else
      std::memcpy(rows.data() + call->first * rowBytes,
                  call->reply.rows().data(), want);
  }
  char *dst = static_cast<char *>(out->rawData());
  for (size_t i = 0; i < all.size(); ++i)
    std::memcpy(dst + i * rowBytes, rows.data() + size_t(slot[i]) * rowBytes,
                rowBytes);
  return Status::ok();
}

} // namespace dtf::dist
