// dtf-cut-train-step: the train_step cut for ps/worker training, the
// worker's @worker_step and the ps's @ps_update (and the lookup cut of
// between-graph training), with dtf.push and dtf.pushed between them.
#include "dialects/Dtf/Transforms/Cut.h"
#include "dialects/Dtf/Transforms/Fusion.h"
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFCUTTRAINSTEP
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

SmallVector<StringRef> mlir::dtf::updateSymbols(Operation *op) {
  SmallVector<StringRef> s;
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](ApplySgdOp o) { s = {o.getVar()}; })
      .Case([&](ApplyMomentumOp o) { s = {o.getVar(), o.getAccum()}; })
      .Case([&](ApplyAdamOp o) { s = {o.getVar(), o.getM(), o.getV()}; })
      .Case([&](ApplyAdagradOp o) { s = {o.getVar(), o.getAccum()}; })
      .Case([&](ApplyFtrlOp o) { s = {o.getVar(), o.getAccum(), o.getLinear()}; })
      .Case([&](ApplyRmspropOp o) { s = {o.getVar(), o.getMs(), o.getMom()}; })
      .Case([&](SparseApplySgdOp o) { s = {o.getVar()}; })
      .Case([&](SparseApplyMomentumOp o) { s = {o.getVar(), o.getAccum()}; })
      .Case([&](SparseApplyAdamOp o) { s = {o.getVar(), o.getM(), o.getV()}; })
      .Case([&](SparseApplyAdagradOp o) { s = {o.getVar(), o.getAccum()}; })
      .Case([&](SparseApplyFtrlOp o) {
        s = {o.getVar(), o.getAccum(), o.getLinear()};
      })
      .Case([&](SparseApplyRmspropOp o) { s = {o.getVar(), o.getMs(), o.getMom()}; })
      .Case([&](AssignAddOp o) { s = {o.getVar()}; })
      .Case([&](AdjustLossScaleOp o) { s = {o.getScale(), o.getGoodSteps()}; })
      .Case([&](AssignMovingAverageOp o) { s = {o.getVar()}; })
      .Case([&](MovingAverageUpdateOp o) { s = {o.getAvg(), o.getVar()}; })
      .Case([&](FusedOp o) {
        // An update's region: its variable and slots lead, written in place.
        if (Operation *update = fusedUpdateOp(o))
          s = fusableUpdateSymbols(update);
      });
  return s;
}

namespace {

/// A sparse update: the dense op it stands for, its operands before the
/// (ids, rows) pairs, and whether the dense op must skip absent rows
/// (`lazy`) to match it. The dense op takes the gradient first.
struct SparseForm {
  StringRef dense;
  unsigned fixed;
  bool lazyMatters;
};

std::optional<SparseForm> sparseForm(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<SparseForm>>(op)
      .Case([](SparseApplySgdOp) {
        return SparseForm{ApplySgdOp::getOperationName(), 1, false};
      })
      .Case([](SparseApplyMomentumOp) {
        return SparseForm{ApplyMomentumOp::getOperationName(), 1, true};
      })
      .Case([](SparseApplyAdamOp) {
        return SparseForm{ApplyAdamOp::getOperationName(), 2, true};
      })
      .Case([](SparseApplyAdagradOp) {
        return SparseForm{ApplyAdagradOp::getOperationName(), 1, false};
      })
      // A dense FTRL update re-derives the rows whose gradient is zero.
      .Case([](SparseApplyFtrlOp) {
        return SparseForm{ApplyFtrlOp::getOperationName(), 1, true};
      })
      .Case([](SparseApplyRmspropOp) {
        return SparseForm{ApplyRmspropOp::getOperationName(), 1, true};
      })
      .Default([](Operation *) { return std::nullopt; });
}

bool isDenseUpdate(Operation *op) {
  return isa<ApplySgdOp, ApplyMomentumOp, ApplyAdamOp, ApplyAdagradOp,
             ApplyFtrlOp, ApplyRmspropOp>(op);
}

Block &bodyOf(func::FuncOp f) { return f.getBody().front(); }

RankedTensorType variableType(Operation *user, StringRef name) {
  auto var = SymbolTable::lookupNearestSymbolFrom<VariableOp>(
      user, StringAttr::get(user->getContext(), name));
  return var ? var.getTensorType() : RankedTensorType();
}

/// The sparse updates of `f` whose table is not in `remote` become, where
/// they were, the sum of dtf.gather_grad of their pairs and the dense
/// update of that sum (with `lazy` where absent rows must stay untouched).
LogicalResult densify(func::FuncOp f, const std::set<std::string> &remote) {
  SmallVector<Operation *> sparse;
  for (Operation &op : bodyOf(f))
    if (sparseForm(&op) && !remote.count(updateSymbols(&op)[0].str()))
      sparse.push_back(&op);
  for (Operation *op : sparse) {
    const SparseForm form = *sparseForm(op);
    const StringRef var = updateSymbols(op)[0];
    RankedTensorType varType = variableType(op, var);
    const unsigned pairs = op->getNumOperands() - form.fixed;
    if (!varType || pairs < 2 || pairs % 2 != 0)
      return op->emitOpError() << "takes " << form.fixed
                               << " operands and pairs of (ids, rows) of a "
                                  "variable; it has "
                               << op->getNumOperands() << " operands";
    OpBuilder b(op);
    Attribute device = op->getAttr("dtf.device");
    auto placed = [&](Operation *made) {
      if (device)
        made->setAttr("dtf.device", device);
      return made->getResult(0);
    };
    Value grad;
    for (unsigned k = form.fixed; k + 1 < op->getNumOperands(); k += 2) {
      Value g = placed(b.create<GatherGradOp>(
          op->getLoc(), varType, op->getOperand(k + 1), op->getOperand(k),
          b.getDenseI64ArrayAttr(varType.getShape())));
      if (grad) {
        OperationState add(op->getLoc(), AddOp::getOperationName());
        add.addOperands({grad, g});
        add.addTypes(varType);
        g = placed(b.create(add));
      }
      grad = g;
    }
    OperationState dense(op->getLoc(), form.dense);
    dense.addOperands(grad);
    dense.addOperands(op->getOperands().take_front(form.fixed));
    dense.addAttributes(op->getAttrs());
    // Weight decay too would reach the absent rows of a dense update.
    if (form.lazyMatters || op->hasAttr("weight_decay"))
      dense.addAttribute("lazy", b.getUnitAttr());
    b.create(dense);
    op->erase();
  }
  return success();
}

/// The embedding tables of a between-graph step that a worker may look up
/// on the ps: every read of one feeds only dtf.gather (as its table), the
/// table is updated sparsely, and nothing else names it.
std::set<std::string> remoteTables(func::FuncOp train) {
  struct Uses {
    bool onlyRows = true, sparseUpdate = false, gathered = false;
  };
  std::map<std::string, Uses> byName;
  for (Operation &op : bodyOf(train)) {
    if (auto read = dyn_cast<ReadVariableOp>(op)) {
      Uses &u = byName[read.getName().str()];
      for (OpOperand &use : read->getUses()) {
        if (isa<GatherOp>(use.getOwner()) && use.getOperandNumber() == 0)
          u.gathered = true;
        else
          u.onlyRows = false;
      }
      continue;
    }
    SmallVector<StringRef> symbols = updateSymbols(&op);
    for (auto [k, name] : llvm::enumerate(symbols)) {
      Uses &u = byName[name.str()];
      if (sparseForm(&op) && k == 0)
        u.sparseUpdate = true;
      else
        u.onlyRows = false;
    }
  }
  std::set<std::string> out;
  for (const auto &[name, u] : byName)
    if (u.onlyRows && u.sparseUpdate && u.gathered)
      out.insert(name);
  return out;
}

/// The gathers of `f` whose table is one of `tables` (that `f` only
/// gathers) become dtf.ps_gather; a dynamic table's raw ids replace its
/// dtf.dynamic_rows (only its ps knows the rows); the reads left unused go.
void lookUpRowsOnPs(func::FuncOp f, std::set<std::string> tables) {
  for (Operation &op : bodyOf(f))
    if (auto read = dyn_cast<ReadVariableOp>(op))
      for (OpOperand &use : read->getUses())
        if (!isa<GatherOp>(use.getOwner()) || use.getOperandNumber() != 0)
          tables.erase(read.getName().str());
  SmallVector<Operation *> gathers, dynamicRows;
  for (Operation &op : bodyOf(f)) {
    if (auto g = dyn_cast<GatherOp>(op))
      if (auto read = g.getParams().getDefiningOp<ReadVariableOp>())
        if (tables.count(read.getName().str()))
          gathers.push_back(g);
    if (auto d = dyn_cast<DynamicRowsOp>(op))
      if (tables.count(d.getTable().str()))
        dynamicRows.push_back(d);
  }
  for (Operation *op : gathers) {
    auto g = cast<GatherOp>(op);
    auto read = g.getParams().getDefiningOp<ReadVariableOp>();
    OpBuilder b(g);
    auto ps = b.create<PsGatherOp>(g.getLoc(), g.getType(), g.getIndices(),
                                   b.getStringAttr(read.getName()),
                                   UnitAttr());
    for (NamedAttribute a : g->getDiscardableAttrs())
      ps->setAttr(a.getName(), a.getValue());
    g.replaceAllUsesWith(ps.getResult());
    g.erase();
  }
  for (Operation *op : dynamicRows) {
    auto d = cast<DynamicRowsOp>(op);
    for (Operation *user : d->getUsers())
      if (auto ps = dyn_cast<PsGatherOp>(user); ps && d.getCreate())
        ps.setCreate(true);
    d.getRows().replaceAllUsesWith(d.getIds());
    d.erase();
  }
  SmallVector<Operation *> dead;
  for (Operation &op : bodyOf(f))
    if (auto read = dyn_cast<ReadVariableOp>(op))
      if (tables.count(read.getName().str()) && read->use_empty())
        dead.push_back(read);
  for (Operation *op : dead)
    op->erase();
}

/// Whether the step's dtf.skip_updates_unless skips `update` (the
/// executor's rule): every update but the global step's assign_add and the
/// loss scale's own schedule.
bool guardedUpdate(Operation *update) {
  return !isa<AssignAddOp, AdjustLossScaleOp>(update);
}

/// Cuts `worker` (a copy of the train_step) in place at its updates: each
/// goes, in order, to a new function `psName` after it, taking what
/// `worker` pushes at its end (each value once, under its first consumer's
/// key). A dtf.skip_updates_unless (mixed_float16's dynamic loss scale)
/// stays on the worker, and its flag goes to the ps too, under
/// `<scale>:finite`, where a copy of the guard over it precedes the
/// updates; a push that only guarded updates take is `skippable`.
LogicalResult cutAtUpdates(func::FuncOp worker, StringRef psName) {
  MLIRContext *ctx = worker.getContext();
  SmallVector<Operation *> updates;
  SkipUpdatesUnlessOp guard;
  StringRef scale;
  for (Operation &op : bodyOf(worker)) {
    if (!updateSymbols(&op).empty())
      updates.push_back(&op);
    if (auto g = dyn_cast<SkipUpdatesUnlessOp>(op)) {
      if (guard)
        return g.emitOpError() << "is the step's second guard (a step has at "
                                  "most one dtf.skip_updates_unless)";
      guard = g;
    }
    if (auto adjust = dyn_cast<AdjustLossScaleOp>(op))
      scale = adjust.getScale();
  }
  if (guard && scale.empty())
    return guard.emitOpError() << "guards a step without dtf.adjust_loss_scale "
                                  "(the ps/worker cut pushes its flag to the "
                                  "ps that holds the loss scale)";
  OpBuilder wb(bodyOf(worker).getTerminator());
  OpBuilder mb(worker);
  mb.setInsertionPointAfter(worker);
  auto ps = mb.create<func::FuncOp>(worker.getLoc(), psName,
                                    FunctionType::get(ctx, {}, {}));
  OpBuilder pb = OpBuilder::atBlockEnd(ps.addEntryBlock());
  llvm::DenseMap<Value, Value> pushed; // worker value -> ps value
  // Per pushed worker value: its push and dtf.pushed, and whether an update
  // the guard does not skip takes it.
  struct Transfer {
    PushOp push;
    PushedOp got;
    bool unguardedUse = false;
  };
  llvm::DenseMap<Value, Transfer> transfers;
  if (guard) {
    auto scaleRef = FlatSymbolRefAttr::get(ctx, scale);
    Value finite = guard.getFinite();
    const std::string key = (scale + ":finite").str();
    wb.create<PushOp>(guard.getLoc(), ValueRange{finite}, wb.getStringAttr(key),
                      scaleRef, UnitAttr(), UnitAttr());
    auto got = pb.create<PushedOp>(guard.getLoc(), TypeRange{finite.getType()},
                                   pb.getStringAttr(key), scaleRef, UnitAttr(),
                                   IntegerAttr(), IntegerAttr(), UnitAttr());
    pushed[finite] = got.getResult(0);
    pb.create<SkipUpdatesUnlessOp>(guard.getLoc(), got.getResult(0));
  }
  for (Operation *op : updates) {
    SmallVector<StringRef> symbols = updateSymbols(op);
    const StringRef var = symbols[0];
    auto varRef = FlatSymbolRefAttr::get(ctx, var);
    const std::optional<SparseForm> form = sparseForm(op);
    const unsigned n = op->getNumOperands();
    SmallVector<Value> operands;
    for (unsigned j = 0; j < n; ++j) {
      Value v = op->getOperand(j);
      if (form && j >= form->fixed && j + 1 < n) {
        // An (ids, rows) pair of a table looked up on the ps.
        RankedTensorType varType = variableType(op, var);
        if (!varType)
          return op->emitOpError() << "updates @" << var
                                   << ", which is not a variable";
        const std::string key =
            (var + ":grad:" + std::to_string((j - form->fixed) / 2)).str();
        Value rows = op->getOperand(j + 1);
        // A sparse update is never the global step's or the scale's.
        const UnitAttr skippable = guard ? wb.getUnitAttr() : UnitAttr();
        wb.create<PushOp>(op->getLoc(), ValueRange{v, rows},
                          wb.getStringAttr(key), varRef, wb.getUnitAttr(),
                          skippable);
        SmallVector<int64_t> rowShape = {ShapedType::kDynamic};
        llvm::append_range(rowShape, varType.getShape().drop_front());
        auto got = pb.create<PushedOp>(
            op->getLoc(),
            TypeRange{
                RankedTensorType::get({ShapedType::kDynamic},
                                      IntegerType::get(ctx, 64)),
                RankedTensorType::get(rowShape, varType.getElementType())},
            pb.getStringAttr(key), varRef, pb.getUnitAttr(), IntegerAttr(),
            IntegerAttr(), skippable);
        operands.append({got.getResult(0), got.getResult(1)});
        ++j;
        continue;
      }
      auto it = pushed.find(v);
      if (it == pushed.end()) {
        // The operand right after the variable and slots of an optimizer
        // update (a generated one's too) is its gradient.
        const bool isGrad = (isDenseUpdate(op) || isa<FusedOp>(op)) && j == 0;
        const std::string key =
            (var + ":" +
             (isGrad ? std::string("grad")
                     : op->getName().stripDialect().str() + ":" +
                           std::to_string(symbols.size() + j)))
                .str();
        auto push = wb.create<PushOp>(op->getLoc(), ValueRange{v},
                                      wb.getStringAttr(key), varRef, UnitAttr(),
                                      UnitAttr());
        auto got = pb.create<PushedOp>(
            op->getLoc(), TypeRange{v.getType()}, pb.getStringAttr(key), varRef,
            UnitAttr(), IntegerAttr(), IntegerAttr(), UnitAttr());
        it = pushed.try_emplace(v, got.getResult(0)).first;
        transfers[v] = {push, got};
      }
      if (auto t = transfers.find(v); t != transfers.end())
        t->second.unguardedUse |= !guardedUpdate(op);
      operands.push_back(it->second);
    }
    Operation *moved = pb.clone(*op);
    moved->setOperands(operands);
  }
  pb.create<func::ReturnOp>(worker.getLoc());
  for (Operation *op : updates)
    op->erase();
  if (guard)
    for (auto &[value, t] : transfers)
      if (!t.unguardedUse) {
        t.push.setSkippable(true);
        t.got.setSkippable(true);
      }
  return success();
}

/// A copy of `f` named `name`, at the end of its module.
func::FuncOp copyOf(func::FuncOp f, StringRef name) {
  func::FuncOp copy = f.clone();
  copy.setSymName(name);
  f->getParentOfType<ModuleOp>().push_back(copy);
  return copy;
}

/// How many worker tasks a replica spans: one more than the largest stage
/// an op of `f` runs on.
int replicaSpan(func::FuncOp f) {
  int span = 1;
  for (Operation &op : bodyOf(f))
    span = std::max(span, stageOf(op) + 1);
  return span;
}

struct DtfCutTrainStep
    : public mlir::dtf::impl::DtfCutTrainStepBase<DtfCutTrainStep> {
  using DtfCutTrainStepBase::DtfCutTrainStepBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto train = module.lookupSymbol<func::FuncOp>("train_step");
    if (!train || train.isExternal()) {
      module.emitError() << "dtf-cut-train-step needs @train_step (run "
                            "dtf-autodiff and dtf-optimize)";
      return signalPassFailure();
    }
    func::FuncOp worker = copyOf(train, kWorkerStep);
    if (failed(densify(worker, {})) || failed(cutAtUpdates(worker, kPsUpdate)))
      return signalPassFailure();
    // Between-graph training with one task per replica looks its embedding
    // tables up on the ps (only the rows of a step's ids travel); in-graph
    // and model-parallel training keep the dense cut.
    auto training = module->getAttrOfType<DictionaryAttr>("dtf.train");
    auto replication =
        training ? training.getAs<StringAttr>("replication") : StringAttr();
    const std::set<std::string> remote = remoteTables(train);
    if (!lookups || remote.empty() || replicaSpan(train) > 1 ||
        (replication && replication.getValue() == "in_graph"))
      return;
    func::FuncOp lookup = copyOf(train, kLookupWorkerStep);
    if (failed(densify(lookup, remote)))
      return signalPassFailure();
    lookUpRowsOnPs(lookup, remote);
    if (failed(cutAtUpdates(lookup, kLookupPsUpdate)))
      return signalPassFailure();
    // The evaluation looks the same tables up (where it only gathers them
    // too), so that no task but their ps ever holds them whole.
    if (auto eval = module.lookupSymbol<func::FuncOp>("eval"))
      lookUpRowsOnPs(copyOf(eval, kLookupEval), remote);
  }
};

} // namespace
