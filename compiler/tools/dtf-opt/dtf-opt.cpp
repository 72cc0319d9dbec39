// dtf-opt: runs dtf's passes on MLIR files, so each can be tested in isolation.
#include "compiler/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::dtf::registerDialects(registry);
  mlir::dtf::registerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "dtf optimizer driver\n", registry));
}
