// dtf-cut-stages: @worker_step cut into the program of each stage of a
// model-parallel replica, with dtf.send and dtf.recv where values cross.
#include "dialects/Dtf/Transforms/Cut.h"
#include "dialects/Dtf/Transforms/Passes.h"
#include "schema/DeviceName.h"
#include "schema/Placement.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFCUTSTAGES
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

int mlir::dtf::stageOf(Operation &op) {
  if (isa<InputOp, PushOp>(op))
    return 0;
  if (isa<ConstantOp, ReadVariableOp>(op))
    return -1;
  auto device = op.getAttrOfType<StringAttr>("dtf.device");
  return device ? ::dtf::stageOfDevice(device.getValue().str()) : 0;
}

namespace {

using ::dtf::plan::kMaxReplicaSpan;

struct DtfCutStages : public mlir::dtf::impl::DtfCutStagesBase<DtfCutStages> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto worker = module.lookupSymbol<func::FuncOp>(kWorkerStep);
    if (!worker || worker.isExternal()) {
      module.emitError() << "dtf-cut-stages needs @worker_step (run "
                            "dtf-cut-train-step)";
      return signalPassFailure();
    }
    Block &body = worker.getBody().front();
    std::vector<Operation *> ops;
    llvm::DenseMap<Operation *, int> stage;
    int span = 1;
    for (Operation &op : body.without_terminator()) {
      ops.push_back(&op);
      stage[&op] = stageOf(op);
      if (stage[&op] >= kMaxReplicaSpan) {
        op.emitError() << op.getName() << " is placed on "
                       << op.getAttrOfType<StringAttr>("dtf.device").getValue()
                       << ": a replica spans at most " << kMaxReplicaSpan
                         << " worker tasks (/job:worker/task:0 to "
                            "/job:worker/task:"
                         << kMaxReplicaSpan - 1 << ")";
        return signalPassFailure();
      }
      span = std::max(span, stage[&op] + 1);
    }
    if (span == 1)
      return;

    // Values made on one stage and used on others (value -> those stages),
    // and the stages that use each repeated op.
    llvm::DenseMap<Value, std::set<int>> needs;
    llvm::DenseMap<Operation *, std::set<int>> usersOf;
    auto use = [&](Value v, int at) {
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != &body)
        return;
      if (stage[def] < 0)
        usersOf[def].insert(at);
      else if (stage[def] != at)
        needs[v].insert(at);
    };
    for (Operation *op : ops)
      if (stage[op] >= 0)
        for (Value in : op->getOperands())
          use(in, stage[op]);
    Operation *ret = body.getTerminator();
    for (Value v : ret->getOperands())
      use(v, 0);
    // Keys name a value by its place among the step's results.
    llvm::DenseMap<Value, int> number;
    for (Operation *op : ops)
      for (Value r : op->getResults())
        number.try_emplace(r, int(number.size()));
    auto keyOf = [&](Value v, int from, int to) {
      return "v" + std::to_string(number.lookup(v)) + ":" +
             std::to_string(from) + "->" + std::to_string(to);
    };

    OpBuilder mb(worker);
    mb.setInsertionPointAfter(worker);
    for (int k = 0; k < span; ++k) {
      FunctionType type = worker.getFunctionType();
      if (k > 0)
        type = FunctionType::get(&getContext(), {}, {});
      auto f = mb.create<func::FuncOp>(worker.getLoc(),
                                       kStagePrefix + std::to_string(k), type);
      if (ArrayAttr names = worker.getResAttrsAttr(); k == 0 && names)
        f.setResAttrsAttr(names);
      mb.setInsertionPointAfter(f);
      OpBuilder b = OpBuilder::atBlockEnd(f.addEntryBlock());
      IRMapping map;
      llvm::DenseSet<Value> received;
      auto recv = [&](Value v) {
        Operation *def = v.getDefiningOp();
        if (!def || def->getBlock() != &body || received.count(v))
          return;
        const int from = stage[def];
        if (from < 0 || from == k)
          return;
        received.insert(v);
        auto r = b.create<RecvOp>(def->getLoc(), v.getType(),
                                  b.getStringAttr(keyOf(v, from, k)),
                                  b.getI64IntegerAttr(from));
        map.map(v, r.getValue());
      };
      for (Operation *op : ops) {
        const bool here = stage[op] == k ||
                          (stage[op] < 0 && usersOf[op].count(k));
        if (!here)
          continue;
        if (isa<PushOp>(op)) // the fetches come in before the pushes
          for (Value v : ret->getOperands())
            recv(v);
        for (Value in : op->getOperands())
          recv(in);
        b.clone(*op, map);
        if (stage[op] < 0)
          continue;
        for (Value r : op->getResults()) {
          auto it = needs.find(r);
          if (it == needs.end())
            continue;
          for (int to : it->second)
            b.create<SendOp>(op->getLoc(), map.lookup(r),
                             b.getStringAttr(keyOf(r, k, to)),
                             b.getI64IntegerAttr(to));
        }
      }
      SmallVector<Value> results;
      if (k == 0)
        for (Value v : ret->getOperands()) {
          recv(v);
          results.push_back(map.lookupOrDefault(v));
        }
      b.create<func::ReturnOp>(ret->getLoc(), results);
    }
  }
};

} // namespace
