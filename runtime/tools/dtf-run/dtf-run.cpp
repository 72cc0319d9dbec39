// dtf-run: trains a plan, alone on this machine or as tasks of a ps/worker
// cluster. This file parses the command line; runtime/task runs it.
#include "dtf/Version.h"

#include "runtime/cluster/RunMode.h"
#include "runtime/cluster/Scaling.h"
#include "runtime/core/FloatEnv.h"
#include "runtime/distributed/PushCompression.h"
#include "runtime/task/Task.h"
#include "runtime/tools/dtf-run/CertsCommand.h"

#include <malloc.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using dtf::task::kOk;
using dtf::task::kUsageError;

constexpr const char *kUsage = R"(usage: dtf-run PLAN [options]

Trains the model in PLAN (a plan.bin written by dtfc).

  dtf-run plan.bin                          train on this machine (embedded default)
  dtf-run plan.bin --cluster cluster.json   start and supervise the local tasks
  dtf-run plan.bin --cluster cluster.json --job worker --task 1   run one task
  dtf-run plan.bin --predict eval --model-dir DIR -o out.csv      predict
  dtf-run certs --cluster cluster.json --out DIR   make the cluster's TLS certificates
  dtf-run ctl --cluster cluster.json scale worker=N   scale a running job

options:
  --steps N        train N steps instead of the plan's count (0: only evaluate)
  --log-every N    print progress every N steps (default: the plan's summary
                   policy when it counts steps, else 100)
  --eval-steps N   evaluate on the eval set's first N batches (Keras'
                   evaluate(steps=N), an EvalSpec's steps); default: all
  --threads N      threads within each op, for dtf's kernels and oneDNN's
                   (default: the plan's intra_op_threads, else every core;
                   the launcher gives the tasks it starts max(1, cores /
                   its worker tasks) when it starts two workers or more)
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
  --restore latest|latest-valid  with --model-dir: which checkpoint to
                   restore (for --predict too; the launcher passes it to its
                   tasks). latest (the default): the newest, checked whole
                   first; a damaged one stops the run with exit 4, naming the
                   damage. latest-valid: the newest whole one, with a warning
                   naming each damaged one passed over and the one taken.
                   Either way a DIR whose checkpoints are all damaged is
                   refused (exit 4), never trained over from the initializers
  --quiet          print only the final line (and errors)
  --profile        time every op of the train_step and print, on stderr at
                   the end, the time per step by op kind and the slowest ops;
                   ops on a GPU are timed on it by CUDA events, their
                   segments run without CUDA graphs (docs/gpu.md)
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
  --workers N      the job starts with the first N worker tasks of the
                   cluster file, the chief counted (default: all): the
                   launcher starts those, and the ps tasks count them live
                   from the start; `dtf-run ctl --cluster FILE scale
                   worker=N` changes it while the job runs: slots that join
                   start at their next step, those scaled away leave after
                   their step (docs/elastic.md)
  --ps N           the job runs over the first N ps tasks of the cluster
                   file (default: all): the launcher starts those and every
                   task places the variables over them; `dtf-run ctl
                   --cluster FILE scale ps=N` re-shards a running job over
                   N ps through a checkpoint of its current step (every task
                   restarts; needs --model-dir; docs/elastic.md)
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
  --wire f32|bf16  how pulls and pushes carry f32 values: as they are (f32,
                   the default), or as bfloat16 (bf16: half the bytes; the
                   ps keeps and updates f32 variables, the workers compute
                   with the bf16-rounded ones and push bf16 gradients)
  --overlap-push   async between-graph training: each step's push and the
                   next step's pull cross at once (both ways of every link
                   busy); the pull may miss the worker's own last gradient
                   (staleness at most 1)
  --prefetch-pull  async between-graph training: the next step's pull
                   starts as each step starts and runs beside its compute
                   and push; a step's variables may lack the worker's own
                   last gradient (staleness at most 1; docs/protocol.md)
  --data static|exactly-once  how the workers of a cluster share the data:
                   static (the default) reads shard `replica` of
                   `num_workers` of every epoch; exactly-once leases
                   splits of batches from ps 0, which counts a batch only
                   when its update is applied and hands out again those of
                   dead workers, dropped gradients and lost updates, so each
                   epoch applies every example once (docs/elastic.md;
                   with update = sync, one ps task)
  --ps-replicas 1|2  2: every ps keeps a replica of its shard on the next
                   ps task (each update it applies is applied there before
                   it answers), so that a ps lost with kill -9 comes back
                   from that replica, the other ps tasks keeping their state,
                   instead of every ps going back to the last checkpoint; 2
                   ps tasks or more, between-graph jobs (async or sync)
                   without dynamic tables or exactly-once data
                   (docs/elastic.md).
                   Default 1: no replicas
  --split-batches N  exactly-once: batches per split an async worker leases
                   (default 4; sync workers lease one at a time)
  --lease-timeout SECONDS  a worker that makes no call to a ps for this long
                   is gone (killed, or its host lost): sync updates stop
                   waiting for it, the chief does not wait for it at the
                   end, and (exactly-once) a split it neither pushed nor
                   leased for this long goes to another (default 60)
  --compress-push topk:R|onebit  between-graph training: each dense f32
                   gradient of 4096 values or more is pushed compressed,
                   top-k (the share R of its values largest in magnitude,
                   0 < R < 0.5, e.g. topk:0.01: indices and values) or
                   onebit (signs and one scale per 1024 values); what was
                   not sent is kept on the worker and added to the next
                   gradient (error feedback). The ps decodes and applies
                   as usual (docs/protocol.md)
  --same-host shm|unix|tcp  how tasks whose cluster addresses are
                   loopback (127.0.0.0/8, localhost, ::1) talk under TLS:
                   unix over Unix sockets in $DTF_SOCKET_DIR (else
                   /tmp/dtf-UID), a directory of mode 0700 that only this
                   user may enter, each call naming its task and the job's
                   CA, without encryption; shm (the default) as unix, with
                   the tensors of pulls and pushes in shared memory (files
                   of mode 0600 in $DTF_SHM_DIR, else /dev/shm/dtf-UID,
                   also 0700; when it cannot be made they go through the
                   sockets, said once); tcp: TLS over TCP, as between
                   hosts (docs/security.md, docs/protocol.md)
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
  DTF_FLUSH_SUBNORMALS=0
                   keep subnormal floats (below 1.2e-38) on the CPU; by
                   default dtf-run flushes them to zero, as TensorFlow does,
                   since each costs an x86 core ~100 cycles (docs/kernels.md)
  DTF_CONV_WINOGRAD=0
                   run f32 5x5 convolutions of stride 1 with oneDNN's direct
                   kernels; by default they use Winograd's F(2x2, 5x5) on an
                   AVX-512 CPU: fewer multiplications, a little more rounding
                   (docs/kernels.md, "Winograd convolutions")

exit codes:
  0    trained
  2    usage error (bad option, no plan, no step count)
  3    not available in this build (an op without a CPU kernel)
  4    I/O: the plan or a data source is missing, unreadable, malformed or
       does not fit the model's inputs; a checkpoint cannot be restored
       (damaged, see --restore; or of another model) or saved
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

// What the command line says: the request, and the cluster options that
// chooseRunMode and --chief turn into its choice.
struct CommandLine {
  dtf::task::TaskRequest request;
  dtf::cluster::ClusterFlags clusterFlags;
  std::string chief; // --chief TASK
  std::string workers; // --workers N (the launcher's)
  std::string ps;      // --ps N
};

// parse* return kGoOn to go on, else the exit code to stop with; kNotMine
// when the option is not one they parse.
constexpr int kGoOn = -1, kNotMine = -2;

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

// Says "dtf-run: error: " and the message, and returns the usage error.
__attribute__((format(printf, 1, 2))) int usageError(const char *format, ...) {
  std::fputs("dtf-run: error: ", stderr);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputc('\n', stderr);
  return kUsageError;
}

// An option without a value; false when `arg` is none.
bool parseSwitch(const std::string &arg, CommandLine *cl) {
  dtf::task::TaskRequest &r = cl->request;
  if (arg == "--quiet" || arg == "-q")
    r.train.quiet = true;
  else if (arg == "--profile")
    r.train.profile = true;
  else if (arg == "--chief-failover")
    ; // the launcher reads it
  else if (arg == "--insecure")
    r.cluster.insecure = true;
  else if (arg == "--overlap-push")
    r.cluster.overlapPush = true;
  else if (arg == "--prefetch-pull")
    r.cluster.prefetchPull = true;
  else if (arg == "--fresh")
    r.train.fresh = true;
  else
    return false;
  return true;
}

// --gpu-towers N or --emulate-gpus N.
int parseGpuCount(const std::string &arg, const char *value, CommandLine *cl) {
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
    cl->request.train.gpuTowers = int(n);
    return kGoOn;
  }
  // The emulation's run order of streams (docs/gpu.md): refused here,
  // not left to fall back onto the CPU.
  if (const char *order = std::getenv("DTF_EMU_STREAM_ORDER");
      order && std::string(order) != "submission" &&
      std::string(order) != "reversed" && std::string(order) != "interleaved")
    return usageError("DTF_EMU_STREAM_ORDER=%s names no order of the "
                      "emulation's streams: submission, reversed (the "
                      "default) or interleaved",
                      order);
  cl->request.emulatedGpus = int(n);
  return kGoOn;
}

bool takesValue(const std::string &arg) {
  for (const char *name : {"--cluster",
                           "--job",
                           "--model-dir",
                           "--max-restarts",
                           "--workers",
                           "--ps",
                           "--chief",
                           "--connect-timeout",
                           "--sync-timeout",
                           "--chunk-bytes",
                           "--slurm-jobs",
                           "--slurm-port-base",
                           "--evaluator-idle-timeout",
                           "--stall-timeout",
                           "--tls-dir",
                           "--bind",
                           "--same-host",
                           "--wire",
                           "--data",
                           "--split-batches",
                           "--ps-replicas",
                           "--lease-timeout",
                           "--compress-push",
                           "--task",
                           "--steps",
                           "--log-every",
                           "--eval-steps",
                           "--threads",
                           "--inter-op-threads",
                           "--predict",
                           "--restore",
                           "--output",
                           "-o"})
    if (arg == name)
      return true;
  return false;
}

// An option whose value is text: a path, a name, a list.
int parseText(const std::string &arg, const char *value, CommandLine *cl) {
  dtf::task::TaskRequest &r = cl->request;
  if (arg == "--model-dir") {
    if (!*value)
      return usageError("--model-dir needs a directory");
    r.train.modelDir = value;
  } else if (arg == "--predict" || arg == "--output" || arg == "-o") {
    if (!*value)
      return usageError("%s needs a value", arg.c_str());
    (arg == "--predict" ? r.predict.source : r.predict.output) = value;
  } else if (arg == "--restore") {
    if (!dtf::checkpoint::parseRestorePolicy(value, &r.train.restore))
      return usageError("--restore expects latest or latest-valid, got '%s'",
                        value);
  } else if (arg == "--cluster") {
    cl->clusterFlags.cluster = value;
  } else if (arg == "--tls-dir" || arg == "--bind") {
    if (!*value)
      return usageError("%s needs a value", arg.c_str());
    (arg == "--tls-dir" ? r.cluster.tlsDir : r.cluster.bind) = value;
  } else if (arg == "--wire") {
    if (std::string(value) != "f32" && std::string(value) != "bf16")
      return usageError("--wire expects f32 or bf16, got '%s'", value);
    r.cluster.wireBf16 = std::string(value) == "bf16";
  } else if (arg == "--data") {
    if (std::string(value) != "static" && std::string(value) != "exactly-once")
      return usageError("--data expects static or exactly-once, got '%s'",
                        value);
    r.cluster.exactlyOnce = std::string(value) == "exactly-once";
  } else if (arg == "--compress-push") {
    dtf::Status s =
        dtf::dist::parsePushCompression(value, &r.cluster.compressPush);
    if (!s.isOk())
      return usageError("%s", s.message().c_str());
  } else if (arg == "--same-host") {
    const std::string v = value;
    if (v != "shm" && v != "unix" && v != "tcp")
      return usageError("--same-host expects shm, unix or tcp, got '%s'",
                        value);
    r.cluster.sameHostTcp = v == "tcp";
    r.cluster.sharedMemory = v == "shm";
  } else if (arg == "--job") {
    cl->clusterFlags.job = value;
  } else if (arg == "--slurm-jobs") {
    dtf::Status s =
        dtf::cluster::SlurmJobs::parse(value, &cl->clusterFlags.slurm.jobs);
    if (!s.isOk())
      return usageError("%s", s.message().c_str());
  } else if (arg == "--task") {
    cl->clusterFlags.task = value;
  } else if (arg == "--max-restarts") {
    // the launcher reads it
  } else if (arg == "--workers") {
    cl->workers = value; // the launcher reads it; checked with the mode
  } else if (arg == "--ps") {
    cl->ps = value; // checked with the mode
  } else if (arg == "--chief") {
    cl->chief = value;
  } else {
    return kNotMine;
  }
  return kGoOn;
}

// An option whose value is a number: seconds, bytes, a count.
int parseNumber(const std::string &arg, const char *value, CommandLine *cl) {
  dtf::task::TaskRequest &r = cl->request;
  if (arg == "--slurm-port-base") {
    const long long port = parseCount(value);
    if (port < 1 || port > 65535)
      return usageError("--slurm-port-base expects a port (1 to 65535), got "
                        "'%s'",
                        value);
    cl->clusterFlags.slurm.portBase = int(port);
    return kGoOn;
  }
  if (arg == "--connect-timeout" || arg == "--sync-timeout" ||
      arg == "--evaluator-idle-timeout" || arg == "--stall-timeout" ||
      arg == "--lease-timeout") {
    char *end = nullptr;
    double seconds = std::strtod(value, &end);
    if (!*value || *end || !(seconds > 0) || seconds > 1e6)
      return usageError("%s expects seconds (> 0), got '%s'", arg.c_str(),
                        value);
    (arg == "--connect-timeout" ? r.cluster.connectTimeoutSeconds
     : arg == "--sync-timeout"  ? r.cluster.syncTimeoutSeconds
     : arg == "--stall-timeout" ? r.cluster.stallTimeoutSeconds
     : arg == "--lease-timeout" ? r.cluster.leaseTimeoutSeconds
                                : r.evaluator.idleTimeoutSeconds) = seconds;
    return kGoOn;
  }
  long long n = parseCount(value);
  if (arg == "--ps-replicas") {
    if (n != 1 && n != 2)
      return usageError("--ps-replicas expects 1 (no replicas) or 2 (a "
                        "replica of each ps's shard on the next ps), got '%s'",
                        value);
    r.cluster.psReplicas = int(n);
    return kGoOn;
  }
  if (arg == "--split-batches") {
    if (n < 1 || n > 1024)
      return usageError("--split-batches expects a batch count from 1 to "
                        "1024, got '%s'",
                        value);
    r.cluster.splitBatches = int(n);
    return kGoOn;
  }
  if (arg == "--chunk-bytes") {
    // At least a page: smaller chunks only multiply the calls.
    if (n < 4096 || n > (1ll << 30))
      return usageError("--chunk-bytes expects bytes from 4096 to "
                        "1073741824, got '%s'",
                        value);
    r.cluster.chunkBytes = size_t(n);
    return kGoOn;
  }
  if (n < 0 || (arg != "--steps" && n == 0) ||
      ((arg == "--threads" || arg == "--inter-op-threads") && n > 4096))
    return usageError("%s expects a %s integer, got '%s'", arg.c_str(),
                      arg == "--steps" ? "non-negative" : "positive", value);
  if (arg == "--steps")
    r.train.steps = n;
  else if (arg == "--log-every")
    r.train.logEvery = n;
  else if (arg == "--eval-steps")
    r.train.evalSteps = n;
  else if (arg == "--inter-op-threads")
    r.train.interOpThreads = int(n);
  else
    r.train.threads = int(n);
  return kGoOn;
}

// Every argument after the program's name.
int parseArguments(int argc, char **argv, CommandLine *cl) {
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
    if (parseSwitch(arg, cl))
      continue;
    int code = kGoOn;
    if (arg == "--gpu-towers" || arg == "--emulate-gpus") {
      if (!value && i + 1 < argc)
        value = argv[++i];
      code = parseGpuCount(arg, value, cl);
    } else if (takesValue(arg)) {
      if (!value) {
        if (i + 1 >= argc)
          return usageError("%s needs a value", arg.c_str());
        value = argv[++i];
      }
      code = parseText(arg, value, cl);
      if (code == kNotMine)
        code = parseNumber(arg, value, cl);
    } else if (arg[0] == '-' && arg.size() > 1) {
      return usageError("unknown option '%s' (see dtf-run --help)", argv[i]);
    } else if (!cl->request.planPath.empty()) {
      return usageError("more than one plan given ('%s' and '%s')",
                        cl->request.planPath.c_str(), argv[i]);
    } else {
      cl->request.planPath = argv[i];
    }
    if (code != kGoOn)
      return code;
  }
  return kGoOn;
}

// --predict's companions: -o, --model-dir, and no cluster.
int checkPredict(CommandLine *cl) {
  dtf::task::TaskRequest &r = cl->request;
  if (r.predict.source.empty() && r.predict.output.empty())
    return kGoOn;
  if (r.predict.source.empty() || r.predict.output.empty() ||
      r.train.modelDir.empty())
    return usageError("--predict DATA needs -o FILE (.csv or .npy) and "
                      "--model-dir DIR (the checkpoints to predict with)");
  if (cl->clusterFlags.cluster || cl->clusterFlags.job)
    return usageError("--predict runs on this machine; leave out --cluster "
                      "and --job");
  r.predict.modelDir = r.train.modelDir;
  r.predict.restore = r.train.restore;
  r.predict.threads = r.train.threads;
  return kGoOn;
}

// --chief TASK: "worker.1" (as dtf-run names tasks) or "worker:1".
int applyChief(CommandLine *cl) {
  const std::string &chief = cl->chief;
  dtf::cluster::RunChoice &choice = cl->request.choice;
  const size_t dot = chief.find_first_of(".:");
  long long index =
      dot == std::string::npos ? -1 : parseCount(chief.c_str() + dot + 1);
  if (choice.mode == dtf::cluster::RunMode::kLocal)
    return usageError("--chief needs a cluster (--cluster FILE or TF_CONFIG)");
  dtf::Status s =
      index < 0 ? dtf::errorStatus("--chief expects a task such as worker.1, "
                                   "not '",
                                   chief, "'")
                : choice.cluster.setChief({chief.substr(0, dot), int(index)});
  if (!s.isOk())
    return usageError("%s", s.message().c_str());
  return kGoOn;
}

// --ps N: the job runs over the first N ps tasks of the cluster file
// (docs/elastic.md). The launcher passes its own to every task it starts; a
// task drops the other ps slots from its cluster, so that its roster, the
// variables' placement and the checkpoint's shards are those of N ps.
int applyPsCount(CommandLine *cl) {
  const long long n = parseCount(cl->ps.c_str());
  dtf::cluster::RunChoice &choice = cl->request.choice;
  using dtf::cluster::RunMode;
  if (n < 1 || n > 1000000)
    return usageError("--ps expects how many ps tasks of the cluster file the "
                      "job runs over (1 or more), got '%s'",
                      cl->ps.c_str());
  if (choice.mode == RunMode::kLocal)
    return usageError("--ps needs a cluster (--cluster FILE): how many of its "
                      "ps tasks the job runs over");
  dtf::cluster::ClusterSpec kept = choice.cluster;
  dtf::Status s = kept.keepFirstPs(int(n));
  if (!s.isOk())
    return usageError("%s", s.message().c_str());
  if (choice.mode == RunMode::kLauncher)
    return kGoOn; // the launcher starts the first N and passes --ps on
  if (choice.task.job == dtf::cluster::kPsJob && choice.task.index >= n)
    return usageError("--job ps --task %d is not among the first %lld ps "
                      "tasks the job runs over (--ps %lld); start it with "
                      "--ps %d or more",
                      choice.task.index, n, n, choice.task.index + 1);
  choice.cluster = kept;
  return kGoOn;
}

// The options that only make sense together, and the run mode they choose.
int checkCombinations(CommandLine *cl) {
  dtf::task::TaskRequest &r = cl->request;
  if (r.planPath.empty()) {
    std::fprintf(stderr, "dtf-run: error: no plan given\n%s", kUsage);
    return kUsageError;
  }
  if (r.train.fresh && r.train.modelDir.empty())
    return usageError("--fresh needs --model-dir DIR (the directory whose "
                      "checkpoints to set aside)");
  using dtf::checkpoint::RestorePolicy;
  if (r.train.restore != RestorePolicy::kLatest && r.train.modelDir.empty())
    return usageError("--restore needs --model-dir DIR (the directory whose "
                      "checkpoints to restore)");
  if (r.train.restore != RestorePolicy::kLatest && r.train.fresh)
    return usageError("--fresh starts over and --restore picks a checkpoint "
                      "to go on from: give one of them");
  if (int code = checkPredict(cl); code != kGoOn)
    return code;
  dtf::Status s = dtf::cluster::chooseRunMode(
      cl->clusterFlags, std::getenv("TF_CONFIG"), &r.choice);
  if (!s.isOk())
    return usageError("%s", s.message().c_str());
  if (!cl->chief.empty())
    if (int code = applyChief(cl); code != kGoOn)
      return code;
  using dtf::cluster::RunMode;
  if (!r.predict.source.empty())
    r.choice.mode = RunMode::kLocal; // whatever TF_CONFIG says
  const RunMode mode = r.choice.mode;
  if (mode != RunMode::kTask &&
      (!r.cluster.bind.empty() || !r.cluster.tlsDir.empty() ||
       r.cluster.insecure) &&
      (mode == RunMode::kLocal || !r.cluster.bind.empty()))
    return usageError("%s",
                      mode == RunMode::kLocal
                          ? "--tls-dir, --insecure and --bind need a cluster "
                            "(--cluster FILE or TF_CONFIG)"
                          : "--bind is for one task (--job/--task): the tasks "
                            "the launcher starts each listen on their own "
                            "address in the cluster file");
  if (!cl->workers.empty()) {
    const long long n = parseCount(cl->workers.c_str());
    if (mode == RunMode::kLocal || n < 1 || n > 1000000)
      return usageError(
          "%s", n < 1 || n > 1000000
                    ? ("--workers expects how many worker tasks the job "
                       "starts with (1 or more, the chief counted), got '" +
                       cl->workers + "'")
                          .c_str()
                    : "--workers needs a cluster (--cluster FILE): how many "
                      "of its worker tasks the job starts with");
    r.cluster.startWorkers = int(n);
  }
  if (!cl->ps.empty())
    if (int code = applyPsCount(cl); code != kGoOn)
      return code;
  if (mode == RunMode::kLocal && r.cluster.psReplicas > 1)
    return usageError("--ps-replicas needs a cluster (--cluster FILE or "
                      "TF_CONFIG) with 2 ps tasks or more: it keeps a "
                      "replica of each ps's shard on another ps");
  if (mode == RunMode::kLocal && r.cluster.exactlyOnce)
    return usageError("--data exactly-once needs a cluster (--cluster FILE "
                      "or TF_CONFIG): one process already reads every "
                      "example once per epoch");
  if (mode == RunMode::kLocal &&
      (r.cluster.wireBf16 || r.cluster.overlapPush || r.cluster.prefetchPull ||
       r.cluster.sameHostTcp || !r.cluster.sharedMemory ||
       r.cluster.compressPush.enabled()))
    return usageError(
        "--wire, --overlap-push, --prefetch-pull, --compress-push and "
        "--same-host need a cluster (--cluster FILE or TF_CONFIG): they say "
        "how its tasks talk");
  return kGoOn;
}

} // namespace

int main(int argc, char **argv) {
  // Tensors of a step and the messages that carry variables and gradients
  // between tasks are megabytes each, made and freed every step: keep them
  // on the heap for reuse instead of mapping and unmapping (and faulting in)
  // fresh pages each time.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Subnormal floats flushed to zero on every thread this process makes
  // (runtime/core/FloatEnv.h says why): first, before any thread exists.
  // DTF_FLUSH_SUBNORMALS=0 keeps them, for comparing.
  if (const char *keep = std::getenv("DTF_FLUSH_SUBNORMALS");
      !keep || std::strcmp(keep, "0") != 0)
    dtf::flushSubnormals();
  if (argc > 1 && std::strcmp(argv[1], "certs") == 0)
    return dtfrun::runCertsCommand(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "ctl") == 0)
    return dtf::cluster::runControlCommand(argc, argv);
  CommandLine cl;
  if (int code = parseArguments(argc, argv, &cl); code != kGoOn)
    return code;
  if (int code = checkCombinations(&cl); code != kGoOn)
    return code;
  return dtf::task::runTask(cl.request, argc, argv);
}
