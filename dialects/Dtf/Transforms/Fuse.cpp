// dtf-fuse: chains of elementwise ops become dtf.fused regions.
#include "dialects/Dtf/Transforms/Fusion.h"
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFFUSE
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

std::optional<FusedIndex> mlir::dtf::fusedIndexOf(RankedTensorType operand,
                                                  ArrayRef<int64_t> shape) {
  if (operand.getShape() == shape)
    return FusedIndex::Same;
  if (!operand.hasStaticShape())
    return std::nullopt;
  if (operand.getNumElements() == 1)
    return FusedIndex::Scalar;
  ArrayRef<int64_t> dims = operand.getShape();
  while (!dims.empty() && dims.front() == 1)
    dims = dims.drop_front();
  if (dims.size() > shape.size())
    return std::nullopt;
  ArrayRef<int64_t> tail = shape.take_back(dims.size());
  if (tail != dims)
    return std::nullopt; // a dynamic dim of the shape never matches
  return FusedIndex::Suffix;
}

const char *mlir::dtf::fusedIndexName(FusedIndex index) {
  switch (index) {
  case FusedIndex::Same:
    return "same";
  case FusedIndex::Scalar:
    return "scalar";
  case FusedIndex::Suffix:
    return "suffix";
  }
  return "same";
}

namespace {

bool isFusableElement(Type t) {
  return t.isF32() || t.isF64() || t.isInteger(1) || t.isInteger(32) ||
         t.isInteger(64);
}

} // namespace

bool mlir::dtf::isFusableElementwise(Operation *op) {
  if (!isa<AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, CompareOp,
           SelectOp, NegOp, ReluOp, ExpOp, LogOp, SqrtOp, RsqrtOp, SigmoidOp,
           TanhOp, CastOp, ReluGradOp, SigmoidGradOp, TanhGradOp>(op))
    return false;
  if (op->getNumResults() != 1)
    return false;
  auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!result || !isFusableElement(result.getElementType()))
    return false;
  if (isa<DivOp>(op) && !isa<FloatType>(result.getElementType()))
    return false;
  for (Value operand : op->getOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || !isFusableElement(type.getElementType()) ||
        !fusedIndexOf(type, result.getShape()))
      return false;
  }
  return true;
}

namespace {

struct Group {
  SmallVector<Operation *> ops;
  SmallVector<int64_t> shape;
  Attribute device; // the ops' dtf.device: a region runs on one device
  bool closed = false;
};

/// Finds the groups of one block, in program order.
SmallVector<Group> findGroups(Block &block) {
  SmallVector<Group> groups;
  DenseMap<Operation *, int> groupOf;
  auto groupOfValue = [&](Value v) -> int {
    Operation *def = v.getDefiningOp();
    if (!def)
      return -1;
    auto it = groupOf.find(def);
    return it == groupOf.end() ? -1 : it->second;
  };
  for (Operation &op : block) {
    int joined = -1;
    SmallVector<int64_t> shape;
    const bool fusable = isFusableElementwise(&op);
    if (fusable) {
      shape = llvm::to_vector(
          cast<RankedTensorType>(op.getResult(0).getType()).getShape());
      for (Value operand : op.getOperands()) {
        int g = groupOfValue(operand);
        if (g >= 0 && !groups[g].closed && groups[g].shape == shape &&
            groups[g].device == op.getAttr("dtf.device"))
          joined = std::max(joined, g);
      }
    }
    // A group whose value an op outside it uses can grow no further: its
    // fused op must come before that use.
    for (Value operand : op.getOperands()) {
      int g = groupOfValue(operand);
      if (g >= 0 && g != joined)
        groups[g].closed = true;
    }
    for (Region &region : op.getRegions())
      region.walk([&](Operation *inner) {
        for (Value operand : inner->getOperands())
          if (int g = groupOfValue(operand); g >= 0)
            groups[g].closed = true;
      });
    if (!fusable)
      continue;
    if (joined < 0) {
      joined = static_cast<int>(groups.size());
      groups.push_back(Group{{}, shape, op.getAttr("dtf.device"), false});
    }
    groups[joined].ops.push_back(&op);
    groupOf[&op] = joined;
  }
  return groups;
}

/// Replaces the ops of `group` by one dtf.fused op where its last op stood;
/// false when the group computes nothing used outside it.
bool fuse(Group &group, int64_t kernel) {
  llvm::SmallPtrSet<Operation *, 16> members(group.ops.begin(),
                                             group.ops.end());
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs;
  for (Operation *op : group.ops) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !members.contains(def))
        inputs.insert(operand);
    }
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !members.contains(user);
          }))
        outputs.push_back(result);
  }
  if (outputs.empty())
    return false;
  Operation *last = group.ops.back();
  OpBuilder b(last);
  SmallVector<Location> locs;
  for (Operation *op : group.ops)
    locs.push_back(op->getLoc());
  Location loc = b.getFusedLoc(locs);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto fused = b.create<FusedOp>(loc, resultTypes, inputs.getArrayRef(),
                                 b.getI64IntegerAttr(kernel));
  if (group.device)
    fused->setAttr("dtf.device", group.device);
  Block *body = new Block();
  fused.getBody().push_back(body);
  IRMapping mapping;
  for (Value in : inputs)
    mapping.map(in, body->addArgument(in.getType(), in.getLoc()));
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  for (Operation *op : group.ops)
    inner.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(mapping.lookup(v));
  inner.create<YieldOp>(loc, yielded);
  for (auto [from, to] : llvm::zip(outputs, fused.getResults()))
    from.replaceUsesWithIf(to, [&](OpOperand &use) {
      return !members.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(group.ops))
    op->erase();
  return true;
}

struct FusePass : public mlir::dtf::impl::DtfFuseBase<FusePass> {
  void runOnOperation() override {
    int64_t kernel = 0;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (Block &block : func.getBody()) {
        SmallVector<Group> groups = findGroups(block);
        for (Group &g : groups)
          if (g.ops.size() >= 2 && fuse(g, kernel))
            ++kernel;
      }
    }
  }
};

} // namespace
