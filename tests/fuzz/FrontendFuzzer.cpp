// libFuzzer target over the whole front end: parse, check and build MLIR from
// arbitrary bytes. Any crash, leak, sanitizer report or hang is a bug; inputs
// that found one are kept in regressions/ and replayed on every run.
#include "compiler/frontend/MLIRGen.h"
#include "compiler/frontend/Parser.h"
#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  context.loadDialect<mlir::dtf::DtfDialect, mlir::func::FuncDialect>();
  // Diagnostics are expected for most inputs; swallow them.
  context.getDiagEngine().registerHandler(
      [](mlir::Diagnostic &) { return mlir::success(); });
  llvm::StringRef source(reinterpret_cast<const char *>(data), size);
  std::optional<mlir::dtf::ast::File> file =
      mlir::dtf::parseSource(source, "fuzz.dtf", &context);
  if (!file)
    return 0;
  mlir::dtf::FrontendOptions options;
  options.checkDataPaths = false;
  // Every model of the file, so that later ones are exercised too.
  for (const mlir::dtf::ast::Model &model : file->models) {
    options.modelName = model.name;
    (void)mlir::dtf::buildModule(*file, &context, options);
  }
  return 0;
}
