// Checks a model (names, arity, shapes, dtypes, devices, training settings) and
// emits it in the dtf dialect. Every check reports at the user's source with
// notes at related places, and checking goes on after an error so that one run
// shows all of them.
#include "compiler/frontend/MLIRGen.h"
#include "compiler/frontend/Builtins.h"
#include "compiler/frontend/Diagnostics.h"
#include "compiler/frontend/Parser.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"
#include "runtime/core/DeviceName.h"

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

using namespace mlir;
using namespace mlir::dtf;
using llvm::StringRef;

namespace {

constexpr int64_t kDynamic = ShapedType::kDynamic;
constexpr unsigned kMaxNetworkDepth = 32;

/// A name in scope.
struct Binding {
  // Poisoned: a definition that had an error; uses stay silent instead of
  // reporting an unknown name on top of the first error.
  enum class Kind { Value, Variable, Literal, Poisoned };
  Kind kind;
  Value value;                       // Value
  std::string symbol;                // Variable: its dtf.variable symbol
  const ast::Expr *literal = nullptr; // Literal: a network parameter's argument
  ast::Loc loc;                      // where the name was defined
  StringRef what;                    // "input", "variable", "value", "parameter"
  size_t callerScopes = 0;           // Literal: the scopes seen at the call
};

/// Tags every op created inside `on "..."` scopes with its device.
struct DeviceTagger : OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (!devices.empty())
      op->setAttr("dtf.device",
                  StringAttr::get(op->getContext(), devices.back().toString()));
  }
  /// Innermost last; each already completed with the ones around it.
  std::vector<::dtf::DeviceName> devices;
};

/// The dtype of a tensor type as the language writes it.
std::string dtypeName(Type type) {
  std::string s = formatType(RankedTensorType::get({}, type));
  return s.substr(0, s.find('['));
}

/// How a layer call names its variables.
struct LayerName {
  std::string full; // the prefix of its variables: "conv1", "left/fc"
  bool share;       // reuse existing variables instead of creating them
};

class ModelGen {
public:
  ModelGen(MLIRContext *context, const ast::File &file, const ast::Model &model,
           const FrontendOptions &options)
      : context(context), file(file), model(model), options(options),
        builder(context) {
    builder.setListener(&deviceTagger);
  }

  OwningOpRef<ModuleOp> run();

private:
  //===--------------------------------------------------------------------===//
  // Diagnostics
  //===--------------------------------------------------------------------===//

  Location loc(ast::Loc l) { return toLocation(context, file.path, l); }
  InFlightDiagnostic error(ast::Loc l) {
    ++errors;
    return emitError(loc(l));
  }
  /// A note on a related place: where a name came from and what it holds.
  void noteOrigin(InFlightDiagnostic &diag, const ast::Expr *expr, Value value) {
    if (!expr || !value)
      return;
    std::string type = formatType(value.getType());
    if (auto *name = dyn_cast<ast::NameExpr>(expr)) {
      if (const Binding *b = lookup(name->name)) {
        diag.attachNote(loc(b->loc))
            << "'" << name->name << "' is " << type << ", " << b->what
            << " defined here";
        return;
      }
    }
    diag.attachNote(loc(expr->getLoc())) << "this operand is " << type;
  }

  //===--------------------------------------------------------------------===//
  // The editor index
  //===--------------------------------------------------------------------===//

  void indexDefinition(StringRef name, FrontendIndex::Kind kind, ast::Loc at,
                       std::string detail) {
    if (options.index)
      options.index->definitions.push_back({name.str(), kind, at, std::move(detail)});
  }
  void indexReference(ast::Loc at, size_t length, ast::Loc target) {
    if (options.index)
      options.index->references.push_back({at, static_cast<unsigned>(length), target});
  }
  void indexHover(ast::Loc at, size_t length, std::string text) {
    if (options.index)
      options.index->hovers.push_back({at, static_cast<unsigned>(length), std::move(text)});
  }
  /// Where a variable lives, in words.
  std::string placementOf(VariableOp var) {
    if (auto device = var->getAttrOfType<StringAttr>("dtf.device"))
      return "on " + device.getValue().str();
    if (auto placement = module->getAttrOfType<DictionaryAttr>("dtf.placement"))
      if (auto strategy = placement.getAs<StringAttr>("ps_strategy"))
        return "on a ps task chosen by the replica device setter (" +
               strategy.getValue().str() + ")";
    return "on the worker (no ps placement given)";
  }
  std::string describeVariable(StringRef symbol) {
    auto it = variables.find(symbol);
    if (it == variables.end())
      return "";
    VariableOp var = it->second.first;
    std::string text = "variable " + symbol.str() + ": " + formatType(var.getType());
    text += var.getTrainable() ? ", trainable" : ", not trainable";
    if (auto parts = var->getAttrOfType<IntegerAttr>("dtf.partitions"))
      text += ", split into " + std::to_string(parts.getInt()) + " shards";
    return text + ", " + placementOf(var);
  }

  //===--------------------------------------------------------------------===//
  // Scopes
  //===--------------------------------------------------------------------===//

  const Binding *lookup(StringRef name) const {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end())
        return &found->second;
      if (it->isBarrier)
        break;
    }
    return nullptr;
  }
  std::vector<std::string> namesInScope() const {
    std::vector<std::string> names;
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      for (const auto &entry : it->bindings)
        names.push_back(entry.first().str());
      if (it->isBarrier)
        break;
    }
    return names;
  }
  struct Scope {
    llvm::StringMap<Binding> bindings;
    bool isBarrier = false; // a network body sees nothing of its caller
    llvm::StringMap<Binding>::iterator find(StringRef n) { return bindings.find(n); }
    llvm::StringMap<Binding>::const_iterator find(StringRef n) const { return bindings.find(n); }
    llvm::StringMap<Binding>::const_iterator end() const { return bindings.end(); }
  };
  /// Defines `name`; inputs and variables cannot be redefined, graph values
  /// can be rebound (as Python names are).
  bool define(StringRef name, Binding binding) {
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

  //===--------------------------------------------------------------------===//
  // Statements
  //===--------------------------------------------------------------------===//

  void genStmt(const ast::Stmt &stmt);
  void genInput(const ast::InputStmt &input);
  void genVar(const ast::VarStmt &var);
  void genOn(const ast::OnStmt &on);
  RankedTensorType buildType(const ast::TensorTypeSpec &spec, bool allowBatch);

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  Value genExpr(const ast::Expr &expr, Type hint = {});
  Value genLiteral(const ast::NumberExpr &number, Type hint);
  Value genBinary(const ast::BinaryExpr &expr, Type hint = {});
  /// Two operands where a number takes the other's dtype, evaluated in an
  /// order that lets it (maximum(0, x), select(c, 0, x), 2 * x).
  std::pair<Value, Value> genPair(const ast::Expr &lhs, const ast::Expr &rhs,
                                  Type hint = {});
  Value genCall(const ast::CallExpr &call);
  Value genOp(const ast::CallExpr &call, const BuiltinSpec &spec,
              const BoundArgs &args);
  Value genConcat(const ast::CallExpr &call, const BoundArgs &args);
  Value genLayer(const ast::CallExpr &call, const BuiltinSpec &spec,
                 const BoundArgs &args);
  Value genNetworkCall(const ast::CallExpr &call, const ast::Network &network);
  const ast::Network *findNetwork(StringRef name) const;

  /// Builds `OpTy` with a result type checked by `infer`, which reports at
  /// `at` with notes on the operands' origins. Returns null on a mismatch.
  template <typename OpTy, typename InferFn, typename... Args>
  Value buildChecked(ast::Loc at,
                     ArrayRef<std::pair<const ast::Expr *, Value>> operands,
                     InferFn infer, Args &&...args) {
    auto emit = [&]() {
      InFlightDiagnostic diag = error(at);
      for (auto [expr, value] : operands)
        noteOrigin(diag, expr, value);
      return diag;
    };
    FailureOr<RankedTensorType> type = infer(EmitErrorFn(emit));
    if (failed(type))
      return nullptr;
    return builder.create<OpTy>(loc(at), *type, std::forward<Args>(args)...)
        ->getResult(0);
  }

  //===--------------------------------------------------------------------===//
  // Arguments of builtins
  //===--------------------------------------------------------------------===//

  /// Follows network parameters bound to literal arguments.
  const ast::Expr *resolve(const ast::Expr *expr) const {
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
  Value tensorArg(const BoundArgs &args, StringRef name, Type hint = {}) {
    const ast::Expr *expr = args.get(name);
    return expr ? genExpr(*expr, hint) : nullptr;
  }
  std::optional<int64_t> intValue(const ast::Expr *expr, StringRef what);
  std::optional<int64_t> intArg(const BoundArgs &args, StringRef name,
                                int64_t fallback, int64_t min, int64_t max);
  std::optional<double> numberValue(const ast::Expr *expr, StringRef what);
  std::optional<double> numberArg(const BoundArgs &args, StringRef name,
                                  double fallback);
  std::optional<bool> boolArg(const BoundArgs &args, StringRef name,
                              bool fallback);
  std::optional<SmallVector<int64_t>> intListValue(const ast::Expr *expr,
                                                   StringRef what,
                                                   bool allowScalar);
  std::optional<SmallVector<int64_t>> pairArg(const BoundArgs &args,
                                              StringRef name, int64_t fallback);
  std::optional<std::string> symbolValue(const ast::Expr *expr, StringRef what,
                                         ArrayRef<StringRef> choices);
  std::optional<std::string> symbolArg(const BoundArgs &args, StringRef name,
                                       ArrayRef<StringRef> choices,
                                       StringRef fallback);
  std::optional<Type> dtypeValue(const ast::Expr *expr, StringRef what);
  std::optional<std::optional<SmallVector<int64_t>>>
  axesArg(const BoundArgs &args, StringRef name);
  Type dtypeFromName(StringRef name);

  //===--------------------------------------------------------------------===//
  // Variables and layers
  //===--------------------------------------------------------------------===//

  std::optional<InitializerAttr> buildInitializer(const ast::Expr *expr,
                                                  ast::Loc fallbackLoc,
                                                  StringRef fallbackKind);
  std::optional<LayerName> layerNameFor(const ast::CallExpr &call,
                                        StringRef kind);
  /// The variable `symbol`: created, or (when sharing) looked up and checked.
  Value layerVariable(const LayerName &layer, StringRef leaf,
                      RankedTensorType type, InitializerAttr init,
                      ast::Loc at, std::optional<int64_t> partitions = {});
  VariableOp createVariable(StringRef symbol, RankedTensorType type,
                            InitializerAttr init, bool trainable, ast::Loc at,
                            std::optional<int64_t> partitions);
  Value readVariable(StringRef symbol, ast::Loc at);
  Value applyActivation(Value x, StringRef activation, ast::Loc at);

  //===--------------------------------------------------------------------===//
  // Placement and training
  //===--------------------------------------------------------------------===//

  void genPlacement();
  void genTrain(SmallVectorImpl<std::pair<std::string, Value>> &outputs);
  Attribute configCall(const ast::Expr *expr, BuiltinKind kind, StringRef what);
  Attribute literalAttr(const ast::Expr *expr, StringRef what);
  /// A parameter of a training call, checked for what it must hold.
  Attribute checkedSetting(const ast::Expr *expr, StringRef param);
  Value graphValue(StringRef name, ast::Loc at, StringRef what);

  MLIRContext *context;
  const ast::File &file;
  const ast::Model &model;
  const FrontendOptions &options;
  OpBuilder builder;
  ModuleOp module;
  func::FuncOp graph;
  unsigned errors = 0;

  std::vector<Scope> scopes;
  llvm::StringMap<std::pair<VariableOp, ast::Loc>> variables;
  /// Named layers and network calls: where named, and what they call.
  llvm::StringMap<std::pair<ast::Loc, std::string>> layerNames;
  llvm::StringMap<unsigned> autoCounters;
  std::string prefix;
  bool sharing = false;
  bool declarationsOnly = false;
  const ast::CallExpr *unnamedNetworkCall = nullptr; // innermost, if unnamed
  DeviceTagger deviceTagger;
  std::vector<const ast::Network *> networkStack;
  std::vector<Value> returned; // values of the innermost network's return
};

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

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
          indexDefinition(s->name, FrontendIndex::Kind::Value, s->getLoc(), type);
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
      error(dim.loc) << "unknown dimension '" << dim.symbol
                     << "': sizes are numbers, and the batch dimension is "
                        "written B";
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
  define(input.name, {Binding::Kind::Value, op, "", nullptr, input.getLoc(),
                      "input"});
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

void ModelGen::genOn(const ast::OnStmt &on) {
  ::dtf::DeviceNameParse parsed = ::dtf::parseDeviceName(on.device);
  if (parsed.name && on.device.empty()) {
    parsed.name.reset();
    parsed.error = "a device name is needed, as in \"/job:ps/task:0\" or \"/gpu:0\"";
  }
  if (!parsed.name) {
    // Model-level blocks are walked twice (declarations, then the graph):
    // report on the second walk only.
    if (declarationsOnly && networkStack.empty()) {
      for (const ast::StmtPtr &stmt : on.body)
        genStmt(*stmt);
      return;
    }
    // Point into the string: past the opening quote, at the bad part.
    ast::Loc at = on.deviceLoc;
    at.col += 1 + parsed.errorColumn;
    error(at) << "invalid device \"" << on.device << "\": " << parsed.error;
    // Check the body all the same, so its names exist for what follows.
    for (const ast::StmtPtr &stmt : on.body)
      genStmt(*stmt);
    return;
  }
  // As with nested tf.device scopes, the inner name's parts win and the
  // enclosing one fills the rest: on "/job:worker/task:1" { on "/gpu:0" {...} }
  // is /job:worker/task:1/gpu:0.
  ::dtf::DeviceName device = *parsed.name;
  if (!deviceTagger.devices.empty())
    device = device.completedWith(deviceTagger.devices.back());
  deviceTagger.devices.push_back(device);
  auto pop = llvm::make_scope_exit([&] { deviceTagger.devices.pop_back(); });
  for (const ast::StmtPtr &stmt : on.body)
    genStmt(*stmt);
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

Value ModelGen::genExpr(const ast::Expr &expr, Type hint) {
  Value result =
      llvm::TypeSwitch<const ast::Expr *, Value>(&expr)
          .Case([&](const ast::NumberExpr *n) { return genLiteral(*n, hint); })
          .Case([&](const ast::BoolExpr *b) {
            auto type = RankedTensorType::get({}, builder.getI1Type());
            return builder.create<ConstantOp>(
                loc(b->getLoc()),
                DenseElementsAttr::get(type, b->value));
          })
          .Case([&](const ast::NameExpr *n) -> Value {
            const Binding *b = lookup(n->name);
            if (!b) {
              auto diag = error(n->getLoc()) << "unknown name '" << n->name << "'";
              if (auto s = closestName(n->name, namesInScope()))
                diag << "; did you mean '" << *s << "'?";
              else if (!networkStack.empty())
                diag << " (a network sees only its parameters and its own "
                        "definitions)";
              return nullptr;
            }
            indexReference(n->getLoc(), n->name.size(), b->loc);
            if (b->kind == Binding::Kind::Variable)
              indexHover(n->getLoc(), n->name.size(), describeVariable(b->symbol));
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
              std::vector<Scope> inner(std::make_move_iterator(scopes.begin() + callerScopes),
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
              std::string text = c->callee + "(...) gives " + formatType(v.getType());
              if (auto device = v.getDefiningOp() ? v.getDefiningOp()->getAttrOfType<StringAttr>("dtf.device") : StringAttr())
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
            error(d->getLoc()) << "'" << d->name
                               << "' is a dtype, not a tensor";
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
      error(number.getLoc()) << number.text << " is out of range for "
                             << dtypeName(element);
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
      error(number.getLoc()) << number.text << " does not fit in "
                             << dtypeName(element);
      return nullptr;
    }
    value = builder.getIntegerAttr(element, static_cast<int64_t>(number.value));
  }
  return builder.create<ConstantOp>(loc(number.getLoc()),
                                    DenseElementsAttr::get(type, value));
}

/// True for expressions made only of numbers (2, -1e-3, 2 * 3), whose dtype
/// follows the other operand's.
static bool isNumberLiteral(const ast::Expr &expr) {
  if (isa<ast::NumberExpr>(expr))
    return true;
  if (auto *neg = dyn_cast<ast::NegExpr>(&expr))
    return isNumberLiteral(*neg->operand);
  if (auto *bin = dyn_cast<ast::BinaryExpr>(&expr))
    return bin->op != "@" && isNumberLiteral(*bin->lhs) && isNumberLiteral(*bin->rhs);
  return false;
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
                    expr.op == "/" || expr.op == "@";
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
  if ((op == "+" || op == "-" || op == "*" || op == "/") &&
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
  ComparePredicate predicate = llvm::StringSwitch<ComparePredicate>(op)
                                   .Case("==", ComparePredicate::eq)
                                   .Case("!=", ComparePredicate::ne)
                                   .Case("<", ComparePredicate::lt)
                                   .Case("<=", ComparePredicate::le)
                                   .Case(">", ComparePredicate::gt)
                                   .Default(ComparePredicate::ge);
  return buildChecked<CompareOp>(at, operands,
                                 broadcast(op, builder.getI1Type()), predicate,
                                 lhs, rhs);
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

Value ModelGen::genCall(const ast::CallExpr &call) {
  if (const ast::Network *network = findNetwork(call.callee)) {
    indexReference(call.getLoc(), call.callee.size(), network->loc);
    return genNetworkCall(call, *network);
  }
  auto emit = [&](ast::Loc at) { return error(at); };
  if (const BuiltinSpec *spec = lookupBuiltin(call.callee, BuiltinKind::Layer)) {
    std::optional<BoundArgs> args =
        bindArguments(*spec, call.args, call.getLoc(), emit);
    return args ? genLayer(call, *spec, *args) : nullptr;
  }
  if (const BuiltinSpec *spec = lookupBuiltin(call.callee, BuiltinKind::Op)) {
    if (call.naming != ast::CallExpr::Naming::None) {
      error(call.layerLoc) << call.callee << " has no variables; only layers "
                              "and networks are named with `as` or `shares`";
      return nullptr;
    }
    std::optional<BoundArgs> args =
        bindArguments(*spec, call.args, call.getLoc(), emit);
    return args ? genOp(call, *spec, *args) : nullptr;
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

//===----------------------------------------------------------------------===//
// Argument helpers
//===----------------------------------------------------------------------===//

std::optional<int64_t> ModelGen::intValue(const ast::Expr *expr, StringRef what) {
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
ModelGen::intListValue(const ast::Expr *expr, StringRef what, bool allowScalar) {
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

std::optional<Type> ModelGen::dtypeValue(const ast::Expr *expr, StringRef what) {
  expr = resolve(expr);
  if (auto *d = dyn_cast<ast::DTypeExpr>(expr))
    return dtypeFromName(d->name);
  error(expr->getLoc()) << what
                        << " must be a dtype: f32, f64, f16, bf16, i32, i64 or bool";
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

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

Value ModelGen::genOp(const ast::CallExpr &call, const BuiltinSpec &spec,
                      const BoundArgs &args) {
  StringRef name = spec.name;
  ast::Loc at = call.getLoc();
  Location l = loc(at);
  if (name == "concat")
    return genConcat(call, args);
  // Ops over two tensors where either may be a number: maximum(0, x).
  // Arguments are evaluated in their written order.
  Value condition;
  if (name == "select" && !(condition = tensorArg(args, "condition")))
    return nullptr;
  Value pairFirst, pairSecond;
  StringRef secondParam = name == "matmul"                      ? "b"
                          : (name == "maximum" || name == "minimum" ||
                             name == "pow")                      ? "y"
                          : name == "select"                     ? "on_false"
                                                                 : "";
  StringRef firstParam = name == "select" ? "on_true" : spec.params.front();
  if (!secondParam.empty() && args.get(firstParam) && args.get(secondParam)) {
    std::tie(pairFirst, pairSecond) =
        genPair(*args.get(firstParam), *args.get(secondParam));
    if (!pairFirst || !pairSecond)
      return nullptr;
  }
  // The first tensor argument; its dtype is the hint for number literals in
  // the others (maximum(x, 0) compares with 0.0 when x is f32).
  Value x = name == "select" ? condition
             : pairFirst    ? pairFirst
                            : tensorArg(args, spec.params.front());
  if (!x)
    return nullptr;
  auto xt = cast<RankedTensorType>(x.getType());
  std::pair<const ast::Expr *, Value> xOperand[] = {
      {args.get(spec.params.front()), x}};
  auto requireFloat = [&](Value v) {
    if (isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType()))
      return true;
    auto diag = error(at) << name << " needs a floating-point tensor, got "
                          << formatType(v.getType());
    noteOrigin(diag, args.get(spec.params.front()), v);
    return false;
  };
  auto requireNumeric = [&](Value v) {
    if (!cast<RankedTensorType>(v.getType()).getElementType().isInteger(1))
      return true;
    error(at) << name << " is not defined on bool tensors";
    return false;
  };

  if (name == "matmul") {
    Value b = pairSecond;
    std::optional<bool> ta = boolArg(args, "transpose_a", false);
    std::optional<bool> tb = boolArg(args, "transpose_b", false);
    if (!b || !ta || !tb || !requireNumeric(x))
      return nullptr;
    auto bt = cast<RankedTensorType>(b.getType());
    std::pair<const ast::Expr *, Value> operands[] = {{args.get("a"), x},
                                                      {args.get("b"), b}};
    return buildChecked<MatmulOp>(
        at, operands,
        [&](EmitErrorFn emit) { return inferMatmul(xt, bt, *ta, *tb, emit); },
        x, b, *ta, *tb);
  }
  if (name == "relu" || name == "neg") {
    if (!requireNumeric(x))
      return nullptr;
    return name == "relu" ? builder.create<ReluOp>(l, x).getResult()
                          : builder.create<NegOp>(l, x).getResult();
  }
  if (name == "sigmoid" || name == "tanh" || name == "exp" || name == "log" ||
      name == "sqrt" || name == "rsqrt") {
    if (!requireFloat(x))
      return nullptr;
    if (name == "sigmoid")
      return builder.create<SigmoidOp>(l, x);
    if (name == "tanh")
      return builder.create<TanhOp>(l, x);
    if (name == "exp")
      return builder.create<ExpOp>(l, x);
    if (name == "log")
      return builder.create<LogOp>(l, x);
    if (name == "sqrt")
      return builder.create<SqrtOp>(l, x);
    return builder.create<RsqrtOp>(l, x);
  }
  if (name == "maximum" || name == "minimum" || name == "pow") {
    Value y = pairSecond;
    if (!y || !requireNumeric(x) || (name == "pow" && !requireFloat(x)))
      return nullptr;
    auto yt = cast<RankedTensorType>(y.getType());
    std::pair<const ast::Expr *, Value> operands[] = {{args.get("x"), x},
                                                      {args.get("y"), y}};
    auto infer = [&](EmitErrorFn emit) {
      return inferBroadcast(name, xt, yt, emit);
    };
    if (name == "maximum")
      return buildChecked<MaximumOp>(at, operands, infer, x, y);
    if (name == "minimum")
      return buildChecked<MinimumOp>(at, operands, infer, x, y);
    return buildChecked<PowOp>(at, operands, infer, x, y);
  }
  if (name == "select") {
    if (!xt.getElementType().isInteger(1)) {
      auto diag = error(at) << "select needs a bool condition, got "
                            << formatType(xt);
      noteOrigin(diag, args.get("condition"), x);
      return nullptr;
    }
    Value t = pairFirst, f = pairSecond;
    if (!t || !f)
      return nullptr;
    auto tt = cast<RankedTensorType>(t.getType());
    auto ft = cast<RankedTensorType>(f.getType());
    std::pair<const ast::Expr *, Value> operands[] = {
        {args.get("condition"), x}, {args.get("on_true"), t}, {args.get("on_false"), f}};
    return buildChecked<SelectOp>(
        at, operands,
        [&](EmitErrorFn emit) -> FailureOr<RankedTensorType> {
          FailureOr<RankedTensorType> values = inferBroadcast("select", tt, ft, emit);
          if (failed(values))
            return failure();
          FailureOr<SmallVector<int64_t>> shape =
              broadcastShapes(xt.getShape(), values->getShape());
          if (failed(shape)) {
            emit() << "select expects a condition that broadcasts with the "
                      "values, got "
                   << xt << " and " << *values;
            return failure();
          }
          return RankedTensorType::get(*shape, values->getElementType());
        },
        x, t, f);
  }
  if (name == "cast") {
    std::optional<Type> to = dtypeValue(args.get("to"), "to");
    if (!to)
      return nullptr;
    return builder.create<CastOp>(l, RankedTensorType::get(xt.getShape(), *to), x);
  }
  if (name == "reshape" || name == "broadcast_to") {
    std::optional<SmallVector<int64_t>> shape =
        intListValue(args.get("shape"), "shape", false);
    if (!shape)
      return nullptr;
    ast::Loc shapeLoc = resolve(args.get("shape"))->getLoc();
    int inferred = -1;
    for (auto [i, d] : llvm::enumerate(*shape)) {
      if (d == -1 && name == "reshape" && inferred < 0) {
        inferred = i;
        continue;
      }
      if (d < 1 || d > kMaxDimSize) {
        error(shapeLoc) << name << " sizes must be positive"
                        << (name == "reshape" ? " (with one -1 for the size "
                                                "that follows from the others)"
                                              : "")
                        << ", got " << d << " at position " << i;
        return nullptr;
      }
    }
    SmallVector<int64_t> target(*shape);
    if (inferred >= 0) {
      // -1 takes what is left; with a batch dimension it stays symbolic.
      int64_t rest = 1;
      for (auto [i, d] : llvm::enumerate(target))
        if (static_cast<int>(i) != inferred)
          rest *= d;
      if (!xt.hasStaticShape()) {
        // The only unknown size is the batch: -1 stands for it, first, and
        // the other sizes hold one example's elements exactly.
        int64_t perExample = 1;
        for (int64_t d : xt.getShape())
          if (!ShapedType::isDynamic(d))
            perExample *= d;
        if (inferred != 0 || rest != perExample) {
          auto diag = error(shapeLoc)
                      << "reshape of a batch keeps the batch first: write -1 "
                         "first and sizes that hold the "
                      << perExample << " elements of one example, as in "
                      << "reshape(x, [-1, " << perExample << "])";
          noteOrigin(diag, args.get("x"), x);
          return nullptr;
        }
      }
      if (xt.hasStaticShape()) {
        int64_t count = xt.getNumElements();
        if (count % rest != 0) {
          auto diag = error(shapeLoc)
                      << "reshape cannot fit " << count << " elements of "
                      << formatType(xt) << " into " << formatType(RankedTensorType::get(target, xt.getElementType())) << " (with -1 for one size)";
          noteOrigin(diag, args.get("x"), x);
          return nullptr;
        }
        target[inferred] = count / rest;
      } else {
        target[inferred] = kDynamic;
      }
    }
    auto type = RankedTensorType::get(target, xt.getElementType());
    std::pair<const ast::Expr *, Value> operands[] = {{args.get("x"), x}};
    if (name == "reshape")
      return buildChecked<ReshapeOp>(
          at, operands,
          [&](EmitErrorFn emit) -> FailureOr<RankedTensorType> {
            if (failed(verifyReshape(xt, type, emit)))
              return failure();
            return type;
          },
          x);
    return buildChecked<BroadcastToOp>(
        at, operands,
        [&](EmitErrorFn emit) -> FailureOr<RankedTensorType> {
          if (failed(verifyBroadcastable(xt.getShape(), type.getShape(), emit)))
            return failure();
          return type;
        },
        x);
  }
  if (name == "flatten") {
    if (xt.getRank() < 1) {
      error(at) << "flatten needs a tensor with a batch dimension, got "
                << formatType(xt);
      return nullptr;
    }
    int64_t rest = 1;
    for (int64_t d : xt.getShape().drop_front()) {
      if (ShapedType::isDynamic(d)) {
        error(at) << "flatten needs static sizes after the batch dimension, "
                     "got "
                  << formatType(xt);
        return nullptr;
      }
      rest *= d;
    }
    return builder.create<ReshapeOp>(
        l, RankedTensorType::get({xt.getDimSize(0), rest}, xt.getElementType()),
        x);
  }
  if (name == "transpose") {
    std::optional<SmallVector<int64_t>> perm =
        intListValue(args.get("perm"), "perm", false);
    if (!perm)
      return nullptr;
    return buildChecked<TransposeOp>(
        at, xOperand,
        [&](EmitErrorFn emit) { return inferTranspose(xt, *perm, emit); }, x,
        *perm);
  }
  if (name == "sum" || name == "mean" || name == "max") {
    auto axes = axesArg(args, "axis");
    std::optional<bool> keep = boolArg(args, "keep_dims", false);
    if (!axes || !keep || !requireNumeric(x))
      return nullptr;
    auto infer = [&](EmitErrorFn emit) {
      return inferReduce(name, xt,
                         *axes ? std::optional<ArrayRef<int64_t>>(**axes)
                               : std::nullopt,
                         *keep, emit);
    };
    DenseI64ArrayAttr axesAttr =
        *axes ? builder.getDenseI64ArrayAttr(**axes) : nullptr;
    if (name == "sum")
      return buildChecked<SumOp>(at, xOperand, infer, x, axesAttr, *keep);
    if (name == "mean")
      return buildChecked<MeanOp>(at, xOperand, infer, x, axesAttr, *keep);
    return buildChecked<MaxOp>(at, xOperand, infer, x, axesAttr, *keep);
  }
  if (name == "argmax") {
    std::optional<int64_t> axis = intValue(args.get("axis"), "axis");
    std::optional<Type> outType = builder.getI32Type();
    if (args.get("output_type"))
      outType = dtypeValue(args.get("output_type"), "output_type");
    if (!axis || !outType || !requireNumeric(x))
      return nullptr;
    if (!outType->isInteger(32) && !outType->isInteger(64)) {
      error(resolve(args.get("output_type"))->getLoc())
          << "output_type of argmax must be i32 or i64";
      return nullptr;
    }
    auto emit = [&]() { return error(at); };
    FailureOr<SmallVector<int64_t>> shape = inferArgmaxShape(xt, *axis, emit);
    if (failed(shape))
      return nullptr;
    return builder.create<ArgmaxOp>(l, RankedTensorType::get(*shape, *outType),
                                    x, *axis);
  }
  if (name == "softmax" || name == "log_softmax") {
    std::optional<int64_t> axis = intArg(args, "axis", -1, INT32_MIN, INT32_MAX);
    if (!axis || !requireFloat(x))
      return nullptr;
    auto emit = [&]() { return error(at); };
    if (failed(normalizeAxis(name, *axis, xt.getRank(), emit)))
      return nullptr;
    if (name == "softmax")
      return builder.create<SoftmaxOp>(l, x, *axis);
    return builder.create<LogSoftmaxOp>(l, x, *axis);
  }
  if (name == "softmax_cross_entropy" || name == "sparse_softmax_cross_entropy") {
    Value labels = tensorArg(args, "labels");
    if (!labels || !requireFloat(x))
      return nullptr;
    auto lt = cast<RankedTensorType>(labels.getType());
    std::pair<const ast::Expr *, Value> operands[] = {
        {args.get("logits"), x}, {args.get("labels"), labels}};
    if (name == "softmax_cross_entropy")
      return buildChecked<SoftmaxCrossEntropyOp>(
          at, operands,
          [&](EmitErrorFn emit) { return inferSoftmaxCrossEntropy(xt, lt, emit); },
          x, labels);
    if (!lt.getElementType().isInteger(32) && !lt.getElementType().isInteger(64)) {
      auto diag = error(at) << "sparse_softmax_cross_entropy needs class indices "
                               "(i32 or i64) as labels, got "
                            << formatType(lt)
                            << " (for label distributions, use "
                               "softmax_cross_entropy)";
      noteOrigin(diag, args.get("labels"), labels);
      return nullptr;
    }
    return buildChecked<SparseSoftmaxCrossEntropyOp>(
        at, operands,
        [&](EmitErrorFn emit) {
          return inferSparseSoftmaxCrossEntropy(xt, lt, emit);
        },
        x, labels);
  }
  if (name == "one_hot") {
    std::optional<int64_t> depth = intArg(args, "depth", 0, 1, kMaxDimSize);
    std::optional<double> on = numberArg(args, "on_value", 1.0);
    std::optional<double> off = numberArg(args, "off_value", 0.0);
    std::optional<Type> dtype = builder.getF32Type();
    if (args.get("dtype"))
      dtype = dtypeValue(args.get("dtype"), "dtype");
    if (!depth || !on || !off || !dtype)
      return nullptr;
    if (dtype->isInteger(1)) {
      error(resolve(args.get("dtype"))->getLoc())
          << "one_hot gives numbers: dtype is f32, f64, f16, bf16, i32 or i64";
      return nullptr;
    }
    if (!xt.getElementType().isInteger(32) && !xt.getElementType().isInteger(64)) {
      auto diag = error(at) << "one_hot needs integer indices (i32 or i64), got "
                            << formatType(xt);
      noteOrigin(diag, args.get("indices"), x);
      return nullptr;
    }
    SmallVector<int64_t> shape(xt.getShape());
    shape.push_back(*depth);
    return builder.create<OneHotOp>(l, RankedTensorType::get(shape, *dtype), x,
                                    builder.getI64IntegerAttr(*depth),
                                    builder.getF64FloatAttr(*on),
                                    builder.getF64FloatAttr(*off));
  }
  if (name == "gather") {
    Value indices = tensorArg(args, "indices");
    if (!indices)
      return nullptr;
    auto it = cast<RankedTensorType>(indices.getType());
    if (!it.getElementType().isInteger(32) && !it.getElementType().isInteger(64)) {
      auto diag = error(at) << "gather needs integer indices (i32 or i64), got "
                            << formatType(it);
      noteOrigin(diag, args.get("indices"), indices);
      return nullptr;
    }
    std::pair<const ast::Expr *, Value> operands[] = {
        {args.get("params"), x}, {args.get("indices"), indices}};
    return buildChecked<GatherOp>(
        at, operands,
        [&](EmitErrorFn emit) { return inferGather(xt, it, emit); }, x, indices);
  }
  if (name == "dropout") {
    std::optional<double> rate = numberArg(args, "rate", 0.0);
    if (!rate || !requireFloat(x))
      return nullptr;
    if (!(*rate >= 0.0 && *rate < 1.0)) {
      error(resolve(args.get("rate"))->getLoc())
          << "dropout rate must be in [0, 1), got " << *rate;
      return nullptr;
    }
    IntegerAttr seed;
    auto *noSeed = dyn_cast_or_null<ast::NameExpr>(args.get("seed") ? resolve(args.get("seed")) : nullptr);
    if (args.get("seed") && !(noSeed && noSeed->name == "none")) {
      std::optional<int64_t> s = intValue(args.get("seed"), "seed");
      if (!s)
        return nullptr;
      seed = builder.getI64IntegerAttr(*s);
    }
    return builder.create<DropoutOp>(l, x, builder.getF64FloatAttr(*rate), seed);
  }
  if (name == "max_pool" || name == "avg_pool") {
    std::optional<SmallVector<int64_t>> size = pairArg(args, "size", 2);
    if (!size)
      return nullptr;
    std::optional<SmallVector<int64_t>> strides =
        args.get("strides") ? pairArg(args, "strides", 1) : size;
    std::optional<std::string> padding =
        symbolArg(args, "padding", {"valid", "same"}, "valid");
    if (!strides || !padding || !requireFloat(x))
      return nullptr;
    Padding pad = *padding == "same" ? Padding::same : Padding::valid;
    auto infer = [&](EmitErrorFn emit) {
      return inferPool(name, xt, *size, *strides, pad, emit);
    };
    if (name == "max_pool")
      return buildChecked<MaxPoolOp>(at, xOperand, infer, x, pad, *size, *strides);
    return buildChecked<AvgPoolOp>(at, xOperand, infer, x, pad, *size, *strides);
  }
  if (name == "slice") {
    std::optional<SmallVector<int64_t>> begin =
        intListValue(args.get("begin"), "begin", false);
    std::optional<SmallVector<int64_t>> size =
        intListValue(args.get("size"), "size", false);
    if (!begin || !size)
      return nullptr;
    return buildChecked<SliceOp>(
        at, xOperand,
        [&](EmitErrorFn emit) { return inferSlice(xt, *begin, *size, emit); },
        x, *begin, *size);
  }
  error(at) << name << " is not supported here";
  return nullptr;
}

Value ModelGen::genConcat(const ast::CallExpr &call, const BoundArgs &args) {
  auto *list = dyn_cast<ast::ListExpr>(resolve(args.get("values")));
  if (!list || list->items.empty()) {
    error(resolve(args.get("values"))->getLoc())
        << "concat takes a non-empty list of tensors, as in concat([a, b], "
           "axis = 1)";
    return nullptr;
  }
  std::optional<int64_t> axis = intValue(args.get("axis"), "axis");
  SmallVector<Value> values;
  SmallVector<RankedTensorType> types;
  SmallVector<std::pair<const ast::Expr *, Value>> operands;
  for (const ast::ExprPtr &item : list->items) {
    Value v = genExpr(*item, types.empty() ? Type() : types.front().getElementType());
    if (!v)
      return nullptr;
    values.push_back(v);
    types.push_back(cast<RankedTensorType>(v.getType()));
    operands.push_back({item.get(), v});
  }
  if (!axis)
    return nullptr;
  return buildChecked<ConcatOp>(
      call.getLoc(), operands,
      [&](EmitErrorFn emit) { return inferConcat(types, *axis, emit); },
      ValueRange(values), *axis);
}

//===----------------------------------------------------------------------===//
// Layers, variables, networks
//===----------------------------------------------------------------------===//

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
      const BuiltinSpec *spec = lookupBuiltin(call->callee, BuiltinKind::Initializer);
      if (spec) {
        auto emit = [&](ast::Loc l) { return error(l); };
        std::optional<BoundArgs> args =
            bindArguments(*spec, call->args, call->getLoc(), emit);
        if (!args)
          return std::nullopt;
        for (StringRef param : spec->params) {
          const ast::Expr *value = args->get(param);
          if (!value)
            continue;
          if (param == "seed") {
            if (auto *n = dyn_cast<ast::NameExpr>(resolve(value)); n && n->name == "none")
              continue;
            std::optional<int64_t> seed = intValue(value, "seed");
            if (!seed)
              return std::nullopt;
            params.append(param, builder.getI64IntegerAttr(*seed));
          } else {
            std::optional<double> v = numberValue(value, param);
            if (!v)
              return std::nullopt;
            params.append(param, builder.getF64FloatAttr(*v));
          }
        }
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
  DictionaryAttr dict = params.empty() ? DictionaryAttr() : params.getDictionary(context);
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
                << unnamedNetworkCall->callee << "(...) as NAME` makes new ones, `"
                << unnamedNetworkCall->callee
                << "(...) shares NAME` reuses those of the call named NAME";
    diag.attachNote(loc(at)) << "a variable is created here";
    return nullptr;
  }
  auto existing = variables.find(symbol);
  if (existing != variables.end()) {
    auto diag = error(at) << "variable '" << symbol << "' is already defined";
    diag.attachNote(loc(existing->second.second)) << "previous definition is here";
    return nullptr;
  }
  if (init.isRandom() && !isa<FloatType>(type.getElementType())) {
    error(at) << "initializer " << stringifyInitKind(init.getKind())
              << " draws floating-point numbers, but '" << symbol << "' is "
              << formatType(type) << " (use zeros, ones or a number)";
    return nullptr;
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(graph);
  auto op = builder.create<VariableOp>(loc(at), symbol, type,
                                       init, trainable);
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
  auto op = builder.create<ReadVariableOp>(loc(at), it->second.first.getType(),
                                           FlatSymbolRefAttr::get(context, symbol));
  return op;
}

std::optional<LayerName> ModelGen::layerNameFor(const ast::CallExpr &call,
                                                StringRef kind) {
  switch (call.naming) {
  case ast::CallExpr::Naming::None: {
    // dense_1, dense_2, ...: skipping names that `as` already took.
    std::string full;
    do {
      unsigned n = ++autoCounters[prefix + kind.str()];
      full = prefix + kind.str() + "_" + std::to_string(n);
    } while (!sharing && layerNames.count(full));
    if (!sharing)
      layerNames.try_emplace(full, call.getLoc(), kind.str());
    return LayerName{full, sharing};
  }
  case ast::CallExpr::Naming::As: {
    std::string full = prefix + call.layerName;
    if (sharing)
      return LayerName{full, true};
    auto [it, inserted] =
        layerNames.try_emplace(full, call.layerLoc, kind.str());
    if (inserted)
      indexDefinition(call.layerName, FrontendIndex::Kind::Layer, call.layerLoc,
                      call.callee + " " + (findNetwork(call.callee) ? "network call" : "layer") +
                          ", variables " + full + "/...");
    if (!inserted) {
      auto diag = error(call.layerLoc)
                  << "the name '" << full
                  << "' is already used by another layer; write `shares "
                  << call.layerName
                  << "` to reuse its variables, or choose another name";
      diag.attachNote(loc(it->second.first)) << "'" << full << "' is named here";
      return std::nullopt;
    }
    return LayerName{full, false};
  }
  case ast::CallExpr::Naming::Shares: {
    std::string full = prefix + call.layerName;
    if (!layerNames.count(full) && !sharing) {
      auto diag = error(call.layerLoc)
                  << "shares '" << call.layerName
                  << "', but no earlier layer or network call is named '"
                  << call.layerName << "'";
      std::vector<std::string> names;
      for (const auto &entry : layerNames)
        names.push_back(entry.first().str());
      if (auto s = closestName(full, names))
        diag << "; did you mean '" << *s << "'?";
      return std::nullopt;
    }
    if (auto it = layerNames.find(full); it != layerNames.end()) {
      indexReference(call.layerLoc, call.layerName.size(), it->second.first);
      if (it->second.second != kind) {
        auto diag = error(call.layerLoc)
                    << "shares '" << call.layerName << "', which is a "
                    << it->second.second << ", not a " << kind;
        diag.attachNote(loc(it->second.first)) << "'" << full << "' is named here";
        return std::nullopt;
      }
    }
    return LayerName{full, true};
  }
  }
  return std::nullopt;
}

Value ModelGen::layerVariable(const LayerName &layer, StringRef leaf,
                              RankedTensorType type, InitializerAttr init,
                              ast::Loc at, std::optional<int64_t> partitions) {
  std::string symbol = layer.full + "/" + leaf.str();
  if (!layer.share) {
    if (!createVariable(symbol, type, init, /*trainable=*/true, at, partitions))
      return nullptr;
    return readVariable(symbol, at);
  }
  auto it = variables.find(symbol);
  if (it == variables.end()) {
    error(at) << "cannot share '" << layer.full << "': it has no variable '"
              << symbol << "'";
    return nullptr;
  }
  if (it->second.first.getType() != type) {
    auto diag = error(at) << "cannot share '" << symbol << "': it is "
                          << formatType(it->second.first.getType())
                          << ", but this call needs " << formatType(type);
    diag.attachNote(loc(it->second.second)) << "'" << symbol << "' is created here";
    return nullptr;
  }
  return readVariable(symbol, at);
}

Value ModelGen::applyActivation(Value x, StringRef activation, ast::Loc at) {
  Location l = loc(at);
  if (activation == "relu")
    return builder.create<ReluOp>(l, x);
  if (activation == "sigmoid")
    return builder.create<SigmoidOp>(l, x);
  if (activation == "tanh")
    return builder.create<TanhOp>(l, x);
  if (activation == "softmax")
    return builder.create<SoftmaxOp>(l, x, -1);
  return x;
}

Value ModelGen::genLayer(const ast::CallExpr &call, const BuiltinSpec &spec,
                         const BoundArgs &args) {
  StringRef name = spec.name;
  ast::Loc at = call.getLoc();
  Location l = loc(at);
  static const StringRef activations[] = {"none", "linear", "relu", "sigmoid",
                                          "tanh", "softmax"};
  Value x = tensorArg(args, spec.params.front());
  if (!x)
    return nullptr;
  auto xt = cast<RankedTensorType>(x.getType());
  std::optional<LayerName> layer = layerNameFor(call, name);
  if (!layer)
    return nullptr;

  if (name == "embedding") {
    std::optional<int64_t> vocab = intArg(args, "vocab", 0, 1, kMaxDimSize);
    std::optional<int64_t> dim = intArg(args, "dim", 0, 1, kMaxDimSize);
    std::optional<int64_t> partitions =
        args.get("partitions") ? intArg(args, "partitions", 1, 1, kMaxDimSize)
                               : std::optional<int64_t>(1);
    std::optional<InitializerAttr> init;
    if (args.get("initializer"))
      init = buildInitializer(args.get("initializer"), at, "normal");
    else
      init = InitializerAttr::get(
          context, InitKind::normal,
          builder.getDictionaryAttr(
              builder.getNamedAttr("stddev", builder.getF64FloatAttr(0.05))));
    if (!vocab || !dim || !partitions || !init)
      return nullptr;
    if (*partitions > *vocab) {
      error(resolve(args.get("partitions"))->getLoc())
          << "partitions (" << *partitions << ") cannot exceed vocab ("
          << *vocab << ")";
      return nullptr;
    }
    if (!xt.getElementType().isInteger(32) && !xt.getElementType().isInteger(64)) {
      auto diag = error(at) << "embedding needs integer ids (i32 or i64), got "
                            << formatType(xt);
      noteOrigin(diag, args.get("ids"), x);
      return nullptr;
    }
    auto tableType = RankedTensorType::get({*vocab, *dim}, builder.getF32Type());
    Value table = layerVariable(*layer, "embeddings", tableType, *init, at,
                                *partitions > 1 ? partitions : std::nullopt);
    if (!table)
      return nullptr;
    return builder.create<GatherOp>(
        l, *inferGather(tableType, xt, [] { return InFlightDiagnostic(); }),
        table, x);
  }

  std::optional<std::string> activation =
      symbolArg(args, "activation", activations, "none");
  std::optional<bool> useBias = boolArg(args, "use_bias", true);
  std::optional<InitializerAttr> kernelInit =
      buildInitializer(args.get("kernel_initializer"), at, "glorot_uniform");
  std::optional<InitializerAttr> biasInit =
      buildInitializer(args.get("bias_initializer"), at, "zeros");
  if (!activation || !useBias || !kernelInit || !biasInit)
    return nullptr;
  if (!isa<FloatType>(xt.getElementType())) {
    auto diag = error(at) << name << " needs a floating-point input, got "
                          << formatType(xt) << " (cast it first)";
    noteOrigin(diag, args.get("x"), x);
    return nullptr;
  }
  Type element = xt.getElementType();
  Value y;
  int64_t units;
  if (name == "dense") {
    std::optional<int64_t> u = intArg(args, "units", 0, 1, kMaxDimSize);
    if (!u)
      return nullptr;
    units = *u;
    if (xt.getRank() != 2 || ShapedType::isDynamic(xt.getDimSize(1))) {
      auto diag = error(at) << "dense needs an input [batch, features] with a "
                               "known number of features, got "
                            << formatType(xt) << " (flatten it first)";
      noteOrigin(diag, args.get("x"), x);
      return nullptr;
    }
    auto kernelType = RankedTensorType::get({xt.getDimSize(1), units}, element);
    Value kernel = layerVariable(*layer, "kernel", kernelType, *kernelInit, at);
    if (!kernel)
      return nullptr;
    y = builder.create<MatmulOp>(
        l, RankedTensorType::get({xt.getDimSize(0), units}, element), x, kernel,
        false, false);
  } else { // conv2d
    std::optional<int64_t> filters = intArg(args, "filters", 0, 1, kMaxDimSize);
    std::optional<SmallVector<int64_t>> kernelSize = pairArg(args, "kernel", 0);
    std::optional<SmallVector<int64_t>> strides = pairArg(args, "strides", 1);
    std::optional<SmallVector<int64_t>> dilation = pairArg(args, "dilation", 1);
    std::optional<std::string> padding =
        symbolArg(args, "padding", {"same", "valid"}, "same");
    if (!filters || !kernelSize || !strides || !dilation || !padding)
      return nullptr;
    units = *filters;
    if (xt.getRank() != 4 || ShapedType::isDynamic(xt.getDimSize(3))) {
      auto diag = error(at) << "conv2d needs an NHWC input [batch, height, "
                               "width, channels] with known channels, got "
                            << formatType(xt)
                            << " (reshape it, as in reshape(x, [-1, 28, 28, 1]))";
      noteOrigin(diag, args.get("x"), x);
      return nullptr;
    }
    auto kernelType = RankedTensorType::get(
        {(*kernelSize)[0], (*kernelSize)[1], xt.getDimSize(3), units}, element);
    Value kernel = layerVariable(*layer, "kernel", kernelType, *kernelInit, at);
    if (!kernel)
      return nullptr;
    Padding pad = *padding == "same" ? Padding::same : Padding::valid;
    std::pair<const ast::Expr *, Value> operands[] = {{args.get("x"), x}};
    y = buildChecked<Conv2DOp>(
        at, operands,
        [&](EmitErrorFn emit) {
          return inferConv2D(xt, kernelType, *strides, *dilation, pad, emit);
        },
        x, kernel, pad, *strides, *dilation);
    if (!y)
      return nullptr;
  }
  if (*useBias) {
    auto biasType = RankedTensorType::get({units}, element);
    Value bias = layerVariable(*layer, "bias", biasType, *biasInit, at);
    if (!bias)
      return nullptr;
    y = builder.create<AddOp>(l, y.getType(), y, bias);
  }
  return applyActivation(y, *activation, at);
}

Value ModelGen::genNetworkCall(const ast::CallExpr &call,
                               const ast::Network &network) {
  if (llvm::is_contained(networkStack, &network) ||
      networkStack.size() >= kMaxNetworkDepth) {
    error(call.getLoc()) << "network '" << network.name
                         << "' calls itself; networks cannot be recursive";
    return nullptr;
  }
  // An unnamed call may not create variables: which ones it uses must be
  // said with `as` (new) or `shares` (existing).
  std::optional<LayerName> instance;
  if (call.naming == ast::CallExpr::Naming::None)
    instance = LayerName{prefix + network.name + "." +
                             std::to_string(++autoCounters["network." + network.name]),
                         false};
  else
    instance = layerNameFor(call, network.name);
  if (!instance)
    return nullptr;

  // Bind arguments to parameters, like a builtin's.
  std::vector<StringRef> params;
  for (const ast::Param &p : network.params)
    params.push_back(p.name);
  BuiltinSpec spec{network.name, BuiltinKind::Op, params, 0, "network"};
  auto emit = [&](ast::Loc l) { return error(l); };
  std::optional<BoundArgs> args = bindArguments(spec, call.args, call.getLoc(), emit);
  if (!args)
    return nullptr;
  Scope scope;
  scope.isBarrier = true;
  bool ok = true;
  for (const ast::Param &p : network.params) {
    const ast::Expr *arg = args->get(p.name);
    if (!arg)
      arg = p.defaultValue.get();
    if (!arg) {
      auto diag = error(call.getLoc())
                  << "network '" << network.name << "' needs '" << p.name << "'";
      diag.attachNote(loc(p.loc)) << "parameter declared here";
      ok = false;
      continue;
    }
    const ast::Expr *resolved = resolve(arg);
    bool literal = isNumberLiteral(*resolved) || isa<ast::BoolExpr>(resolved) ||
                   isa<ast::StringExpr>(resolved) || isa<ast::DTypeExpr>(resolved) ||
                   isa<ast::ListExpr>(resolved) ||
                   (isa<ast::NameExpr>(resolved) &&
                    !lookup(cast<ast::NameExpr>(resolved)->name));
    if (literal) {
      scope.bindings[p.name] = {Binding::Kind::Literal, nullptr, "", resolved,
                                p.loc, "parameter", scopes.size()};
      continue;
    }
    Value v = genExpr(*arg);
    if (!v) {
      ok = false;
      continue;
    }
    scope.bindings[p.name] = {Binding::Kind::Value, v, "", nullptr, p.loc,
                              "parameter"};
  }
  if (!ok)
    return nullptr;

  std::string savedPrefix = prefix;
  bool savedSharing = sharing;
  const ast::CallExpr *savedUnnamed = unnamedNetworkCall;
  unnamedNetworkCall = call.naming == ast::CallExpr::Naming::None
                           ? &call
                           : (sharing || call.naming != ast::CallExpr::Naming::None
                                  ? nullptr
                                  : unnamedNetworkCall);
  llvm::StringMap<unsigned> savedCounters = std::move(autoCounters);
  std::vector<Value> savedReturned = std::move(returned);
  autoCounters.clear();
  returned.clear();
  prefix = instance->full + "/";
  sharing = instance->share;
  scopes.push_back(std::move(scope));
  networkStack.push_back(&network);
  unsigned errorsBefore = errors;
  for (const ast::StmtPtr &stmt : network.body)
    genStmt(*stmt);
  networkStack.pop_back();
  scopes.pop_back();
  prefix = savedPrefix;
  sharing = savedSharing;
  unnamedNetworkCall = savedUnnamed;
  autoCounters = std::move(savedCounters);
  std::vector<Value> results = std::move(returned);
  returned = std::move(savedReturned);

  if (errors != errorsBefore)
    return nullptr;
  if (results.size() != 1) {
    auto diag = error(call.getLoc())
                << "network '" << network.name << "' must end with one `return`";
    diag.attachNote(loc(network.loc)) << "network defined here";
    return nullptr;
  }
  return results.front();
}

//===----------------------------------------------------------------------===//
// Placement
//===----------------------------------------------------------------------===//

void ModelGen::genPlacement() {
  for (size_t i = 1; i < model.placements.size(); ++i) {
    auto diag = error(model.placements[i].loc) << "placement is given twice";
    diag.attachNote(loc(model.placements[0].loc)) << "first given here";
  }
  if (model.placements.empty())
    return;
  const ast::Placement &p = model.placements.front();
  if (p.strategy != "replicate") {
    error(p.loc) << "unknown placement '" << p.strategy
                 << "'; write `placement replicate(ps = round_robin)` (or "
                    "greedy), or place with `on \"/job:ps/task:0\" { ... }`";
    return;
  }
  std::string strategy = "round_robin";
  for (const ast::Arg &option : p.options) {
    if (option.key != "ps") {
      error(option.keyLoc) << "replicate has no option '" << option.key
                           << "' (it takes ps = round_robin or greedy)";
      continue;
    }
    if (auto s = symbolValue(option.value.get(), "ps", {"round_robin", "greedy"}))
      strategy = *s;
  }
  module->setAttr("dtf.placement",
                  builder.getDictionaryAttr(builder.getNamedAttr(
                      "ps_strategy", builder.getStringAttr(strategy))));
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

Attribute ModelGen::literalAttr(const ast::Expr *expr, StringRef what) {
  expr = resolve(expr);
  if (auto *n = dyn_cast<ast::NumberExpr>(expr))
    return n->isInteger ? Attribute(builder.getI64IntegerAttr(
                              static_cast<int64_t>(n->value)))
                        : Attribute(builder.getF64FloatAttr(n->value));
  if (isa<ast::NegExpr>(expr)) {
    std::optional<double> v = numberValue(expr, what);
    return v ? builder.getF64FloatAttr(*v) : Attribute();
  }
  if (auto *b = dyn_cast<ast::BoolExpr>(expr))
    return builder.getBoolAttr(b->value);
  if (auto *s = dyn_cast<ast::StringExpr>(expr))
    return builder.getStringAttr(s->value);
  if (auto *n = dyn_cast<ast::NameExpr>(expr))
    return builder.getStringAttr(n->name);
  if (auto *l = dyn_cast<ast::ListExpr>(expr)) {
    SmallVector<Attribute> items;
    for (const ast::ExprPtr &item : l->items) {
      Attribute a = literalAttr(item.get(), what);
      if (!a)
        return nullptr;
      items.push_back(a);
    }
    return builder.getArrayAttr(items);
  }
  if (isa<ast::CallExpr>(expr))
    return configCall(expr, BuiltinKind::Schedule, what);
  error(expr->getLoc()) << what << " must be a number, a bool, a string, a "
                                   "name or a list";
  return nullptr;
}

Attribute ModelGen::checkedSetting(const ast::Expr *expr, StringRef param) {
  // What each parameter of the training calls takes.
  enum class Rule { Positive, Fraction, NonNegative, Bool, Count, Threads, Text,
                    Ints, Numbers, LearningRate, Any };
  Rule rule = llvm::StringSwitch<Rule>(param)
                  .Cases("epsilon", "clip_norm", "decay_rate", Rule::Positive)
                  .Cases("initial_accumulator_value", "learning_rate", Rule::LearningRate)
                  .Cases("beta1", "beta2", "decay", "momentum", Rule::Fraction)
                  .Cases("use_nesterov", "staircase", "soft_placement",
                         "log_device_placement", "header", Rule::Bool)
                  .Cases("decay_steps", "examples", "replicas_to_aggregate",
                         "total_num_replicas", Rule::Count)
                  .Cases("inter_op_threads", "intra_op_threads", "seed", Rule::Threads)
                  .Cases("path", "label", Rule::Text)
                  .Case("boundaries", Rule::Ints)
                  .Case("values", Rule::Numbers)
                  .Default(Rule::Any);
  if (param == "initial_accumulator_value")
    rule = Rule::NonNegative;
  const ast::Expr *resolved = resolve(expr);
  auto number = [&](auto check, StringRef what) -> Attribute {
    std::optional<double> v = numberValue(resolved, param);
    if (!v)
      return nullptr;
    if (!check(*v)) {
      std::ostringstream shown;
      shown << *v; // 6 significant digits: 0.5, -1, 1e-08
      error(resolved->getLoc()) << param << " must be " << what << ", got "
                                << shown.str();
      return nullptr;
    }
    return builder.getF64FloatAttr(*v);
  };
  auto integer = [&](int64_t min) -> Attribute {
    std::optional<int64_t> v = intValue(resolved, param);
    if (!v)
      return nullptr;
    if (*v < min) {
      error(resolved->getLoc()) << param << " must be at least " << min
                                << ", got " << *v;
      return nullptr;
    }
    return builder.getI64IntegerAttr(*v);
  };
  switch (rule) {
  case Rule::LearningRate:
    if (isa<ast::CallExpr>(resolved))
      return configCall(resolved, BuiltinKind::Schedule, "learning-rate schedule");
    return number([](double v) { return v > 0; }, "positive");
  case Rule::Positive:
    return number([](double v) { return v > 0; }, "positive");
  case Rule::NonNegative:
    return number([](double v) { return v >= 0; }, "zero or more");
  case Rule::Fraction:
    return number([](double v) { return v >= 0 && v < 1; }, "in [0, 1)");
  case Rule::Count:
    return integer(1);
  case Rule::Threads:
    return integer(0);
  case Rule::Bool:
    if (auto *b = dyn_cast<ast::BoolExpr>(resolved))
      return builder.getBoolAttr(b->value);
    error(resolved->getLoc()) << param << " must be true or false";
    return nullptr;
  case Rule::Text:
    if (auto *str = dyn_cast<ast::StringExpr>(resolved))
      return builder.getStringAttr(str->value);
    if (param == "label" && isa<ast::NumberExpr>(resolved))
      return integer(0);
    error(resolved->getLoc()) << param << " must be a string, as in \"...\"";
    return nullptr;
  case Rule::Ints:
  case Rule::Numbers: {
    auto *list = dyn_cast<ast::ListExpr>(resolved);
    if (!list) {
      error(resolved->getLoc()) << param << " must be a list";
      return nullptr;
    }
    SmallVector<Attribute> items;
    for (const ast::ExprPtr &item : list->items) {
      if (rule == Rule::Ints) {
        std::optional<int64_t> v = intValue(item.get(), param);
        if (!v)
          return nullptr;
        if (!items.empty() && *v <= cast<IntegerAttr>(items.back()).getInt()) {
          error(item->getLoc()) << param << " must increase";
          return nullptr;
        }
        items.push_back(builder.getI64IntegerAttr(*v));
      } else {
        std::optional<double> v = numberValue(item.get(), param);
        if (!v)
          return nullptr;
        items.push_back(builder.getF64FloatAttr(*v));
      }
    }
    return builder.getArrayAttr(items);
  }
  case Rule::Any:
    return literalAttr(expr, param);
  }
  return nullptr;
}

Attribute ModelGen::configCall(const ast::Expr *expr, BuiltinKind kind,
                               StringRef what) {
  expr = resolve(expr);
  StringRef callee;
  const std::vector<ast::Arg> *args = nullptr;
  static const std::vector<ast::Arg> none;
  if (auto *call = dyn_cast<ast::CallExpr>(expr)) {
    callee = call->callee;
    args = &call->args;
  } else if (auto *name = dyn_cast<ast::NameExpr>(expr)) {
    callee = name->name;
    args = &none;
  } else {
    error(expr->getLoc()) << what << " must be a call such as "
                          << builtinsOfKind(kind).front()->name << "(...)";
    return nullptr;
  }
  const BuiltinSpec *spec = lookupBuiltin(callee, kind);
  if (!spec) {
    std::vector<std::string> names;
    for (const BuiltinSpec *s : builtinsOfKind(kind))
      names.push_back(s->name.str());
    auto diag = error(expr->getLoc()) << "unknown " << what << " '" << callee << "'";
    if (auto s = closestName(callee, names))
      diag << "; did you mean '" << *s << "'?";
    else
      diag << " (use " << llvm::join(names, ", ") << ")";
    return nullptr;
  }
  auto emit = [&](ast::Loc l) { return error(l); };
  std::optional<BoundArgs> bound =
      bindArguments(*spec, *args, expr->getLoc(), emit);
  if (!bound)
    return nullptr;
  NamedAttrList attrs;
  attrs.append("kind", builder.getStringAttr(spec->name));
  for (StringRef param : spec->params) {
    const ast::Expr *value = bound->get(param);
    if (!value)
      continue;
    Attribute attr = checkedSetting(value, param);
    if (!attr)
      return nullptr;
    attrs.append(param, attr);
  }
  // Checks across parameters.
  if (spec->name == "piecewise_constant") {
    auto boundaries = dyn_cast_or_null<ArrayAttr>(attrs.get("boundaries"));
    auto values = dyn_cast_or_null<ArrayAttr>(attrs.get("values"));
    if (boundaries && values && values.size() != boundaries.size() + 1) {
      error(expr->getLoc()) << "piecewise_constant needs one more value than "
                               "boundaries, got "
                            << boundaries.size() << " boundaries and "
                            << values.size() << " values";
      return nullptr;
    }
  }
  return attrs.getDictionary(context);
}

Value ModelGen::graphValue(StringRef name, ast::Loc at, StringRef what) {
  const Binding *b = lookup(name);
  if (b && b->kind == Binding::Kind::Poisoned)
    return nullptr;
  if (!b || b->kind == Binding::Kind::Literal) {
    auto diag = error(at) << what << " '" << name
                          << "' is not a value of the graph";
    if (auto s = closestName(name, namesInScope()))
      diag << "; did you mean '" << *s << "'?";
    return nullptr;
  }
  Value v = b->kind == Binding::Kind::Variable ? readVariable(b->symbol, at)
                                               : b->value;
  if (!v)
    return nullptr;
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() != 0) {
    auto diag = error(at) << what << " '" << name << "' must be a scalar, but it is "
                          << formatType(type) << "; reduce it, as in mean(...)";
    diag.attachNote(loc(b->loc)) << "'" << name << "' is defined here";
    return nullptr;
  }
  return v;
}

void ModelGen::genTrain(SmallVectorImpl<std::pair<std::string, Value>> &outputs) {
  if (model.trainBlocks.empty())
    return;
  for (size_t i = 1; i < model.trainBlocks.size(); ++i) {
    auto diag = error(model.trainBlocks[i]) << "a model has one train block";
    diag.attachNote(loc(model.trainBlocks[0])) << "the first one is here";
  }
  NamedAttrList settings;
  llvm::StringMap<ast::Loc> seen;
  auto addOutput = [&](StringRef name, Value v) {
    for (auto &[n, value] : outputs)
      if (n == name)
        return;
    outputs.push_back({name.str(), v});
  };
  std::optional<std::pair<std::string, ast::Loc>> lossName;
  static const StringRef keys[] = {"loss", "metrics", "optimizer", "clip_gradients",
                                   "moving_average", "replication", "update",
                                   "batch", "steps", "seed", "data", "eval",
                                   "session"};
  const ast::TrainItem *sync = nullptr;

  for (const ast::TrainItem &item : model.train) {
    std::string key = item.kind == ast::TrainItem::Kind::Setting ? item.key
                      : item.kind == ast::TrainItem::Kind::Checkpoint
                          ? "checkpoint"
                          : "summary";
    auto [it, inserted] = seen.try_emplace(key, item.loc);
    if (!inserted) {
      auto diag = error(item.loc) << "'" << key << "' is set twice";
      diag.attachNote(loc(it->second)) << "first set here";
      continue;
    }
    if (item.kind == ast::TrainItem::Kind::Checkpoint ||
        item.kind == ast::TrainItem::Kind::Summary) {
      bool checkpoint = item.kind == ast::TrainItem::Kind::Checkpoint;
      static const StringRef checkpointUnits[] = {"s", "min", "steps"};
      static const StringRef summaryUnits[] = {"steps", "s", "min"};
      ArrayRef<StringRef> units = checkpoint ? ArrayRef<StringRef>(checkpointUnits)
                                             : ArrayRef<StringRef>(summaryUnits);
      if (!llvm::is_contained(units, item.unit)) {
        error(item.unitLoc) << "unknown unit '" << item.unit << "' (use "
                            << llvm::join(units, ", ") << ")";
        continue;
      }
      if (!(item.every > 0) || !std::isfinite(item.every)) {
        error(item.everyLoc) << key
                             << " interval must be a positive number of reasonable size";
        continue;
      }
      NamedAttrList policy;
      policy.append("every", builder.getF64FloatAttr(item.every));
      policy.append("unit", builder.getStringAttr(item.unit));
      if (item.keep) {
        if (*item.keep < 1) {
          error(item.keepLoc) << "keep must be at least 1";
          continue;
        }
        policy.append("keep", builder.getI64IntegerAttr(*item.keep));
      }
      if (!checkpoint) {
        SmallVector<Attribute> names;
        for (auto &[name, at] : item.names) {
          if (Value v = graphValue(name, at, "summary value")) {
            addOutput(name, v);
            names.push_back(builder.getStringAttr(name));
          }
        }
        policy.append("values", builder.getArrayAttr(names));
      }
      settings.append(key, policy.getDictionary(context));
      continue;
    }

    const ast::Expr *value = item.value.get();
    if (!llvm::is_contained(keys, StringRef(key))) {
      auto diag = error(item.loc) << "unknown training setting '" << key << "'";
      std::vector<std::string> names(std::begin(keys), std::end(keys));
      names.push_back("checkpoint");
      names.push_back("summary");
      if (auto s = closestName(key, names))
        diag << "; did you mean '" << *s << "'?";
      continue;
    }
    if (key != "eval" && !item.extra.empty()) {
      error(item.extra.front().keyLoc) << "'" << key << "' takes one value";
      continue;
    }
    Attribute attr;
    if (key == "loss") {
      auto *name = dyn_cast<ast::NameExpr>(value);
      if (!name) {
        error(value->getLoc()) << "loss names a graph value, as in `loss = xent`";
        continue;
      }
      lossName = {name->name, name->getLoc()};
      continue;
    } else if (key == "metrics") {
      auto *list = dyn_cast<ast::ListExpr>(value);
      if (!list) {
        error(value->getLoc()) << "metrics is a list of graph values, as in "
                                  "[loss, accuracy]";
        continue;
      }
      SmallVector<Attribute> names;
      for (const ast::ExprPtr &e : list->items) {
        auto *name = dyn_cast<ast::NameExpr>(e.get());
        if (!name) {
          error(e->getLoc()) << "metrics lists names of graph values";
          continue;
        }
        if (Value v = graphValue(name->name, name->getLoc(), "metric")) {
          addOutput(name->name, v);
          names.push_back(builder.getStringAttr(name->name));
        }
      }
      attr = builder.getArrayAttr(names);
    } else if (key == "optimizer") {
      attr = configCall(value, BuiltinKind::Optimizer, "optimizer");
    } else if (key == "clip_gradients") {
      attr = configCall(value, BuiltinKind::Config, "clip_gradients");
      if (attr && cast<DictionaryAttr>(attr).getAs<StringAttr>("kind").getValue() !=
                      "global_norm") {
        error(value->getLoc()) << "clip_gradients takes global_norm(N)";
        attr = nullptr;
      }
    } else if (key == "moving_average") {
      std::optional<double> decay = numberValue(value, "moving_average");
      if (decay && !(*decay > 0 && *decay < 1)) {
        error(value->getLoc()) << "moving_average is a decay in (0, 1), as in 0.999";
        decay.reset();
      }
      if (decay)
        attr = builder.getF64FloatAttr(*decay);
    } else if (key == "replication") {
      if (auto s = symbolValue(value, "replication", {"between_graph", "in_graph"}))
        attr = builder.getStringAttr(*s);
    } else if (key == "update") {
      auto *name = dyn_cast<ast::NameExpr>(resolve(value));
      auto *call = dyn_cast<ast::CallExpr>(resolve(value));
      if (name && name->name == "async") {
        attr = builder.getDictionaryAttr(
            builder.getNamedAttr("kind", builder.getStringAttr("async")));
      } else if ((name && name->name != "sync") || (call && call->callee != "sync")) {
        StringRef written = name ? StringRef(name->name) : StringRef(call->callee);
        auto diag = error(value->getLoc())
                    << "update is async or sync(replicas_to_aggregate = N, "
                       "total_num_replicas = M), not '"
                    << written << "'";
        if (auto s = closestName(written, {"async", "sync"}))
          diag << "; did you mean '" << *s << "'?";
      } else if (call || name) {
        attr = configCall(value, BuiltinKind::Config, "update");
        if (attr && cast<DictionaryAttr>(attr).getAs<StringAttr>("kind").getValue() != "sync") {
          error(value->getLoc()) << "update is async or sync(replicas_to_aggregate "
                                    "= N, total_num_replicas = M)";
          attr = nullptr;
        }
        sync = &item;
      } else {
        error(value->getLoc()) << "update is async or sync(...)";
      }
    } else if (key == "batch" || key == "steps" || key == "seed") {
      if (std::optional<int64_t> n = intValue(value, key)) {
        if (*n < (key == "seed" ? 0 : 1))
          error(value->getLoc()) << key << " must be " << (key == "seed" ? "non-negative" : "positive");
        else
          attr = builder.getI64IntegerAttr(*n);
      }
    } else if (key == "data" || key == "eval") {
      attr = configCall(value, BuiltinKind::Data, "data source");
      if (attr) {
        auto dict = cast<DictionaryAttr>(attr);
        NamedAttrList data(dict);
        StringRef kindName = dict.getAs<StringAttr>("kind").getValue();
        auto *call = dyn_cast<ast::CallExpr>(resolve(value));
        if (kindName != "synthetic" && !dict.get("path")) {
          error(value->getLoc()) << kindName << " needs a path";
          continue;
        }
        if (auto path = dict.getAs<StringAttr>("path")) {
          if (options.checkDataPaths && !llvm::sys::fs::exists(path.getValue())) {
            const ast::Expr *pathExpr = call && !call->args.empty() ? call->args.front().value.get() : value;
            emitWarning(loc(pathExpr->getLoc()))
                << "data path '" << path.getValue()
                << "' does not exist on this machine; training will need it";
          }
        }
        if (auto split = dict.get("split")) {
          auto s = dyn_cast<StringAttr>(split);
          if (!s || (s.getValue() != "train" && s.getValue() != "test")) {
            error(value->getLoc()) << "split is train or test";
            continue;
          }
        }
        for (const ast::Arg &extra : item.extra) {
          if (extra.key != "every") {
            error(extra.keyLoc) << "eval takes `every = N` (steps) after the "
                                   "data source, not '" << extra.key << "'";
            continue;
          }
          if (std::optional<int64_t> every = intValue(extra.value.get(), "every")) {
            if (*every < 1)
              error(extra.value->getLoc()) << "every must be positive";
            else
              data.append("every", builder.getI64IntegerAttr(*every));
          }
        }
        attr = data.getDictionary(context);
      }
    } else if (key == "session") {
      attr = configCall(value, BuiltinKind::Config, "session");
      if (attr && cast<DictionaryAttr>(attr).getAs<StringAttr>("kind").getValue() != "session") {
        error(value->getLoc()) << "session takes session(soft_placement = "
                                  "true, inter_op_threads = 2, ...)";
        attr = nullptr;
      }
    }
    if (attr)
      settings.append(key, attr);
  }

  // SyncReplicasOptimizer: aggregating more gradients than there are replicas
  // would wait forever.
  if (sync) {
    if (auto dict = dyn_cast_or_null<DictionaryAttr>(settings.get("update"))) {
      auto aggregate = dict.getAs<IntegerAttr>("replicas_to_aggregate");
      auto total = dict.getAs<IntegerAttr>("total_num_replicas");
      auto *call = dyn_cast<ast::CallExpr>(resolve(sync->value.get()));
      auto argLoc = [&](StringRef name) {
        if (call)
          for (const ast::Arg &a : call->args)
            if (a.key == name)
              return a.keyLoc;
        return sync->value->getLoc();
      };
      if ((dict.get("replicas_to_aggregate") && !aggregate) ||
          (dict.get("total_num_replicas") && !total))
        error(sync->value->getLoc()) << "sync takes integer replica counts";
      else if ((aggregate && aggregate.getInt() < 1) || (total && total.getInt() < 1))
        error(sync->value->getLoc()) << "replica counts must be at least 1";
      else if (aggregate && total && aggregate.getInt() > total.getInt()) {
        auto diag = error(argLoc("replicas_to_aggregate"))
                    << "replicas_to_aggregate (" << aggregate.getInt()
                    << ") exceeds total_num_replicas (" << total.getInt()
                    << "): each step would wait for gradients that never come";
        diag.attachNote(loc(argLoc("total_num_replicas")))
            << "total_num_replicas is set here";
      }
    }
  }

  // The loss: named in the train block, or the graph value called `loss`.
  Value loss;
  if (lossName) {
    loss = graphValue(lossName->first, lossName->second, "loss");
  } else if (lookup("loss")) {
    loss = graphValue("loss", model.trainBlocks.front(), "loss");
    lossName = {"loss", model.trainBlocks.front()};
  } else {
    error(model.trainBlocks.front())
        << "the train block has no loss: define `loss = ...` in the graph, "
           "or write `loss = NAME` in the train block";
  }
  if (loss) {
    if (!isa<FloatType>(cast<RankedTensorType>(loss.getType()).getElementType()))
      error(lossName->second) << "the loss must be floating-point, got "
                              << formatType(loss.getType());
    // The loss is the first result; a metric of the same name is the same.
    llvm::erase_if(outputs, [&](auto &o) { return o.first == lossName->first; });
    outputs.insert(outputs.begin(), {lossName->first, loss});
    settings.append("loss", builder.getStringAttr(lossName->first));
  }
  module->setAttr("dtf.train", settings.getDictionary(context));
}

} // namespace

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
  return ModelGen(context, file, *chosen, options).run();
}
