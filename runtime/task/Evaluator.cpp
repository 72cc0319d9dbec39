// The evaluator task: a loop over the job's new checkpoints.
#include "runtime/task/Evaluator.h"
#include "runtime/task/Task.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/summary/EventWriter.h"
#include "runtime/summary/TrainLog.h"
#include "runtime/train/Progress.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

namespace dtf::task {
namespace {

using dtf::errorStatus;
using dtf::Status;
using dtf::strCat;


int fail(const std::string &message, int code) {
  std::fflush(stdout);
  std::fprintf(stderr, "dtf-run: error: evaluator.0: %s\n", message.c_str());
  return code;
}

// Reads every variable of the trainer from checkpoint `step`, in place.
Status restore(const std::string &dir, int64_t step,
               dtf::train::Trainer &trainer) {
  std::unique_ptr<dtf::checkpoint::CheckpointReader> reader;
  DTF_RETURN_IF_ERROR(
      dtf::checkpoint::CheckpointReader::open(dir, step, &reader));
  return dtf::train::restoreVariables(
      *reader, "checkpoint " + dtf::checkpoint::checkpointName(step),
      &trainer.variables(), trainer.dynamicTables());
}

} // namespace

int runEvaluator(const dtf::plan::Plan &plan,
                 const dtf::train::TrainOptions &base,
                 const EvaluatorOptions &flags, const std::atomic<bool> *stop) {
  const std::string dir = base.modelDir;
  if (dir.empty())
    return fail("the evaluator reads the job's checkpoints: give it the "
                "job's --model-dir (a directory every task shares)",
                kUsageError);
  // Training keeps the cores first: the evaluator only takes what is left.
  if (nice(10) == -1 && errno != 0)
    std::fprintf(stderr, "dtf-run: warning: evaluator.0: cannot lower its "
                         "priority (nice 10)\n");
  dtf::train::TrainOptions options = base;
  options.modelDir.clear(); // no restore, no checkpoints, no summaries
  options.driver = nullptr;
  options.threads = base.threads > 0 ? base.threads : 1;
  options.quiet = true;
  std::unique_ptr<dtf::train::Trainer> trainer;
  dtf::train::FailureKind kind = dtf::train::FailureKind::kNone;
  Status s = dtf::train::Trainer::create(plan, options, &trainer, &kind);
  if (!s.isOk())
    return fail(s.message(),
                kind == dtf::train::FailureKind::kUsage ? kUsageError : kIoError);
  if (!trainer->evalExecutor())
    return fail("the plan has no eval set (`eval = ...` in its train "
                "block): there is nothing to evaluate",
                kUsageError);
  const int64_t lastStep =
      base.steps >= 0 ? base.steps : int64_t(plan.training().steps());

  std::unique_ptr<dtf::summary::EventWriter> events;
  s = dtf::summary::EventWriter::open(dir + "/evaluator", &events);
  std::unique_ptr<dtf::summary::TrainLog> log;
  if (s.isOk())
    s = dtf::summary::TrainLog::open(dir + "/evaluator.log", &log);
  if (!s.isOk())
    return fail(s.message(), kIoError);
  auto say = [&](const std::string &line) {
    std::fprintf(base.out, "%s\n", line.c_str());
    std::fflush(base.out);
    (void)log->line(line);
  };
  say(strCat("evaluator: following the checkpoints in ", dir, " until step ",
             lastStep));

  using Clock = std::chrono::steady_clock;
  Clock::time_point lastNew = Clock::now();
  int64_t evaluated = -1;
  while (!(stop && stop->load())) {
    std::vector<int64_t> steps;
    s = dtf::checkpoint::listCheckpoints(dir, &steps);
    if (!s.isOk())
      return fail(s.message(), kIoError);
    // The newest one: an evaluator that falls behind skips to the present
    // instead of queueing (TensorFlow's checkpoints_iterator does the same).
    if (!steps.empty() && steps.back() > evaluated) {
      const int64_t step = steps.back();
      int skipped = 0;
      for (int64_t k : steps)
        skipped += k > evaluated && k < step;
      s = restore(dir, step, *trainer);
      if (!s.isOk()) {
        // Deleted under us (keep N) or of another model: say so and wait
        // for the next one.
        say(strCat("evaluator: cannot read ",
                   dtf::checkpoint::checkpointName(step), ": ", s.message()));
        // No newer checkpoint will come to wait for.
        if (step >= lastStep)
          return fail(strCat("cannot read the last step's checkpoint (",
                             s.message(), "); no newer one will come"),
                      kIoError);
        evaluated = step;
        lastNew = Clock::now();
        continue;
      }
      std::vector<dtf::train::Metric> metrics;
      s = trainer->evaluate(uint64_t(step), &metrics, &kind);
      if (!s.isOk())
        return fail(s.message(), kRuntimeError);
      std::vector<dtf::summary::Scalar> scalars;
      std::string line =
          strCat("evaluator: ", dtf::checkpoint::checkpointName(step),
                 "  step ", step);
      for (const dtf::train::Metric &m : metrics) {
        scalars.emplace_back(m.name, m.value);
        line += "  " + m.name + " " + dtf::train::formatValue(m.value);
      }
      if (skipped > 0)
        line += strCat("  (", skipped, " older checkpoint",
                       skipped == 1 ? "" : "s", " skipped)");
      s = events->writeScalars(step, scalars);
      if (s.isOk())
        s = events->flush();
      if (!s.isOk())
        return fail(s.message(), kIoError);
      say(line);
      evaluated = step;
      lastNew = Clock::now();
      if (step >= lastStep) {
        say(strCat("evaluator: evaluated the last step's checkpoint; done"));
        s = events->close();
        return s.isOk() ? 0 : fail(s.message(), kIoError);
      }
      continue;
    }
    const double idle =
        std::chrono::duration<double>(Clock::now() - lastNew).count();
    if (idle > flags.idleTimeoutSeconds)
      return fail(strCat("no new checkpoint in ", dir, " for ",
                         flags.idleTimeoutSeconds,
                         " s; is the job still running? "
                         "(--evaluator-idle-timeout sets the wait)"),
                  kClusterError);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(int64_t(flags.pollSeconds * 1000)));
  }
  (void)events->close();
  return kInterrupted;
}

} // namespace dtf::task
