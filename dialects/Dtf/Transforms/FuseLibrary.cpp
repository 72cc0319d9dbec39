// dtf-fuse-library: a convolution, its bias add and relu as one library call
// (oneDNN post-ops), and a max pool's gradient with the relu's gradient after
// it as one pass, and a max pool that keeps its argmax for its gradient,
// where the ops run on the CPU.
#include "dialects/Dtf/Transforms/Fusion.h"
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFFUSELIBRARY
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

namespace {

/// Folds `relu(conv2d(x, f) + b)` (or without the relu) into one
/// conv2d_bias. Returns true when it did.
bool foldConv(Conv2DOp conv) {
  auto outType = cast<RankedTensorType>(conv.getType());
  if (!outType.getElementType().isF32() || isGpuDevice(conv->getAttr("dtf.device")) ||
      !conv.getResult().hasOneUse())
    return false;
  auto add = dyn_cast<AddOp>(*conv.getResult().getUsers().begin());
  if (!add || add.getType() != outType ||
      add->getAttr("dtf.device") != conv->getAttr("dtf.device"))
    return false;
  Value bias = add.getLhs() == conv.getResult() ? add.getRhs() : add.getLhs();
  auto biasType = dyn_cast<RankedTensorType>(bias.getType());
  if (bias == conv.getResult() || !biasType || biasType.getRank() != 1 ||
      biasType.getDimSize(0) != outType.getDimSize(3) ||
      biasType.getElementType() != outType.getElementType())
    return false;

  // relu joins when every other user of the sum is a relu_grad reading it
  // as x (which the relu's result can stand for: positive exactly where the
  // sum is).
  ReluOp relu;
  SmallVector<ReluGradOp> grads;
  bool withRelu = true;
  for (Operation *user : add.getResult().getUsers()) {
    if (auto r = dyn_cast<ReluOp>(user);
        r && !relu && r->getAttr("dtf.device") == conv->getAttr("dtf.device")) {
      relu = r;
      continue;
    }
    auto g = dyn_cast<ReluGradOp>(user);
    if (g && g.getX() == add.getResult() && g.getDy() != add.getResult()) {
      grads.push_back(g);
      continue;
    }
    withRelu = false;
  }
  if (!relu)
    withRelu = false;
  OpBuilder b(withRelu ? relu.getOperation() : add.getOperation());
  auto fused = b.create<Conv2DBiasOp>(
      conv.getLoc(), conv.getInput(), conv.getFilter(), bias,
      conv.getPaddingAttr(), conv.getStridesAttr(), conv.getDilationsAttr(),
      withRelu ? b.getUnitAttr() : UnitAttr(), conv.getComputeDtypeAttr());
  if (auto device = conv->getAttr("dtf.device"))
    fused->setAttr("dtf.device", device);
  if (withRelu) {
    for (ReluGradOp g : grads)
      g.getXMutable().assign(fused.getResult());
    relu.getResult().replaceAllUsesWith(fused.getResult());
    relu.erase();
  } else {
    // Whatever reads the sum (a relu_grad among them) reads it from here.
    add.getResult().replaceAllUsesWith(fused.getResult());
  }
  add.erase();
  conv.erase();
  return true;
}

/// Folds `relu_grad(max_pool_grad(x, dy), x)` into `max_pool_grad relu`.
/// Every dy lands on its window's maximum, so the relu's mask at that
/// position is the window's: one pass instead of two over x's size.
bool foldPoolGrad(ReluGradOp reluGrad) {
  auto pool = reluGrad.getDy().getDefiningOp<MaxPoolGradOp>();
  if (!pool || pool.getRelu() || !pool.getResult().hasOneUse() ||
      pool.getX() != reluGrad.getX() ||
      isGpuDevice(pool->getAttr("dtf.device")) ||
      pool->getAttr("dtf.device") != reluGrad->getAttr("dtf.device"))
    return false;
  pool.setRelu(true);
  reluGrad.getResult().replaceAllUsesWith(pool.getResult());
  reluGrad.erase();
  return true;
}

/// Makes a CPU-placed f32/f64 max pool whose every gradient (a
/// max_pool_grad of the same input and window, on the pool's device, after
/// it in its block) is there a max_pool_with_argmax, and those gradients
/// max_pool_grad_with_argmax: they read the argmax bytes and dy, not x.
/// A pool with no gradient (evaluation) stays as it is. Returns true when it
/// did.
bool keepPoolArgmax(MaxPoolOp pool) {
  auto inType = cast<RankedTensorType>(pool.getInput().getType());
  auto outType = cast<RankedTensorType>(pool.getType());
  ArrayRef<int64_t> window = pool.getWindow();
  Attribute device = pool->getAttr("dtf.device");
  if (!(inType.getElementType().isF32() || inType.getElementType().isF64()) ||
      isGpuDevice(device) || window[0] * window[1] > 127)
    return false;
  SmallVector<MaxPoolGradOp> grads;
  for (Operation *user : pool.getInput().getUsers()) {
    auto g = dyn_cast<MaxPoolGradOp>(user);
    if (!g || g.getX() != pool.getInput() || g.getDy() == pool.getInput() ||
        g.getWindow() != window || g.getStrides() != pool.getStrides() ||
        g.getPadding() != pool.getPadding())
      continue;
    if (g->getAttr("dtf.device") != device ||
        g->getBlock() != pool->getBlock() || !pool->isBeforeInBlock(g))
      return false;
    grads.push_back(g);
  }
  if (grads.empty())
    return false;
  SmallVector<int64_t> argmaxShape(outType.getShape());
  if (!ShapedType::isDynamic(argmaxShape.back()))
    argmaxShape.back() = (argmaxShape.back() + 3) / 4;
  OpBuilder b(pool);
  auto kept = b.create<MaxPoolWithArgmaxOp>(
      pool.getLoc(), outType,
      RankedTensorType::get(argmaxShape, b.getI32Type()), pool.getInput(),
      pool.getPaddingAttr(), pool.getWindowAttr(), pool.getStridesAttr());
  if (device)
    kept->setAttr("dtf.device", device);
  pool.getResult().replaceAllUsesWith(kept.getOutput());
  pool.erase();
  SmallVector<int64_t> inputShape;
  for (int64_t i = 0; i < inType.getRank(); ++i)
    inputShape.push_back(inType.isDynamicDim(i) ? -1 : inType.getDimSize(i));
  for (MaxPoolGradOp g : grads) {
    OpBuilder gb(g);
    auto grad = gb.create<MaxPoolGradWithArgmaxOp>(
        g.getLoc(), g.getType(), kept.getArgmax(), g.getDy(),
        g.getPaddingAttr(), g.getWindowAttr(), g.getStridesAttr(),
        gb.getDenseI64ArrayAttr(inputShape),
        g.getRelu() ? gb.getUnitAttr() : UnitAttr());
    if (device)
      grad->setAttr("dtf.device", device);
    g.getResult().replaceAllUsesWith(grad.getResult());
    g.erase();
  }
  return true;
}

struct FuseLibraryPass
    : public mlir::dtf::impl::DtfFuseLibraryBase<FuseLibraryPass> {
  using DtfFuseLibraryBase::DtfFuseLibraryBase;
  void runOnOperation() override {
    SmallVector<Conv2DOp> convs;
    getOperation().walk([&](Conv2DOp c) { convs.push_back(c); });
    for (Conv2DOp c : convs)
      foldConv(c);
    // After the convolutions: a folded conv's relu_grad reads its result,
    // which is also the max pool's input.
    SmallVector<ReluGradOp> reluGrads;
    getOperation().walk([&](ReluGradOp g) { reluGrads.push_back(g); });
    for (ReluGradOp g : reluGrads)
      foldPoolGrad(g);
    // After the relu_grads: a gradient keeps its relu through the rewrite.
    if (poolArgmax) {
      SmallVector<MaxPoolOp> pools;
      getOperation().walk([&](MaxPoolOp p) { pools.push_back(p); });
      for (MaxPoolOp p : pools)
        keepPoolArgmax(p);
    }
  }
};

} // namespace
