// The state the front end checks and builds with (ModelGen), shared by the
// MLIRGen*.cpp files: one per construct of the language.
#pragma once

#include "compiler/frontend/AST.h"
#include "compiler/frontend/Builtins.h"
#include "compiler/frontend/Diagnostics.h"
#include "compiler/frontend/Index.h"
#include "compiler/frontend/MLIRGen.h"
#include "compiler/frontend/Parser.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"
#include "schema/DeviceName.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir::dtf::frontend {

constexpr int64_t kDynamic = ShapedType::kDynamic;
constexpr unsigned kMaxNetworkDepth = 32;

/// A name in scope.
struct Binding {
  // Poisoned: a definition that had an error; uses stay silent instead of
  // reporting an unknown name on top of the first error.
  enum class Kind { Value, Variable, Literal, Poisoned };
  Kind kind;
  Value value;                        // Value
  std::string symbol;                 // Variable: its dtf.variable symbol
  const ast::Expr *literal = nullptr; // Literal: a network parameter's argument
  ast::Loc loc;                       // where the name was defined
  StringRef what;          // "input", "variable", "value", "parameter"
  size_t callerScopes = 0; // Literal: the scopes seen at the call
};

/// Tags every op created inside `on "..."` scopes with its device, and tells
/// `inserted` (the batch-factor check) of each.
struct DeviceTagger : OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (!devices.empty())
      op->setAttr("dtf.device",
                  StringAttr::get(op->getContext(), devices.back().toString()));
    if (inserted)
      inserted(op);
  }
  /// Innermost last; each already completed with the ones around it.
  std::vector<::dtf::DeviceName> devices;
  std::function<void(Operation *)> inserted;
};

/// The dtype of a tensor type as the language writes it.
inline std::string dtypeName(Type type) {
  std::string s = formatType(RankedTensorType::get({}, type));
  return s.substr(0, s.find('['));
}

/// True for expressions made only of numbers (2, -1e-3, 2 * 3), whose dtype
/// follows the other operand's.
inline bool isNumberLiteral(const ast::Expr &expr) {
  if (isa<ast::NumberExpr>(expr))
    return true;
  if (auto *neg = dyn_cast<ast::NegExpr>(&expr))
    return isNumberLiteral(*neg->operand);
  if (auto *bin = dyn_cast<ast::BinaryExpr>(&expr))
    return bin->op != "@" && isNumberLiteral(*bin->lhs) &&
           isNumberLiteral(*bin->rhs);
  return false;
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
    deviceTagger.inserted = [this](Operation *op) { checkBatchFactors(op); };
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
  void noteOrigin(InFlightDiagnostic &diag, const ast::Expr *expr, Value value);

  //===--------------------------------------------------------------------===//
  // The editor index
  //===--------------------------------------------------------------------===//

  void indexDefinition(StringRef name, FrontendIndex::Kind kind, ast::Loc at,
                       std::string detail) {
    if (options.index)
      options.index->definitions.push_back(
          {name.str(), kind, at, std::move(detail)});
  }
  void indexReference(ast::Loc at, size_t length, ast::Loc target) {
    if (options.index)
      options.index->references.push_back(
          {at, static_cast<unsigned>(length), target});
  }
  void indexHover(ast::Loc at, size_t length, std::string text) {
    if (options.index)
      options.index->hovers.push_back(
          {at, static_cast<unsigned>(length), std::move(text)});
  }
  /// Where a variable lives, in words.
  std::string placementOf(VariableOp var);
  std::string describeVariable(StringRef symbol);

  //===--------------------------------------------------------------------===//
  // Scopes
  //===--------------------------------------------------------------------===//

  const Binding *lookup(StringRef name) const;
  std::vector<std::string> namesInScope() const;
  struct Scope {
    llvm::StringMap<Binding> bindings;
    bool isBarrier = false; // a network body sees nothing of its caller
    llvm::StringMap<Binding>::iterator find(StringRef n) {
      return bindings.find(n);
    }
    llvm::StringMap<Binding>::const_iterator find(StringRef n) const {
      return bindings.find(n);
    }
    llvm::StringMap<Binding>::const_iterator end() const {
      return bindings.end();
    }
  };
  /// Defines `name`; inputs and variables cannot be redefined, graph values
  /// can be rebound (as Python names are).
  bool define(StringRef name, Binding binding);

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
  /// After a call's binding failed: makes the computations among its
  /// arguments, to report their own errors too; returns null.
  Value checkArguments(const ast::CallExpr &call);
  /// A builtin op's call once genOp has generated its first tensor
  /// operands, in their written order: what each family of ops starts from.
  struct OpCall {
    const ast::CallExpr &call;
    const BuiltinSpec &spec;
    const BoundArgs &args;
    StringRef name;
    ast::Loc at;
    Value x; // the first tensor argument (select: its condition)
    RankedTensorType xt;
    Value pairFirst, pairSecond; // ops over two tensors: both, else null
  };
  Value genOp(const ast::CallExpr &call, const BuiltinSpec &spec,
              const BoundArgs &args);
  /// False, with an error at the call, when `v` is not floating-point (or is
  /// bool, for requireNumeric).
  bool requireFloat(const OpCall &op, Value v);
  bool requireNumeric(const OpCall &op, Value v);
  // The families of builtin ops (MLIRGenOps.cpp).
  Value genArithmeticOp(const OpCall &op); // matmul, unary math, max, pow, cast
  Value genSelect(const OpCall &op);
  // erf, gelu, floor, ceil, round, abs, floormod, bucketize (MLIRGenMath.cpp)
  Value genMathOp(const OpCall &op);
  Value genBucketize(const OpCall &op);
  Value buildGelu(Value x, bool approximate, Location l);
  Value genReshape(const OpCall &op);
  // broadcast_to and tile (MLIRGenBatchShapes.cpp): their sizes may name
  // the batch, which they take from an input at run time (batchSource).
  Value genBroadcastTo(const OpCall &op);
  Value genTile(const OpCall &op);
  Value batchSource(ast::Loc at, StringRef what);
  /// A list of integers where the name B stands for the batch (kDynamic);
  /// each item's place in `itemLocs`. Reports every bad item.
  std::optional<SmallVector<int64_t>>
  batchListValue(const ast::Expr *expr, StringRef what,
                 SmallVectorImpl<ast::Loc> &itemLocs);
  Value genShapeOp(const OpCall &op);     // flatten, transpose, slice
  Value genReductionOp(const OpCall &op); // sum, mean, max, argmax, softmax
  Value genLossOp(const OpCall &op);      // the softmax cross-entropies
  Value genIndicesOp(const OpCall &op);   // one_hot, gather
  Value genDropout(const OpCall &op);
  Value genPool(const OpCall &op); // max_pool, avg_pool
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
  const ast::Expr *resolve(const ast::Expr *expr) const;
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
  std::optional<SmallVector<int64_t>>
  intListValue(const ast::Expr *expr, StringRef what, bool allowScalar);
  std::optional<SmallVector<int64_t>> pairArg(const BoundArgs &args,
                                              StringRef name, int64_t fallback);
  std::optional<std::string> symbolValue(const ast::Expr *expr, StringRef what,
                                         ArrayRef<StringRef> choices);
  /// A layer's `dtype`: true for `dtype = f32` (kept in f32 under a mixed
  /// policy), false when absent; an error and nullopt otherwise.
  std::optional<bool> keepF32Arg(const BoundArgs &args);
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
                      RankedTensorType type, InitializerAttr init, ast::Loc at,
                      std::optional<int64_t> partitions = {},
                      bool trainable = true);
  VariableOp createVariable(StringRef symbol, RankedTensorType type,
                            InitializerAttr init, bool trainable, ast::Loc at,
                            std::optional<int64_t> partitions);
  Value readVariable(StringRef symbol, ast::Loc at);
  Value applyActivation(Value x, StringRef activation, ast::Loc at);
  Value genLayerNorm(Value x, const LayerName &layer, const BoundArgs &args,
                     ast::Loc at);
  Value genDynamicEmbedding(Value ids, const LayerName &layer,
                            const BoundArgs &args, ast::Loc at);
  std::optional<InitializerAttr> embeddingInitializer(const BoundArgs &args,
                                                      ast::Loc at);
  bool checkEmbeddingIds(Value ids, const BoundArgs &args, ast::Loc at);
  Value genBatchNorm(Value x, const LayerName &layer, const BoundArgs &args,
                     ast::Loc at);
  Value genAttention(Value query, const LayerName &layer, const BoundArgs &args,
                     ast::Loc at);
  Value genRecurrent(StringRef name, Value x, const LayerName &layer,
                     const BoundArgs &args, ast::Loc at);

  //===--------------------------------------------------------------------===//
  // Placement and training
  //===--------------------------------------------------------------------===//

  void genPlacement();
  void genTrain(SmallVectorImpl<std::pair<std::string, Value>> &outputs);
  // The parts of the train block (MLIRGenTrain.cpp). Each returns the
  // setting's attribute, or null (after an error, or for the loss, which
  // genTrainLoss sets last).
  Attribute
  genTrainPolicy(const ast::TrainItem &item, StringRef key,
                 SmallVectorImpl<std::pair<std::string, Value>> &outputs);
  Attribute
  genTrainSetting(const ast::TrainItem &item, StringRef key,
                  SmallVectorImpl<std::pair<std::string, Value>> &outputs,
                  std::optional<std::pair<std::string, ast::Loc>> &lossName,
                  const ast::TrainItem *&sync);
  Attribute genUpdateSetting(const ast::TrainItem &item,
                             const ast::TrainItem *&sync);
  Attribute genDataSetting(const ast::TrainItem &item);
  /// `optimizer for TARGET, ... = ...` items (MLIRGenOptimizers.cpp): an
  /// array of {group, variables, optimizer}, or null after an error.
  Attribute genOptimizerGroups(ArrayRef<const ast::TrainItem *> items);
  void checkSyncReplicas(const NamedAttrList &settings,
                         const ast::TrainItem &sync);
  void genTrainLoss(NamedAttrList &settings,
                    SmallVectorImpl<std::pair<std::string, Value>> &outputs,
                    std::optional<std::pair<std::string, ast::Loc>> lossName);
  Attribute configCall(const ast::Expr *expr, BuiltinKind kind, StringRef what);
  Attribute literalAttr(const ast::Expr *expr, StringRef what);
  /// A parameter of a training call, checked for what it must hold.
  Attribute checkedSetting(const ast::Expr *expr, StringRef param);
  /// tfrecord's compression, on_corrupt and features; false after an error.
  bool checkTFRecordArgs(DictionaryAttr dict, const ast::CallExpr *call);
  Value graphValue(StringRef name, ast::Loc at, StringRef what);

  MLIRContext *context;
  const ast::File &file;
  const ast::Model &model;
  const FrontendOptions &options;
  OpBuilder builder;
  ModuleOp module;
  func::FuncOp graph;
  unsigned errors = 0;
  /// The errors before the train block: a graph with errors may lack the
  /// variables an optimizer group names, so that group is not reported.
  unsigned graphErrors = 0;

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
  /// A value whose batch dimension holds several rows per example (a
  /// reshape merged the batch with other axes, [B, 16, 49] -> [-1, 49]):
  /// how many. Absent: one, the batch B itself.
  llvm::DenseMap<Value, int64_t> batchFactors;
  int64_t batchFactor(Value v) const { return batchFactors.lookup(v) ? batchFactors.lookup(v) : 1; }
  /// Every new op: its results take the batch factor of its operands, which
  /// must agree (B * 16 rows never meet B rows elementwise).
  void checkBatchFactors(Operation *op);
};

} // namespace mlir::dtf::frontend
