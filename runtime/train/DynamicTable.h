// Dynamic tables: the embedding tables of `embedding(ids, vocab = dynamic)`,
// whose rows are made at run time for the ids a model sees.
//
// A dynamic table is an ordinary variable of `capacity + partitions` rows
// (and its optimizer slots beside it) whose memory is reserved, not used
// (Tensor::reserveZeros): a page is taken from the system when a row on it
// is first written. Each partition (shard) k of P holds the ids whose hash
// is k modulo P, in its own rows [offset_k, offset_k + rows_k); its first
// row is reserved: it stays zero, ids without a row read it, and the sparse
// updates skip it (their `dynamic_shards` attribute). An id gets a row the
// `admit_after`-th time a training step sees it; its value row is drawn from
// the table's initializer, seeded by (the variable's seed, the id), so a row
// is the same whichever shard or task makes it; its slots start at their
// initializers' constants. Rows unused for `evict_after` steps are evicted
// and their rows reused.
//
// Checkpoints hold, per shard, the ids (`NAME-keys`, or `NAME/part_k-keys`
// with partitions) and the rows of the value and of each slot in that
// order (`NAME`, `NAME/Adagrad`, ... with `/part_k` appended when
// partitioned): the live rows only, written from where they are after the
// shard is compacted in place (no second copy).
#pragma once

#include "runtime/checkpoint/Checkpoint.h"
#include "schema/Status.h"
#include "runtime/core/Tensor.h"
#include "runtime/core/ThreadPool.h"
#include "runtime/exec/Rendezvous.h"
#include "runtime/exec/VariableStore.h"

#include "plan.pb.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dtf::train {

/// The shard (0 .. parts-1) that holds `id`: a mix of its bits modulo parts.
int dynamicShardOf(int64_t id, int64_t parts);

/// Row counts of one dynamic table, summed over the shards this process
/// holds.
struct DynamicTableStats {
  int64_t live = 0;     // rows held now
  int64_t capacity = 0; // rows it can hold (the reserved rows excluded)
  int64_t created = 0;  // rows made so far
  int64_t evicted = 0;  // rows evicted so far
  int64_t refused = 0;  // admissions refused because the shard was full
};

/// An open-addressing hash map from int64 ids to V (linear probing,
/// deletion by backward shift): one probe of a flat array per lookup, no
/// allocation per id.
template <typename V> class IdMap {
public:
  size_t size() const { return count_; }
  V *find(int64_t id) {
    if (!count_)
      return nullptr;
    for (size_t i = home(id);; i = (i + 1) & mask_) {
      if (!used_[i])
        return nullptr;
      if (keys_[i] == id)
        return &vals_[i];
    }
  }
  /// The value of `id`, made from `init` when missing.
  V &at(int64_t id, V init) {
    if ((count_ + 1) * 2 > keys_.size())
      grow();
    size_t i = home(id);
    for (; used_[i]; i = (i + 1) & mask_)
      if (keys_[i] == id)
        return vals_[i];
    used_[i] = 1;
    keys_[i] = id;
    vals_[i] = init;
    ++count_;
    return vals_[i];
  }
  bool erase(int64_t id) {
    if (!count_)
      return false;
    size_t i = home(id);
    for (; used_[i] && keys_[i] != id; i = (i + 1) & mask_) {
    }
    if (!used_[i])
      return false;
    // Backward shift: move later entries of the run into the hole when
    // their home does not lie in (hole, j].
    for (size_t j = (i + 1) & mask_; used_[j]; j = (j + 1) & mask_) {
      const size_t k = home(keys_[j]);
      const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (stays)
        continue;
      keys_[i] = keys_[j];
      vals_[i] = vals_[j];
      i = j;
    }
    used_[i] = 0;
    --count_;
    return true;
  }
  void clear() {
    keys_.clear();
    vals_.clear();
    used_.clear();
    count_ = 0;
    mask_ = 0;
  }
  template <typename F> void forEach(F &&f) const {
    for (size_t i = 0; i < used_.size(); ++i)
      if (used_[i])
        f(keys_[i], vals_[i]);
  }

private:
  size_t home(int64_t id) const {
    uint64_t z = uint64_t(id) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return size_t(z ^ (z >> 31)) & mask_;
  }
  void grow() {
    std::vector<int64_t> keys = std::move(keys_);
    std::vector<V> vals = std::move(vals_);
    std::vector<uint8_t> used = std::move(used_);
    const size_t n = std::max<size_t>(16, used.size() * 2);
    keys_.assign(n, 0);
    vals_.assign(n, V());
    used_.assign(n, 0);
    mask_ = n - 1;
    count_ = 0;
    for (size_t i = 0; i < used.size(); ++i)
      if (used[i])
        at(keys[i], vals[i]);
  }
  std::vector<int64_t> keys_;
  std::vector<V> vals_;
  std::vector<uint8_t> used_;
  size_t count_ = 0, mask_ = 0;
};

class DynamicTable {
public:
  /// The table `var` (its rows: plan rows), held here in `value` for the
  /// shards `parts` (global shard indices; all of them in one process).
  /// `rowOffsets[i]` is where shard parts[i] starts in `value` and its
  /// slots. `slots` are the optimizer slots (plan variable, tensor).
  DynamicTable(const plan::Variable &var, uint64_t runSeed, Tensor *value,
               std::vector<std::pair<const plan::Variable *, Tensor *>> slots,
               std::vector<int> parts, std::vector<int64_t> rowOffsets,
               std::vector<int64_t> rowCounts);

  const std::string &name() const { return var_.name(); }
  int64_t numParts() const { return numParts_; }

  /// Rows (indices into the held tensors) of `n` ids: see DynamicRows.
  /// An id of a shard this process does not hold is an error.
  Status rows(const int64_t *ids, int64_t n, bool create, int64_t step,
              int64_t *out);
  /// Where new rows are initialized (several at once); null: inline.
  void setThreadPool(ThreadPool *pool) { pool_ = pool; }
  /// True when `id` belongs to a shard held here.
  bool holdsShardOf(int64_t id) const {
    return partAt_[size_t(dynamicShardOf(id, numParts_))] >= 0;
  }
  /// Evicts rows unused for evict_after steps (every evict_after / 8
  /// steps at most; none when evict_after is 0), and forgets ids seen too
  /// few times to be admitted when unseen for as long.
  void sweep(int64_t step);
  /// Forgets every row (the plan's initial, empty table).
  void clear();

  /// The checkpoint's name of shard `part` of variable `variable`.
  std::string savedName(const std::string &variable, int part) const;
  /// Compacts each held shard in place and appends its tensors: the keys
  /// (kept alive in `owned`) and views of the live rows of the value and
  /// the slots. The table must not change until the tensors are written.
  void save(std::vector<checkpoint::SavedTensor> *out,
            std::vector<std::unique_ptr<Tensor>> *owned);
  /// Reads the held shards back from a checkpoint written by save(), in
  /// place; every row is marked used at `step`.
  Status restore(const checkpoint::CheckpointReader &reader, int64_t step);
  /// True when the checkpoint tensor `name` is one save() writes.
  bool savesTensor(const std::string &name) const;

  DynamicTableStats stats() const;
  /// The table's variable and its slots' (the plan's names).
  std::vector<std::string> variableNames() const;

private:
  struct Part {
    int index = 0;        // global shard index
    int64_t offset = 0;   // first row in the tensors
    int64_t rows = 0;     // rows, the reserved one included
    IdMap<int64_t> rowOf; // id -> local row (>= 1)
    // Ids not admitted yet: sightings and the last step seen.
    IdMap<std::pair<int64_t, int64_t>> pending;
    std::vector<int64_t> idOf;     // local row -> id
    std::vector<int64_t> lastUsed; // local row -> step
    std::vector<int64_t> freeRows;
    int64_t next = 1;           // rows [0, next) were handed out at least once
    std::vector<int64_t> fresh; // rows made by this call, to initialize
    int64_t created = 0, evicted = 0, refused = 0;
    bool warnedFull = false;
    mutable std::mutex mu;
  };
  int64_t makeRow(Part &part, int64_t id, int64_t step);
  void initializeRow(int64_t row, int64_t id);
  void moveRow(Part &part, int64_t from, int64_t to);
  Part *partFor(int64_t id, Status *error);

  // An initializer as numbers: kind, then (mean, stddev), (min, max) or
  // the constant.
  struct Init {
    enum Kind { kConstant, kUniform, kNormal, kTruncated } kind = kConstant;
    double a = 0, b = 0;
  };
  static Init initOf(const plan::Initializer &init);
  plan::Variable var_;
  Init valueInit_;
  std::vector<float> slotInit_; // per slot: its constant
  uint64_t seed_ = 0;
  int64_t width_ = 0;
  int64_t numParts_ = 1;
  int64_t admitAfter_ = 1, evictAfter_ = 0;
  std::atomic<int64_t> lastSweep_{0};
  Tensor *value_;
  ThreadPool *pool_ = nullptr;
  std::vector<std::pair<const plan::Variable *, Tensor *>> slots_;
  std::vector<std::unique_ptr<Part>> parts_;
  std::vector<int> partAt_; // global shard index -> parts_ index, or -1
};

/// The dynamic tables of one process, by name: what its executors'
/// dtf.dynamic_rows ops use.
class DynamicTables : public exec::DynamicRows {
public:
  /// The tables of `plan` whose variables (whole, with their slots) are in
  /// `store`: training in one process.
  static Status create(const plan::Plan &plan, uint64_t runSeed,
                       exec::VariableStore *store,
                       std::unique_ptr<DynamicTables> *out);

  /// Adds a table under `key` (its variable's name when empty; a ps
  /// holding several shards of one table adds each under its shard's name).
  void add(std::unique_ptr<DynamicTable> table, std::string key = "");
  /// The table under `key` (see add), or null.
  DynamicTable *find(const std::string &key);
  bool empty() const { return tables_.empty(); }
  /// True when `variable` (a plan name) is a dynamic table or one of its
  /// slots.
  bool holdsVariable(const std::string &variable) const;
  /// True when the checkpoint tensor `name` belongs to one of the tables.
  bool savesTensor(const std::string &name) const;

  Status rows(const std::string &table, const Tensor &ids, bool create,
              int64_t step, Tensor *out) override;
  void sweep(int64_t step);
  void setThreadPool(ThreadPool *pool);
  void clear();
  void save(std::vector<checkpoint::SavedTensor> *out,
            std::vector<std::unique_ptr<Tensor>> *owned);
  Status restore(const checkpoint::CheckpointReader &reader, int64_t step);
  /// "ads/embeddings: 1234 of 100000 rows (1300 made, 66 evicted)" per
  /// table, "; "-separated.
  std::string describe() const;

private:
  std::map<std::string, std::unique_ptr<DynamicTable>> tables_;
  std::map<std::string, std::string> variables_; // variable -> a key
};

/// Every variable of `store` from checkpoint `reader`, in place: the
/// dynamic tables among them (`tables`, may be null) by their live rows,
/// the others whole. For the readers of a job's checkpoints (the evaluator,
/// --predict); `what` names the checkpoint in messages.
Status restoreVariables(const checkpoint::CheckpointReader &reader,
                        const std::string &what, exec::VariableStore *store,
                        DynamicTables *tables);

} // namespace dtf::train
