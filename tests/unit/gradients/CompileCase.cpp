// A test model compiled to a plan as dtfc compiles it (CompileCase.h).
#include "CompileCase.h"

#include "compiler/Registration.h"
#include "compiler/frontend/MLIRGen.h"
#include "compiler/frontend/Parser.h"
#include "compiler/kernels/KernelGen.h"
#include "compiler/plan/PlanEmitter.h"
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

namespace dtf::testing {

bool compileCase(const std::string &source, dtf::plan::Plan &plan,
                 std::string &error, bool fuse) {
  mlir::DialectRegistry registry;
  mlir::dtf::registerDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    error += d.str() + "\n";
    return mlir::success();
  });
  auto file = mlir::dtf::parseSource(source, "case.dtf", &context);
  if (!file)
    return false;
  mlir::dtf::FrontendOptions options;
  options.checkDataPaths = false;
  auto module = mlir::dtf::buildModule(*file, &context, options);
  if (!module)
    return false;
  mlir::PassManager pm(&context);
  pm.addPass(mlir::dtf::createDtfAutodiff());
  pm.addPass(mlir::dtf::createDtfOptimize());
  // The train block's precision (float32 unless it says otherwise): the
  // products' compute_dtype, as dtfc marks them.
  pm.addPass(mlir::dtf::createDtfMixedPrecision());
  if (fuse) {
    // As dtfc: the library folds first (a max pool keeps its argmax for its
    // gradient), then the generated kernels.
    pm.addPass(mlir::dtf::createDtfFuseLibrary());
    pm.addPass(mlir::dtf::createDtfFuse());
  }
  if (mlir::failed(pm.run(*module)) ||
      mlir::failed(mlir::dtf::emitPlan(*module, "case.dtf", plan)))
    return false;
  return !(fuse && plan.kernels_size() > 0 &&
           mlir::failed(mlir::dtf::compileCpuKernels(*module, plan, error)));
}

} // namespace dtf::testing
