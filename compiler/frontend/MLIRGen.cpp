// Checks a model (names, arity, shapes, dtypes, devices, training settings) and
// emits it in the dtf dialect. Every check reports at the user's source with
// notes at related places, and checking goes on after an error so that one run
// shows all of them. This file drives it: the module, statements, diagnostics
// and scopes; the other MLIRGen*.cpp files hold one construct each.
#include "compiler/frontend/MLIRGen.h"
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

void ModelGen::noteOrigin(InFlightDiagnostic &diag, const ast::Expr *expr,
                          Value value) {
  if (!expr || !value)
    return;
  std::string type = formatType(value.getType());
  if (auto *name = dyn_cast<ast::NameExpr>(expr)) {
    if (const Binding *b = lookup(name->name)) {
      diag.attachNote(loc(b->loc)) << "'" << name->name << "' is " << type
                                   << ", " << b->what << " defined here";
      return;
    }
  }
  diag.attachNote(loc(expr->getLoc())) << "this operand is " << type;
}

std::string ModelGen::placementOf(VariableOp var) {
  if (auto device = var->getAttrOfType<StringAttr>("dtf.device"))
    return "on " + device.getValue().str();
  if (auto placement = module->getAttrOfType<DictionaryAttr>("dtf.placement"))
    if (auto strategy = placement.getAs<StringAttr>("ps_strategy"))
      return "on a ps task chosen by the replica device setter (" +
             strategy.getValue().str() + ")";
  return "on the worker (no ps placement given)";
}

std::string ModelGen::describeVariable(StringRef symbol) {
  auto it = variables.find(symbol);
  if (it == variables.end())
    return "";
  VariableOp var = it->second.first;
  std::string text =
      "variable " + symbol.str() + ": " + formatType(var.getType());
  text += var.getTrainable() ? ", trainable" : ", not trainable";
  if (auto parts = var->getAttrOfType<IntegerAttr>("dtf.partitions"))
    text += ", split into " + std::to_string(parts.getInt()) + " shards";
  return text + ", " + placementOf(var);
}

const Binding *ModelGen::lookup(StringRef name) const {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end())
      return &found->second;
    if (it->isBarrier)
      break;
  }
  return nullptr;
}

std::vector<std::string> ModelGen::namesInScope() const {
  std::vector<std::string> names;
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    for (const auto &entry : it->bindings)
      names.push_back(entry.first().str());
    if (it->isBarrier)
      break;
  }
  return names;
}

bool ModelGen::define(StringRef name, Binding binding) {
  if (const Binding *old = lookup(name)) {
    bool rebindable = [](const Binding *b) {
      return (b->kind == Binding::Kind::Value ||
              b->kind == Binding::Kind::Poisoned) &&
             (b->what == "value" || b->what == "parameter");
    }(old);
    bool fixed = !rebindable || binding.what != "value";
    if (fixed) {
      auto diag = error(binding.loc)
                  << "'" << name << "' is already defined as "
                  << (old->what.starts_with("i") ? "an " : "a ") << old->what;
      diag.attachNote(loc(old->loc)) << "previous definition is here";
      return false;
    }
  }
  scopes.back().bindings[name] = std::move(binding);
  return true;
}

const ast::Expr *ModelGen::resolve(const ast::Expr *expr) const {
  for (unsigned i = 0; expr && i < 64; ++i) {
    auto *name = dyn_cast<ast::NameExpr>(expr);
    if (!name)
      return expr;
    const Binding *b = lookup(name->name);
    if (!b || b->kind != Binding::Kind::Literal)
      return expr;
    expr = b->literal;
  }
  return expr;
}

OwningOpRef<ModuleOp> ModelGen::run() {
  // Owned from the start, so that every early return frees it.
  OwningOpRef<ModuleOp> owned(ModuleOp::create(loc(model.loc), model.name));
  module = *owned;
  module->setAttr("dtf.model", builder.getStringAttr(model.name));
  builder.setInsertionPointToEnd(module.getBody());
  graph = builder.create<func::FuncOp>(loc(model.loc), model.name,
                                       builder.getFunctionType({}, {}));
  builder.setInsertionPointToStart(graph.addEntryBlock());
  scopes.emplace_back();

  indexDefinition(model.name, FrontendIndex::Kind::Model, model.loc, "model");
  for (const ast::Network &n : model.networks)
    indexDefinition(n.name, FrontendIndex::Kind::Network, n.loc, "network");
  for (const ast::Network &n : file.networks)
    indexDefinition(n.name, FrontendIndex::Kind::Network, n.loc, "network");
  genPlacement();
  // Inputs and variables are visible in the whole model, wherever they are
  // declared: declarations first, then the graph in order.
  declarationsOnly = true;
  for (const ast::StmtPtr &stmt : model.body)
    genStmt(*stmt);
  declarationsOnly = false;
  for (const ast::StmtPtr &stmt : model.body)
    genStmt(*stmt);

  SmallVector<std::pair<std::string, Value>> outputs;
  genTrain(outputs);

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (auto &[name, value] : outputs) {
    results.push_back(value);
    resultTypes.push_back(value.getType());
  }
  builder.setInsertionPointToEnd(&graph.getBody().front());
  builder.create<func::ReturnOp>(loc(model.loc), results);
  graph.setType(builder.getFunctionType({}, resultTypes));
  for (auto [i, output] : llvm::enumerate(outputs))
    graph.setResultAttr(i, "dtf.name", builder.getStringAttr(output.first));

  if (errors > 0)
    return nullptr;
  if (failed(verify(*owned)))
    return nullptr;
  return owned;
}

void ModelGen::genStmt(const ast::Stmt &stmt) {
  // Model-level declarations are made in a first pass (networks declare
  // their own variables in order, as their body runs).
  if (networkStack.empty() && !isa<ast::OnStmt>(stmt)) {
    bool declaration = isa<ast::InputStmt, ast::VarStmt>(stmt);
    if (declaration != declarationsOnly)
      return;
  }
  llvm::TypeSwitch<const ast::Stmt *>(&stmt)
      .Case([&](const ast::InputStmt *s) { genInput(*s); })
      .Case([&](const ast::VarStmt *s) { genVar(*s); })
      .Case([&](const ast::OnStmt *s) { genOn(*s); })
      .Case([&](const ast::AssignStmt *s) {
        Value value = genExpr(*s->value);
        define(s->name, {value ? Binding::Kind::Value : Binding::Kind::Poisoned,
                         value, "", nullptr, s->getLoc(), "value"});
        if (value) {
          std::string type = formatType(value.getType());
          indexDefinition(s->name, FrontendIndex::Kind::Value, s->getLoc(),
                          type);
          indexHover(s->getLoc(), s->name.size(), s->name + ": " + type);
        }
      })
      .Case([&](const ast::ReturnStmt *s) {
        if (networkStack.empty()) {
          error(s->getLoc()) << "return is only allowed inside a network";
          return;
        }
        if (s->values.size() != 1) {
          error(s->getLoc()) << "a network returns exactly one value, got "
                             << s->values.size();
          return;
        }
        if (Value v = genExpr(*s->values.front()))
          returned.push_back(v);
      });
}

void ModelGen::checkBatchFactors(Operation *op) {
  if (isa<ReshapeOp>(op)) // it sets its own
    return;
  auto rows = [](int64_t f) {
    return f == 1 ? std::string("B") : "B * " + std::to_string(f);
  };
  int64_t factor = 0;
  for (Value v : op->getOperands()) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.hasStaticShape())
      continue;
    const int64_t f = batchFactor(v);
    if (factor == 0) {
      factor = f;
    } else if (f != factor) {
      ++errors;
      emitError(op->getLoc())
          << op->getName().stripDialect() << " combines a batch of "
          << rows(factor) << " rows with one of " << rows(f)
          << " rows: a reshape merged the batch with other axes; reshape it "
             "back to one row per example first";
      return;
    }
  }
  if (factor > 1)
    for (Value r : op->getResults())
      if (auto t = dyn_cast<RankedTensorType>(r.getType());
          t && !t.hasStaticShape())
        batchFactors[r] = factor;
}

} // namespace mlir::dtf::frontend

using namespace mlir;
using namespace mlir::dtf;

OwningOpRef<ModuleOp> mlir::dtf::buildModule(const ast::File &file,
                                             MLIRContext *context,
                                             const FrontendOptions &options) {
  context->getOrLoadDialect<DtfDialect>();
  context->getOrLoadDialect<func::FuncDialect>();
  const ast::Model *chosen = nullptr;
  for (const ast::Model &model : file.models) {
    if (options.modelName.empty() || model.name == options.modelName) {
      if (chosen && options.modelName.empty()) {
        emitError(toLocation(context, file.path, model.loc))
            << "the file defines more than one model; choose one with "
               "--model NAME";
        return nullptr;
      }
      chosen = &model;
    }
  }
  if (!chosen) {
    emitError(FileLineColLoc::get(context, file.path, 1, 1))
        << (options.modelName.empty()
                ? std::string("the file defines no model; start one with "
                              "`model NAME { ... }`")
                : "the file has no model named '" + options.modelName + "'");
    return nullptr;
  }
  return frontend::ModelGen(context, file, *chosen, options).run();
}
