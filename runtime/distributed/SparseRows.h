// The embedding rows a worker moves to and from the ps tasks: the ids of a
// step as int64 and their unique values, the tables as the ps hold them,
// and a step's sparse gradients summed per unique id, then cut per shard
// for each ps's push. No calls: PsClient makes those.
#pragma once

#include "runtime/core/Tensor.h"
#include "schema/Placement.h"
#include "schema/Status.h"

#include "plan.pb.h"
#include "service.pb.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dtf::dist {

struct PsLink;

/// A step's value for a send's key; null when the step made none.
using ValueOf = std::function<const Tensor *(const std::string &)>;

/// The ids of a tensor of any integer type as int64.
Status idsOf(const Tensor &ids, std::vector<int64_t> *out);
/// The ascending unique values of `ids`, and for each position the index of
/// its value among them: one sort of (id, position) pairs.
void uniqueIds(const std::vector<int64_t> &ids, std::vector<int64_t> *unique,
               std::vector<uint32_t> *slot);

/// A table a step looks up on the ps: its shards (ps, rows) and row shape.
struct PsTable {
  std::vector<plan::PlacedShard> shards;
  int64_t rows = 0;
  std::vector<int64_t> rowDims;
  DType dtype = DType::F32;
  // A dynamic table: shards hold ids by hash (train::dynamicShardOf), and
  // the ids travel as they are.
  bool dynamic = false;
  int64_t parts = 1;
};
using PsTables = std::map<std::string, PsTable>;

/// A step's sparse gradient, its rows summed per unique id (ascending).
struct SparseSum {
  std::vector<int64_t> ids;
  Tensor rows;
};
/// By the send's key without its "/part_K".
using SparseSums = std::map<std::string, SparseSum>;

/// The sparse gradient of `send` (the step's ids and rows) summed per id.
Status sumSparse(const plan::Transfer &send, const ValueOf &value,
                 SparseSum *out);
/// sum += more, by id (both ascending): the rows of an id in both are added,
/// sum's first.
Status addSparse(SparseSum *sum, const SparseSum &more);
/// Each sparse gradient the links take, summed per unique id once; the
/// gathers of one table summed into the first pair.
Status sumSparseSends(const std::vector<PsLink> &links, const ValueOf &value,
                      SparseSums *sparse);

/// The ids (relative to the shard's first row; a dynamic table's as they
/// are) and rows of `sum` that shard recv `r` takes: *ids a new tensor,
/// *rows a view of sum's rows (a dynamic table's: a copy).
void cutForShard(const plan::Transfer &r, const SparseSum &sum,
                 const PsTables &tables, Tensor *ids, Tensor *rows);

} // namespace dtf::dist
