// dtf-shard-ps-update: @ps_update (and the lookup cut's @lookup_ps_update)
// per held tensor, each update once per axis-0 shard of its variable, over
// dtf.variable_shard declarations and dtf.pushed ops of the shards' rows.
#include "dialects/Dtf/Transforms/Cut.h"
#include "dialects/Dtf/Transforms/Fusion.h"
#include "dialects/Dtf/Transforms/Passes.h"

#include "schema/Placement.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFSHARDPSUPDATE
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

namespace {

/// One axis-0 shard of the variable an update writes.
struct Shard {
  int index = 0;
  int count = 1;
  int64_t rowOffset = 0;
  int64_t rows = 0;
  /// One of several: the update runs over its rows, under its names.
  bool part() const { return count > 1; }
  std::string name(StringRef variable) const {
    return ::dtf::plan::shardName(variable.str(), index, count);
  }
};

/// `type` with `rows` rows.
RankedTensorType withRows(RankedTensorType type, int64_t rows) {
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = rows;
  return RankedTensorType::get(shape, type.getElementType());
}

/// The rewrite of one function: its updates, in order, each once per shard,
/// appended before its return after the dtf.pushed ops they take first.
class PsUpdateSharder {
public:
  PsUpdateSharder(ModuleOp module, func::FuncOp f)
      : module(module), body(f.getBody().front()),
        b(body.getTerminator()) {}

  LogicalResult run() {
    SmallVector<Operation *> updates;
    for (Operation &op : body)
      if (!updateSymbols(&op).empty()) {
        if (op.hasAttr("dtf.held"))
          return success(); // cut per held tensor already
        updates.push_back(&op);
      }
    // mixed_float16's guard (dtf-cut-train-step) goes first, after the flag
    // it reads: every ps runs it before the updates it may skip.
    for (Operation &op : body)
      if (auto guard = dyn_cast<SkipUpdatesUnlessOp>(op)) {
        if (auto flag = guard.getFinite().getDefiningOp<PushedOp>())
          place(flag);
        guard->moveBefore(body.getTerminator());
        break;
      }
    for (Operation *op : updates) {
      const StringRef var = updateSymbols(op)[0];
      FailureOr<SmallVector<Shard>> shards = shardsOf(op, var);
      if (failed(shards))
        return failure();
      for (const Shard &s : *shards)
        if (failed(addUpdate(op, var, s)))
          return failure();
    }
    for (Operation *op : llvm::reverse(updates))
      op->erase();
    // What the workers pushed and no update takes whole any more.
    SmallVector<Operation *> unused;
    for (Operation &op : body)
      if (isa<PushedOp>(op) && op.use_empty() && !placed.contains(&op))
        unused.push_back(&op);
    for (Operation *op : unused)
      op->erase();
    return success();
  }

private:
  /// The shards of `name`, which `update` writes: those of its variable (a
  /// slot's or moving average's: its owner's, dtf.slot_of), under its name.
  FailureOr<SmallVector<Shard>> shardsOf(Operation *update, StringRef name) {
    auto var = module.lookupSymbol<VariableOp>(name);
    if (!var)
      return update->emitOpError()
             << "updates @" << name
             << ", which the module does not declare as a dtf.variable";
    VariableOp owner = var;
    if (auto of = var->getAttrOfType<FlatSymbolRefAttr>("dtf.slot_of"))
      if (auto o = module.lookupSymbol<VariableOp>(of.getAttr()))
        owner = o;
    auto parts = owner->getAttrOfType<IntegerAttr>("dtf.partitions");
    RankedTensorType type = owner.getTensorType();
    const int64_t rows = type.getRank() ? type.getDimSize(0) : 1;
    SmallVector<Shard> out;
    for (const ::dtf::plan::ShardRows &r :
         ::dtf::plan::axisZeroRows(rows, parts ? int(parts.getInt()) : 1)) {
      Shard s;
      s.index = int(out.size());
      s.rowOffset = r.rowOffset;
      s.rows = r.rows;
      out.push_back(s);
    }
    for (Shard &s : out)
      s.count = int(out.size());
    return out;
  }

  /// The symbol of shard `s` of variable `name`, declared after it (and its
  /// other shards) the first time.
  FailureOr<FlatSymbolRefAttr> shardSymbol(Operation *update, StringRef name,
                                           const Shard &s) {
    MLIRContext *ctx = module.getContext();
    if (!s.part())
      return FlatSymbolRefAttr::get(ctx, name);
    const std::string shardName = s.name(name);
    auto var = module.lookupSymbol<VariableOp>(name);
    if (!var)
      return update->emitOpError()
             << "updates @" << name
             << ", which the module does not declare as a dtf.variable";
    Operation *existing = module.lookupSymbol(shardName);
    auto declared = dyn_cast_or_null<VariableShardOp>(existing);
    if (existing && (!declared || declared.getOf() != name ||
                     declared.getRowOffsetAttr().getInt() != s.rowOffset))
      return update->emitOpError()
             << "updates shard " << s.index << " of @" << name
             << ", but the module already declares @\"" << shardName
             << "\" as something else; rename that symbol";
    if (!declared) {
      Operation *&after = lastShardOf[var.getOperation()];
      OpBuilder mb(ctx);
      mb.setInsertionPointAfter(after ? after : var.getOperation());
      declared = mb.create<VariableShardOp>(
          var.getLoc(), mb.getStringAttr(shardName),
          FlatSymbolRefAttr::get(ctx, name), mb.getI64IntegerAttr(s.rowOffset),
          TypeAttr::get(withRows(var.getTensorType(), s.rows)));
      after = declared;
    }
    return FlatSymbolRefAttr::get(ctx, shardName);
  }

  /// `op` over shard `s` of `var`, before the function's return: its
  /// variable and slots renamed to their shards, its operands shaped like
  /// the variable taken as the shard's rows, marked with the held tensor.
  LogicalResult addUpdate(Operation *op, StringRef var, const Shard &s) {
    auto fullType = cast<RankedTensorType>(
        module.lookupSymbol<VariableOp>(var).getType());
    SmallVector<Value> operands;
    const unsigned n = op->getNumOperands();
    for (unsigned j = 0; j < n; ++j) {
      Value v = op->getOperand(j);
      auto pushed = v.getDefiningOp<PushedOp>();
      if (!pushed) {
        operands.push_back(v);
        continue;
      }
      if (pushed.getSparse() && v == pushed.getResult(0) && j + 1 < n) {
        PushedOp got = sparseShard(pushed, s);
        operands.append({got.getResult(0), got.getResult(1)});
        ++j; // the pair's rows
        continue;
      }
      operands.push_back(denseShard(pushed, v, fullType, s));
    }
    Operation *copy = b.clone(*op);
    copy->setOperands(operands);
    copy->setAttr("dtf.held", b.getStringAttr(s.name(var)));
    if (auto fused = dyn_cast<FusedOp>(copy))
      for (auto [arg, in] : llvm::zip(fused.getBody().front().getArguments(),
                                      fused.getInputs()))
        arg.setType(in.getType());
    // The variable and slots an update names are its symbol attributes (a
    // fused update's, its region's update's).
    Operation *named = isa<FusedOp>(copy) ? fusedUpdateOp(copy) : copy;
    for (NamedAttribute a : named->getAttrs()) {
      auto ref = dyn_cast<FlatSymbolRefAttr>(a.getValue());
      if (!ref)
        continue;
      FailureOr<FlatSymbolRefAttr> renamed = shardSymbol(op, ref.getValue(), s);
      if (failed(renamed))
        return failure();
      named->setAttr(a.getName(), *renamed);
    }
    return success();
  }

  /// A sparse pair for shard `s`: its ids in the shard's rows (relative to
  /// its first) and their rows, keyed `<key>/part_<k>`; a whole table's is
  /// the pair itself over all its rows.
  PushedOp sparseShard(PushedOp pushed, const Shard &s) {
    const std::string key = (pushed.getKey() + suffix(s)).str();
    if (PushedOp made = madeByKey.lookup(key))
      return made;
    PushedOp got = pushed;
    if (s.part())
      got = b.create<PushedOp>(pushed.getLoc(), pushed.getResultTypes(),
                               b.getStringAttr(key), pushed.getVariableAttr(),
                               pushed.getSparseAttr(), IntegerAttr(),
                               IntegerAttr(), pushed.getSkippableAttr());
    else
      place(pushed);
    got.setRowOffsetAttr(b.getI64IntegerAttr(s.rowOffset));
    got.setRowsAttr(b.getI64IntegerAttr(s.rows));
    madeByKey[key] = got;
    return got;
  }

  /// A dense operand `v` for shard `s`: the shard's rows of a value shaped
  /// like the variable, else the whole value, each pushed once.
  Value denseShard(PushedOp pushed, Value v, RankedTensorType fullType,
                   const Shard &s) {
    auto type = cast<RankedTensorType>(v.getType());
    if (!s.part() || type.getRank() == 0 ||
        type.getShape() != fullType.getShape()) {
      place(pushed);
      return v;
    }
    const std::string key = (pushed.getKey() + suffix(s)).str();
    PushedOp &made = madeByKey[key];
    if (!made)
      made = b.create<PushedOp>(
          pushed.getLoc(), TypeRange{withRows(type, s.rows)},
          b.getStringAttr(key), pushed.getVariableAttr(), UnitAttr(),
          b.getI64IntegerAttr(s.rowOffset), b.getI64IntegerAttr(s.rows),
          pushed.getSkippableAttr());
    return made.getResult(0);
  }

  /// A pushed value taken whole: moved, the first time, to where the
  /// updates are being appended.
  void place(PushedOp pushed) {
    if (placed.insert(pushed).second)
      pushed->moveBefore(body.getTerminator());
  }

  static std::string suffix(const Shard &s) {
    return s.part() ? "/part_" + std::to_string(s.index) : "";
  }

  ModuleOp module;
  Block &body;
  OpBuilder b; // before the function's return
  llvm::StringMap<PushedOp> madeByKey;
  llvm::DenseSet<Operation *> placed;
  llvm::DenseMap<Operation *, Operation *> lastShardOf;
};

struct DtfShardPsUpdate
    : public mlir::dtf::impl::DtfShardPsUpdateBase<DtfShardPsUpdate> {
  using DtfShardPsUpdateBase::DtfShardPsUpdateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (const char *name : {kPsUpdate, kLookupPsUpdate})
      if (auto f = module.lookupSymbol<func::FuncOp>(name);
          f && !f.isExternal() &&
          failed(PsUpdateSharder(module, f).run()))
        return signalPassFailure();
  }
};

} // namespace
