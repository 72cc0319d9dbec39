// dtf.fused regions to CPU machine code: loops in scf, LLVM, a shared object.
#include "compiler/kernels/KernelGen.h"
#include "compiler/kernels/ScalarOps.h"
#include "compiler/kernels/UpdateKernels.h"

#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/Transforms/Fusion.h"
#include "plan.pb.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/Function.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

#include <map>
#include <mutex>

using namespace mlir;
using namespace mlir::dtf;

namespace {

/// The C ABI entry point of one fused region.
LogicalResult buildKernelFunc(FusedOp fused, OpBuilder &b, StringRef name) {
  if (Operation *update = fusedUpdateOp(fused)) // in place: UpdateKernels.h
    return buildCpuUpdateFunc(fused, update, b, name);
  MLIRContext *ctx = b.getContext();
  Location loc = fused.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto i64 = b.getI64Type();
  auto func = b.create<func::FuncOp>(
      loc, name, b.getFunctionType({ptr, ptr, i64, i64}, {}));
  Block *entry = func.addEntryBlock();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  Value buffers = entry->getArgument(0);
  Value begin = entry->getArgument(2), end = entry->getArgument(3);

  // The buffer pointers, loaded once: inputs, then outputs.
  SmallVector<Value> pointers;
  const unsigned numOperands = fused.getInputs().size() + fused.getNumResults();
  for (unsigned k = 0; k < numOperands; ++k) {
    Value slot = fb.create<LLVM::GEPOp>(loc, ptr, ptr, buffers,
                                        ArrayRef<LLVM::GEPArg>{int32_t(k)});
    pointers.push_back(fb.create<LLVM::LoadOp>(loc, ptr, slot));
  }
  Value step = fb.create<arith::ConstantIndexOp>(loc, 1);
  // scalars[0]: the loop's element count (the iteration space's in a kernel
  // without reductions).
  Value total = fb.create<LLVM::LoadOp>(loc, i64, entry->getArgument(1));
  // One flat scf.parallel over [begin, end): a builder in its body, and i.
  auto flatLoop = [&](Value &i) {
    Value lo = fb.create<arith::IndexCastOp>(loc, fb.getIndexType(), begin);
    Value hi = fb.create<arith::IndexCastOp>(loc, fb.getIndexType(), end);
    auto loop = fb.create<scf::ParallelOp>(loc, ValueRange{lo}, ValueRange{hi},
                                           ValueRange{step});
    fb.create<func::ReturnOp>(loc);
    OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
    i = lb.create<arith::IndexCastOp>(loc, i64, loop.getInductionVars()[0]);
    return lb;
  };
  if (hasReductions(fused)) {
    // One iteration per output element of the reductions; the i64
    // parameters are elements, reduced, inner (docs/plan-format.md).
    Value scalars = entry->getArgument(1);
    SmallVector<Value> counts;
    for (int32_t k = 0; k < 3; ++k) {
      Value slot = fb.create<LLVM::GEPOp>(loc, ptr, i64, scalars,
                                          ArrayRef<LLVM::GEPArg>{k});
      counts.push_back(fb.create<LLVM::LoadOp>(loc, i64, slot));
    }
    Value t;
    OpBuilder lb = flatLoop(t);
    return emitReducedRegionAt(lb, fused, pointers, t, counts[0], counts[1],
                               counts[2], /*readUnusedInputs=*/false,
                               /*interleave=*/true);
  }
  const int64_t rowSize = largestSuffix(fused);
  if (rowSize == 0) {
    Value i;
    OpBuilder lb = flatLoop(i);
    return emitRegionAt(lb, fused, pointers, i, total, false);
  }
  // A bias of rowSize elements: rows of rowSize over [begin, end), each an
  // inner loop that reads the bias contiguously.
  Value size = fb.create<arith::ConstantOp>(loc, fb.getI64IntegerAttr(rowSize));
  Value one64 = fb.create<arith::ConstantOp>(loc, fb.getI64IntegerAttr(1));
  Value firstRow = fb.create<arith::DivSIOp>(loc, begin, size);
  Value lastRow = fb.create<arith::DivSIOp>(
      loc,
      fb.create<arith::AddIOp>(loc, end,
                               fb.create<arith::SubIOp>(loc, size, one64)),
      size);
  auto rows = fb.create<scf::ForOp>(
      loc, fb.create<arith::IndexCastOp>(loc, fb.getIndexType(), firstRow),
      fb.create<arith::IndexCastOp>(loc, fb.getIndexType(), lastRow), step);
  fb.create<func::ReturnOp>(loc);
  OpBuilder rb = OpBuilder::atBlockBegin(rows.getBody());
  Value row = rb.create<arith::IndexCastOp>(loc, i64, rows.getInductionVar());
  Value rowStart = rb.create<arith::MulIOp>(loc, row, size);
  Value lo = rb.create<arith::MaxSIOp>(loc, begin, rowStart);
  Value hi = rb.create<arith::MinSIOp>(
      loc, end, rb.create<arith::AddIOp>(loc, rowStart, size));
  auto loop = rb.create<scf::ParallelOp>(
      loc, ValueRange{rb.create<arith::IndexCastOp>(loc, rb.getIndexType(), lo)},
      ValueRange{rb.create<arith::IndexCastOp>(loc, rb.getIndexType(), hi)},
      ValueRange{step});
  OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
  Value i = lb.create<arith::IndexCastOp>(loc, i64, loop.getInductionVars()[0]);
  return emitRegionAt(lb, fused, pointers, i, total, false, rowStart,
                      rowSize);
}

// The passes from the loops to the LLVM dialect. libm calls for what LLVM
// has no intrinsic for (tanh); exp and log become intrinsics that LLVM
// lowers to the same libm calls the op-by-op kernels make.
constexpr const char *kLowerToLLVM =
    "builtin.module(convert-scf-to-cf,convert-math-to-llvm,"
    "convert-math-to-libm,convert-arith-to-llvm,convert-index-to-llvm,"
    "convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts)";

std::unique_ptr<llvm::TargetMachine> cpuTargetMachine(std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  const std::string triple = "x86_64-unknown-linux-gnu";
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, kCpuKernelTarget, "", options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
}

void optimize(llvm::Module &module, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
}

// Removes a file when it goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
};

LogicalResult linkSharedObject(llvm::StringRef objectBytes, std::string &so,
                               std::string &error) {
  TempFile obj, lib;
  int fd = -1;
  if (llvm::sys::fs::createTemporaryFile("dtf-kernels", "o", fd, obj.path)) {
    error = "cannot create a temporary object file";
    return failure();
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << objectBytes;
  }
  if (llvm::sys::fs::createTemporaryFile("dtf-kernels", "so", lib.path)) {
    error = "cannot create a temporary shared object";
    return failure();
  }
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc) {
    error = "no C compiler driver 'cc' on PATH to link the CPU kernels (install "
            "gcc, or compile with --fusion=off)";
    return failure();
  }
  llvm::SmallVector<llvm::StringRef> args = {
      *cc, "-shared", "-nostartfiles", "-o", lib.path, obj.path, "-lm"};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 60, 0,
                                     &message);
  if (rc != 0) {
    error = "linking the CPU kernels with " + *cc + " failed" +
            (message.empty() ? "" : ": " + message);
    return failure();
  }
  auto buffer = llvm::MemoryBuffer::getFile(lib.path, /*IsText=*/false);
  if (!buffer) {
    error = "cannot read the linked kernels: " + buffer.getError().message();
    return failure();
  }
  so = (*buffer)->getBuffer().str();
  return success();
}

struct FusedToLoopsPass
    : public PassWrapper<FusedToLoopsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FusedToLoopsPass)
  StringRef getArgument() const final { return "dtf-fused-to-loops"; }
  StringRef getDescription() const final {
    return "Adds the CPU kernel function (an scf.parallel loop) of every "
           "dtf.fused region";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, math::MathDialect, scf::SCFDialect,
                    LLVM::LLVMDialect, func::FuncDialect>();
  }
  void runOnOperation() override {
    if (failed(buildCpuKernelFuncs(getOperation(), getOperation())))
      signalPassFailure();
  }
};

struct LowerKernelsPass
    : public PassWrapper<LowerKernelsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LowerKernelsPass)
  StringRef getArgument() const final { return "dtf-lower-kernels-to-llvm"; }
  StringRef getDescription() const final {
    return "Lowers generated kernel functions to the LLVM dialect";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect, func::FuncDialect>();
  }
  void runOnOperation() override {
    if (failed(lowerKernelsToLLVM(getOperation())))
      signalPassFailure();
  }
};

} // namespace

std::map<int64_t, FusedOp> mlir::dtf::planKernelOps(ModuleOp module) {
  std::map<int64_t, FusedOp> byKernel;
  auto add = [&](Operation *root) {
    root->walk([&](FusedOp op) { byKernel.emplace(op.getKernel(), op); });
  };
  auto train = module.lookupSymbol<func::FuncOp>("train_step");
  auto eval = module.lookupSymbol<func::FuncOp>("eval");
  if (!train && !eval)
    add(module);
  for (func::FuncOp f : {train, eval})
    if (f)
      add(f);
  return byKernel;
}

LogicalResult mlir::dtf::buildCpuKernelFuncs(ModuleOp module,
                                             ModuleOp kernels) {
  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<arith::ArithDialect, math::MathDialect, scf::SCFDialect,
                   LLVM::LLVMDialect, func::FuncDialect>();
  std::map<int64_t, FusedOp> byKernel = planKernelOps(module);
  OpBuilder b = OpBuilder::atBlockEnd(kernels.getBody());
  for (auto &[k, op] : byKernel)
    if (failed(buildKernelFunc(op, b, "dtf_fused_" + std::to_string(k))))
      return failure();
  return success();
}

LogicalResult mlir::dtf::lowerKernelsToLLVM(ModuleOp kernels) {
  static std::once_flag registered;
  std::call_once(registered, [] { registerConversionPasses(); });
  FailureOr<OpPassManager> pipeline = parsePassPipeline(kLowerToLLVM);
  if (failed(pipeline))
    return failure();
  PassManager pm(kernels.getContext());
  static_cast<OpPassManager &>(pm) = std::move(*pipeline);
  return pm.run(kernels);
}

LogicalResult mlir::dtf::compileCpuKernels(ModuleOp module,
                                           ::dtf::plan::Plan &plan,
                                           std::string &error,
                                           std::string *llvmIR) {
  MLIRContext *ctx = module.getContext();
  OwningOpRef<ModuleOp> kernels = ModuleOp::create(module.getLoc());
  if (failed(buildCpuKernelFuncs(module, *kernels))) {
    error = "cannot build the kernel loops";
    return failure();
  }
  if (failed(lowerKernelsToLLVM(*kernels))) {
    error = "cannot lower the kernels to the LLVM dialect";
    return failure();
  }
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*kernels, llvmContext, "dtf_kernels");
  if (!llvmModule) {
    error = "cannot translate the kernels to LLVM IR";
    return failure();
  }
  std::unique_ptr<llvm::TargetMachine> tm = cpuTargetMachine(error);
  if (!tm)
    return failure();
  llvmModule->setDataLayout(tm->createDataLayout());
  llvmModule->setTargetTriple(tm->getTargetTriple().str());
  for (llvm::Function &f : *llvmModule)
    if (!f.isDeclaration())
      f.addFnAttr("target-cpu", kCpuKernelTarget);
  optimize(*llvmModule, *tm);
  if (llvmIR) {
    llvm::raw_string_ostream os(*llvmIR);
    llvmModule->print(os, nullptr);
  }
  llvm::SmallVector<char, 0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager codegen;
    if (tm->addPassesToEmitFile(codegen, os, nullptr,
                                llvm::CodeGenFileType::ObjectFile)) {
      error = "this LLVM cannot emit x86-64 object files";
      return failure();
    }
    codegen.run(*llvmModule);
  }
  std::string so;
  if (failed(linkSharedObject(llvm::StringRef(object.data(), object.size()),
                              so, error)))
    return failure();
  plan.set_cpu_object(std::move(so));
  plan.set_cpu_target(kCpuKernelTarget);
  return success();
}

void mlir::dtf::registerKernelPasses() {
  PassRegistration<FusedToLoopsPass>();
  PassRegistration<LowerKernelsPass>();
}
