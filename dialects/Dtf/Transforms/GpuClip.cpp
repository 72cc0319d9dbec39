// dtf-gpu-clip: clipping by global norm on the GPU that makes the gradients,
// as ops that dtf-fuse turns into generated kernels.
#include "dialects/Dtf/Transforms/Fusion.h"
#include "dialects/Dtf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFGPUCLIP
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

namespace {

/// The GPU (dtf.device) on which every gradient of `clip` is made; null
/// when one is made elsewhere (the CPU, another GPU, an argument).
Attribute commonGpu(GlobalNormClipOp clip) {
  Attribute device;
  for (Value g : clip.getGrads()) {
    Operation *def = g.getDefiningOp();
    Attribute d = def ? def->getAttr("dtf.device") : Attribute();
    if (!isGpuDevice(d) || (device && d != device))
      return {};
    device = d;
  }
  return device;
}

/// Replaces `clip` by the ops that compute it, on `device`, right after
/// the last op that makes one of its gradients: the GPU ops of the backward
/// pass and these then follow each other (one GPU segment in dtf-run), not
/// split by the host ops dtf-optimize put between (the learning rate).
void expand(GlobalNormClipOp clip, Attribute device) {
  Operation *last = nullptr;
  bool sameBlock = true;
  for (Value g : clip.getGrads()) {
    Operation *def = g.getDefiningOp();
    sameBlock = sameBlock && def->getBlock() == clip->getBlock();
    if (sameBlock && (!last || last->isBeforeInBlock(def)))
      last = def;
  }
  OpBuilder b(clip);
  if (sameBlock)
    b.setInsertionPointAfter(last);
  const Location loc = clip.getLoc();
  auto on = [&](Operation *op) {
    op->setAttr("dtf.device", device);
    return op->getResult(0);
  };
  const Type f64 = b.getF64Type();
  auto scalar64 = RankedTensorType::get({}, f64);
  auto constant = [&](double v) {
    return on(b.create<ConstantOp>(
        loc, DenseElementsAttr::get(scalar64, b.getF64FloatAttr(v))));
  };
  // The sum of every squared element, in f64 as the CPU kernel sums.
  Value total;
  for (Value g : clip.getGrads()) {
    auto type = cast<RankedTensorType>(g.getType());
    Value x = g;
    if (!type.getElementType().isF64())
      x = on(b.create<CastOp>(loc, type.clone(f64), g));
    Value squares = on(b.create<SumOp>(loc, on(b.create<MulOp>(loc, x, x)),
                                       DenseI64ArrayAttr(), UnitAttr()));
    total = total ? on(b.create<AddOp>(loc, total, squares)) : squares;
  }
  Value norm = on(b.create<SqrtOp>(loc, total));
  Value c = constant(clip.getClipNorm().convertToDouble());
  // clip / max(norm, clip), plus (norm - norm): 0 for a finite norm, NaN
  // for an infinite or NaN one, which then makes every gradient NaN.
  Value capped = on(b.create<MaximumOp>(loc, norm, c));
  Value ratio = on(b.create<DivOp>(loc, c, capped));
  Value zeroOrNaN = on(b.create<SubOp>(loc, norm, norm));
  Value scale = on(b.create<AddOp>(loc, ratio, zeroOrNaN));
  // The scale in each gradient's type (cast once per type).
  DenseMap<Type, Value> scales;
  scales[f64] = scale;
  for (auto [g, out] : llvm::zip(clip.getGrads(), clip.getClipped())) {
    Type element = cast<RankedTensorType>(g.getType()).getElementType();
    Value &s = scales[element];
    if (!s)
      s = on(b.create<CastOp>(loc, RankedTensorType::get({}, element), scale));
    out.replaceAllUsesWith(on(b.create<MulOp>(loc, g, s)));
  }
  clip.erase();
}

struct GpuClipPass : public mlir::dtf::impl::DtfGpuClipBase<GpuClipPass> {
  void runOnOperation() override {
    SmallVector<GlobalNormClipOp> clips;
    getOperation().walk([&](GlobalNormClipOp op) { clips.push_back(op); });
    for (GlobalNormClipOp clip : clips)
      if (Attribute device = commonGpu(clip))
        expand(clip, device);
  }
};

} // namespace
