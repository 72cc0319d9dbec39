// The front end's expressions: names, number literals, binary operators with
// broadcasting, and calls (dispatched to ops, layers or networks).
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

Value ModelGen::genExpr(const ast::Expr &expr, Type hint) {
  Value result =
      llvm::TypeSwitch<const ast::Expr *, Value>(&expr)
          .Case([&](const ast::NumberExpr *n) { return genLiteral(*n, hint); })
          .Case([&](const ast::BoolExpr *b) {
            auto type = RankedTensorType::get({}, builder.getI1Type());
            return builder.create<ConstantOp>(
                loc(b->getLoc()), DenseElementsAttr::get(type, b->value));
          })
          .Case([&](const ast::NameExpr *n) -> Value {
            const Binding *b = lookup(n->name);
            if (!b) {
              auto diag = error(n->getLoc())
                          << "unknown name '" << n->name << "'";
              if (auto s = closestName(n->name, namesInScope()))
                diag << "; did you mean '" << *s << "'?";
              else if (!networkStack.empty())
                diag << " (a network sees only its parameters and its own "
                        "definitions)";
              return nullptr;
            }
            indexReference(n->getLoc(), n->name.size(), b->loc);
            if (b->kind == Binding::Kind::Variable)
              indexHover(n->getLoc(), n->name.size(),
                         describeVariable(b->symbol));
            else if (b->kind == Binding::Kind::Value)
              indexHover(n->getLoc(), n->name.size(),
                         n->name + ": " + formatType(b->value.getType()) +
                             " (" + b->what.str() + ")");
            switch (b->kind) {
            case Binding::Kind::Value:
              return b->value;
            case Binding::Kind::Variable:
              return readVariable(b->symbol, n->getLoc());
            case Binding::Kind::Literal: {
              // A name passed to a network means what it meant at the call.
              const ast::Expr *literal = b->literal;
              size_t callerScopes = b->callerScopes;
              std::vector<Scope> inner(
                  std::make_move_iterator(scopes.begin() + callerScopes),
                  std::make_move_iterator(scopes.end()));
              scopes.resize(callerScopes);
              Value v = genExpr(*literal, hint);
              for (Scope &scope : inner)
                scopes.push_back(std::move(scope));
              return v;
            }
            case Binding::Kind::Poisoned:
              return nullptr;
            }
            return nullptr;
          })
          .Case([&](const ast::NegExpr *n) -> Value {
            if (auto *number = dyn_cast<ast::NumberExpr>(n->operand.get())) {
              ast::NumberExpr negative(n->getLoc(), -number->value,
                                       number->isInteger, "-" + number->text);
              return genLiteral(negative, hint);
            }
            Value operand = genExpr(*n->operand, hint);
            if (!operand)
              return nullptr;
            auto type = cast<RankedTensorType>(operand.getType());
            if (type.getElementType().isInteger(1)) {
              error(n->getLoc()) << "cannot negate a bool tensor";
              return nullptr;
            }
            return builder.create<NegOp>(loc(n->getLoc()), operand);
          })
          .Case([&](const ast::BinaryExpr *b) {
            Value v = genBinary(*b, hint);
            if (v)
              indexHover(b->getLoc(), b->op.size(),
                         "'" + b->op + "' gives " + formatType(v.getType()));
            return v;
          })
          .Case([&](const ast::CallExpr *c) {
            Value v = genCall(*c);
            if (v) {
              std::string text =
                  c->callee + "(...) gives " + formatType(v.getType());
              if (auto device =
                      v.getDefiningOp()
                          ? v.getDefiningOp()->getAttrOfType<StringAttr>(
                                "dtf.device")
                          : StringAttr())
                text += ", on " + device.getValue().str();
              indexHover(c->getLoc(), c->callee.size(), text);
            }
            return v;
          })
          .Case([&](const ast::ListExpr *l) -> Value {
            error(l->getLoc()) << "a list is not a tensor; lists are "
                                  "arguments such as shapes and axes";
            return nullptr;
          })
          .Case([&](const ast::StringExpr *s) -> Value {
            error(s->getLoc()) << "a string is not a tensor";
            return nullptr;
          })
          .Case([&](const ast::DTypeExpr *d) -> Value {
            error(d->getLoc())
                << "'" << d->name << "' is a dtype, not a tensor";
            return nullptr;
          })
          .Default([](const ast::Expr *) { return Value(); });
  return result;
}

Value ModelGen::genLiteral(const ast::NumberExpr &number, Type hint) {
  Type element = hint ? hint
                      : (number.isInteger ? Type(builder.getI32Type())
                                          : Type(builder.getF32Type()));
  auto type = RankedTensorType::get({}, element);
  Attribute value;
  if (auto floatType = dyn_cast<FloatType>(element)) {
    APFloat converted(number.value);
    bool losesInfo = false;
    converted.convert(floatType.getFloatSemantics(),
                      APFloat::rmNearestTiesToEven, &losesInfo);
    if (!std::isfinite(number.value) || converted.isInfinity()) {
      error(number.getLoc())
          << number.text << " is out of range for " << dtypeName(element);
      return nullptr;
    }
    value = builder.getFloatAttr(element, number.value);
  } else if (element.isInteger(1)) {
    error(number.getLoc()) << "a number is not a bool; use true or false";
    return nullptr;
  } else {
    if (!number.isInteger || std::abs(number.value) > 9.2e18) {
      error(number.getLoc())
          << number.text << " is not an integer, but the other operand is "
          << dtypeName(element);
      return nullptr;
    }
    unsigned width = element.getIntOrFloatBitWidth();
    double limit = std::ldexp(1.0, width - 1);
    if (number.value >= limit || number.value < -limit) {
      error(number.getLoc())
          << number.text << " does not fit in " << dtypeName(element);
      return nullptr;
    }
    value = builder.getIntegerAttr(element, static_cast<int64_t>(number.value));
  }
  return builder.create<ConstantOp>(loc(number.getLoc()),
                                    DenseElementsAttr::get(type, value));
}

std::pair<Value, Value> ModelGen::genPair(const ast::Expr &lhsExpr,
                                          const ast::Expr &rhsExpr, Type hint) {
  // A number takes the dtype of the tensor on the other side, as in
  // TensorFlow: x * 2 with x: f32 multiplies by 2.0.
  auto elementOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  Value lhs, rhs;
  if (isNumberLiteral(lhsExpr) && !isNumberLiteral(rhsExpr)) {
    rhs = genExpr(rhsExpr);
    if (!rhs)
      return {};
    lhs = genExpr(lhsExpr, elementOf(rhs));
  } else {
    lhs = genExpr(lhsExpr, hint);
    if (!lhs)
      return {};
    rhs = genExpr(rhsExpr, elementOf(lhs));
  }
  if (!lhs || !rhs)
    return {};
  return {lhs, rhs};
}

Value ModelGen::genBinary(const ast::BinaryExpr &expr, Type hint) {
  // The hint is the dtype wanted for the result: it carries to the operands
  // of arithmetic, not of comparisons.
  bool arithmetic = expr.op == "+" || expr.op == "-" || expr.op == "*" ||
                    expr.op == "/" || expr.op == "%" || expr.op == "@";
  auto [lhs, rhs] = genPair(*expr.lhs, *expr.rhs, arithmetic ? hint : Type());
  if (!lhs || !rhs)
    return nullptr;
  auto l = cast<RankedTensorType>(lhs.getType());
  auto r = cast<RankedTensorType>(rhs.getType());
  std::pair<const ast::Expr *, Value> operands[] = {{expr.lhs.get(), lhs},
                                                    {expr.rhs.get(), rhs}};
  StringRef op = expr.op;
  ast::Loc at = expr.getLoc();
  if (op == "@" && l.getElementType().isInteger(1)) {
    error(at) << "matmul is not defined on bool tensors; cast them first";
    return nullptr;
  }
  if (op == "@")
    return buildChecked<MatmulOp>(
        at, operands,
        [&](EmitErrorFn emit) { return inferMatmul(l, r, false, false, emit); },
        lhs, rhs, false, false);
  auto broadcast = [&](StringRef name, Type element = {}) {
    return [&, name, element](EmitErrorFn emit) {
      return inferBroadcast(name, l, r, emit, element);
    };
  };
  if ((op == "+" || op == "-" || op == "*" || op == "/" || op == "%") &&
      l.getElementType().isInteger(1)) {
    error(at) << "arithmetic on bool tensors is not defined; cast them first";
    return nullptr;
  }
  if (op == "+")
    return buildChecked<AddOp>(at, operands, broadcast("+"), lhs, rhs);
  if (op == "-")
    return buildChecked<SubOp>(at, operands, broadcast("-"), lhs, rhs);
  if (op == "*")
    return buildChecked<MulOp>(at, operands, broadcast("*"), lhs, rhs);
  if (op == "/")
    return buildChecked<DivOp>(at, operands, broadcast("/"), lhs, rhs);
  if (op == "%") // TensorFlow's floormod, as Python's % and tf's
    return buildChecked<FloorModOp>(at, operands, broadcast("%"), lhs, rhs);
  ComparePredicate predicate = llvm::StringSwitch<ComparePredicate>(op)
                                   .Case("==", ComparePredicate::eq)
                                   .Case("!=", ComparePredicate::ne)
                                   .Case("<", ComparePredicate::lt)
                                   .Case("<=", ComparePredicate::le)
                                   .Case(">", ComparePredicate::gt)
                                   .Default(ComparePredicate::ge);
  return buildChecked<CompareOp>(
      at, operands, broadcast(op, builder.getI1Type()), predicate, lhs, rhs);
}

const ast::Network *ModelGen::findNetwork(StringRef name) const {
  for (const ast::Network &n : model.networks)
    if (n.name == name)
      return &n;
  for (const ast::Network &n : file.networks)
    if (n.name == name)
      return &n;
  return nullptr;
}

Value ModelGen::checkArguments(const ast::CallExpr &call) {
  // Only what is a computation for certain is made: a call of an op, a layer
  // or a network, or arithmetic. A bare name may be a setting (activation =
  // relu) and a literal has nothing of its own to report. An argument that
  // did not bind (an unknown keyword) is checked too.
  std::function<bool(const ast::Expr *)> computes =
      [&](const ast::Expr *e) -> bool {
    e = resolve(e);
    if (auto *inner = dyn_cast<ast::CallExpr>(e))
      return findNetwork(inner->callee) ||
             lookupBuiltin(inner->callee, BuiltinKind::Op) ||
             lookupBuiltin(inner->callee, BuiltinKind::Layer);
    if (auto *neg = dyn_cast<ast::NegExpr>(e))
      return computes(neg->operand.get());
    return isa<ast::BinaryExpr>(e);
  };
  for (const ast::Arg &arg : call.args) // in the order written
    if (computes(arg.value.get()))
      (void)genExpr(*arg.value);
  return nullptr;
}

Value ModelGen::genCall(const ast::CallExpr &call) {
  if (const ast::Network *network = findNetwork(call.callee)) {
    indexReference(call.getLoc(), call.callee.size(), network->loc);
    return genNetworkCall(call, *network);
  }
  auto emit = [&](ast::Loc at) { return error(at); };
  if (const BuiltinSpec *spec =
          lookupBuiltin(call.callee, BuiltinKind::Layer)) {
    BoundArgs args = bindArguments(*spec, call.args, call.getLoc(), emit);
    if (!args.complete)
      return checkArguments(call);
    return genLayer(call, *spec, args);
  }
  if (const BuiltinSpec *spec = lookupBuiltin(call.callee, BuiltinKind::Op)) {
    if (call.naming != ast::CallExpr::Naming::None) {
      error(call.layerLoc) << call.callee
                           << " has no variables; only layers "
                              "and networks are named with `as` or `shares`";
      return nullptr;
    }
    BoundArgs args = bindArguments(*spec, call.args, call.getLoc(), emit);
    if (!args.complete)
      return checkArguments(call);
    return genOp(call, *spec, args);
  }
  for (BuiltinKind kind : {BuiltinKind::Initializer, BuiltinKind::Optimizer,
                           BuiltinKind::Schedule, BuiltinKind::Data}) {
    if (lookupBuiltin(call.callee, kind)) {
      error(call.getLoc()) << "'" << call.callee << "' is "
                           << (kind == BuiltinKind::Initializer
                                   ? "an initializer: use it in a var "
                                     "declaration"
                                   : "a training setting: use it in the "
                                     "train block");
      return nullptr;
    }
  }
  std::vector<std::string> names;
  for (BuiltinKind kind : {BuiltinKind::Op, BuiltinKind::Layer})
    for (const BuiltinSpec *spec : builtinsOfKind(kind))
      names.push_back(spec->name.str());
  for (const ast::Network &n : model.networks)
    names.push_back(n.name);
  for (const ast::Network &n : file.networks)
    names.push_back(n.name);
  auto diag = error(call.getLoc())
              << "unknown op, layer or network '" << call.callee << "'";
  if (auto s = closestName(call.callee, names))
    diag << "; did you mean '" << *s << "'?";
  return nullptr;
}

} // namespace mlir::dtf::frontend
