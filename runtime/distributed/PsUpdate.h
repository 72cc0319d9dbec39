// PsUpdate: the apply core of a ps task: its ps_update program, the keys a
// push must carry (each checked against what the update takes before
// anything is allocated for it), and running the update on a push's values.
#pragma once

#include "runtime/distributed/PsStore.h"
#include "runtime/distributed/TransferBuffers.h"
#include "runtime/exec/Executor.h"

#include "plan.pb.h"
#include "service.pb.h"

#include <memory>
#include <string>
#include <vector>

namespace dtf::dist {
struct PayloadTarget;
}

namespace dtf::dist::ps {

// Whether the recv'd value `value` is what the ps's update adds to the
// global step (the operand of an assign_add to the global_step variable).
bool feedsGlobalStep(const plan::Plan &plan, const plan::Program &program,
                     int32_t value);

class PsUpdate {
public:
  /// `name`: the ps task's, for messages.
  explicit PsUpdate(std::string name) : name_(std::move(name)) {}

  /// The ps program of ps `index` over `store`'s variables, and its keys.
  Status setUp(const plan::Plan &plan, const plan::Placement &placement,
               int index, PsStore &store);

  /// Where a push's values get their buffers (null: Tensor::allocate).
  void lendFrom(TransferBuffers *buffers) { buffers_ = buffers; }

  /// The push keys, in the order a push's values are held.
  const std::vector<std::string> &keys() const { return keys_; }
  /// Per key: the replicas' values are concatenated (a sparse gradient's
  /// ids and rows), not summed.
  const std::vector<bool> &concat() const { return concat_; }
  /// mixed_float16's dynamic loss scale: the key of the flag the update's
  /// dtf.skip_updates_unless reads (-1: none), and per key whether a push
  /// whose flag is false may leave it out (Transfer.skippable).
  int flagKey() const { return flagKey_; }
  const std::vector<bool> &skippable() const { return skippable_; }

  /// The tensors a push's header announces, one per key, each checked to be
  /// what the update takes (bf16 for f32: see widen; an encoding of an f32
  /// gradient: see decode) before it is allocated; `targets` gets where
  /// their bytes go. Errors are the caller's (INVALID_ARGUMENT).
  Status prepare(const rpc::PushRequest &req, std::vector<Tensor> *values,
                 std::vector<PayloadTarget> *targets) const;

  /// Compressed gradients (--compress-push) become the dense f32 gradients
  /// they encode, once their bytes arrived; an error naming a malformed one.
  Status decode(const rpc::PushRequest &req, std::vector<Tensor> *values) const;

  /// Values that crossed as bfloat16 (--wire bf16) become the f32 the
  /// update takes, once their bytes arrived.
  void widen(std::vector<Tensor> *values) const;

  /// A push's gradients must be finite, and its integer operands (the
  /// global step's increment) 1: one update advances the step by one; a
  /// sparse gradient's ids must be in its shard. A skippable value may be
  /// absent only when the push's loss-scale flag is false. `refusal` gets a
  /// line for the ps's log when the push oversteps (not only malformed);
  /// `sparseRows` counts the sparse rows checked.
  Status checkValues(const std::vector<Tensor> &values, const std::string &who,
                     std::string *refusal, uint64_t *sparseRows) const;

  /// Runs the update on `values` (one per key) at update number `version`;
  /// a dynamic table's ids become its rows first. Absent (skippable)
  /// values are fed zeros: the guard skips every update that reads them.
  Status run(std::vector<Tensor> &values, int64_t version);

private:
  int keyIndex(const std::string &key) const {
    for (size_t k = 0; k < keys_.size(); ++k)
      if (keys_[k] == key)
        return int(k);
    return -1;
  }
  Status prepareEncoded(const rpc::WireTensor &w, int k,
                        std::vector<Tensor> *values,
                        std::vector<PayloadTarget> *targets) const;
  void addKeys(const plan::Plan &plan, const plan::Program &program,
               PsStore &store);

  // A tensor for a push's value, from buffers_ when set.
  Tensor allocate(DType dtype, std::vector<int64_t> dims) const {
    return buffers_ ? buffers_->allocate(dtype, std::move(dims))
                    : Tensor::allocate(dtype, std::move(dims));
  }

  const std::string name_;
  TransferBuffers *buffers_ = nullptr;
  std::unique_ptr<exec::Executor> update_;
  std::vector<std::string> keys_;
  std::vector<plan::TensorType> expected_; // what the update takes per key
  std::vector<bool> stepKey_; // the key feeds the global step's increment
  // Sparse gradients: a key whose values replicas concatenate (ids, rows)
  // rather than sum; for an ids key, the rows of the shard its ids index.
  std::vector<bool> concat_;
  std::vector<int64_t> idRows_;
  // For each key the dynamic table its ids index (null for the others).
  std::vector<train::DynamicTable *> dynamicKey_;
  std::vector<bool> skippable_;
  int flagKey_ = -1;
};

} // namespace dtf::dist::ps
