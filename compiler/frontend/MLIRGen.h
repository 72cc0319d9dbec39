// Checks a parsed model and builds its MLIR module in the dtf dialect.
#pragma once

#include "compiler/frontend/AST.h"
#include "compiler/frontend/Index.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::dtf {

struct FrontendOptions {
  /// The model to compile when the file has several (empty: the only one).
  std::string modelName;
  /// Warn about data paths that do not exist on this machine.
  bool checkDataPaths = true;
  /// When set, receives definitions, uses and types for editors (dtf-lsp).
  FrontendIndex *index = nullptr;
  /// An f32 `lstm` or `gru` layer placed on the CPU becomes one dtf.lstm or
  /// dtf.gru op (oneDNN's LSTM or GRU primitive in dtf-run); false, or any
  /// other float type or a GPU, unrolls it into one step's ops per time step
  /// (dtfc --recurrent).
  bool libraryRecurrent = true;
};

/// Checks `file` (names, arity, shapes, dtypes, devices, training settings)
/// and builds one module for the chosen model: variables as dtf.variable
/// symbols, the graph as func.func @<model> returning the loss and metrics,
/// and the placement and training settings as module attributes. Reports
/// every error it finds through the context's diagnostics; returns null if
/// there was any.
OwningOpRef<ModuleOp> buildModule(const ast::File &file, MLIRContext *context,
                                  const FrontendOptions &options = {});

} // namespace mlir::dtf
