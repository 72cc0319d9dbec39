// dtf-opt: runs dtf's passes on MLIR files, so each can be tested in isolation.
#include "compiler/Registration.h"
#include "compiler/kernels/KernelGen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::dtf::registerDialects(registry);
  // The dialects generated kernels are made of, so each lowering stage can
  // be tested alone.
  registry.insert<mlir::arith::ArithDialect, mlir::math::MathDialect,
                  mlir::scf::SCFDialect, mlir::LLVM::LLVMDialect>();
  mlir::dtf::registerPasses();
  mlir::dtf::registerKernelPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "dtf optimizer driver\n", registry));
}
