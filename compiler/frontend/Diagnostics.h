// Prints front-end diagnostics as `file:line:col: error: message`, the source
// line and a caret, with notes; speaks the language's types (f32[B, 784]), not
// MLIR's, and stops printing after a limit.
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <set>
#include <string>

namespace mlir::dtf {

/// `tensor<?x784xf32>` as the language writes it: `f32[B, 784]`.
std::string formatType(Type type);

/// Rewrites every 'tensor<...>' in a message into the language's notation.
std::string rewriteTypesInMessage(llvm::StringRef message);

/// Installs itself on the context for its lifetime.
class FrontendDiagnostics {
public:
  FrontendDiagnostics(llvm::SourceMgr &sourceMgr, MLIRContext *context,
                      llvm::raw_ostream &os, unsigned errorLimit = 20);
  ~FrontendDiagnostics();

  unsigned errorCount() const { return errors; }
  unsigned warningCount() const { return warnings; }
  /// Prints "N errors generated." (or nothing), and the limit note if it hit.
  void printSummary();

private:
  LogicalResult handle(Diagnostic &diag);

  /// MLIR's printer of located diagnostics, with its emitter made public.
  struct Printer : SourceMgrDiagnosticHandler {
    using SourceMgrDiagnosticHandler::emitDiagnostic;
    using SourceMgrDiagnosticHandler::SourceMgrDiagnosticHandler;
  };
  std::unique_ptr<Printer> printer;
  MLIRContext *context;
  llvm::raw_ostream &os;
  DiagnosticEngine::HandlerID handlerId;
  unsigned errorLimit;
  unsigned errors = 0;
  unsigned warnings = 0;
  bool limitReported = false;
  std::set<std::string> seen; // line:col:message of what was printed
};

} // namespace mlir::dtf
