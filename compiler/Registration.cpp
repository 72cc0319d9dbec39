// Registration of dtf's dialects and passes for all tools.
#include "compiler/Registration.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::dtf {

void registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<DtfDialect, func::FuncDialect>();
}

void registerPasses() {
  registerDtfPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
}

} // namespace mlir::dtf
