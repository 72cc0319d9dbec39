// dtfc: compiles a .dtf model into a training plan.
#include "compiler/Registration.h"
#include "compiler/frontend/Diagnostics.h"
#include "compiler/frontend/MLIRGen.h"
#include "compiler/frontend/Parser.h"
#include "compiler/kernels/KernelGen.h"
#include "compiler/plan/PlanEmitter.h"
#include "compiler/plan/PlanDot.h"
#include "schema/ClusterSpec.h"
#include "schema/DeviceName.h"
#include "schema/Placement.h"
#include "schema/PlanSchema.h"
#include "schema/PlanSeal.h"
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Transforms/ViewOpGraph.h"

#include <google/protobuf/text_format.h>
#include "dtf/Version.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace {

// Exit codes, distinct per kind of failure (as toyc does).
enum ExitCode {
  kOk = 0,
  kCompileError = 1, // the model has errors; the diagnostics say which
  kUsageError = 2,
  kNotAvailable = 3,
  kIoError = 4,
};

enum class Emit { AST, MLIR, TrainMLIR, FusedMLIR, Kernels, KernelLLVM, PTX, Dot, PlanText, Plan };

cl::OptionCategory category("dtfc options");
cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.dtf>"),
                               cl::init(""), cl::cat(category));
cl::opt<std::string> outputFile("o", cl::desc("Write the output to <file> ('-' for stdout)"),
                                cl::value_desc("file"), cl::init(""),
                                cl::cat(category));
cl::opt<Emit> emit(
    "emit", cl::desc("Stop after a stage and print its result"),
    cl::values(clEnumValN(Emit::AST, "ast", "the syntax tree"),
               clEnumValN(Emit::MLIR, "mlir", "the model in the dtf dialect"),
               clEnumValN(Emit::TrainMLIR, "train-mlir",
                          "the training step: after dtf-autodiff and dtf-optimize"),
               clEnumValN(Emit::FusedMLIR, "fused-mlir",
                          "the training step after dtf-fuse: dtf.fused regions"),
               clEnumValN(Emit::Kernels, "kernels",
                          "each generated kernel: its ops and their source locations"),
               clEnumValN(Emit::KernelLLVM, "kernel-llvm",
                          "the CPU kernels as optimized LLVM IR"),
               clEnumValN(Emit::PTX, "ptx", "the PTX (sm_80) of every GPU kernel"),
               clEnumValN(Emit::Dot, "dot",
                          "each task's program (worker_step, ps_update) as a Graphviz graph"),
               clEnumValN(Emit::PlanText, "plan-text", "the plan, as readable text"),
               clEnumValN(Emit::Plan, "plan", "the training plan (default)")),
    cl::init(Emit::Plan), cl::cat(category));
cl::opt<std::string> modelName("model",
                               cl::desc("The model to compile when the file has several"),
                               cl::value_desc("name"), cl::init(""),
                               cl::cat(category));
cl::opt<unsigned> errorLimit("error-limit",
                             cl::desc("Stop printing after this many errors (default 20)"),
                             cl::init(20), cl::cat(category));
cl::opt<bool> noDataCheck("no-data-check",
                          cl::desc("Do not warn about data paths missing on this machine"),
                          cl::init(false), cl::cat(category));

enum class Fusion { On, Off };
cl::opt<Fusion> fusion(
    "fusion",
    cl::desc("Fuse chains of elementwise ops into generated kernels (default on)"),
    cl::values(clEnumValN(Fusion::On, "on",
                          "dtf-fuse, then CPU machine code in the plan"),
               clEnumValN(Fusion::Off, "off",
                          "no fusion: every op runs its own library kernel")),
    cl::init(Fusion::On), cl::cat(category));

cl::opt<std::string> fuseReductions(
    "fuse-reductions",
    cl::desc("Which sums, means and maxima may end a fused region: all "
             "(default: rows and columns: bias gradients, batch norm's "
             "statistics, whose rows dtf-run cuts into chunks over its "
             "threads, docs/kernels.md), rows (only over the last axes, as "
             "layer norm's statistics, or over every axis, as a loss mean) "
             "or none"),
    cl::init("all"), cl::cat(category));

cl::opt<Fusion> fuseUpdates(
    "fuse-updates",
    cl::desc("With --fusion=on, run each dense optimizer update (apply_sgd, "
             "apply_momentum, apply_adam, apply_adagrad, apply_rmsprop) as a "
             "generated kernel that writes the variable and its slots in "
             "place (default on)"),
    cl::values(clEnumValN(Fusion::On, "on", "generated update kernels"),
               clEnumValN(Fusion::Off, "off", "the op-by-op update kernels")),
    cl::init(Fusion::On), cl::cat(category));

cl::opt<Fusion> fuseRows(
    "fuse-rows",
    cl::desc("With --fusion=on, run each softmax, log_softmax, softmax "
             "cross-entropy (dense or sparse labels), their gradients and "
             "argmax along the last axis as a generated row kernel (default "
             "on)"),
    cl::values(clEnumValN(Fusion::On, "on", "generated row kernels"),
               clEnumValN(Fusion::Off, "off", "the op-by-op loss kernels")),
    cl::init(Fusion::On), cl::cat(category));

cl::opt<Fusion> fuseDropout(
    "fuse-dropout",
    cl::desc("With --fusion=on, run each dropout and dropout_grad as a "
             "generated kernel that draws the op-by-op kernel's mask from a "
             "per-step key (so it runs on a GPU too; default on)"),
    cl::values(clEnumValN(Fusion::On, "on", "generated dropout kernels"),
               clEnumValN(Fusion::Off, "off", "the op-by-op dropout kernels")),
    cl::init(Fusion::On), cl::cat(category));

enum class Recurrent { Library, Unrolled };
cl::opt<Recurrent> recurrent(
    "recurrent",
    cl::desc("How an f32 lstm or gru layer placed on the CPU runs (default "
             "library; on a GPU, and in other float types, it is always "
             "unrolled)"),
    cl::values(clEnumValN(Recurrent::Library, "library",
                          "one op for the whole sequence: oneDNN's LSTM or "
                          "GRU primitive, forward and backward"),
               clEnumValN(Recurrent::Unrolled, "unrolled",
                          "one step's ops (products, slices, gates) per "
                          "time step")),
    cl::init(Recurrent::Library), cl::cat(category));

enum class GpuKernels { Auto, On, Off };
cl::opt<GpuKernels> gpuKernels(
    "gpu-kernels",
    cl::desc("Also compile the fused kernels for NVIDIA GPUs: PTX and sm_80/sm_90 "
             "cubins (default auto: when the CUDA toolkit is there)"),
    cl::values(clEnumValN(GpuKernels::Auto, "auto", "when --cuda-toolkit has ptxas"),
               clEnumValN(GpuKernels::On, "on", "always; an error without the toolkit"),
               clEnumValN(GpuKernels::Off, "off", "CPU code only")),
    cl::init(GpuKernels::Auto), cl::cat(category));
cl::opt<std::string> cudaToolkit(
    "cuda-toolkit",
    cl::desc("The CUDA toolkit for the GPU kernels: ptxas, libdevice "
             "(default /usr/local/cuda)"),
    cl::value_desc("dir"), cl::init("/usr/local/cuda"), cl::cat(category));

cl::opt<std::string> precision(
    "precision",
    cl::desc("The precision policy, over the train block's `precision`: "
             "float32, mixed_bfloat16 or mixed_float16 (matmuls and "
             "convolutions in bf16 or f16 with f32 accumulation, f32 "
             "variables; f16 with a dynamic loss scale)"),
    cl::init(""), cl::cat(category));

cl::opt<bool> placementReport(
    "placement-report",
    cl::desc("Print, for each ps task, its variables and bytes, and the imbalance"),
    cl::init(false), cl::cat(category));
cl::opt<int> numPs("ps", cl::desc("Number of ps tasks for --placement-report (default 2)"),
                   cl::init(2), cl::cat(category));
cl::opt<std::string> clusterFile(
    "cluster",
    cl::desc("Pin the placement to this cluster (cluster.json, TensorFlow's "
             "ClusterSpec shape) instead of leaving it for dtf-run to bind"),
    cl::value_desc("cluster.json"), cl::init(""), cl::cat(category));
cl::opt<std::string> psStrategy(
    "ps-strategy",
    cl::desc("round_robin or greedy for --placement-report (default: the model's)"),
    cl::init(""), cl::cat(category));

void printVersion(llvm::raw_ostream &os) {
  os << "dtfc " << DTF_VERSION_STRING << " (MLIR " << LLVM_VERSION_STRING
     << ")\n";
}

/// --emit=kernels: each kernel, the shape it loops over, its ops and where
/// they come from.
void printKernels(const ::dtf::plan::Plan &plan, llvm::raw_ostream &os) {
  if (plan.kernels_size() == 0)
    os << "no fused kernels (--fusion=off, or no chain of elementwise ops)\n";
  for (const ::dtf::plan::Kernel &k : plan.kernels()) {
    // The iteration shape: an input that has it, else the first output;
    // and the axes a reduced kernel sums ("reduce:<spec>").
    int32_t shaped = k.outputs_size() > 0 ? k.outputs(0) : -1;
    std::string reduces;
    for (const ::dtf::plan::KernelParam &p : k.params()) {
      if (p.meaning().rfind("reduce:", 0) == 0 && reduces.empty())
        reduces = ", " + p.meaning();
      if (p.meaning() == "row-size") // a row kernel: one row per iteration
        reduces = ", rows of the last axis";
      if (p.meaning() == "dropout-key") // its mask from a per-step key
        reduces = ", a mask keyed by the step";
    }
    for (const ::dtf::plan::KernelParam &p : k.params())
      if (!reduces.empty() && p.meaning() == "same" &&
          p.operand() < k.inputs_size()) {
        shaped = k.inputs(p.operand());
        break;
      }
    // An update kernel has no outputs: it writes its variable and slots
    // (the `inout` buffers) in place, over the variable's shape.
    int inPlace = 0;
    for (const ::dtf::plan::KernelParam &p : k.params())
      if (p.meaning() == "inout" && p.operand() < k.inputs_size()) {
        if (inPlace++ == 0 && shaped < 0)
          shaped = k.inputs(p.operand());
      }
    if (inPlace > 0)
      reduces += ", " + std::to_string(inPlace) + " in place";
    const ::dtf::plan::Value *out = nullptr;
    for (const ::dtf::plan::Value &v : k.values())
      if (v.id() == shaped)
        out = &v;
    os << k.name() << ": " << k.ops_size() << " ops, " << k.inputs_size()
       << " inputs, " << k.outputs_size() << " outputs, over "
       << (out ? ::dtf::plan::typeString(out->type()) : std::string("?"))
       << reduces << "\n";
    for (int i = 0; i < k.ops_size(); ++i)
      os << "  " << k.ops(i) << "  "
         << (k.locations(i).empty() ? std::string("(no location)") : k.locations(i))
         << "\n";
  }
}

/// The precision of each matmul, convolution and library LSTM/GRU op of the
/// training step and eval (dtf-mixed-precision's `compute_dtype`); every
/// other op computes in its tensors' dtype (f32), and the variables stay f32.
/// A low-precision product placed on a GPU says what computes it there.
/// `recurrent`, when given, counts the LSTM/GRU ops among those returned.
int lowPrecisionProducts(const ::dtf::plan::Plan &plan, llvm::raw_ostream *os,
                         int *recurrent = nullptr) {
  int n = 0;
  for (const ::dtf::plan::Program *p : {&plan.train_step(), &plan.eval()})
    for (int i = 0; i < p->ops_size(); ++i) {
      const ::dtf::plan::Op &op = p->ops(i);
      auto it = op.attrs().find("compute_dtype");
      const std::string low =
          it != op.attrs().end() ? it->second.s() : std::string();
      const bool bf16 = low == "bf16" || low == "f16";
      n += bf16;
      const std::string &name = op.name();
      const bool rnn = ::dtf::plan::isRecurrentLayerOp(name);
      if (recurrent && bf16 && rnn)
        ++*recurrent;
      if (!os ||
          !(bf16 || rnn || name == "dtf.matmul" || name.rfind("dtf.conv2d", 0) == 0))
        continue;
      ::dtf::DeviceNameParse device = ::dtf::parseDeviceName(op.device());
      const bool onGpu = device.name && device.name->type == ::dtf::DeviceType::GPU;
      *os << "  " << p->name() << ": " << ::dtf::plan::describeOp(*p, i) << "  "
          << (!bf16 ? std::string("f32")
              : onGpu
                  ? low + " operands, f32 accumulation and result (on a GPU: "
                          "cuBLAS and cuDNN, tensor-op math)"
                  : low + " operands, f32 accumulation and result")
          << "\n";
    }
  return n;
}

/// `policy`: the module's precision (the train block's, or --precision).
void printPrecision(const ::dtf::plan::Plan &plan, llvm::StringRef policy,
                    llvm::raw_ostream &os) {
  os << "precision: " << policy
     << " (variables f32; every op not listed computes in f32)\n";
  lowPrecisionProducts(plan, &os);
  // mixed_float16's loss scale (dtf-loss-scale), from the train step.
  bool scaled = false;
  int64_t growth = 0;
  for (const ::dtf::plan::Op &op : plan.train_step().ops()) {
    scaled |= op.name() == "dtf.unscale_gradients";
    if (op.name() == "dtf.adjust_loss_scale")
      growth = op.attrs().at("growth_steps").i();
  }
  if (scaled)
    os << "loss scale: the gradients of loss * loss_scale (an f32 variable), "
          "divided by it before the updates; "
       << (growth ? "dynamic: a step with a non-finite gradient is skipped "
                    "and halves it, " +
                        std::to_string(growth) + " finite steps double it"
                  : std::string("fixed"))
       << "\n";
}

/// Where the result goes, opened only once there is something to write, so a
/// failed compile never truncates an earlier output.
struct Output {
  std::string path;
  int write(llvm::function_ref<void(llvm::raw_ostream &)> body) const {
    std::string errorMessage;
    auto output = mlir::openOutputFile(path, &errorMessage);
    if (!output) {
      llvm::errs() << "dtfc: error: " << errorMessage << "\n";
      return kIoError;
    }
    body(output->os());
    output->keep();
    return kOk;
  }
  int print(mlir::ModuleOp module) const {
    return write([&](llvm::raw_ostream &os) { module->print(os); });
  }
};

/// The training step (dtf-autodiff, dtf-optimize, CSE), printed with
/// --emit=train-mlir, then dtf-fuse's regions with --fusion=on. kOk to go
/// on; -1 when the output was written; an exit code otherwise.
int runPipeline(mlir::MLIRContext &context, mlir::ModuleOp module,
                mlir::dtf::FrontendDiagnostics &diagnostics, const Output &out) {
  mlir::PassManager pm(&context);
  mlir::dtf::DtfLossScaleOptions lossScaleOptions;
  lossScaleOptions.policy = precision;
  pm.addPass(mlir::dtf::createDtfLossScale(lossScaleOptions));
  pm.addPass(mlir::dtf::createDtfAutodiff());
  pm.addPass(mlir::dtf::createDtfOptimize());
  pm.addPass(mlir::createCSEPass());
  mlir::dtf::DtfMixedPrecisionOptions precisionOptions;
  precisionOptions.policy = precision;
  pm.addPass(mlir::dtf::createDtfMixedPrecision(precisionOptions));
  if (mlir::failed(pm.run(module))) {
    diagnostics.printSummary();
    return kCompileError;
  }
  if (emit == Emit::TrainMLIR)
    return out.print(module) == kOk ? -1 : kIoError;
  if (fusion == Fusion::Off)
    return kOk;
  // Only the plan's two programs get kernels; the model's own function (the
  // forward pass they were built from) is not in the plan.
  for (auto func : llvm::make_early_inc_range(module.getOps<mlir::func::FuncOp>()))
    if (func.getSymName() != "train_step" && func.getSymName() != "eval")
      func.erase();
  if (fuseReductions != "all" && fuseReductions != "rows" &&
      fuseReductions != "none") {
    llvm::errs() << "dtfc: --fuse-reductions must be all, rows or none, not '"
                 << fuseReductions << "'\n";
    return kUsageError;
  }
  mlir::dtf::DtfFuseOptions fuseOptions;
  fuseOptions.reductions = fuseReductions;
  fuseOptions.updates = fuseUpdates == Fusion::On;
  fuseOptions.rows = fuseRows == Fusion::On;
  fuseOptions.dropout = fuseDropout == Fusion::On;
  mlir::PassManager fuse(&context);
  fuse.addPass(mlir::dtf::createDtfFuseLibrary());
  fuse.addPass(mlir::dtf::createDtfGpuClip());
  fuse.addPass(mlir::dtf::createDtfFuse(fuseOptions));
  if (mlir::failed(fuse.run(module))) {
    diagnostics.printSummary();
    return kCompileError;
  }
  return kOk;
}

/// The generated kernels' machine code (CPU, and GPU where a toolkit is);
/// --emit=kernel-llvm prints the CPU kernels' IR. kOk to go on; -1 when the
/// output was written; an exit code otherwise.
int compileKernels(mlir::ModuleOp module, ::dtf::plan::Plan &plan,
                   const Output &out) {
  if (plan.kernels_size() == 0)
    return kOk;
  std::string error, llvmIR;
  if (mlir::failed(mlir::dtf::compileCpuKernels(
          module, plan, error, emit == Emit::KernelLLVM ? &llvmIR : nullptr))) {
    llvm::errs() << "dtfc: error: generating the CPU kernels: " << error << "\n";
    return kCompileError;
  }
  if (emit == Emit::KernelLLVM)
    return out.write([&](llvm::raw_ostream &os) { os << llvmIR; }) == kOk ? -1 : kIoError;
  const bool haveToolkit =
      llvm::sys::fs::exists(cudaToolkit.getValue() + "/bin/ptxas");
  if (gpuKernels == GpuKernels::On ||
      (gpuKernels == GpuKernels::Auto && haveToolkit)) {
    if (mlir::failed(mlir::dtf::compileGpuKernels(module, plan, cudaToolkit, error))) {
      llvm::errs() << "dtfc: error: generating the GPU kernels: " << error << "\n";
      return gpuKernels == GpuKernels::On && !haveToolkit ? kNotAvailable
                                                          : kCompileError;
    }
  }
  return kOk;
}

/// --cluster: binds the symbolic placement now: every variable names its ps
/// task, and dtf-run refuses a cluster of another size.
int bindCluster(::dtf::plan::Plan &plan) {
  ::dtf::cluster::ClusterSpec spec;
  ::dtf::Status parsed = ::dtf::cluster::ClusterSpec::parseFile(clusterFile, &spec);
  if (!parsed.isOk()) {
    llvm::errs() << "dtfc: error: " << parsed.message() << "\n";
    return kUsageError;
  }
  const int workers = spec.numWorkers() + spec.numTasks(::dtf::cluster::kChiefJob);
  if (spec.numPs() < 1) {
    llvm::errs() << "dtfc: error: " << clusterFile
                 << " has no ps job: ps/worker training needs at least one ps task\n";
    return kCompileError;
  }
  int replicas = 0;
  if (::dtf::Status s = ::dtf::plan::replicasFor(plan, workers, &replicas); !s.isOk()) {
    llvm::errs() << "dtfc: error: " << clusterFile << ": " << s.message() << "\n";
    return kCompileError;
  }
  ::dtf::plan::Placement placement;
  ::dtf::Status placed = ::dtf::plan::placeVariables(plan, spec.numPs(), "", &placement);
  if (!placed.isOk()) {
    llvm::errs() << "dtfc: error: " << clusterFile << ": " << placed.message() << "\n";
    return kCompileError;
  }
  for (::dtf::plan::Variable &v : *plan.mutable_variables()) {
    auto it = placement.psOf.find(v.name());
    if (it != placement.psOf.end() && it->second >= 0)
      v.set_device("/job:ps/task:" + std::to_string(it->second));
  }
  plan.set_bound_ps_tasks(spec.numPs());
  plan.set_bound_worker_tasks(workers);
  numPs = spec.numPs();
  return kOk;
}

/// What --placement-report, --emit=dot, --emit=plan-text or the plan itself
/// write of a finished plan.
int writePlan(const ::dtf::plan::Plan &plan, const Output &out) {
  if (placementReport) {
    if (numPs < 1) {
      llvm::errs() << "dtfc: error: --ps must be at least 1\n";
      return kUsageError;
    }
    std::string strategy = psStrategy.getValue();
    if (strategy.empty()) {
      strategy = plan.ps_strategy().empty() ? "round_robin" : plan.ps_strategy();
    }
    if (strategy != "round_robin" && strategy != "greedy") {
      llvm::errs() << "dtfc: error: --ps-strategy is round_robin or greedy, not '"
                   << strategy << "'\n";
      return kUsageError;
    }
    ::dtf::plan::Placement placement;
    ::dtf::Status placed = ::dtf::plan::placeVariables(plan, numPs, strategy, &placement);
    if (!placed.isOk()) {
      llvm::errs() << "dtfc: error: " << placed.message() << "\n";
      return kCompileError;
    }
    llvm::outs() << ::dtf::plan::placementReport(placement);
    int recurrent = 0;
    if (int n = lowPrecisionProducts(plan, nullptr, &recurrent))
      llvm::outs() << "precision: "
                   << (std::any_of(plan.train_step().ops().begin(),
                                   plan.train_step().ops().end(),
                                   [](const ::dtf::plan::Op &op) {
                                     auto it = op.attrs().find("compute_dtype");
                                     return it != op.attrs().end() &&
                                            it->second.s() == "f16";
                                   })
                           ? "mixed_float16"
                           : "mixed_bfloat16")
                   << ": the variables above are f32 "
                      "(master weights, f32 on the wire and in checkpoints); "
                   << ::dtf::plan::lowPrecisionOpsPhrase(n, recurrent)
                   << " compute in bf16 or f16 (--emit=kernels lists them)\n";
    return kOk;
  }

  if (emit == Emit::Dot) {
    // Each task's program; per ps task when the placement is bound
    // (--cluster) or asked for (--ps N).
    ::dtf::plan::Placement placement;
    const bool perPs = plan.bound_ps_tasks() > 0 || numPs.getNumOccurrences() > 0;
    if (perPs) {
      ::dtf::Status placed = ::dtf::plan::placeVariables(plan, numPs, "", &placement);
      if (!placed.isOk()) {
        llvm::errs() << "dtfc: error: " << placed.message() << "\n";
        return kCompileError;
      }
    }
    return out.write([&](llvm::raw_ostream &os) {
      os << ::dtf::plan::planToDot(plan, perPs ? &placement : nullptr);
    });
  }
  if (emit == Emit::PlanText)
    return out.write([&](llvm::raw_ostream &os) {
      // What plan.bin holds, its seal included.
      ::dtf::plan::Plan sealed;
      sealed.ParseFromString(::dtf::plan::sealPlan(plan));
      std::string text;
      google::protobuf::TextFormat::PrintToString(sealed, &text);
      os << text;
    });
  // Sealed: the digests of its bytes and its code close the file
  // (Plan.integrity), and every reader checks them before anything runs.
  return out.write(
      [&](llvm::raw_ostream &os) { os << ::dtf::plan::sealPlan(plan); });
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::SetVersionPrinter(printVersion);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "dtfc: compiles a dtf model into a training plan\n\n"
      "  dtfc model.dtf -o plan.bin\n"
      "  dtfc model.dtf --emit=mlir        print the model in the dtf dialect\n"
      "  dtfc model.dtf --emit=ast         print the syntax tree\n"
      "  dtfc model.dtf --emit=kernels     list the fused kernels and their ops\n"
      "  dtfc model.dtf --fusion=off       no generated kernels: op by op\n");
  if (inputFile.empty()) {
    llvm::errs() << "dtfc: error: no input file (see dtfc --help)\n";
    return kUsageError;
  }
  if (!precision.empty() && precision != "float32" &&
      precision != "mixed_bfloat16" && precision != "mixed_float16") {
    llvm::errs() << "dtfc: error: --precision is float32, mixed_bfloat16 or "
                    "mixed_float16, not '"
                 << precision << "'\n";
    return kUsageError;
  }
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(inputFile, /*IsText=*/true);
  if (std::error_code ec = buffer.getError()) {
    llvm::errs() << "dtfc: error: cannot read '" << inputFile
                 << "': " << ec.message() << "\n";
    return kIoError;
  }
  llvm::StringRef source = (*buffer)->getBuffer();
  std::string filename = inputFile == "-" ? "<stdin>" : inputFile.getValue();

  mlir::DialectRegistry registry;
  mlir::dtf::registerDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(source, filename, false), llvm::SMLoc());
  mlir::dtf::FrontendDiagnostics diagnostics(sourceMgr, &context, llvm::errs(),
                                             errorLimit);

  std::optional<mlir::dtf::ast::File> file =
      mlir::dtf::parseSource(source, filename, &context);
  if (!file) {
    diagnostics.printSummary();
    return kCompileError;
  }

  const Output out{outputFile.empty()
                       ? (emit == Emit::Plan ? "plan.bin" : "-")
                       : outputFile.getValue()};
  if (emit == Emit::AST)
    return out.write(
        [&](llvm::raw_ostream &os) { mlir::dtf::ast::dump(*file, os); });

  mlir::dtf::FrontendOptions options;
  options.modelName = modelName;
  options.checkDataPaths = !noDataCheck;
  options.libraryRecurrent = recurrent == Recurrent::Library;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::dtf::buildModule(*file, &context, options);
  if (!module) {
    diagnostics.printSummary();
    return kCompileError;
  }
  if (emit == Emit::MLIR)
    return out.print(*module);

  if (int code = runPipeline(context, *module, diagnostics, out); code != kOk)
    return code < 0 ? kOk : code;
  if (emit == Emit::FusedMLIR)
    return out.print(*module);
  ::dtf::plan::Plan plan;
  if (mlir::failed(mlir::dtf::emitPlan(*module, filename, plan))) {
    diagnostics.printSummary();
    return kCompileError;
  }
  if (emit == Emit::Kernels) {
    auto train = (*module)->getAttrOfType<mlir::DictionaryAttr>("dtf.train");
    auto policy = train ? train.getAs<mlir::StringAttr>("precision") : nullptr;
    return out.write([&](llvm::raw_ostream &os) {
      printKernels(plan, os);
      printPrecision(plan, policy ? policy.getValue() : "float32", os);
    });
  }
  if (int code = compileKernels(*module, plan, out); code != kOk)
    return code < 0 ? kOk : code;
  if (emit == Emit::PTX) {
    if (plan.gpu_ptx().empty()) {
      llvm::errs() << "dtfc: error: the plan has no GPU kernels ("
                   << (plan.kernels_size() == 0 ? "nothing was fused"
                                                : "no CUDA toolkit at " + cudaToolkit)
                   << ")\n";
      return kNotAvailable;
    }
    return out.write([&](llvm::raw_ostream &os) { os << plan.gpu_ptx(); });
  }
  if (!clusterFile.empty())
    if (int code = bindCluster(plan); code != kOk)
      return code;
  return writePlan(plan, out);
}
