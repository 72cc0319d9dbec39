// Sharded checkpoints: each ps writes one data file with the variables (or
// axis-0 slices of variables) it holds, the chief writes the index last; a
// reader assembles whole tensors from any number of shards. The format is in
// docs/checkpoint-format.md.
//
// A checkpoint of step S in directory DIR is
//   DIR/ckpt-S.data-K-of-N   one per shard K of N (written by writeShard)
//   DIR/ckpt-S.index         written by writeIndex once every shard is written
// and DIR/checkpoint, a text file naming the latest and the kept ones (for
// people and tools; readers find checkpoints by their index files).
//
// Every file is written under a hidden temporary name in the same directory,
// fsynced, renamed into place and the directory fsynced, so a crash leaves
// either the old or the new file whole, and a checkpoint exists only once its
// index does. Data files carry a CRC32C per tensor and over their metadata;
// a damaged file is reported with the file and the tensor.
//
// Distributed use (ps/worker runtime):
//   each ps task k of n:  writeShard(dir, step, k, n, {its variables/slices})
//   the chief, after all: writeIndex(dir, step, n, keep)
//   at start, the chief:  chooseCheckpoint(dir, policy, ...) (the newest
//                         checkpoint, checked whole; a damaged one is refused
//                         unless the policy is kLatestValid), then
//                         CheckpointReader::open(...) and read (or readRows
//                         for one ps's slice) by name; the number of ps may
//                         differ from the writer's.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtf::checkpoint {

/// One tensor of a shard: a whole variable, or rows [rowOffset, rowOffset +
/// value->dim(0)) of a variable partitioned along axis 0 whose whole shape is
/// `fullShape`. A scalar counts as one row.
struct SavedTensor {
  std::string name;
  std::vector<int64_t> fullShape;
  int64_t rowOffset = 0;
  /// Must stay alive (and unchanged) during writeShard.
  const Tensor *value = nullptr;

  /// The whole of `value` under `name`.
  static SavedTensor whole(std::string name, const Tensor &value) {
    return {std::move(name), value.shape(), 0, &value};
  }
};

/// "DIR/ckpt-S.index" and "DIR/ckpt-S.data-K-of-N".
std::string indexPath(const std::string &dir, int64_t step);
std::string dataPath(const std::string &dir, int64_t step, int shard,
                     int numShards);
/// "ckpt-S", the checkpoint's name in messages.
std::string checkpointName(int64_t step);
/// "DIR/ckpt-S", the prefix of the checkpoint's files (what a tool that
/// reads it says it read).
std::string checkpointPath(const std::string &dir, int64_t step);

/// Writes shard `shard` of `numShards` of the checkpoint of `step` (creating
/// `dir` when missing). Tensor names must be unique within the shard; the
/// dtypes and shapes must be consistent with fullShape. Fails when the
/// checkpoint of `step` already has an index (a finished checkpoint is never
/// rewritten in place; a restarted run that reaches a step it saved before
/// should skip the save).
Status writeShard(const std::string &dir, int64_t step, int shard,
                  int numShards, const std::vector<SavedTensor> &tensors);

/// Writes the index of the checkpoint of `step` once all `numShards` data
/// files are written: checks that every one is there and whole, that the
/// shards agree on each variable's dtype and shape and that the slices of a
/// variable cover its rows exactly once. Then updates DIR/checkpoint and,
/// with keep > 0, deletes all but the `keep` newest checkpoints (only after
/// the new index is durable; the index of an old one goes first, so a crash
/// midway never leaves a checkpoint that looks complete but is not).
/// Leftover temporary files of older steps are removed too.
Status writeIndex(const std::string &dir, int64_t step, int numShards,
                  int keep);

/// writeShard(dir, step, 0, 1, tensors) and writeIndex(dir, step, 1, keep):
/// the single-machine case.
Status saveCheckpoint(const std::string &dir, int64_t step,
                      const std::vector<SavedTensor> &tensors, int keep);

/// The steps of the complete checkpoints in `dir`, oldest first: an index
/// that parses with a good CRC and data files of the sizes and file CRCs it
/// records (the tensors' own CRCs are checked when they are read). A missing
/// directory has none. Each checkpoint that looks started but is not
/// complete (a damaged index, a missing or truncated data file) is described
/// in `skipped` when given. Fails only when the directory cannot be read.
Status listCheckpoints(const std::string &dir, std::vector<int64_t> *steps,
                       std::vector<std::string> *skipped = nullptr);

/// The step of the newest complete checkpoint, or -1 when there is none.
Status findLatest(const std::string &dir, int64_t *step,
                  std::vector<std::string> *skipped = nullptr);

/// Which checkpoint a run restores (dtf-run --restore).
enum class RestorePolicy {
  /// The newest checkpoint, which must be whole: a damaged one stops the
  /// run, named.
  kLatest,
  /// The newest whole checkpoint: damaged newer ones are passed over, each
  /// named in a warning.
  kLatestValid,
};
/// "latest" or "latest-valid"; false for anything else.
bool parseRestorePolicy(const std::string &text, RestorePolicy *policy);

struct RestoreChoice {
  /// The checkpoint to restore, checked whole; -1: the directory holds no
  /// checkpoint (no index file).
  int64_t step = -1;
  /// kLatestValid: one sentence per damaged checkpoint passed over, newest
  /// first, naming it, its damage and the one taken instead.
  std::vector<std::string> passedOver;
  /// Their steps: a run that trains on from `step` sets them aside
  /// (moveDamagedAside) before it saves those steps again.
  std::vector<int64_t> passedOverSteps;
  /// Saves that did not finish (data files newer than every index, no index
  /// of their own): not checkpoints, said as warnings.
  std::vector<std::string> unfinished;

  /// What a run says of its choice as warnings: `unfinished`, then
  /// `passedOver`.
  std::vector<std::string> warnings() const {
    std::vector<std::string> all = unfinished;
    all.insert(all.end(), passedOver.begin(), passedOver.end());
    return all;
  }
};

/// Chooses the checkpoint of `dir` to restore under `policy`, and checks it
/// whole before anything is read from it: its index, the header and every
/// record of each data file against the index, a global_step that is not
/// negative, and the CRC32C of every tensor (one read of the checkpoint,
/// through a small buffer). A checkpoint exists once its index file does;
/// one whose files fail any check is damaged. Fails, naming the damage and
/// what to do, when the newest checkpoint is damaged under kLatest, and
/// under either policy when checkpoints exist but none is whole (a run must
/// not start from the initializers over them). `startOver` is the flag
/// that sets the checkpoints aside ("--fresh"), or null where there is
/// none. Fails too when the directory cannot be read.
Status chooseCheckpoint(const std::string &dir, RestorePolicy policy,
                        const char *startOver, RestoreChoice *out);

/// What the index says about one variable.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape; // the whole variable's
};

/// Reads tensors of one checkpoint by name, from whichever shards hold them.
/// Every read checks the CRC32C of each slice it touches; a mismatch names
/// the file, the tensor and its rows.
class CheckpointReader {
public:
  /// Opens the checkpoint of `step` in `dir`: reads and checks its index,
  /// and every data file's header and records against it (format::
  /// scanDataFile: each field bounded before it is used; sizes, offsets and
  /// CRCs as the index records them), and refuses a negative global_step.
  static Status open(const std::string &dir, int64_t step,
                     std::unique_ptr<CheckpointReader> *out);
  ~CheckpointReader();

  /// Reads every slice of every tensor (through a small buffer) and checks
  /// its CRC32C: the checkpoint is whole. A mismatch names the file, the
  /// tensor and its rows.
  Status verify() const;

  int64_t step() const;
  /// The number of shards it was written with.
  int numShards() const;
  /// Every variable, sorted by name.
  std::vector<TensorInfo> tensors() const;
  /// Null when the checkpoint has no variable of that name.
  const TensorInfo *find(const std::string &name) const;

  /// The whole variable, in a new tensor.
  Status read(const std::string &name, Tensor *out) const;
  /// Rows [begin, end) along axis 0, in a new tensor of shape
  /// {end - begin, rest...}: the part one ps holds after a restore onto a
  /// different number of ps. A scalar has one row.
  Status readRows(const std::string &name, int64_t begin, int64_t end,
                  Tensor *out) const;
  /// As read(), into `dst`, which must have the variable's dtype and shape
  /// (a variable restored in place, whose buffer an executor points to).
  Status readInto(const std::string &name, Tensor *dst) const;
  /// Rows [begin, begin + dst's rows) of `name`, straight into `dst` (of the
  /// tensor's type, with that many rows): a ps restores its shard of a large
  /// table without a second copy.
  Status readRowsInto(const std::string &name, int64_t begin,
                      Tensor *dst) const;

  struct Impl;

private:
  explicit CheckpointReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Every variable of the checkpoint of `step`, whole, by name.
Status readCheckpoint(const std::string &dir, int64_t step,
                      std::map<std::string, Tensor> *out);

/// Moves every checkpoint file of `dir` (ckpt-*, their temporaries and the
/// state file) into a new subdirectory `dir/previous-run-K` (the first K
/// unused) so that a fresh run starts there without losing them; `movedTo`
/// gets its path, or "" when there was nothing to move.
Status moveCheckpointsAside(const std::string &dir, std::string *movedTo);

/// Moves the files of the checkpoints of `steps` (ckpt-S.*) into a new
/// subdirectory `dir/damaged-K` (the first K unused): a run that restored an
/// older checkpoint (--restore=latest-valid) saves those steps again, which
/// writeShard refuses while their index is there, and the damaged files are
/// kept for a person to look at. `movedTo` gets its path ("" when nothing
/// was moved).
Status moveDamagedAside(const std::string &dir,
                        const std::vector<int64_t> &steps,
                        std::string *movedTo);

} // namespace dtf::checkpoint
