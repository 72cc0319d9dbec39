// The embedding rows a worker moves: ids, sparse gradients summed per
// unique id, and their cut per shard for a push (SparseRows.h).
#include "runtime/distributed/SparseRows.h"

#include "runtime/distributed/WorkerLinks.h"
#include "runtime/train/DynamicTable.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace dtf::dist {

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

Status sumSparse(const plan::Transfer &send, const ValueOf &value,
                 SparseSum *out) {
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

Status addSparse(SparseSum *sum, const SparseSum &more) {
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
Status sumSparseSends(const std::vector<PsLink> &links, const ValueOf &value,
                      SparseSums *sparseOut) {
  SparseSums &sparse = *sparseOut;
  for (const PsLink &l : links) {
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


void cutForShard(const plan::Transfer &r, const SparseSum &sum,
                 const PsTables &tables, Tensor *idsOut, Tensor *rowsOut) {
  const std::string &key = r.key();
  if (auto t = tables.find(r.variable());
      t != tables.end() && t->second.dynamic) {
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
    *idsOut = std::move(ids);
    *rowsOut = std::move(rows);
    return;
  }
  const auto lo =
      std::lower_bound(sum.ids.begin(), sum.ids.end(), r.row_offset());
  const auto hi =
      std::lower_bound(lo, sum.ids.end(), r.row_offset() + r.rows());
  Tensor ids = Tensor::allocate(DType::I64, {int64_t(hi - lo)});
  int64_t *rel = ids.data<int64_t>();
  for (auto id = lo; id != hi; ++id)
    *rel++ = *id - r.row_offset();
  *idsOut = std::move(ids);
  *rowsOut = rowsOf(sum.rows, int64_t(lo - sum.ids.begin()), int64_t(hi - lo));
}

} // namespace dtf::dist
