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
  if (operand.hasStaticShape()) {
    if (operand.getNumElements() == 1)
      return FusedIndex::Scalar;
    ArrayRef<int64_t> dims = operand.getShape();
    while (!dims.empty() && dims.front() == 1)
      dims = dims.drop_front();
    if (dims.size() <= shape.size() && shape.take_back(dims.size()) == dims)
      return FusedIndex::Suffix; // a dynamic dim of the shape never matches
  }
  if (fusedPrefixDivisor(operand, shape) > 1)
    return FusedIndex::Prefix;
  return std::nullopt;
}

int64_t mlir::dtf::fusedPrefixDivisor(RankedTensorType operand,
                                      ArrayRef<int64_t> shape) {
  // The same rank, equal leading dims, then a run of 1s against static
  // dims of the shape.
  ArrayRef<int64_t> dims = operand.getShape();
  if (dims.size() != shape.size())
    return 0;
  size_t lead = dims.size();
  int64_t divisor = 1;
  while (lead > 0 && dims[lead - 1] == 1 && shape[lead - 1] != 1) {
    if (ShapedType::isDynamic(shape[lead - 1]))
      return 0;
    divisor *= shape[lead - 1];
    --lead;
  }
  if (dims.take_front(lead) != shape.take_front(lead))
    return 0;
  return divisor;
}

const char *mlir::dtf::fusedIndexName(FusedIndex index) {
  switch (index) {
  case FusedIndex::Same:
    return "same";
  case FusedIndex::Scalar:
    return "scalar";
  case FusedIndex::Suffix:
    return "suffix";
  case FusedIndex::Prefix:
    return "prefix";
  }
  return "same";
}

namespace {

bool isFloatTensor(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && (r.getElementType().isF32() || r.getElementType().isF64());
}

bool isFusableElement(Type t) {
  return t.isF32() || t.isF64() || t.isInteger(1) || t.isInteger(32) ||
         t.isInteger(64);
}

} // namespace

namespace {
/// The elementwise ops a generated kernel may hold: one list for the test
/// below and for fusableElementwiseOpNames().
template <typename... Ops> struct OpList {
  static bool contains(Operation *op) { return isa<Ops...>(op); }
  static SmallVector<StringRef> names() {
    return {Ops::getOperationName()...};
  }
};
using FusableElementwise =
    OpList<AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, CompareOp,
           SelectOp, NegOp, ReluOp, ExpOp, LogOp, SqrtOp, RsqrtOp, SigmoidOp,
           TanhOp, CastOp, ReluGradOp, SigmoidGradOp, TanhGradOp, ReduceGradOp,
           ErfOp, FloorOp, CeilOp, RoundOp, AbsOp, FloorModOp, BucketizeOp>;
} // namespace

SmallVector<StringRef> mlir::dtf::fusableElementwiseOpNames() {
  return FusableElementwise::names();
}

bool mlir::dtf::isFusableElementwise(Operation *op) {
  if (!FusableElementwise::contains(op))
    return false;
  if (op->getNumResults() != 1)
    return false;
  auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!result || !isFusableElement(result.getElementType()))
    return false;
  // Integer division and floor_mod stay op by op: their kernels report a
  // zero divisor, which a generated kernel cannot.
  if (isa<DivOp, FloorModOp>(op) && !isa<FloatType>(result.getElementType()))
    return false;
  if (auto grad = dyn_cast<ReduceGradOp>(op)) {
    // dy broadcast over the reduced axes: fusable where they are leading
    // (dy a suffix or a scalar of x), on floats (the op-by-op kernel's
    // types), and for a mean with dy static (the count is elements / |dy|).
    auto dy = dyn_cast<RankedTensorType>(grad.getDy().getType());
    if (!isa<FloatType>(result.getElementType()) || !dy ||
        grad.getX().getType() != result)
      return false;
    if (grad.getMean() && dy.getShape() != result.getShape() &&
        (!dy.hasStaticShape() || dy.getNumElements() == 0))
      return false;
  }
  for (Value operand : op->getOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || !isFusableElement(type.getElementType()) ||
        !fusedIndexOf(type, result.getShape()))
      return false;
  }
  return true;
}

namespace {

/// Whether the non-'k' chars of `spec` form one contiguous, non-empty run.
bool oneRun(const std::string &spec) {
  size_t first = spec.find_first_not_of('k');
  if (first == std::string::npos)
    return false;
  size_t last = spec.find_last_not_of('k');
  return spec.substr(first, last - first + 1).find('k') == std::string::npos;
}

template <typename Reduce>
std::optional<std::string> reduceOpSpec(Reduce op) {
  auto x = cast<RankedTensorType>(op.getX().getType());
  const int64_t rank = x.getRank();
  std::string spec(size_t(rank), 'k');
  const char reduced = op.getKeepDims() ? '1' : 'r';
  std::optional<ArrayRef<int64_t>> axes = op.getAxes();
  if (!axes) // every axis: to one element (a loss mean, the accuracy)
    return std::string(size_t(rank), reduced);
  for (int64_t a : *axes) {
    if (a < 0)
      a += rank;
    if (a < 0 || a >= rank)
      return std::nullopt;
    spec[size_t(a)] = reduced;
  }
  return spec;
}

} // namespace

std::optional<std::string> mlir::dtf::fusedReduceSpec(Operation *op) {
  if (!isa<SumOp, MeanOp, SumToShapeOp, MaxOp>(op) ||
      op->getNumResults() != 1 || !isFloatTensor(op->getResult(0).getType()) ||
      !isFloatTensor(op->getOperand(0).getType()))
    return std::nullopt;
  std::optional<std::string> spec;
  if (auto sum = dyn_cast<SumOp>(op))
    spec = reduceOpSpec(sum);
  else if (auto mean = dyn_cast<MeanOp>(op))
    spec = reduceOpSpec(mean);
  else if (auto max = dyn_cast<MaxOp>(op))
    spec = reduceOpSpec(max);
  else if (auto s = dyn_cast<SumToShapeOp>(op)) {
    auto dy = cast<RankedTensorType>(s.getDy().getType());
    auto like = dyn_cast<RankedTensorType>(s.getLike().getType());
    if (!like || like.getRank() > dy.getRank() ||
        !fusedIndexOf(like, dy.getShape()))
      return std::nullopt; // `like` is an input the region must index
    const int64_t pad = dy.getRank() - like.getRank();
    std::string text(size_t(dy.getRank()), 'k');
    for (int64_t d = 0; d < dy.getRank(); ++d) {
      if (d < pad) {
        text[size_t(d)] = 'r';
        continue;
      }
      const int64_t l = like.getDimSize(d - pad), y = dy.getDimSize(d);
      if (l == 1 && y != 1)
        text[size_t(d)] = '1';
      else if (l != y)
        return std::nullopt;
    }
    if (text.find('k') == std::string::npos)
      return std::nullopt;
    spec = text;
  }
  if (!spec || !oneRun(*spec))
    return std::nullopt;
  return spec;
}

bool mlir::dtf::isColumnSpec(StringRef spec) {
  return !spec.empty() && spec.back() == 'k' &&
         spec.find_first_not_of('k') != StringRef::npos;
}

bool mlir::dtf::sameReducedAxes(const std::string &a, const std::string &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if ((a[i] == 'k') != (b[i] == 'k'))
      return false;
  return true;
}

namespace {

/// Whether `t` is a ranked tensor of one element (static) whose element
/// type the generated update reads as a hyperparameter.
bool isHyperScalar(Type t, bool integers) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || !r.hasStaticShape() || r.getNumElements() != 1)
    return false;
  Type e = r.getElementType();
  return e.isF32() || e.isF64() ||
         (integers && (e.isInteger(32) || e.isInteger(64)));
}

} // namespace

SmallVector<StringRef> mlir::dtf::fusableUpdateSymbols(Operation *op) {
  SmallVector<StringRef> symbols;
  // The attributes each update may carry (others, such as centered or lazy,
  // leave it to the op-by-op kernel).
  SmallVector<StringRef> known = {"var", "dtf.device", "weight_decay"};
  Value grad, lr, step;
  if (auto o = dyn_cast<ApplySgdOp>(op)) {
    symbols = {o.getVar()};
    grad = o.getGrad(), lr = o.getLr();
  } else if (auto o = dyn_cast<ApplyMomentumOp>(op)) {
    symbols = {o.getVar(), o.getAccum()};
    grad = o.getGrad(), lr = o.getLr();
    known.append({"accum", "momentum", "use_nesterov"});
  } else if (auto o = dyn_cast<ApplyAdamOp>(op)) {
    symbols = {o.getVar(), o.getM(), o.getV()};
    grad = o.getGrad(), lr = o.getLr(), step = o.getStep();
    known.append({"m", "v", "beta1", "beta2", "epsilon"});
  } else if (auto o = dyn_cast<ApplyAdagradOp>(op)) {
    symbols = {o.getVar(), o.getAccum()};
    grad = o.getGrad(), lr = o.getLr();
    known.append({"accum", "epsilon"});
  } else if (auto o = dyn_cast<ApplyRmspropOp>(op)) {
    symbols = {o.getVar(), o.getMs(), o.getMom()};
    grad = o.getGrad(), lr = o.getLr();
    known.append({"ms", "mom", "decay", "momentum", "epsilon"});
  } else {
    return {};
  }
  if (!isFloatTensor(grad.getType()) ||
      !cast<RankedTensorType>(grad.getType()).hasStaticShape() ||
      !isHyperScalar(lr.getType(), false) ||
      (step && !isHyperScalar(step.getType(), true)))
    return {};
  for (NamedAttribute a : op->getAttrs()) {
    if (!llvm::is_contained(known, a.getName().strref()))
      return {};
    if (a.getName() == "epsilon" && !isa<FloatAttr>(a.getValue()))
      return {};
  }
  return symbols;
}

Operation *mlir::dtf::fusedUpdateOp(Operation *fused) {
  if (!isa<FusedOp>(fused) || fused->getNumResults() != 0)
    return nullptr;
  for (Operation &op : fused->getRegion(0).front())
    if (!fusableUpdateSymbols(&op).empty())
      return &op;
  return nullptr;
}

SmallVector<int64_t> mlir::dtf::fusedIterationShape(Operation *fused) {
  if (Operation *row = fusedRowOp(fused)) // the rows: the logits' shape
    return llvm::to_vector(
        cast<RankedTensorType>(rowOpRowsOperand(row).getType()).getShape());
  if (Operation *update = fusedUpdateOp(fused)) // the gradient's shape
    return llvm::to_vector(
        cast<RankedTensorType>(update->getOperand(0).getType()).getShape());
  for (Operation &op : fused->getRegion(0).front())
    if (fusedReduceSpec(&op))
      return llvm::to_vector(
          cast<RankedTensorType>(op.getOperand(0).getType()).getShape());
  return llvm::to_vector(
      cast<RankedTensorType>(fused->getResult(0).getType()).getShape());
}

SmallVector<std::string> mlir::dtf::fusedResultSpecs(Operation *fused) {
  SmallVector<std::string> specs;
  Operation *yield = fused->getRegion(0).front().getTerminator();
  for (Value v : yield->getOperands()) {
    Operation *def = v.getDefiningOp();
    std::optional<std::string> spec =
        def ? fusedReduceSpec(def) : std::nullopt;
    specs.push_back(spec ? *spec : "");
  }
  return specs;
}

bool mlir::dtf::isGpuDevice(Attribute device) {
  auto name = dyn_cast_or_null<StringAttr>(device);
  return name &&
         StringRef(name.getValue()).lower().find("gpu:") != std::string::npos;
}

namespace {

struct Group {
  SmallVector<Operation *> ops;
  SmallVector<int64_t> shape;
  Attribute device; // the ops' dtf.device: a region runs on one device
  bool closed = false;
  std::string spec; // its reductions' spec; "" when it has none
};

/// Finds the groups of one block, in program order.
/// Which reductions may end a region (the pass's `reductions` option).
enum class Reductions { None, Rows, All };

SmallVector<Group> findGroups(Block &block, Reductions allowed) {
  SmallVector<Group> groups;
  DenseMap<Operation *, int> groupOf;
  auto groupOfValue = [&](Value v) -> int {
    Operation *def = v.getDefiningOp();
    if (!def)
      return -1;
    auto it = groupOf.find(def);
    return it == groupOf.end() ? -1 : it->second;
  };
  // Reduction results: no op of their own region may read them (the
  // region computes them after its loop).
  llvm::SmallPtrSet<Operation *, 16> reductions;
  auto reducedIn = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && reductions.contains(def);
  };
  for (Operation &op : block) {
    int joined = -1;
    SmallVector<int64_t> shape;
    const bool elementwise = isFusableElementwise(&op);
    std::optional<std::string> spec =
        elementwise ? std::nullopt : fusedReduceSpec(&op);
    // A column reduction (an axis kept after the reduced ones) only with
    // `all` (the default), and always on a GPU (where it has no library
    // kernel).
    const bool onGpu = isGpuDevice(op.getAttr("dtf.device"));
    if (spec &&
        (allowed == Reductions::None ||
         (allowed == Reductions::Rows && spec->back() == 'k' && !onGpu)))
      spec = std::nullopt;
    const bool fusable = elementwise || spec.has_value();
    if (elementwise) {
      shape = llvm::to_vector(
          cast<RankedTensorType>(op.getResult(0).getType()).getShape());
      SmallVector<int, 4> reducing; // groups whose reductions it reads
      for (Value operand : op.getOperands())
        if (reducedIn(operand))
          reducing.push_back(groupOfValue(operand));
      for (Value operand : op.getOperands()) {
        int g = groupOfValue(operand);
        if (g >= 0 && !groups[g].closed && groups[g].shape == shape &&
            groups[g].device == op.getAttr("dtf.device") &&
            !llvm::is_contained(reducing, g))
          joined = std::max(joined, g);
      }
    } else if (spec) {
      // A reduction joins the region of its operand (on the CPU it starts
      // none: a region of one reduction would be the library kernel again;
      // on a GPU it may, below).
      Value x = op.getOperand(0);
      shape = llvm::to_vector(cast<RankedTensorType>(x.getType()).getShape());
      int g = groupOfValue(x);
      if (g >= 0 && !groups[g].closed && groups[g].shape == shape &&
          groups[g].device == op.getAttr("dtf.device") && !reducedIn(x) &&
          llvm::none_of(op.getOperands().drop_front(),
                        [&](Value v) { return reducedIn(v); }) &&
          (groups[g].spec.empty() || sameReducedAxes(groups[g].spec, *spec)))
        joined = g;
      for (Value operand : op.getOperands().drop_front())
        if (int h = groupOfValue(operand); h >= 0 && h == g)
          joined = -1; // `like` from its own region: keep it simple
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
    if (spec && joined < 0 && !onGpu)
      continue;
    if (joined < 0) {
      joined = static_cast<int>(groups.size());
      groups.push_back(Group{{}, shape, op.getAttr("dtf.device"), false, ""});
    }
    if (spec) {
      groups[joined].spec = *spec;
      reductions.insert(&op);
    }
    groups[joined].ops.push_back(&op);
    groupOf[&op] = joined;
  }
  return groups;
}

/// A dtf.fused op at `b` whose region clones `ops` (in order) over block
/// arguments standing for `inputs` and yields the clones of `outputs`.
FusedOp buildFusedOp(OpBuilder &b, Location loc, TypeRange results,
                     ArrayRef<Value> inputs, int64_t kernel, Attribute device,
                     ArrayRef<Operation *> ops, ArrayRef<Value> outputs) {
  auto fused =
      b.create<FusedOp>(loc, results, inputs, b.getI64IntegerAttr(kernel));
  if (device)
    fused->setAttr("dtf.device", device);
  Block *body = new Block();
  fused.getBody().push_back(body);
  IRMapping mapping;
  for (Value in : inputs)
    mapping.map(in, body->addArgument(in.getType(), in.getLoc()));
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  for (Operation *op : ops)
    inner.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(mapping.lookup(v));
  inner.create<YieldOp>(loc, yielded);
  return fused;
}

/// Replaces the ops of `group` by one dtf.fused op where its last op stood;
/// false when the group computes nothing used outside it.
bool fuse(Group &group, int64_t kernel) {
  llvm::SmallPtrSet<Operation *, 16> members(group.ops.begin(),
                                             group.ops.end());
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs, reduced;
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
        (fusedReduceSpec(op) ? reduced : outputs).push_back(result);
  }
  // The elementwise results first, then the reductions': the order in which
  // the kernel first writes them (the GPU kernel's parameter order).
  outputs.append(reduced.begin(), reduced.end());
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
  FusedOp fused =
      buildFusedOp(b, loc, resultTypes, inputs.getArrayRef(), kernel,
                   group.device, group.ops, outputs);
  for (auto [from, to] : llvm::zip(outputs, fused.getResults()))
    from.replaceUsesWithIf(to, [&](OpOperand &use) {
      return !members.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(group.ops))
    op->erase();
  return true;
}

/// Wraps the update `op` into a dtf.fused op of its own, with no results:
/// its kernel writes the variable and its slots in place.
void fuseUpdate(Operation *op, int64_t kernel) {
  OpBuilder b(op);
  llvm::SetVector<Value> inputs(op->getOperands().begin(),
                                op->getOperands().end());
  buildFusedOp(b, op->getLoc(), TypeRange{}, inputs.getArrayRef(), kernel,
               op->getAttr("dtf.device"), {op}, {});
  op->erase();
}

/// Wraps the row op `op` (rowOpRowsOperand) into a dtf.fused op of its own.
void fuseRowOp(Operation *op, int64_t kernel) {
  OpBuilder b(op);
  llvm::SetVector<Value> inputs(op->getOperands().begin(),
                                op->getOperands().end());
  FusedOp fused =
      buildFusedOp(b, op->getLoc(), op->getResultTypes(), inputs.getArrayRef(),
                   kernel, op->getAttr("dtf.device"), {op}, {op->getResult(0)});
  op->getResult(0).replaceAllUsesWith(fused.getResult(0));
  op->erase();
}

struct FusePass : public mlir::dtf::impl::DtfFuseBase<FusePass> {
  using DtfFuseBase::DtfFuseBase;
  void runOnOperation() override {
    Reductions allowed = Reductions::Rows;
    if (reductions == "all")
      allowed = Reductions::All;
    else if (reductions == "none")
      allowed = Reductions::None;
    else if (reductions != "rows") {
      getOperation().emitError() << "dtf-fuse: reductions must be all, rows "
                                    "or none, not '"
                                 << reductions << "'";
      return signalPassFailure();
    }
    int64_t kernel = 0;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (Block &block : func.getBody()) {
        SmallVector<Group> groups = findGroups(block, allowed);
        for (Group &g : groups)
          if ((g.ops.size() >= 2 || isGpuDevice(g.device)) && fuse(g, kernel))
            ++kernel;
        if (rows || dropout) {
          // Row ops and dropouts: each alone in a region of one result.
          SmallVector<Operation *> rowOps;
          for (Operation &op : block)
            if (((rows && rowOpRowsOperand(&op)) ||
                 (dropout && isFusableDropout(&op))) &&
                !op.use_empty())
              rowOps.push_back(&op);
          for (Operation *op : rowOps)
            fuseRowOp(op, kernel++);
        }
        if (!updates)
          continue;
        SmallVector<Operation *> toFuse;
        for (Operation &op : block)
          if (!fusableUpdateSymbols(&op).empty())
            toFuse.push_back(&op);
        for (Operation *op : toFuse)
          fuseUpdate(op, kernel++);
      }
    }
  }
};

} // namespace
