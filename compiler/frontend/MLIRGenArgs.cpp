// The front end's reading of builtin arguments: integers, numbers, booleans,
// lists, symbols, dtypes and axes, each checked with a precise error.
#include "compiler/frontend/ModelGen.h"

#include "compiler/frontend/Builtins.h"
#include "compiler/frontend/Diagnostics.h"
#include "compiler/frontend/Parser.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"
#include "schema/DeviceName.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <sstream>

namespace mlir::dtf::frontend {

std::optional<int64_t> ModelGen::intValue(const ast::Expr *expr,
                                          StringRef what) {
  expr = resolve(expr);
  bool negative = false;
  if (auto *neg = dyn_cast<ast::NegExpr>(expr)) {
    negative = true;
    expr = resolve(neg->operand.get());
  }
  auto *n = dyn_cast<ast::NumberExpr>(expr);
  if (!n || !n->isInteger) {
    error(expr->getLoc()) << what << " must be an integer";
    return std::nullopt;
  }
  if (n->value > 9.2e18) {
    error(expr->getLoc()) << what << " is too large (" << n->text << ")";
    return std::nullopt;
  }
  int64_t v = static_cast<int64_t>(n->value);
  return negative ? -v : v;
}

std::optional<int64_t> ModelGen::intArg(const BoundArgs &args, StringRef name,
                                        int64_t fallback, int64_t min,
                                        int64_t max) {
  const ast::Expr *expr = args.get(name);
  if (!expr)
    return fallback;
  std::optional<int64_t> v = intValue(expr, name);
  if (!v)
    return std::nullopt;
  if (*v < min || *v > max) {
    error(resolve(expr)->getLoc()) << name << " must be between " << min
                                   << " and " << max << ", got " << *v;
    return std::nullopt;
  }
  return v;
}

std::optional<double> ModelGen::numberValue(const ast::Expr *expr,
                                            StringRef what) {
  expr = resolve(expr);
  double sign = 1;
  if (auto *neg = dyn_cast<ast::NegExpr>(expr)) {
    sign = -1;
    expr = resolve(neg->operand.get());
  }
  auto *n = dyn_cast<ast::NumberExpr>(expr);
  if (!n || !std::isfinite(n->value)) {
    error(expr->getLoc()) << what << " must be a number";
    return std::nullopt;
  }
  return sign * n->value;
}

std::optional<double> ModelGen::numberArg(const BoundArgs &args, StringRef name,
                                          double fallback) {
  const ast::Expr *expr = args.get(name);
  return expr ? numberValue(expr, name) : std::optional<double>(fallback);
}

std::optional<bool> ModelGen::boolArg(const BoundArgs &args, StringRef name,
                                      bool fallback) {
  const ast::Expr *expr = args.get(name);
  if (!expr)
    return fallback;
  expr = resolve(expr);
  if (auto *b = dyn_cast<ast::BoolExpr>(expr))
    return b->value;
  error(expr->getLoc()) << name << " must be true or false";
  return std::nullopt;
}

std::optional<SmallVector<int64_t>>
ModelGen::intListValue(const ast::Expr *expr, StringRef what,
                       bool allowScalar) {
  expr = resolve(expr);
  SmallVector<int64_t> values;
  if (auto *list = dyn_cast<ast::ListExpr>(expr)) {
    for (const ast::ExprPtr &item : list->items) {
      std::optional<int64_t> v = intValue(item.get(), what);
      if (!v)
        return std::nullopt;
      values.push_back(*v);
    }
    return values;
  }
  if (allowScalar) {
    if (std::optional<int64_t> v = intValue(expr, what)) {
      values.push_back(*v);
      return values;
    }
    return std::nullopt;
  }
  error(expr->getLoc()) << what << " must be a list of integers, as in [1, 2]";
  return std::nullopt;
}

std::optional<SmallVector<int64_t>>
ModelGen::pairArg(const BoundArgs &args, StringRef name, int64_t fallback) {
  const ast::Expr *expr = args.get(name);
  if (!expr)
    return SmallVector<int64_t>{fallback, fallback};
  std::optional<SmallVector<int64_t>> v = intListValue(expr, name, true);
  if (!v)
    return std::nullopt;
  if (v->size() == 1)
    v->push_back(v->front());
  if (v->size() != 2 || (*v)[0] < 1 || (*v)[1] < 1 || (*v)[0] > kMaxDimSize ||
      (*v)[1] > kMaxDimSize) {
    error(resolve(expr)->getLoc())
        << name << " must be a positive integer or two of them [height, width]";
    return std::nullopt;
  }
  return v;
}

std::optional<std::string> ModelGen::symbolValue(const ast::Expr *expr,
                                                 StringRef what,
                                                 ArrayRef<StringRef> choices) {
  expr = resolve(expr);
  auto *name = dyn_cast<ast::NameExpr>(expr);
  if (!name || !llvm::is_contained(choices, name->name)) {
    auto diag = error(expr->getLoc())
                << what << " must be one of " << llvm::join(choices, ", ");
    if (name) {
      std::vector<std::string> names(choices.begin(), choices.end());
      if (auto s = closestName(name->name, names))
        diag << "; did you mean '" << *s << "'?";
    }
    return std::nullopt;
  }
  return name->name;
}

std::optional<std::string> ModelGen::symbolArg(const BoundArgs &args,
                                               StringRef name,
                                               ArrayRef<StringRef> choices,
                                               StringRef fallback) {
  const ast::Expr *expr = args.get(name);
  return expr ? symbolValue(expr, name, choices)
              : std::optional<std::string>(fallback.str());
}

std::optional<Type> ModelGen::dtypeValue(const ast::Expr *expr,
                                         StringRef what) {
  expr = resolve(expr);
  if (auto *d = dyn_cast<ast::DTypeExpr>(expr))
    return dtypeFromName(d->name);
  error(expr->getLoc())
      << what << " must be a dtype: f32, f64, f16, bf16, i32, i64 or bool";
  return std::nullopt;
}

std::optional<std::optional<SmallVector<int64_t>>>
ModelGen::axesArg(const BoundArgs &args, StringRef name) {
  const ast::Expr *expr = args.get(name);
  if (!expr)
    return std::optional<SmallVector<int64_t>>();
  if (auto *n = dyn_cast<ast::NameExpr>(resolve(expr)); n && n->name == "none")
    return std::optional<SmallVector<int64_t>>();
  std::optional<SmallVector<int64_t>> axes = intListValue(expr, name, true);
  if (!axes)
    return std::nullopt;
  return std::optional<SmallVector<int64_t>>(*axes);
}

} // namespace mlir::dtf::frontend
