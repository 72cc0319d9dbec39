// Parsing of .dtf source into the AST, with syntax errors as MLIR diagnostics.
#pragma once

#include "compiler/frontend/AST.h"

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace mlir::dtf {

/// Parses `source` (named `filename` in locations). Syntax errors are emitted
/// through `context`'s diagnostic engine; returns nullopt when there were any.
std::optional<ast::File> parseSource(llvm::StringRef source,
                                     llvm::StringRef filename,
                                     MLIRContext *context);

/// The location of `loc` in `filename`.
Location toLocation(MLIRContext *context, llvm::StringRef filename,
                    ast::Loc loc);

} // namespace mlir::dtf
