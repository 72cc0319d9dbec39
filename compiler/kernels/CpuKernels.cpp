// dtf.fused regions to CPU machine code: loops in scf, LLVM, a shared object.
#include "compiler/kernels/DropoutKernels.h"
#include "compiler/kernels/KernelGen.h"
#include "compiler/kernels/RowKernels.h"
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
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/MDBuilder.h"
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

/// An scf.for at `fb` over the rows of `size` (i64) elements that meet
/// [begin, end): a builder in its body, the row's index and first element,
/// and the part of the row in [begin, end), [lo, hi).
struct RowsIn {
  OpBuilder b;
  Value row, start, lo, hi;
};
RowsIn rowsIn(OpBuilder &fb, Location loc, Value begin, Value end, Value size) {
  Value one64 = fb.create<arith::ConstantOp>(loc, fb.getI64IntegerAttr(1));
  Value firstRow = fb.create<arith::DivSIOp>(loc, begin, size);
  Value lastRow = fb.create<arith::DivSIOp>(
      loc,
      fb.create<arith::AddIOp>(loc, end,
                               fb.create<arith::SubIOp>(loc, size, one64)),
      size);
  auto rows = fb.create<scf::ForOp>(
      loc, fb.create<arith::IndexCastOp>(loc, fb.getIndexType(), firstRow),
      fb.create<arith::IndexCastOp>(loc, fb.getIndexType(), lastRow),
      fb.create<arith::ConstantIndexOp>(loc, 1));
  OpBuilder rb = OpBuilder::atBlockBegin(rows.getBody());
  Value row = rb.create<arith::IndexCastOp>(loc, rb.getI64Type(),
                                            rows.getInductionVar());
  Value rowStart = rb.create<arith::MulIOp>(loc, row, size);
  Value lo = rb.create<arith::MaxSIOp>(loc, begin, rowStart);
  Value hi = rb.create<arith::MinSIOp>(
      loc, end, rb.create<arith::AddIOp>(loc, rowStart, size));
  return RowsIn{rb, row, rowStart, lo, hi};
}

/// The chunked column entry point of a region with column reductions
/// (Kernel.cpu_columns_symbol, docs/plan-format.md): the CPU ABI with
/// `buffers` = the kernel's buffers, then one partial-rows buffer per
/// reduced output (output order), and `scalars` = elements (O * N),
/// reduced (R), inner (N), rows (per chunk, L), phase. Phase 0 sums the
/// chunks: [begin, end) over [O, C, N] (C = ceil(R / L)); row (o, c) of N
/// sums the reduced rows [c L, min(R, c L + L)) into its partial row. Phase
/// 1 combines: [begin, end) over [O, N], the partials in chunk order.
LogicalResult buildColumnsFunc(FusedOp fused, OpBuilder &b, StringRef name) {
  Location loc = fused.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto i64 = b.getI64Type();
  const unsigned numBuffers = fused.getInputs().size() + fused.getNumResults();
  SmallVector<unsigned> slot;
  regionReductions(fused, &slot);
  unsigned numPartials = 0;
  for (unsigned s : slot)
    numPartials = std::max(numPartials, s + 1);
  SmallVector<Value> all;
  func::FuncOp func =
      createCpuKernelEntry(b, loc, name, numBuffers + numPartials, all);
  SmallVector<Value> pointers(all.begin(), all.begin() + numBuffers);
  SmallVector<Value> partials;
  for (unsigned s : slot)
    partials.push_back(all[numBuffers + s]);
  Block *entry = &func.getBody().front();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  Value begin = entry->getArgument(2), end = entry->getArgument(3);
  SmallVector<Value> counts; // elements, reduced, inner, rows, phase
  for (int32_t k = 0; k < 5; ++k)
    counts.push_back(fb.create<LLVM::LoadOp>(
        loc, i64,
        fb.create<LLVM::GEPOp>(loc, ptr, i64, entry->getArgument(1),
                               ArrayRef<LLVM::GEPArg>{k})));
  Value reduced = counts[1], inner = counts[2], rows = counts[3];
  auto c64 = [&](OpBuilder &bb, int64_t v) -> Value {
    return bb.create<arith::ConstantOp>(loc, bb.getI64IntegerAttr(v));
  };
  Value one = c64(fb, 1);
  Value chunks = fb.create<arith::DivSIOp>(
      loc,
      fb.create<arith::SubIOp>(
          loc, fb.create<arith::AddIOp>(loc, reduced, rows), one),
      rows);
  Value combine =
      fb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, counts[4], one);
  auto branch = fb.create<scf::IfOp>(loc, combine, /*withElse=*/true);
  fb.create<func::ReturnOp>(loc);
  {
    // Phase 1: row o of [O, N]; its partial c of element t at
    // t + o N (C - 1) + c N.
    OpBuilder tb = branch.getThenBodyBuilder();
    RowsIn row = rowsIn(tb, loc, begin, end, inner);
    Value partialOffset = row.b.create<arith::MulIOp>(
        loc, row.start, row.b.create<arith::SubIOp>(loc, chunks, one));
    if (failed(emitColumnCombine(row.b, fused, pointers, partials, row.lo,
                                 row.hi, partialOffset, chunks, reduced,
                                 inner)))
      return failure();
  }
  // Phase 0: row u = o C + c of [O C, N], over output elements
  // t = u - shift of row o (shift = o N (C - 1) + c N, where its partials
  // go); input element (o, r, n) is t + o N (R - 1) + r N.
  OpBuilder eb = branch.getElseBodyBuilder();
  RowsIn row = rowsIn(eb, loc, begin, end, inner);
  OpBuilder &rb = row.b;
  Value o = rb.create<arith::DivSIOp>(loc, row.row, chunks);
  Value c = rb.create<arith::RemSIOp>(loc, row.row, chunks);
  Value oStart = rb.create<arith::MulIOp>(loc, o, inner);
  Value shift = rb.create<arith::SubIOp>(loc, row.start, oStart);
  ColumnChunk chunk;
  chunk.rowBegin = rb.create<arith::MulIOp>(loc, c, rows);
  chunk.rowEnd = rb.create<arith::MinSIOp>(
      loc, reduced, rb.create<arith::AddIOp>(loc, chunk.rowBegin, rows));
  chunk.partials = partials;
  chunk.partialOffset = shift;
  Value offset = rb.create<arith::MulIOp>(
      loc, oStart, rb.create<arith::SubIOp>(loc, reduced, one));
  return emitColumnSums(rb, fused, pointers,
                        rb.create<arith::SubIOp>(loc, row.lo, shift),
                        rb.create<arith::SubIOp>(loc, row.hi, shift), offset,
                        oStart, counts[0], reduced, inner, &chunk);
}

/// The C ABI entry point of one fused region.
LogicalResult buildKernelFunc(FusedOp fused, OpBuilder &b, StringRef name) {
  if (Operation *update = fusedUpdateOp(fused)) // in place: UpdateKernels.h
    return buildCpuUpdateFunc(fused, update, b, name);
  if (Operation *row = fusedRowOp(fused)) // one row per call: RowKernels.h
    return buildCpuRowFunc(fused, row, b, name);
  if (Operation *dropout = fusedDropoutOp(fused)) // DropoutKernels.h
    return buildCpuDropoutFunc(fused, dropout, b, name);
  MLIRContext *ctx = b.getContext();
  Location loc = fused.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto i64 = b.getI64Type();
  // The buffer pointers, loaded once: inputs, then outputs.
  SmallVector<Value> pointers;
  func::FuncOp func = createCpuKernelEntry(
      b, loc, name, fused.getInputs().size() + fused.getNumResults(),
      pointers);
  Block *entry = &func.getBody().front();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  Value begin = entry->getArgument(2), end = entry->getArgument(3);
  Value step = fb.create<arith::ConstantIndexOp>(loc, 1);
  // scalars[0]: the loop's element count (the iteration space's in a kernel
  // without reductions).
  Value total = fb.create<LLVM::LoadOp>(loc, i64, entry->getArgument(1));
  // One flat scf.parallel over [begin, end): a builder in its body, and i.
  auto flatLoop = [&](Value &i, bool ret = true) {
    Value lo = fb.create<arith::IndexCastOp>(loc, fb.getIndexType(), begin);
    Value hi = fb.create<arith::IndexCastOp>(loc, fb.getIndexType(), end);
    auto loop = fb.create<scf::ParallelOp>(loc, ValueRange{lo}, ValueRange{hi},
                                           ValueRange{step});
    if (ret)
      fb.create<func::ReturnOp>(loc);
    OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
    i = lb.create<arith::IndexCastOp>(loc, i64, loop.getInductionVars()[0]);
    return lb;
  };
  // An scf.for over the rows of `size` (i64) elements that meet [begin,
  // end): a builder in its body, the row's first element, and the part of
  // the row in [begin, end), [lo, hi).
  struct Row {
    OpBuilder b;
    Value start, lo, hi;
  };
  auto rowsLoop = [&](Value size, bool ret) {
    auto [rb, row, rowStart, lo, hi] = rowsIn(fb, loc, begin, end, size);
    if (ret)
      fb.create<func::ReturnOp>(loc);
    return Row{rb, rowStart, lo, hi};
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
    Value one64 = fb.create<arith::ConstantOp>(loc, fb.getI64IntegerAttr(1));
    Value rows = fb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                          counts[2], one64);
    auto branch = fb.create<scf::IfOp>(loc, rows, /*withElse=*/true);
    fb.create<func::ReturnOp>(loc);
    {
      // N == 1 (rows): one iteration per output element, each summing its
      // row (16 interleaved partial sums, as the op-by-op kernel).
      fb = branch.getThenBodyBuilder();
      Value t;
      OpBuilder lb = flatLoop(t, /*ret=*/false);
      if (failed(emitReducedRegionAt(lb, fused, pointers, t, counts[0],
                                     counts[1], counts[2],
                                     /*readUnusedInputs=*/false,
                                     /*interleave=*/true)))
        return failure();
    }
    // N > 1 (columns): the rows o of [O, N] that meet [begin, end), each
    // summed by passes over contiguous reduced rows (emitColumnSums), so the
    // vectorizer takes the inner loop.
    fb = branch.getElseBodyBuilder();
    Row row = rowsLoop(counts[2], /*ret=*/false);
    Value offset = row.b.create<arith::MulIOp>(
        loc, row.start, row.b.create<arith::SubIOp>(loc, counts[1], one64));
    return emitColumnSums(row.b, fused, pointers, row.lo, row.hi, offset,
                          row.start, counts[0], counts[1], counts[2]);
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
  auto [rb, rowStart, lo, hi] = rowsLoop(size, /*ret=*/true);
  auto loop = rb.create<scf::ParallelOp>(
      loc, ValueRange{rb.create<arith::IndexCastOp>(loc, rb.getIndexType(), lo)},
      ValueRange{rb.create<arith::IndexCastOp>(loc, rb.getIndexType(), hi)},
      ValueRange{step});
  OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
  Value i = lb.create<arith::IndexCastOp>(loc, i64, loop.getInductionVars()[0]);
  return emitRegionAt(lb, fused, pointers, i, total, false, rowStart,
                      rowSize);
}

// The passes from the loops to the LLVM dialect, after f32 exp, log and
// tanh became polynomials (lowerKernelsToLLVM). f64: libm calls for what
// LLVM has no intrinsic for (tanh); exp and log become intrinsics that LLVM
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

/// Tells LLVM that the buffers of kernel `f` do not overlap: each comes from
/// the `buffers` array, so without this LLVM cannot prove that a store to an
/// output leaves the inputs (and the other outputs) unchanged, and does not
/// vectorize a loop that reads and writes several of them (a column sum adds
/// to its outputs in memory). It holds: dtf-run allocates every output for
/// the call (KernelContext::allocateOutput), and inputs are only read. Each
/// buffer gets an alias scope; every access through it is in that scope and
/// declared not to alias the others' (what inlining a function with noalias
/// arguments would give).
void markBuffersDistinct(llvm::Function &f) {
  if (f.isDeclaration() || f.arg_size() != 4)
    return;
  llvm::Argument *buffers = f.getArg(0);
  llvm::DenseMap<const llvm::Value *, unsigned> bufferOf;
  for (llvm::Instruction &inst : f.getEntryBlock())
    if (auto *load = llvm::dyn_cast<llvm::LoadInst>(&inst))
      if (load->getType()->isPointerTy() &&
          llvm::getUnderlyingObject(load->getPointerOperand()) == buffers)
        bufferOf.try_emplace(load, unsigned(bufferOf.size()));
  if (bufferOf.size() < 2)
    return;
  llvm::LLVMContext &ctx = f.getContext();
  llvm::MDBuilder mdb(ctx);
  llvm::MDNode *domain = mdb.createAnonymousAliasScopeDomain(f.getName());
  llvm::SmallVector<llvm::Metadata *> scopes;
  for (unsigned k = 0; k < bufferOf.size(); ++k)
    scopes.push_back(
        mdb.createAnonymousAliasScope(domain, "buffer " + std::to_string(k)));
  llvm::SmallVector<llvm::MDNode *> own, others;
  for (unsigned k = 0; k < scopes.size(); ++k) {
    own.push_back(llvm::MDNode::get(ctx, scopes[k]));
    llvm::SmallVector<llvm::Metadata *> rest;
    for (unsigned j = 0; j < scopes.size(); ++j)
      if (j != k)
        rest.push_back(scopes[j]);
    others.push_back(llvm::MDNode::get(ctx, rest));
  }
  for (llvm::Instruction &inst : llvm::instructions(f)) {
    const llvm::Value *addr = llvm::getLoadStorePointerOperand(&inst);
    if (!addr)
      continue;
    auto it = bufferOf.find(llvm::getUnderlyingObject(addr, /*MaxLookup=*/0));
    if (it == bufferOf.end())
      continue;
    inst.setMetadata(llvm::LLVMContext::MD_alias_scope, own[it->second]);
    inst.setMetadata(llvm::LLVMContext::MD_noalias, others[it->second]);
  }
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
  for (auto &[k, op] : byKernel) {
    const std::string name = "dtf_fused_" + std::to_string(k);
    if (failed(buildKernelFunc(op, b, name)))
      return failure();
    if (!fusedUpdateOp(op) && hasColumnReductions(op) &&
        failed(buildColumnsFunc(op, b, name + "_columns")))
      return failure();
  }
  return success();
}

LogicalResult mlir::dtf::lowerKernelsToLLVM(ModuleOp kernels) {
  static std::once_flag registered;
  std::call_once(registered, [] { registerConversionPasses(); });
  // f32 exp, log and tanh (sigmoid is 1 / (1 + exp(-x))) as MLIR's
  // polynomial approximations: branch-free arithmetic the loop vectorizer
  // makes 8-wide, where libm's expf/logf/tanhf calls keep the loop scalar
  // (a tanh took 20 ns; the LSTM spent a third of its step in tanhf).
  // f64 keeps libm. docs/kernels.md gives the accuracy.
  {
    RewritePatternSet patterns(kernels.getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(kernels, std::move(patterns))))
      return failure();
  }
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
    if (!f.isDeclaration()) {
      f.addFnAttr("target-cpu", kCpuKernelTarget);
      markBuffersDistinct(f);
    }
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
