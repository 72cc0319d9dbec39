// dtf-run: trains a plan, alone on this machine or as tasks of a ps/worker
// cluster.
#include "dtf/Version.h"

#include "Distributed.h"
#include "Evaluator.h"

#include "Launch.h"
#include "Predict.h"
#include "runtime/cluster/RunMode.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/train/Trainer.h"

#include <google/protobuf/stubs/logging.h>

#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <string>
#include <thread>
#include <unistd.h>

namespace {

constexpr const char *kUsage = R"(usage: dtf-run PLAN [options]

Trains the model in PLAN (a plan.bin written by dtfc).

  dtf-run plan.bin                          train on this machine (embedded default)
  dtf-run plan.bin --cluster cluster.json   start and supervise the local tasks
  dtf-run plan.bin --cluster cluster.json --job worker --task 1   run one task
  dtf-run plan.bin --predict eval --model-dir DIR -o out.csv      predict
  dtf-run certs --cluster cluster.json --out DIR   make the cluster's TLS certificates

options:
  --steps N        train N steps instead of the plan's count (0: only evaluate)
  --log-every N    print progress every N steps (default: the plan's summary
                   policy when it counts steps, else 100)
  --threads N      threads within each op, for dtf's kernels and oneDNN's
                   (default: the plan's intra_op_threads, else every core)
  --inter-op-threads N  ops of a step that do not depend on each other run
                   concurrently on N threads; 1 runs them in order
                   (default: the plan's inter_op_threads, else 1)
  --model-dir DIR  the run's directory: checkpoints, TensorBoard summaries
                   (DIR/train/, DIR/eval/) and the training log (DIR/train.log)
                   (default: none written); a run whose DIR holds a
                   checkpoint restores the latest and continues from its step
  --fresh          with --model-dir: start from the initializers even when
                   DIR holds checkpoints; they are moved, never deleted, to
                   DIR/previous-run-K (the first K free)
  --quiet          print only the final line (and errors)
  --profile        time every op of the train_step and print, on stderr at
                   the end, the time per step by op kind and the slowest ops
  --emulate-gpus N  run the plan's GPU ops on N emulated CUDA GPUs: dtf's
                   host emulation of the CUDA driver, cuBLAS and cuDNN
                   (libdtf-cuda-emu.so beside dtf-run), loaded through the
                   same path as the real libraries, so that a GPU plan can be
                   checked on any machine; prints what it ran at exit
                   (docs/gpu.md); DTF_EMU_STREAM_ORDER=submission|reversed|
                   interleaved picks when its streams' queued work runs
                   (default reversed). Without it, GPU ops need libcuda.so.1
                   (DTF_CUDA_DRIVER=PATH names another driver library)
  --gpu-towers N   in-graph towers over this task's GPUs (overrides the
                   plan's session(gpu_towers = N)): the step runs once per
                   tower, tower k on GPU k, each on its share of the batch,
                   and the towers' gradients are averaged with NCCL
                   (libnccl.so.2, DTF_NCCL_LIBRARY=PATH names another) before
                   the one update or push of the step (docs/gpu.md)
  --cluster FILE   cluster spec: {"ps": ["host:port", ...], "worker": [...]}
                   (TensorFlow's ClusterSpec, or a whole TF_CONFIG); without
                   --job, starts and supervises every task on this machine
  --cluster slurm  the cluster is the Slurm job step this process is a task
                   of (srun dtf-run plan.bin --cluster slurm ...): ranks go
                   to the jobs of --slurm-jobs in order, workers take the
                   rest; hosts are the step's nodes, ports the step's
                   reserved ports (srun --resv-ports) or --slurm-port-base
                   plus the task's slot on its node (docs/deploy.md)
  --slurm-jobs LIST  with --cluster slurm: JOB=COUNT,... in rank order, of
                   ps, chief and evaluator (default ps=1)
  --slurm-port-base P  with --cluster slurm and no reserved ports: the first
                   task of each node listens on P, the next on P+1 (2222)
  --job NAME       the job of the task to run (ps, worker, chief, or
                   evaluator: follows --model-dir's checkpoints and
                   evaluates each new one, see docs/deploy.md)
  --task N         the index of the task to run within its job
  --max-restarts N the launcher restarts a failed task up to N times (3)
  --chief TASK     the worker that takes the chief's duties (initializing and
                   restoring the ps, checkpoints, evaluation), e.g. worker.1
                   (default: chief.0, else worker.0)
  --chief-failover when the chief fails, the launcher moves the chief role to
                   the next worker and restarts the job from the last
                   checkpoint (default: it restarts the job with the same
                   chief)
  --connect-timeout S  seconds a task waits for another to answer before it
                   names it and exits (15)
  --sync-timeout S seconds a sync worker waits for the other replicas'
                   gradients, or for the chief, before it names them and
                   exits (120)
  --evaluator-idle-timeout S  the evaluator gives up (exit 6) when no new
                   checkpoint appears for S seconds (3600)
  --stall-timeout S  a ps cuts a stream of chunks that moves nothing for S
                   seconds (30)
  --chunk-bytes N  pulls, pushes and initial values larger than N bytes
                   cross between tasks in a stream of N-byte chunks (no
                   message size limit; the receiver copies each chunk into
                   place as the next arrives); smaller ones in one message
                   (default 4194304, 4 MiB)
  --predict DATA   instead of training, write the model's outputs (its
                   logits, else its last value) for every example of DATA,
                   in order, from the latest checkpoint in --model-dir, to
                   -o FILE (.csv: a header and one line per example; .npy: a
                   NumPy array [examples, ...]). DATA is eval or data (the
                   plan's sources), idx:DIR (its test split), csv:FILE or
                   tfrecord:PATTERN (with the features and on_corrupt
                   of the plan's tfrecord source; gzip when the pattern
                   ends in .gz or .gzip)
  -o, --output FILE  where --predict writes
  --tls-dir DIR    the TLS certificates of a task started alone: DIR/ca.pem
                   and DIR/TASK.pem, DIR/TASK.key, as `dtf-run certs` writes
                   them (default: $DTF_TLS_DIR). The tasks talk mutual TLS
                   and accept only peers whose certificate, signed by that
                   CA, names a task of the cluster; the launcher makes a new
                   CA and certificates for the tasks it starts. Without it a
                   task refuses to start (docs/security.md)
  --insecure       plaintext between the tasks, with no authentication: any
                   process that reaches a port can call it (warns)
  --bind HOST:PORT where a task started alone listens (default: its address
                   in the cluster file; never every interface)
  --help           print this help and exit
  --version        print the version and exit

Training on this machine runs the plan's train_step for its steps on batches
of its data source (shuffled each epoch with the plan's seed, epochs repeated),
evaluates the eval source every `every` steps and at the end, and prints:

  step 1200/5000  loss 0.4312  accuracy 0.8600  1873 img/s  ETA 2m01s
  eval  step 5000  loss 0.3120  accuracy 0.8874
  final: steps=5000 loss=0.3120 accuracy=0.8874 examples_per_sec=1873.2 seconds=133.5

Progress values are means over the steps since the previous line; the first
fetch of the train_step is the loss, the others are metrics. On a terminal the
progress line is redrawn in place. Evaluation reports each metric's mean over
the whole eval set. The final line is always the last line on stdout: the eval
metrics when the plan has an eval set, else the last training means;
examples_per_sec leaves evaluation time out.

Feeding: idx and synthetic data feed the images (as f32, pixel / 255,
converted for an f64 input; reshaped to the input's shape, batch first) to
the first floating-point input and the labels (converted to i32 or i64) to
the first integer input. A csv
source feeds its label column to the last input and its other columns, left
to right, to the inputs before it, each taking as many columns as one of its
examples holds. Synthetic data feeds learnable features and labels to a
model with one floating-point input and labels; to any other it feeds random
examples (normal floats, integer ids below the table they index) and labels
to the input the loss reads. A tfrecord source feeds each input the
feature of its name (or the one its `features` renames give), labels
included. An f32 or f64 scalar input named
`learning_rate` takes the plan's learning-rate schedule at each step instead
of data.

Ctrl-C stops after the current step and prints the final line.

Checkpoints (with --model-dir DIR): saved to DIR as the plan's train block
says (`checkpoint every 1000 steps keep 5`, or every N s or min), always at
the end of training and on Ctrl-C; without a checkpoint policy in the plan,
only at the end, keeping 5. A checkpoint is DIR/ckpt-STEP.index with its
DIR/ckpt-STEP.data-K-of-N files (docs/checkpoint-format.md); each file is
written under a temporary name, fsynced and renamed, so a crash leaves the
previous checkpoint whole. At start, dtf-run restores every variable (model,
optimizer slots, global step, moving averages) from the latest complete
checkpoint in DIR and continues at its step with the data where it left off:

  restored checkpoint ckpt-3000 from DIR; continuing at step 3000

A run whose step count is already reached trains nothing and only evaluates.
A damaged checkpoint stops the run with an error naming the file and the
tensor (and the previous complete checkpoint, if any).

environment:
  OMP_WAIT_POLICY, GOMP_SPINCOUNT
                   how the OpenMP threads (oneDNN's and the intra-op pool's)
                   wait between jobs. When neither is set, dtf-run training
                   alone spins briefly (GOMP_SPINCOUNT=10000) so that the
                   next job finds its threads awake, and a task of a cluster
                   waits passively (OMP_WAIT_POLICY=passive), since tasks
                   started together share the machine's cores; a task alone
                   on its machine can set GOMP_SPINCOUNT=10000 to spin too

exit codes:
  0    trained
  2    usage error (bad option, no plan, no step count)
  3    not available in this build (an op without a CPU kernel)
  4    I/O: the plan or a data source is missing, unreadable, malformed or
       does not fit the model's inputs; a checkpoint cannot be restored
       (damaged, or of another model) or saved
  5    runtime error in a kernel during a step
  6    cluster: another task could not be reached within --connect-timeout,
       was lost, or did not answer within --sync-timeout (the message names
       it and its address)
  130  interrupted (Ctrl-C)

  Under a TF_CONFIG whose "environment" is "cloud" (as Kubeflow's training
  operator writes it), exit code 6 becomes 166, so that Kubernetes'
  `restartPolicy: ExitCode` restarts the pod (codes 128 to 255 are
  retryable; 1 to 127, the usage, build, I/O and kernel errors, are not).
)";

// Exit codes, distinct per kind of failure.
enum ExitCode {
  kOk = 0,
  kUsageError = 2,
  kNotAvailable = 3,
  kIoError = 4,
  kRuntimeError = 5,
  kInterrupted = 130,
};

std::atomic<bool> gStop{false};

extern "C" void onInterrupt(int) { gStop.store(true); }

// Ctrl-C and SIGTERM are taken by one thread that waits for them: they are
// blocked in every other thread (threads started later inherit the mask), so
// that no signal handler runs on a thread in the middle of a kernel. The
// first sets the stop flag; a second Ctrl-C ends the process at once. (The
// handler stays as the disposition, so that a signal reaching a thread that
// a library started unblocked still only sets the flag.)
void watchInterrupts() {
  std::signal(SIGINT, onInterrupt);
  std::signal(SIGTERM, onInterrupt);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    bool first = true;
    while (sigwait(&set, &sig) == 0) {
      gStop.store(true);
      if (!first && sig == SIGINT) {
        std::signal(SIGINT, SIG_DFL);
        sigset_t interrupt;
        sigemptyset(&interrupt);
        sigaddset(&interrupt, SIGINT);
        pthread_sigmask(SIG_UNBLOCK, &interrupt, nullptr);
        raise(SIGINT);
      }
      first = false;
    }
  }).detach();
}

// A non-negative integer option value, or -1.
long long parseCount(const char *text) {
  if (!text || !*text)
    return -1;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || *end || v < 0)
    return -1;
  return v;
}

// oneDNN's primitives and the intra-op pool's jobs run on OpenMP's threads.
// libgomp's default wait policy spins for a long while (300,000 rounds) after
// each parallel region, taking the cores that the data prefetch thread, the
// inter-op threads and other processes need: on 2 cores a small model once ran
// 20 times slower. Passive waits cost a wake-up per region instead.
// - Training alone on this machine: a short spin (GOMP_SPINCOUNT=10000), so
//   that the next region of the step finds the threads awake: 1.09x (the
//   seed CNN) to 2.2x (the transformer) the speed with passive waits
//   (bench/omp_waits.sh, bench/results/omp_waits.md).
// - As a task of a cluster: passive, since the tasks a launcher starts share
//   this machine's cores.
// libgomp reads these once, when it loads, so dtf-run sets them and starts
// itself again. A policy or spin count the user set is kept.
void chooseOpenMpWaits(char **argv, bool alone) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") ||
      std::getenv("DTF_RUN_REEXECED"))
    return;
  const char *name = alone ? "GOMP_SPINCOUNT" : "OMP_WAIT_POLICY";
  setenv(name, alone ? "10000" : "passive", 1);
  setenv("DTF_RUN_REEXECED", "1", 1);
  execv("/proc/self/exe", argv);
  // Exec failed: go on with the default policy.
  unsetenv(name);
}

int exitCodeOf(dtf::train::FailureKind kind) {
  switch (kind) {
  case dtf::train::FailureKind::kUsage:
    return kUsageError;
  case dtf::train::FailureKind::kUnavailable:
    return kNotAvailable;
  case dtf::train::FailureKind::kPlan:
  case dtf::train::FailureKind::kData:
    return kIoError;
  case dtf::train::FailureKind::kRuntime:
  case dtf::train::FailureKind::kNone:
    break;
  }
  return kRuntimeError;
}

} // namespace

int main(int argc, char **argv) {
  // Tensors of a step and the messages that carry variables and gradients
  // between tasks are megabytes each, made and freed every step: keep them
  // on the heap for reuse instead of mapping and unmapping (and faulting in)
  // fresh pages each time.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::string plan;
  dtf::cluster::ClusterFlags clusterFlags;
  dtfrun::DistributedFlags distributedFlags;
  dtfrun::EvaluatorFlags evaluatorFlags;
  std::string chiefFlag;
  dtfrun::PredictFlags predict;
  dtf::train::TrainOptions options;
  if (argc > 1 && std::strcmp(argv[1], "certs") == 0)
    return dtfrun::runCertsCommand(argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    // --name=value as well as --name value.
    std::string::size_type eq = arg.find('=');
    std::string inlineValue;
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inlineValue = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      value = inlineValue.c_str();
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return kOk;
    }
    if (arg == "--version") {
      std::printf("dtf-run %s\n", DTF_VERSION_STRING);
      return kOk;
    }
    if (arg == "--quiet" || arg == "-q") {
      options.quiet = true;
      continue;
    }
    if (arg == "--profile") {
      options.profile = true;
      continue;
    }
    if (arg == "--chief-failover")
      continue; // the launcher reads it
    if (arg == "--insecure") {
      distributedFlags.insecure = true;
      continue;
    }
    if (arg == "--fresh") {
      options.fresh = true;
      continue;
    }
    if (arg == "--gpu-towers" || arg == "--emulate-gpus") {
      if (!value && i + 1 < argc)
        value = argv[++i];
      const long long n = value ? parseCount(value) : -1;
      if (n < 1 || n > 16) {
        std::fprintf(stderr,
                     "dtf-run: error: %s expects a %s count from 1 to 16, "
                     "got '%s'\n",
                     arg.c_str(), arg == "--gpu-towers" ? "tower" : "GPU",
                     value ? value : "");
        return kUsageError;
      }
      if (arg == "--gpu-towers") {
        options.gpuTowers = int(n);
        continue;
      }
      // The emulation's run order of streams (docs/gpu.md): refused here,
      // not left to fall back onto the CPU.
      if (const char *order = std::getenv("DTF_EMU_STREAM_ORDER");
          order && std::string(order) != "submission" &&
          std::string(order) != "reversed" &&
          std::string(order) != "interleaved") {
        std::fprintf(stderr,
                     "dtf-run: error: DTF_EMU_STREAM_ORDER=%s names no order "
                     "of the emulation's streams: submission, reversed (the "
                     "default) or interleaved\n",
                     order);
        return kUsageError;
      }
      dtf::gpu::CudaLibraries libs;
      libs.driver = dtf::gpu::emulationLibraryPath();
      libs.emulatedGpus = int(n);
      dtf::gpu::configureProcessGpus(libs);
      // What the emulation ran, so that a test can tell it ran at all.
      std::atexit([] {
        const std::string stats = dtf::gpu::processEmulationStats();
        if (!stats.empty())
          std::fprintf(stderr, "%s\n", stats.c_str());
      });
      continue;
    }
    const bool takesValue = arg == "--cluster" || arg == "--job" ||
                            arg == "--model-dir" || arg == "--max-restarts" ||
                            arg == "--chief" ||
                            arg == "--connect-timeout" ||
                            arg == "--sync-timeout" ||
                            arg == "--chunk-bytes" ||
                            arg == "--slurm-jobs" ||
                            arg == "--slurm-port-base" ||
                            arg == "--evaluator-idle-timeout" ||
                            arg == "--stall-timeout" ||
                            arg == "--chunk-bytes" || arg == "--tls-dir" ||
                            arg == "--bind" ||
                            arg == "--task" || arg == "--steps" ||
                            arg == "--log-every" || arg == "--threads" ||
                            arg == "--inter-op-threads" ||
                            arg == "--predict" || arg == "--output" ||
                            arg == "-o";
    if (takesValue) {
      if (!value) {
        if (i + 1 >= argc) {
          std::fprintf(stderr, "dtf-run: error: %s needs a value\n",
                       arg.c_str());
          return kUsageError;
        }
        value = argv[++i];
      }
      if (arg == "--model-dir") {
        if (!*value) {
          std::fprintf(stderr, "dtf-run: error: --model-dir needs a directory\n");
          return kUsageError;
        }
        options.modelDir = value;
        continue;
      }
      if (arg == "--predict" || arg == "--output" || arg == "-o") {
        if (!*value) {
          std::fprintf(stderr, "dtf-run: error: %s needs a value\n",
                       arg.c_str());
          return kUsageError;
        }
        (arg == "--predict" ? predict.source : predict.output) = value;
        continue;
      }
      if (arg == "--cluster") {
        clusterFlags.cluster = value;
        continue;
      }
      if (arg == "--tls-dir" || arg == "--bind") {
        if (!*value) {
          std::fprintf(stderr, "dtf-run: error: %s needs a value\n",
                       arg.c_str());
          return kUsageError;
        }
        (arg == "--tls-dir" ? distributedFlags.tlsDir : distributedFlags.bind) =
            value;
        continue;
      }
      if (arg == "--job") {
        clusterFlags.job = value;
        continue;
      }
      if (arg == "--slurm-jobs") {
        dtf::Status s =
            dtf::cluster::SlurmJobs::parse(value, &clusterFlags.slurm.jobs);
        if (!s.isOk()) {
          std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
          return kUsageError;
        }
        continue;
      }
      if (arg == "--slurm-port-base") {
        const long long port = parseCount(value);
        if (port < 1 || port > 65535) {
          std::fprintf(stderr,
                       "dtf-run: error: --slurm-port-base expects a port "
                       "(1 to 65535), got '%s'\n",
                       value);
          return kUsageError;
        }
        clusterFlags.slurm.portBase = int(port);
        continue;
      }
      if (arg == "--task") {
        clusterFlags.task = value;
        continue;
      }
      if (arg == "--max-restarts")
        continue; // the launcher reads it
      if (arg == "--chief") {
        chiefFlag = value;
        continue;
      }
      if (arg == "--connect-timeout" || arg == "--sync-timeout" ||
          arg == "--evaluator-idle-timeout" || arg == "--stall-timeout") {
        char *end = nullptr;
        double seconds = std::strtod(value, &end);
        if (!*value || *end || !(seconds > 0) || seconds > 1e6) {
          std::fprintf(stderr,
                       "dtf-run: error: %s expects seconds (> 0), got '%s'\n",
                       arg.c_str(), value);
          return kUsageError;
        }
        (arg == "--connect-timeout" ? distributedFlags.connectTimeoutSeconds
         : arg == "--sync-timeout"  ? distributedFlags.syncTimeoutSeconds
         : arg == "--stall-timeout" ? distributedFlags.stallTimeoutSeconds
                                    : evaluatorFlags.idleTimeoutSeconds) =
            seconds;
        continue;
      }
      long long n = parseCount(value);
      if (arg == "--chunk-bytes") {
        // At least a page: smaller chunks only multiply the calls.
        if (n < 4096 || n > (1ll << 30)) {
          std::fprintf(stderr,
                       "dtf-run: error: --chunk-bytes expects bytes from 4096 "
                       "to 1073741824, got '%s'\n",
                       value);
          return kUsageError;
        }
        distributedFlags.chunkBytes = size_t(n);
        continue;
      }
      if (n < 0 || (arg != "--steps" && n == 0) ||
          ((arg == "--threads" || arg == "--inter-op-threads") &&
           n > 4096)) {
        std::fprintf(
            stderr, "dtf-run: error: %s expects a %s integer, got '%s'\n",
            arg.c_str(), arg == "--steps" ? "non-negative" : "positive", value);
        return kUsageError;
      }
      if (arg == "--steps")
        options.steps = n;
      else if (arg == "--log-every")
        options.logEvery = n;
      else if (arg == "--inter-op-threads")
        options.interOpThreads = int(n);
      else
        options.threads = int(n);
      continue;
    }
    if (arg[0] == '-' && arg.size() > 1) {
      std::fprintf(stderr,
                   "dtf-run: error: unknown option '%s' (see dtf-run --help)\n",
                   argv[i]);
      return kUsageError;
    }
    if (!plan.empty()) {
      std::fprintf(stderr,
                   "dtf-run: error: more than one plan given ('%s' and '%s')\n",
                   plan.c_str(), argv[i]);
      return kUsageError;
    }
    plan = argv[i];
  }
  if (plan.empty()) {
    std::fprintf(stderr, "dtf-run: error: no plan given\n%s", kUsage);
    return kUsageError;
  }
  if (options.fresh && options.modelDir.empty()) {
    std::fprintf(stderr, "dtf-run: error: --fresh needs --model-dir DIR (the "
                         "directory whose checkpoints to set aside)\n");
    return kUsageError;
  }
  if (!predict.source.empty() || !predict.output.empty()) {
    if (predict.source.empty() || predict.output.empty() ||
        options.modelDir.empty()) {
      std::fprintf(stderr, "dtf-run: error: --predict DATA needs -o FILE "
                           "(.csv or .npy) and --model-dir DIR (the "
                           "checkpoints to predict with)\n");
      return kUsageError;
    }
    if (clusterFlags.cluster || clusterFlags.job) {
      std::fprintf(stderr, "dtf-run: error: --predict runs on this machine; "
                           "leave out --cluster and --job\n");
      return kUsageError;
    }
    predict.modelDir = options.modelDir;
    predict.threads = options.threads;
  }
  dtf::cluster::RunChoice choice;
  {
    dtf::Status s =
        dtf::cluster::chooseRunMode(clusterFlags, std::getenv("TF_CONFIG"), &choice);
    if (!s.isOk()) {
      std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
      return kUsageError;
    }
  }
  if (!chiefFlag.empty()) {
    // "worker.1" (as dtf-run names tasks) or "worker:1".
    const size_t dot = chiefFlag.find_first_of(".:");
    long long index = dot == std::string::npos
                          ? -1
                          : parseCount(chiefFlag.c_str() + dot + 1);
    if (choice.mode == dtf::cluster::RunMode::kLocal) {
      std::fprintf(stderr, "dtf-run: error: --chief needs a cluster "
                           "(--cluster FILE or TF_CONFIG)\n");
      return kUsageError;
    }
    dtf::Status s =
        index < 0 ? dtf::errorStatus("--chief expects a task such as worker.1, "
                                     "not '", chiefFlag, "'")
                  : choice.cluster.setChief(
                        {chiefFlag.substr(0, dot), int(index)});
    if (!s.isOk()) {
      std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
      return kUsageError;
    }
  }
  if (!predict.source.empty())
    choice.mode = dtf::cluster::RunMode::kLocal; // whatever TF_CONFIG says
  if (choice.mode != dtf::cluster::RunMode::kTask &&
      (!distributedFlags.bind.empty() || !distributedFlags.tlsDir.empty() ||
       distributedFlags.insecure) &&
      (choice.mode == dtf::cluster::RunMode::kLocal ||
       !distributedFlags.bind.empty())) {
    std::fprintf(stderr, "dtf-run: error: %s\n",
                 choice.mode == dtf::cluster::RunMode::kLocal
                     ? "--tls-dir, --insecure and --bind need a cluster "
                       "(--cluster FILE or TF_CONFIG)"
                     : "--bind is for one task (--job/--task): the tasks "
                       "the launcher starts each listen on their own "
                       "address in the cluster file");
    return kUsageError;
  }
  if (choice.mode == dtf::cluster::RunMode::kLauncher) {
    // Check the plan before starting anything.
    google::protobuf::SetLogHandler(nullptr);
    dtf::plan::Plan parsed;
    dtf::Status s = dtf::plan::readPlanFile(plan, &parsed);
    if (!s.isOk()) {
      std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
      return kIoError;
    }
    return dtf::run::runLauncherMode(choice, argc, argv);
  }

  chooseOpenMpWaits(argv, choice.mode == dtf::cluster::RunMode::kLocal);

  // The plan reader reports every problem itself; protobuf's own log lines
  // (invalid UTF-8 in a corrupted plan, say) would only add noise.
  google::protobuf::SetLogHandler(nullptr);

  dtf::plan::Plan parsed;
  dtf::plan::PlanErrorKind planError = dtf::plan::PlanErrorKind::kNone;
  dtf::Status s = dtf::plan::readPlanFile(plan, &parsed, &planError);
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
    return kIoError;
  }

  if (!predict.source.empty())
    return dtfrun::runPredict(parsed, predict);
  watchInterrupts();
  options.stop = &gStop;
  if (choice.mode == dtf::cluster::RunMode::kTask &&
      choice.task.job == dtf::cluster::kEvaluatorJob)
    return dtfrun::cloudExitCode(
        choice, dtfrun::runEvaluator(parsed, options, evaluatorFlags, &gStop));
  if (choice.mode == dtf::cluster::RunMode::kTask)
    return dtfrun::cloudExitCode(choice,
                                 dtfrun::runTask(plan, parsed, choice, options,
                                                 distributedFlags, &gStop));
  dtf::train::TrainReport report;
  dtf::train::FailureKind kind = dtf::train::FailureKind::kNone;
  s = dtf::train::train(parsed, options, &report, &kind);
  if (!s.isOk()) {
    std::fflush(stdout);
    std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
    return exitCodeOf(kind);
  }
  return report.interrupted ? kInterrupted : kOk;
}
