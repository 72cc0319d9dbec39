// The front end's declarations: tensor types, inputs, variables and their
// initializers.
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

RankedTensorType ModelGen::buildType(const ast::TensorTypeSpec &spec,
                                     bool allowBatch) {
  SmallVector<int64_t> shape;
  bool ok = true;
  for (auto [i, dim] : llvm::enumerate(spec.dims)) {
    if (dim.size) {
      if (*dim.size < 1 || *dim.size > kMaxDimSize) {
        error(dim.loc) << "a dimension must be between 1 and " << kMaxDimSize;
        ok = false;
      }
      shape.push_back(*dim.size);
      continue;
    }
    if (dim.symbol != "B") {
      // A network's parameter sizes a dimension: checked at each call.
      const Binding *param = lookup(dim.symbol);
      if (param && param->kind == Binding::Kind::Literal) {
        const ast::Expr *arg = resolve(param->literal);
        auto *n = dyn_cast_or_null<ast::NumberExpr>(arg);
        if (n && n->isInteger && n->value >= 1 && n->value <= kMaxDimSize) {
          shape.push_back(static_cast<int64_t>(n->value));
          continue;
        }
        auto diag = error(dim.loc)
                    << "dimension '" << dim.symbol
                    << "' must be a whole number between 1 and " << kMaxDimSize;
        if (n)
          diag << ", got " << n->text;
        if (arg)
          diag.attachNote(loc(arg->getLoc()))
              << "'" << dim.symbol << "' is given here";
        ok = false;
        shape.push_back(1);
        continue;
      }
      error(dim.loc) << "unknown dimension '" << dim.symbol
                     << "': sizes are numbers, a network's parameters, and "
                        "the batch dimension is written B";
      ok = false;
    } else if (!allowBatch) {
      error(dim.loc) << "a variable has no batch dimension; give every size "
                        "as a number";
      ok = false;
    } else if (i != 0) {
      error(dim.loc) << "the batch dimension B comes first, as in f32[B, 784]";
      ok = false;
    }
    shape.push_back(kDynamic);
  }
  if (!ok)
    return nullptr;
  return RankedTensorType::get(shape, dtypeFromName(spec.dtype));
}

Type ModelGen::dtypeFromName(StringRef name) {
  return llvm::StringSwitch<Type>(name)
      .Case("f32", builder.getF32Type())
      .Case("f64", builder.getF64Type())
      .Case("f16", builder.getF16Type())
      .Case("bf16", builder.getBF16Type())
      .Case("i32", builder.getI32Type())
      .Case("i64", builder.getI64Type())
      .Case("bool", builder.getI1Type())
      .Default(Type());
}

void ModelGen::genInput(const ast::InputStmt &input) {
  if (!networkStack.empty()) {
    error(input.getLoc()) << "inputs belong to the model, not to a network";
    return;
  }
  RankedTensorType type = buildType(input.type, /*allowBatch=*/true);
  if (!type) {
    define(input.name, {Binding::Kind::Poisoned, nullptr, "", nullptr,
                        input.getLoc(), "input"});
    return;
  }
  auto op = builder.create<InputOp>(loc(input.getLoc()), type, input.name);
  define(input.name,
         {Binding::Kind::Value, op, "", nullptr, input.getLoc(), "input"});
  indexDefinition(input.name, FrontendIndex::Kind::Input, input.getLoc(),
                  formatType(type));
  indexHover(input.getLoc(), input.name.size(),
             "input " + input.name + ": " + formatType(type));
}

void ModelGen::genVar(const ast::VarStmt &var) {
  RankedTensorType type = buildType(var.type, /*allowBatch=*/false);
  std::optional<InitializerAttr> init =
      buildInitializer(var.init.get(), var.getLoc(), "zeros");
  bool trainable = type && isa<FloatType>(type.getElementType());
  std::optional<int64_t> partitions;
  bool ok = type && init;
  for (const ast::Arg &option : var.options) {
    if (option.key == "trainable") {
      const ast::Expr *value = resolve(option.value.get());
      auto *b = dyn_cast<ast::BoolExpr>(value);
      if (!b) {
        error(value->getLoc()) << "trainable must be true or false";
        ok = false;
        continue;
      }
      if (b->value && type && !isa<FloatType>(type.getElementType())) {
        error(value->getLoc()) << "only floating-point variables can be "
                                  "trainable, '"
                               << var.name << "' is " << formatType(type);
        ok = false;
      }
      trainable = b->value;
    } else if (option.key == "partitions") {
      std::optional<int64_t> n = intValue(option.value.get(), "partitions");
      if (!n) {
        ok = false;
        continue;
      }
      if (*n < 1 || (type && *n > type.getDimSize(0))) {
        error(option.value->getLoc())
            << "partitions splits axis 0 into shards, so it must be between 1 "
               "and the size of axis 0"
            << (type ? " (" + std::to_string(type.getDimSize(0)) + ")" : "")
            << ", got " << *n;
        ok = false;
        continue;
      }
      partitions = *n;
    } else {
      auto diag = error(option.keyLoc)
                  << "a variable has no option '" << option.key << "'";
      if (auto s = closestName(option.key, {"trainable", "partitions"}))
        diag << "; did you mean '" << *s << "'?";
      else
        diag << " (it takes trainable, partitions)";
      ok = false;
    }
  }
  if (!ok) {
    define(var.name, {Binding::Kind::Poisoned, nullptr, "", nullptr,
                      var.getLoc(), "variable"});
    return;
  }
  std::string symbol = prefix + var.name;
  if (sharing) {
    auto it = variables.find(symbol);
    if (it == variables.end()) {
      error(var.getLoc()) << "no variable '" << symbol << "' to share";
    } else if (it->second.first.getType() != type) {
      auto diag = error(var.getLoc())
                  << "shared variable '" << symbol << "' is "
                  << formatType(it->second.first.getType()) << ", not "
                  << formatType(type);
      diag.attachNote(loc(it->second.second)) << "declared here";
    }
  } else if (!createVariable(symbol, type, *init, trainable, var.getLoc(),
                             partitions)) {
    return;
  }
  define(var.name, {Binding::Kind::Variable, nullptr, symbol, nullptr,
                    var.getLoc(), "variable"});
  indexDefinition(var.name, FrontendIndex::Kind::Variable, var.getLoc(),
                  formatType(type));
  indexHover(var.getLoc(), var.name.size(), describeVariable(symbol));
}

std::optional<InitializerAttr>
ModelGen::buildInitializer(const ast::Expr *expr, ast::Loc fallbackLoc,
                           StringRef fallbackKind) {
  std::string kindName = fallbackKind.str();
  ast::Loc at = fallbackLoc;
  NamedAttrList params;
  if (expr) {
    expr = resolve(expr);
    at = expr->getLoc();
    if (isNumberLiteral(*expr)) {
      std::optional<double> v = numberValue(expr, "the initial value");
      if (!v)
        return std::nullopt;
      kindName = "constant";
      params.append("value", builder.getF64FloatAttr(*v));
    } else if (auto *name = dyn_cast<ast::NameExpr>(expr)) {
      kindName = name->name;
    } else if (auto *call = dyn_cast<ast::CallExpr>(expr)) {
      kindName = call->callee;
      const BuiltinSpec *spec =
          lookupBuiltin(call->callee, BuiltinKind::Initializer);
      if (spec) {
        auto emit = [&](ast::Loc l) { return error(l); };
        BoundArgs args = bindArguments(*spec, call->args, call->getLoc(), emit);
        // Each bound argument is checked even after a refused one.
        bool ok = args.complete;
        for (StringRef param : spec->params) {
          const ast::Expr *value = args.get(param);
          if (!value)
            continue;
          if (param == "seed") {
            if (auto *n = dyn_cast<ast::NameExpr>(resolve(value));
                n && n->name == "none")
              continue;
            std::optional<int64_t> seed = intValue(value, "seed");
            if (seed)
              params.append(param, builder.getI64IntegerAttr(*seed));
            ok &= seed.has_value();
          } else {
            std::optional<double> v = numberValue(value, param);
            if (v)
              params.append(param, builder.getF64FloatAttr(*v));
            ok &= v.has_value();
          }
        }
        if (!ok)
          return std::nullopt;
      }
    } else {
      error(at) << "an initializer is a name (zeros), a call "
                   "(truncated_normal(stddev = 0.1)) or a number";
      return std::nullopt;
    }
  }
  std::optional<InitKind> kind = symbolizeInitKind(kindName);
  if (!kind) {
    std::vector<std::string> names;
    for (const BuiltinSpec *spec : builtinsOfKind(BuiltinKind::Initializer))
      names.push_back(spec->name.str());
    auto diag = error(at) << "unknown initializer '" << kindName << "'";
    if (auto s = closestName(kindName, names))
      diag << "; did you mean '" << *s << "'?";
    else
      diag << " (use " << llvm::join(names, ", ") << ")";
    return std::nullopt;
  }
  DictionaryAttr dict =
      params.empty() ? DictionaryAttr() : params.getDictionary(context);
  auto emit = [&]() { return error(at); };
  if (failed(InitializerAttr::verify(emit, *kind, dict)))
    return std::nullopt;
  return InitializerAttr::get(context, *kind, dict);
}

VariableOp ModelGen::createVariable(StringRef symbol, RankedTensorType type,
                                    InitializerAttr init, bool trainable,
                                    ast::Loc at,
                                    std::optional<int64_t> partitions) {
  if (unnamedNetworkCall) {
    auto diag = error(unnamedNetworkCall->getLoc())
                << "this call of network '" << unnamedNetworkCall->callee
                << "' creates variables, so it must say whose: `"
                << unnamedNetworkCall->callee
                << "(...) as NAME` makes new ones, `"
                << unnamedNetworkCall->callee
                << "(...) shares NAME` reuses those of the call named NAME";
    diag.attachNote(loc(at)) << "a variable is created here";
    return nullptr;
  }
  auto existing = variables.find(symbol);
  if (existing != variables.end()) {
    auto diag = error(at) << "variable '" << symbol << "' is already defined";
    diag.attachNote(loc(existing->second.second))
        << "previous definition is here";
    return nullptr;
  }
  if (init.isRandom() && !isa<FloatType>(type.getElementType())) {
    error(at) << "initializer " << stringifyInitKind(init.getKind())
              << " draws floating-point numbers, but '" << symbol << "' is "
              << formatType(type) << " (use zeros, ones or a number)";
    return nullptr;
  }
  if (init.getKind() == InitKind::orthogonal && type.getRank() < 2) {
    error(at) << "the orthogonal initializer makes a matrix, but '" << symbol
              << "' is " << formatType(type)
              << " (orthogonal needs rank 2 or more)";
    return nullptr;
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(graph);
  auto op = builder.create<VariableOp>(loc(at), symbol, type, init, trainable);
  if (partitions && *partitions > 1)
    op->setAttr("dtf.partitions", builder.getI64IntegerAttr(*partitions));
  variables[symbol] = {op, at};
  return op;
}

Value ModelGen::readVariable(StringRef symbol, ast::Loc at) {
  auto it = variables.find(symbol);
  if (it == variables.end()) {
    error(at) << "no variable '" << symbol << "' to share";
    return nullptr;
  }
  auto op =
      builder.create<ReadVariableOp>(loc(at), it->second.first.getType(),
                                     FlatSymbolRefAttr::get(context, symbol));
  return op;
}

} // namespace mlir::dtf::frontend
