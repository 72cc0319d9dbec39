// Which checkpoint a run restores (dtf-run --restore): the newest checked
// whole, or the newest whole one; the refusal that says what to do.
#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/checkpoint/DurableFile.h"
#include "runtime/checkpoint/Format.h"

#include <set>
#include <utility>

namespace dtf::checkpoint {

using files::joinPath;
using files::listDir;

bool parseRestorePolicy(const std::string &text, RestorePolicy *policy) {
  if (text == "latest")
    *policy = RestorePolicy::kLatest;
  else if (text == "latest-valid")
    *policy = RestorePolicy::kLatestValid;
  else
    return false;
  return true;
}

namespace {

// Checkpoint `step` of `dir` opened and read through: whole, or its damage.
Status checkWhole(const std::string &dir, int64_t step) {
  std::unique_ptr<CheckpointReader> reader;
  DTF_RETURN_IF_ERROR(CheckpointReader::open(dir, step, &reader));
  return reader->verify();
}

// The refusal of chooseCheckpoint: `damaged` (newest first, each with its
// damage) are newer than `whole` (-1: none is whole).
Status
refuseDamaged(const std::string &dir,
              const std::vector<std::pair<int64_t, std::string>> &damaged,
              int64_t whole, const char *startOver) {
  const std::string newest = checkpointName(damaged[0].first);
  std::string others;
  for (size_t i = 1; i < damaged.size(); ++i)
    others += (i > 1 ? ", " : "") + checkpointName(damaged[i].first);
  std::string todo =
      whole >= 0
          ? strCat("pass --restore=latest-valid to restore ",
                   checkpointName(whole), ", the newest whole one, instead; ")
          : std::string();
  if (startOver)
    todo += strCat(whole >= 0 ? "" : "pass ", startOver,
                   " to start over (the checkpoints move to ", dir,
                   "/previous-run-K), or ");
  todo += strCat("repair or remove the files of ", newest, " (",
                 joinPath(dir, newest), ".*)",
                 damaged.size() > 1 ? " and of the other damaged ones" : "");
  const std::string what =
      strCat(newest, ", is damaged: ", damaged[0].second,
             others.empty() ? "" : strCat(" (damaged too: ", others, ")"));
  if (whole >= 0)
    return errorStatus("cannot restore from ", dir, ": its newest checkpoint, ",
                       what, ". To go on, ", todo);
  return errorStatus("cannot restore from ", dir,
                     ": it holds checkpoints, but none is whole: the newest, ",
                     what, ".",
                     startOver ? " A run does not start from the initializers "
                                 "over checkpoints it cannot read."
                               : "",
                     " To go on, ", todo);
}

// The steps the `checkpoint` file names (`latest ckpt-S`, `kept ckpt-S`): the
// chief writes it after their indexes, so each of them was saved whole. The
// file is for people and tools: one that is missing or unreadable names none.
std::set<int64_t> stepsNamedSaved(const std::string &dir) {
  std::set<int64_t> steps;
  std::string text;
  if (!files::readWholeFile(joinPath(dir, "checkpoint"), &text).isOk() ||
      text.size() > (1 << 20))
    return steps;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos)
      end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    for (const char *word : {"latest ckpt-", "kept ckpt-"}) {
      const std::string prefix = word;
      if (line.rfind(prefix, 0) != 0 || line.size() == prefix.size() ||
          line.size() > prefix.size() + 18 ||
          line.find_first_not_of("0123456789", prefix.size()) !=
              std::string::npos)
        continue;
      steps.insert(std::stoll(line.substr(prefix.size())));
    }
  }
  return steps;
}

} // namespace

Status chooseCheckpoint(const std::string &dir, RestorePolicy policy,
                        const char *startOver, RestoreChoice *out) {
  *out = RestoreChoice();
  std::vector<std::string> names;
  bool missing = false;
  DTF_RETURN_IF_ERROR(listDir(dir, &names, &missing));
  std::set<int64_t> withData, withIndex;
  format::checkpointSteps(names, &withData, &withIndex);
  // A step the `checkpoint` file names as saved has lost its index: damage.
  const std::set<int64_t> saved = stepsNamedSaved(dir);
  std::set<int64_t> steps = withIndex;
  for (int64_t s : saved)
    if (!withIndex.count(s))
      steps.insert(s);
  // A crash while the shards were written: not a checkpoint (docs/
  // checkpoint-format.md, crash safety), so not damage either.
  for (int64_t s : withData)
    if (!steps.count(s) && (withIndex.empty() || s > *withIndex.rbegin()))
      out->unfinished.push_back(
          strCat(checkpointName(s), " in ", dir,
                 " has data files but no index: a save that did not finish, "
                 "not a checkpoint"));
  std::vector<std::pair<int64_t, std::string>> damaged;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (!withIndex.count(*it)) {
      damaged.push_back(
          {*it, strCat("its index ", checkpointName(*it),
                       ".index is missing, though the checkpoint file names it "
                       "as saved (the index is written before that file)")});
      continue;
    }
    Status s = checkWhole(dir, *it);
    if (s.isOk()) {
      out->step = *it;
      break;
    }
    damaged.push_back({*it, s.message()});
  }
  if (damaged.empty())
    return Status::ok();
  if (policy == RestorePolicy::kLatestValid && out->step >= 0) {
    for (const auto &[step, why] : damaged) {
      out->passedOverSteps.push_back(step);
      out->passedOver.push_back(strCat(
          "checkpoint ", checkpointName(step), " in ", dir, " is damaged (",
          why, "); restoring ", checkpointName(out->step),
          ", the newest whole one, instead (--restore=latest-valid)"));
    }
    return Status::ok();
  }
  const int64_t whole = out->step;
  out->step = -1;
  return refuseDamaged(dir, damaged, whole, startOver);
}

} // namespace dtf::checkpoint
