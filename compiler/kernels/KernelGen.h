// Kernels from dtf.fused regions: the loop nest in MLIR's own dialects
// (scf.parallel over arith and math), lowered to LLVM and compiled in
// process to a shared object for Plan.cpu_object.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include "dialects/Dtf/IR/DtfDialect.h"

#include <map>
#include <string>

namespace dtf::plan {
class Plan;
}

namespace mlir::dtf {

/// The baseline the CPU kernels are compiled for (docs/plan-format.md says
/// why): AVX2 and FMA, every x86 server since 2013-2015.
inline constexpr const char *kCpuKernelTarget = "x86-64-v3";

/// The dtf.fused op of each kernel index: those of @train_step and @eval
/// when the module has them (the plan emitter numbered them as Plan.kernels),
/// else every one in the module.
std::map<int64_t, FusedOp> planKernelOps(ModuleOp module);

/// Adds to `kernels` one `func.func @dtf_fused_<k>` per distinct kernel index
/// of the dtf.fused ops in `module` (kernels may be `module` itself): the C
/// ABI entry point `(!llvm.ptr buffers, !llvm.ptr scalars, i64 begin, i64
/// end)` whose body is one scf.parallel loop over [begin, end) computing the
/// region's ops on scalars.
LogicalResult buildCpuKernelFuncs(ModuleOp module, ModuleOp kernels);

/// Lowers a module of such functions to the LLVM dialect (scf to cf, math
/// to LLVM intrinsics and libm calls, arith, func).
LogicalResult lowerKernelsToLLVM(ModuleOp kernels);

/// The whole CPU path for `module`'s dtf.fused ops: functions, LLVM
/// dialect, LLVM IR optimized at O3 for kCpuKernelTarget, an object file,
/// linked to a shared object with the system's `cc -shared`. Fills
/// plan.cpu_object and plan.cpu_target; on failure `error` says why.
/// With `llvmIR` non-null, also prints the optimized LLVM IR there.
LogicalResult compileCpuKernels(ModuleOp module, ::dtf::plan::Plan &plan,
                                std::string &error,
                                std::string *llvmIR = nullptr);

/// The GPU path: each kernel's loop tiled by 256, mapped to gpu.launch,
/// outlined into one gpu.module, lowered to NVVM; sm_80 PTX in
/// plan.gpu_ptx, sm_80 and sm_90 cubins (ptxas of the CUDA toolkit at
/// `toolkit`, libdevice linked) in plan.gpu_cubins; each Kernel gets its
/// block size, launch rule and its params in the GPU kernel's order.
LogicalResult compileGpuKernels(ModuleOp module, ::dtf::plan::Plan &plan,
                                const std::string &toolkit,
                                std::string &error);

/// Registers dtf-fused-to-loops (buildCpuKernelFuncs as a pass) and
/// dtf-lower-kernels-to-llvm (lowerKernelsToLLVM) for dtf-opt.
void registerKernelPasses();

} // namespace mlir::dtf
