// dtf.fused regions to GPU code: the same element loop as on the CPU, as an
// scf.parallel tiled by the block size, mapped to gpu.launch, outlined into
// one gpu.module, lowered to NVVM and compiled to sm_80 PTX and sm_80/sm_90
// cubins with the CUDA toolkit's ptxas.
#include "compiler/kernels/DropoutKernels.h"
#include "compiler/kernels/KernelGen.h"
#include "compiler/kernels/RowKernels.h"
#include "compiler/kernels/ScalarOps.h"
#include "compiler/kernels/UpdateKernels.h"
#include "dialects/Dtf/Transforms/Fusion.h"

#include "plan.pb.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/Support/FileSystem.h"

#include <mutex>

using namespace mlir;
using namespace mlir::dtf;

namespace {

constexpr int kBlock = 256;

/// How a kernel with reductions spreads over a block (docs/kernels.md, "The
/// GPU code"): rows (N = 1: a layer statistic, a loss mean) give each output
/// element a block of 256 threads over its reduced elements; columns (N > 1,
/// static or not: a convolution's or dense layer's bias gradient, a batch
/// statistic) give a block of 32 x 8 threads 32 neighbouring output elements
/// (x, so that a warp reads 32 neighbouring columns of a row), each shared
/// by 8 threads over its rows (y), and split the rows into chunks over the
/// grid's y (dtf-run picks their number), summed again in chunk order by
/// the last block of each column group (docs/kernels.md, "Column reductions
/// over the whole GPU").
struct TreeShape {
  int64_t x, y, outputsPerBlock;
  bool split;
};
TreeShape treeShapeOf(FusedOp fused) {
  if (!hasColumnReductions(fused))
    return TreeShape{kBlock, 1, 1, false};
  return TreeShape{32, 8, 32, true};
}

/// Bytes of workgroup memory a block of `fused`'s tree holds: one slot per
/// thread for each reduction.
int64_t treeSharedBytes(FusedOp fused) {
  const TreeShape shape = treeShapeOf(fused);
  int64_t bytes = 0;
  for (Operation *r : regionReductions(fused, nullptr))
    bytes +=
        shape.x * shape.y *
        int64_t(elementTypeOf(r->getResult(0)).getIntOrFloatBitWidth() / 8);
  return bytes + (shape.split ? 4 : 0); // the "last block" flag
}

/// A split column tree's workspace parameter, inserted after the CPU's
/// `numBuffers` buffers (which the CPU code indexes by position, and after
/// which the columns entry point's partials follow).
void addWorkspaceParam(::dtf::plan::Kernel &kernel, int numBuffers) {
  ::dtf::plan::KernelParam workspace;
  workspace.set_kind("buffer");
  workspace.set_meaning("workspace");
  kernel.mutable_params()->Add(std::move(workspace));
  for (int p = kernel.params_size() - 1; p > numBuffers; --p)
    kernel.mutable_params()->SwapElements(p, p - 1);
}

// To gpu.launch and an outlined kernel per function (checked with
// mlir-opt-19, docs/kernels.md): without no-min-max-bounds the tile keeps an
// affine.min bound and the loop silently stays on the host; the index
// computations are sunk so constants do not become parameters.
constexpr const char *kToKernels =
    "builtin.module(func.func(scf-parallel-loop-tiling{"
    "parallel-loop-tile-sizes=256 no-min-max-bounds=true},"
    "gpu-map-parallel-loops,convert-parallel-loops-to-gpu,lower-affine,"
    "canonicalize),gpu-launch-sink-index-computations,gpu-kernel-outlining)";

// The merged module to NVVM, for both chips. LLVM 19 knows chips up to
// sm_90a; PTX 8.0 for sm_80 also JIT-compiles on newer ones.
std::string toBinary(const std::string &format, const std::string &toolkit) {
  return "builtin.module(nvvm-attach-target{chip=sm_80 features=+ptx80 O=3},"
         "nvvm-attach-target{chip=sm_90 features=+ptx80 O=3},"
         "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm{"
         "use-bare-ptr-memref-call-conv=1},canonicalize,cse,"
         "reconcile-unrealized-casts),"
         "gpu-module-to-binary{format=" +
         format + " toolkit=" + toolkit + "})";
}

LogicalResult runPipeline(ModuleOp module, const std::string &text,
                          std::string &error) {
  FailureOr<OpPassManager> pipeline = parsePassPipeline(text);
  if (failed(pipeline)) {
    error = "bad pass pipeline: " + text;
    return failure();
  }
  PassManager pm(module.getContext());
  static_cast<OpPassManager &>(pm) = std::move(*pipeline);
  if (failed(pm.run(module))) {
    error = "the GPU pass pipeline failed (see the diagnostics above)";
    return failure();
  }
  return success();
}

/// A kernel with reductions as a gpu.launch of block-wide trees
/// (treeShapeOf): block b's thread (x, y) works for output element
/// t = b * outputsPerBlock + (columns ? x : 0) over its rows (y, or x in a
/// row block), then the block combines them in workgroup memory
/// (emitReducedRegionAt with a ReductionTree). The launch's grid is
/// ceil(elements / outputsPerBlock) blocks (Kernel.outputs_per_block).
LogicalResult buildTreeLaunch(FusedOp fused, OpBuilder &fb,
                              ArrayRef<Value> pointers, Value workspace,
                              Value elements, Value reduced, Value inner) {
  Location loc = fused.getLoc();
  MLIRContext *ctx = fb.getContext();
  const TreeShape shape = treeShapeOf(fused);
  const bool columns = shape.outputsPerBlock > 1;
  auto cidx = [&](OpBuilder &bb, int64_t v) -> Value {
    return bb.create<arith::ConstantIndexOp>(loc, v);
  };
  Value grid = fb.create<arith::DivUIOp>(
      loc,
      fb.create<arith::AddIOp>(loc, elements,
                               cidx(fb, shape.outputsPerBlock - 1)),
      cidx(fb, shape.outputsPerBlock));
  SmallVector<Type> sharedTypes;
  for (Operation *r : regionReductions(fused, nullptr))
    sharedTypes.push_back(MemRefType::get(
        {shape.x * shape.y}, elementTypeOf(r->getResult(0)), AffineMap(),
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup)));
  if (shape.split) // the "last block of the column group" flag
    sharedTypes.push_back(MemRefType::get(
        {1}, fb.getI32Type(), AffineMap(),
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup)));
  Value c1 = cidx(fb, 1);
  // A split tree's grid.y is dtf-run's chunk count: no constant here, so
  // that outlining records no known grid size (this host launch never runs).
  Value gridY = shape.split ? fb.create<arith::IndexCastOp>(
                                  loc, fb.getIndexType(), reduced)
                            : c1;
  auto launch = fb.create<gpu::LaunchOp>(
      loc, grid, gridY, c1, cidx(fb, shape.x), cidx(fb, shape.y), c1,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      ValueRange{}, sharedTypes);
  fb.create<func::ReturnOp>(loc);
  OpBuilder lb = OpBuilder::atBlockBegin(&launch.getBody().front());
  auto i64 = lb.getI64Type();
  auto toI64 = [&](Value v) -> Value {
    return lb.create<arith::IndexCastOp>(loc, i64, v);
  };
  // The i64 parameters are first read in their order (elements here, then
  // reduced and inner), so outlining keeps it (compileGpuKernels checks).
  Value count = toI64(elements);
  gpu::KernelDim3 block = launch.getBlockIds(), thread = launch.getThreadIds();
  Value outLane = columns ? thread.x : cidx(lb, 0);
  Value rowLane = columns ? thread.y : thread.x;
  Value t = toI64(lb.create<arith::AddIOp>(
      loc,
      lb.create<arith::MulIOp>(loc, block.x, cidx(lb, shape.outputsPerBlock)),
      outLane));
  ReductionTree tree;
  tree.rowLane = toI64(rowLane);
  tree.rowLanes = columns ? shape.y : shape.x;
  tree.valid =
      lb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, t, count);
  tree.slot = lb.create<arith::AddIOp>(
      loc,
      lb.create<arith::MulIOp>(loc, rowLane, cidx(lb, shape.outputsPerBlock)),
      outLane);
  tree.slotStride = shape.outputsPerBlock;
  tree.shared.assign(launch.getWorkgroupAttributions().begin(),
                     launch.getWorkgroupAttributions().end());
  if (shape.split) {
    tree.split = true;
    tree.lastFlag = tree.shared.pop_back_val();
    tree.chunk = toI64(block.y);
    tree.chunks = toI64(launch.getGridSize().y);
    tree.group = toI64(block.x);
    tree.groups = toI64(launch.getGridSize().x);
    tree.firstThread = lb.create<arith::AndIOp>(
        loc,
        lb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, thread.x,
                                 cidx(lb, 0)),
        lb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, thread.y,
                                 cidx(lb, 0)));
    tree.workspace = workspace;
  }
  lb.create<gpu::TerminatorOp>(loc);
  lb.setInsertionPoint(launch.getBody().front().getTerminator());
  return emitReducedRegionAt(lb, fused, pointers, t, count, reduced, inner,
                             /*readUnusedInputs=*/true, /*interleave=*/false,
                             &tree);
}

/// `func @dtf_fused_<k>(ptr..., index elements)`: scf.parallel over
/// [0, elements) computing the region.
LogicalResult buildHostFunc(FusedOp fused, OpBuilder &b, StringRef name) {
  if (Operation *update = fusedUpdateOp(fused)) // in place: UpdateKernels.h
    return buildGpuUpdateFunc(fused, update, b, name);
  if (Operation *row = fusedRowOp(fused)) // one thread per row: RowKernels.h
    return buildGpuRowFunc(fused, row, b, name);
  if (Operation *dropout = fusedDropoutOp(fused)) // DropoutKernels.h
    return buildGpuDropoutFunc(fused, dropout, b, name);
  MLIRContext *ctx = b.getContext();
  Location loc = fused.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  const unsigned numOperands = fused.getInputs().size() + fused.getNumResults();
  SmallVector<Type> args(numOperands, ptr);
  args.push_back(b.getIndexType());
  const bool reduced = hasReductions(fused);
  // A split column tree's workspace: the last buffer (Kernel.params'
  // "workspace", GPU only).
  const bool split = reduced && treeShapeOf(fused).split;
  if (split)
    args.insert(args.begin() + numOperands, ptr);
  if (reduced) // reduced, inner
    args.append({b.getI64Type(), b.getI64Type()});
  auto func = b.create<func::FuncOp>(loc, name, b.getFunctionType(args, {}));
  Block *entry = func.addEntryBlock();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  SmallVector<Value> pointers(entry->getArguments().take_front(numOperands));
  const unsigned at = numOperands + (split ? 1 : 0);
  Value elements = entry->getArgument(at);
  Value zero = fb.create<arith::ConstantIndexOp>(loc, 0);
  Value one = fb.create<arith::ConstantIndexOp>(loc, 1);
  if (reduced)
    return buildTreeLaunch(
        fused, fb, pointers,
        split ? entry->getArgument(numOperands) : Value(), elements,
        entry->getArgument(at + 1), entry->getArgument(at + 2));
  auto loop = fb.create<scf::ParallelOp>(loc, ValueRange{zero},
                                         ValueRange{elements},
                                         ValueRange{one});
  fb.create<func::ReturnOp>(loc);
  OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
  Value i = lb.create<arith::IndexCastOp>(loc, lb.getI64Type(),
                                          loop.getInductionVars()[0]);
  return emitRegionAt(
      lb, fused, pointers, i,
      lb.create<arith::IndexCastOp>(loc, lb.getI64Type(), elements),
      /*readUnusedInputs=*/true);
}

} // namespace

LogicalResult mlir::dtf::compileGpuKernels(ModuleOp module,
                                           ::dtf::plan::Plan &plan,
                                           const std::string &toolkit,
                                           std::string &error) {
  MLIRContext *ctx = module.getContext();
  static std::once_flag registered;
  std::call_once(registered, [] { registerAllPasses(); });
  {
    DialectRegistry registry;
    registerAllDialects(registry);
    registerAllExtensions(registry);
    registerAllToLLVMIRTranslations(registry);
    NVVM::registerNVVMTargetInterfaceExternalModels(registry);
    ctx->appendDialectRegistry(registry);
  }
  ctx->loadDialect<gpu::GPUDialect, NVVM::NVVMDialect, arith::ArithDialect,
                   scf::SCFDialect, LLVM::LLVMDialect, func::FuncDialect,
                   memref::MemRefDialect>();
  if (!llvm::sys::fs::exists(toolkit + "/bin/ptxas")) {
    error = "no CUDA toolkit at " + toolkit + " (no bin/ptxas)";
    return failure();
  }

  OwningOpRef<ModuleOp> gpuModule = ModuleOp::create(module.getLoc());
  (*gpuModule)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                        UnitAttr::get(ctx));
  std::map<int64_t, FusedOp> byKernel = planKernelOps(module);
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule->getBody());
  for (auto &[k, op] : byKernel)
    if (failed(buildHostFunc(op, b, "dtf_fused_" + std::to_string(k)))) {
      error = "cannot build the GPU loop of kernel " + std::to_string(k);
      return failure();
    }
  if (failed(runPipeline(*gpuModule, kToKernels, error)))
    return failure();

  // One gpu.module for the plan: each launched kernel moves there under its
  // kernel's name, and its launch's operands give the parameter order.
  OpBuilder mb = OpBuilder::atBlockEnd(gpuModule->getBody());
  auto merged = mb.create<gpu::GPUModuleOp>(module.getLoc(), "dtf_kernels");
  SymbolTable table(*gpuModule);
  SmallVector<Operation *> dead;
  for (auto func : gpuModule->getOps<func::FuncOp>()) {
    SmallVector<gpu::LaunchFuncOp> launches;
    func.walk([&](gpu::LaunchFuncOp l) { launches.push_back(l); });
    const int64_t k = std::stoll(func.getSymName().substr(10).str());
    if (launches.size() != 1) {
      error = "kernel " + std::to_string(k) + " became " +
              std::to_string(launches.size()) + " GPU launches, not one";
      return failure();
    }
    gpu::LaunchFuncOp launch = launches.front();
    ::dtf::plan::Kernel *kernel = plan.mutable_kernels(int(k));
    // The CPU order of Kernel.params is the function's arguments: the
    // buffers, then the i64s (elements; reduced, inner in a reduced kernel).
    const int numArgs = int(func.getNumArguments());
    int numBuffers = 0;
    for (const auto &p : kernel->params())
      numBuffers += p.kind() == "buffer";
    auto fused = byKernel.find(k);
    const bool reducedKernel = fused != byKernel.end() &&
                               !fusedUpdateOp(fused->second) &&
                               hasReductions(fused->second);
    if (reducedKernel && treeShapeOf(fused->second).split)
      addWorkspaceParam(*kernel, numBuffers++);
    // Parameters in the launch's order; buffers keep their relative order
    // (the CPU ABI's buffers array), and so do the i64s (its scalars array),
    // which outlining does, as the loop first reads them in that order.
    google::protobuf::RepeatedPtrField<::dtf::plan::KernelParam> params;
    int nextBuffer = 0, nextScalar = numBuffers;
    for (Value operand : launch.getKernelOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (!arg || arg.getOwner() != &func.getBody().front() ||
          arg.getArgNumber() >= unsigned(kernel->params_size())) {
        error = "kernel " + std::to_string(k) +
                " takes a GPU parameter that is not one of its buffers or its "
                "counts";
        return failure();
      }
      const int n = int(arg.getArgNumber());
      int &next = n < numBuffers ? nextBuffer : nextScalar;
      if (n != next++) {
        error = "kernel " + std::to_string(k) +
                " reads its parameters out of order on the GPU";
        return failure();
      }
      *params.Add() = kernel->params(n);
    }
    if (nextBuffer != numBuffers || nextScalar != numArgs ||
        params.size() != numArgs) {
      error = "kernel " + std::to_string(k) +
              " does not take every buffer and count on the GPU";
      return failure();
    }
    *kernel->mutable_params() = std::move(params);
    if (reducedKernel) {
      // A block-wide tree per output element (or 32 of them).
      const TreeShape shape = treeShapeOf(fused->second);
      kernel->set_block(int32_t(shape.x));
      kernel->set_block_y(int32_t(shape.y));
      kernel->set_outputs_per_block(int32_t(shape.outputsPerBlock));
      kernel->set_shared_bytes(int32_t(treeSharedBytes(fused->second)));
      kernel->set_launch(
          shape.split
              ? "grid.x = ceil(elements / outputs_per_block), grid.y = row "
                "chunks (dtf-run's rule), block.x = block, block.y = block_y"
              : "grid.x = ceil(elements / outputs_per_block), block.x = "
                "block, block.y = block_y");
    } else {
      kernel->set_block(kBlock);
      kernel->set_launch("grid.x = ceil(elements / block), block.x = block");
    }

    auto outlined = table.lookup<gpu::GPUModuleOp>(launch.getKernelModuleName());
    auto gpuFunc = outlined.lookupSymbol<gpu::GPUFuncOp>(launch.getKernelName());
    gpuFunc->moveBefore(merged.getBody()->getTerminator());
    gpuFunc.setName(kernel->name());
    dead.push_back(outlined);
    dead.push_back(func);
  }
  for (Operation *op : dead)
    op->erase();

  // PTX and cubins from two copies: one module, so ptxas runs once per chip.
  for (const char *format : {"isa", "bin"}) {
    OwningOpRef<ModuleOp> copy = cast<ModuleOp>((*gpuModule)->clone());
    if (failed(runPipeline(*copy, toBinary(format, toolkit), error)))
      return failure();
    for (auto binary : copy->getOps<gpu::BinaryOp>())
      for (Attribute a : binary.getObjects()) {
        auto object = cast<gpu::ObjectAttr>(a);
        auto target = cast<NVVM::NVVMTargetAttr>(object.getTarget());
        std::string bytes = object.getObject().getValue().str();
        if (std::string(format) == "isa") {
          if (target.getChip() != "sm_80")
            continue;
          while (!bytes.empty() && bytes.back() == '\0')
            bytes.pop_back(); // ptxas reads "Unexpected EOF" at a NUL
          plan.set_gpu_ptx(bytes);
        } else {
          (*plan.mutable_gpu_cubins())[target.getChip().str()] = bytes;
        }
      }
  }
  if (plan.gpu_ptx().empty() || plan.gpu_cubins().size() != 2) {
    error = "gpu-module-to-binary gave no PTX or not both cubins";
    return failure();
  }
  return success();
}
