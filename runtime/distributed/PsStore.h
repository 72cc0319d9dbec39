// PsStore: the tensors one ps task holds (its variables or shards of them,
// and the dynamic tables among them): made from the plan's initializers,
// restored from a checkpoint in place, and listed for a checkpoint. The
// service locks around it; it locks nothing itself.
#pragma once

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/exec/VariableStore.h"
#include "schema/Placement.h"
#include "runtime/train/DynamicTable.h"

#include "plan.pb.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtf::dist::ps {

class PsStore {
public:
  PsStore(const plan::Plan &plan, const plan::Placement &placement, int index)
      : plan_(plan), placement_(placement), index_(index) {}

  /// This ps's variables (or shards), initialized from the plan, and its
  /// dynamic tables.
  Status setUp();

  exec::VariableStore &variables() { return variables_; }
  const exec::VariableStore &variables() const { return variables_; }
  /// What this ps holds, in the plan's order.
  const std::vector<plan::HeldTensor> &held() const { return held_; }
  /// The held tensors' names here ("emb/part_1").
  const std::vector<std::string> &names() const { return names_; }
  train::DynamicTables &dynamic() { return dynamic_; }
  const train::DynamicTables &dynamic() const { return dynamic_; }
  /// The dynamic table held under `name`, or null.
  train::DynamicTable *dynamicTable(const std::string &name) const {
    auto it = dynamicByName_.find(name);
    return it == dynamicByName_.end() ? nullptr : it->second;
  }
  /// The global step, or -1 when another ps holds it.
  int64_t globalStep() const;

  /// The plan's initial value of a tensor this ps holds (rows of a shard
  /// made without the whole variable).
  Status initialShard(const plan::HeldTensor &h, Tensor *out) const;
  /// Every held tensor back to the plan's initializers (a dynamic table's
  /// rows are made again as ids come).
  Status resetToInitializers();

  /// Checks that checkpoint `reader` holds every tensor of this ps, of its
  /// type; changes nothing.
  Status checkRestorable(const checkpoint::CheckpointReader &reader) const;
  /// Reads every held tensor from `reader` straight into the variables.
  /// `version`: the updates the restored variables have seen (the step at
  /// which a dynamic table's restored rows count as last used).
  Status restore(const checkpoint::CheckpointReader &reader, int64_t version);

  /// The rows of table `name` at `ids` (a dynamic table's ids become its
  /// rows in place, made when `create`, at update `version`) into *rows;
  /// *unknown when this ps holds no such table. At most the table's size is
  /// answered, so a lookup cannot ask for more bytes than the ps holds.
  /// `bf16`: an f32 table's rows are written as bfloat16 (rounded to
  /// nearest even; --wire bf16), and *narrowed says they were.
  Status lookup(const std::string &name, std::vector<int64_t> &ids, bool create,
                int64_t version, bool bf16, std::string *rows, bool *unknown,
                bool *narrowed);

  /// The tensors of this ps's shard of a checkpoint, written from where
  /// they are (a dynamic table's live rows: dynamic().save).
  void listForSave(std::vector<checkpoint::SavedTensor> *tensors) const;

private:
  Status addDynamicTables();

  const plan::Plan &plan_;
  const plan::Placement &placement_;
  const int index_;
  std::vector<plan::HeldTensor> held_;
  std::vector<std::string> names_;
  bool holdsStep_ = false;
  exec::VariableStore variables_;
  // The dynamic tables among the shards held (by their names here, "emb" or
  // "emb/part_1").
  train::DynamicTables dynamic_;
  std::map<std::string, train::DynamicTable *> dynamicByName_;
};

} // namespace dtf::dist::ps
