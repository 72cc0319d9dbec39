// The catalogue of the language's built-in calls (ops, layers, initializers,
// optimizers, schedules, data sources) and the binding of call arguments to
// their parameters. Shared by the checker and, later, the language server's
// completion.
#pragma once

#include "compiler/frontend/AST.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <functional>
#include <optional>

namespace mlir {
class InFlightDiagnostic;
} // namespace mlir

namespace mlir::dtf {

enum class BuiltinKind {
  Op,          // a tensor op: relu(x), matmul(a, b), ...
  Layer,       // owns variables: dense, conv2d, embedding
  Initializer, // of variables
  Optimizer,   // train { optimizer = ... }
  Schedule,    // learning-rate schedules
  Data,        // data sources
  Config,      // other settings given as calls: sync(...), session(...), global_norm(...)
};

struct BuiltinSpec {
  llvm::StringRef name;
  BuiltinKind kind;
  /// Parameters in positional order; the first `required` must be given.
  std::vector<llvm::StringRef> params;
  unsigned required;
  llvm::StringRef summary;
};

/// The spec of `name` among builtins of `kind`, or null.
const BuiltinSpec *lookupBuiltin(llvm::StringRef name, BuiltinKind kind);
/// Every builtin of `kind`, in catalogue order.
std::vector<const BuiltinSpec *> builtinsOfKind(BuiltinKind kind);
/// The closest name to `name` among `candidates`, if close enough to suggest.
std::optional<std::string> closestName(llvm::StringRef name,
                                       llvm::ArrayRef<std::string> candidates);

/// Arguments of one call bound to its parameters.
struct BoundArgs {
  llvm::StringMap<const ast::Expr *> values;
  /// False when binding reported an error; the arguments that did bind are
  /// still here, so that their own errors are reported in the same compile.
  bool complete = true;
  /// Parameters an error suggested for a misspelled keyword: not reported
  /// again as missing.
  std::vector<std::string> suggested;
  const ast::Expr *get(llvm::StringRef param) const {
    auto it = values.find(param);
    return it == values.end() ? nullptr : it->second;
  }
};

using LocatedErrorFn = std::function<InFlightDiagnostic(ast::Loc)>;

/// Binds positional and keyword `args` of a call to `spec`'s parameters.
/// Reports too many positional arguments, unknown keywords (with a
/// suggestion), duplicates and missing required parameters, all of them;
/// after any, the result is not `complete` but holds what did bind.
BoundArgs bindArguments(const BuiltinSpec &spec,
                        const std::vector<ast::Arg> &args, ast::Loc callLoc,
                        const LocatedErrorFn &emitError);

} // namespace mlir::dtf
