// Rendezvous: where the dtf.send and dtf.recv ops of a model-parallel step
// meet. A send hands a tensor to the stage that receives it, under a key
// unique per step; a recv waits for its key and step.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dtf::exec {

/// The executor's side: a dtf.send calls send() with its input, a dtf.recv
/// calls recv() for its output. Both may block; a send returns once the
/// tensor is on its way (its memory may change after that).
class Rendezvous {
public:
  virtual ~Rendezvous() = default;
  virtual Status send(const std::string &key, int peer, uint64_t step,
                      const Tensor &value) = 0;
  virtual Status recv(const std::string &key, int peer, uint64_t step,
                      Tensor *out) = 0;
};

/// Where a dtf.ps_gather (an embedding table looked up on its ps: dtfc's
/// lookup cut, Plan.lookups) gets its rows: lookup() fills `out` with the
/// rows of `variable` at `ids` (any integer tensor; out: ids' shape, then a
/// row's), asking only for the unique ids.
class RowLookup {
public:
  virtual ~RowLookup() = default;
  /// `create`: a training step's lookup of a dynamic table, which makes
  /// rows for the ids admitted (see DynamicRows).
  virtual Status lookup(const std::string &variable, const Tensor &ids,
                        bool create, Tensor *out) = 0;
};

/// Where a dtf.dynamic_rows (the rows of a dynamic table, `embedding(vocab =
/// dynamic)`) gets them: rows() fills `out` (i64, the shape of `ids`) with
/// the row of `table` that holds each id, the reserved row (of zeros) for
/// ids without one. With `create` (training) it counts the ids seen, makes
/// rows for those admitted, and marks them used at `step`.
class DynamicRows {
public:
  virtual ~DynamicRows() = default;
  virtual Status rows(const std::string &table, const Tensor &ids, bool create,
                      int64_t step, Tensor *out) = 0;
};

/// The tensors that arrived for this stage, by key and step: a thread-safe
/// mailbox. put() from the sender (an RPC handler, or another thread),
/// take() from the recv.
class RendezvousTable {
public:
  /// Stores `value` (its buffer is taken over) for (key, step).
  void put(const std::string &key, uint64_t step, Tensor value);

  /// Waits until (key, step) arrives and moves it to `out`. Every `every`
  /// it calls `waiting(seconds so far)`, which returns false to give up with
  /// the status it sets in `why` (a lost peer, a timeout, an interrupt).
  Status take(const std::string &key, uint64_t step, Tensor *out,
              std::chrono::milliseconds every,
              const std::function<bool(double, Status *)> &waiting);

  /// Drops what arrived for steps before `step` (a step that failed midway).
  void dropBefore(uint64_t step);
  size_t size() const;

private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<uint64_t, std::string>, Tensor> arrived_;
};

/// Stages of one process (tests, or a replica run in threads): a send
/// copies into the receiving stage's table.
class LocalRendezvous : public Rendezvous {
public:
  /// `tables[k]` is stage k's mailbox; `self` the stage using this one.
  LocalRendezvous(std::vector<RendezvousTable *> tables, int self,
                  double timeoutSeconds = 60)
      : tables_(std::move(tables)), self_(self), timeout_(timeoutSeconds) {}
  Status send(const std::string &key, int peer, uint64_t step,
              const Tensor &value) override;
  Status recv(const std::string &key, int peer, uint64_t step,
              Tensor *out) override;

private:
  std::vector<RendezvousTable *> tables_;
  int self_;
  double timeout_;
};

} // namespace dtf::exec
