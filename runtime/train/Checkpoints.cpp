// The checkpoints of a single-machine run (--model-dir): restoring the latest
// one when a Trainer is set up, and saving one during and after run().
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/train/CheckpointSchedule.h"
#include "runtime/train/Trainer.h"

#include <cstdio>

namespace dtf::train {

Status Trainer::restoreLatestCheckpoint(FailureKind *kind) {
  const std::string &dir = options_.modelDir;
  if (dir.empty())
    return Status::ok();
  if (options_.fresh) {
    std::string movedTo;
    Status s = checkpoint::moveCheckpointsAside(dir, &movedTo);
    if (!s.isOk()) {
      setKind(kind, FailureKind::kData);
      return errorStatus("--fresh: ", s.message());
    }
    if (!movedTo.empty())
      checkpointNote_ = "--fresh: moved the checkpoints of the previous run "
                        "to " +
                        movedTo;
    return Status::ok();
  }
  // The checkpoint is checked whole before any variable changes; a damaged
  // one stops the run rather than quietly throwing training away.
  checkpoint::RestoreChoice choice;
  Status s =
      checkpoint::chooseCheckpoint(dir, options_.restore, "--fresh", &choice);
  for (const std::string &why : choice.warnings())
    std::fprintf(stderr, "dtf-run: warning: %s\n", why.c_str());
  if (!s.isOk()) {
    setKind(kind, FailureKind::kData);
    return s;
  }
  const int64_t step = choice.step;
  if (step < 0)
    return Status::ok();
  // This run saves those steps again: their damaged files move aside.
  std::string movedTo;
  s = checkpoint::moveDamagedAside(dir, choice.passedOverSteps, &movedTo);
  if (!s.isOk()) {
    setKind(kind, FailureKind::kData);
    return errorStatus("--restore=latest-valid: ", s.message());
  }
  if (!movedTo.empty())
    std::fprintf(stderr,
                 "dtf-run: warning: moved the damaged checkpoints' files to "
                 "%s\n",
                 movedTo.c_str());
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  s = checkpoint::CheckpointReader::open(dir, step, &reader);
  // Every variable of the model comes from the checkpoint, in place (the
  // executors point at the variables' buffers).
  for (const std::string &name : variables_.names()) {
    if (!s.isOk())
      break;
    if (dynamicTables_ && dynamicTables_->holdsVariable(name))
      continue; // its live rows, below
    if (!reader->find(name))
      s = errorStatus("checkpoint ", checkpoint::checkpointName(step), " in ",
                      dir, " has no variable '", name,
                      "': it was saved by a different model; train in another "
                      "--model-dir, or pass --fresh to start over here");
    else
      s = reader->readInto(name, variables_.find(name));
  }
  if (s.isOk() && dynamicTables_)
    s = dynamicTables_->restore(*reader, step);
  if (!s.isOk()) {
    setKind(kind, FailureKind::kData);
    return errorStatus("cannot restore from ", dir, ": ", s.message());
  }
  for (const checkpoint::TensorInfo &t : reader->tensors())
    if (!variables_.find(t.name) &&
        !(dynamicTables_ && dynamicTables_->savesTensor(t.name)))
      std::fprintf(stderr,
                   "dtf-run: warning: %s: checkpoint %s has a variable '%s' "
                   "that the model lacks; ignored\n",
                   dir.c_str(), checkpoint::checkpointName(step).c_str(),
                   t.name.c_str());
  startStep_ = step;
  restoredStep_ = step;
  if (train_)
    train_->reloadVariablesFromHost(); // resident variables: upload again
  for (auto &e : towerExecs_)
    e->reloadVariablesFromHost();
  if (update_)
    update_->reloadVariablesFromHost();
  checkpointNote_ =
      strCat("restored checkpoint ", checkpoint::checkpointName(step), " from ",
             dir, "; continuing at step ", step);
  return Status::ok();
}

Status Trainer::saveCheckpoint(int64_t step, TrainReport *report,
                               FailureKind *kind) {
  // Variables that live on a GPU between steps come down first.
  if (train_)
    DTF_RETURN_IF_ERROR(syncResidentVariables());
  std::vector<checkpoint::SavedTensor> tensors;
  for (const std::string &name : variables_.names())
    if (!dynamicTables_ || !dynamicTables_->holdsVariable(name))
      tensors.push_back(
          checkpoint::SavedTensor::whole(name, *variables_.find(name)));
  std::vector<std::unique_ptr<Tensor>> dynamicRows; // alive until written
  if (dynamicTables_)
    dynamicTables_->save(&tensors, &dynamicRows);
  const CheckpointSchedule schedule(training_, true, 0);
  Status s = checkpoint::saveCheckpoint(options_.modelDir, step, tensors,
                                        schedule.keep());
  if (!s.isOk()) {
    setKind(kind, FailureKind::kData);
    return errorStatus("cannot save a checkpoint at step ", step, ": ",
                       s.message());
  }
  report->checkpoints.push_back(step);
  return Status::ok();
}

} // namespace dtf::train
