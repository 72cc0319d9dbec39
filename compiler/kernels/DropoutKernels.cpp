// Generated dropout kernels: out[i] = keep ? x[i] * scale : 0, where keep
// compares, in f32, the 24 high bits of SplitMix64's mix of key + (first +
// i + 1) * golden (scaled to [0, 1)) with the rate, and scale = T(1 / (1 -
// rate)): the arithmetic of runtime/kernels/cpu/Random.cpp and
// runtime/kernels/DropoutMask.h, in 64-bit integer ops (wrapping, as C++'s
// unsigned ones), an exact integer-to-float conversion and one product, so
// the output is the op-by-op kernel's bit for bit, f32 and f64 alike. The
// rate and scale are the op's and become constants; the key (which changes
// every step) and the first element (a tower's offset in the batch's mask)
// come from the "dropout-key" word dtf-run fills before each run, so a
// CUDA graph that replays the launch reads the new step's key.
#include "compiler/kernels/DropoutKernels.h"
#include "compiler/kernels/ScalarOps.h"

#include "dialects/Dtf/Transforms/Fusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::dtf;

namespace {

/// Element `i` (i64) of the dropout `op`: buffers x, out, key (the word).
/// The buffers are first used in that order (each one's address is taken
/// before any load), so the GPU kernel's parameters keep the plan's order.
LogicalResult emitDropoutAt(OpBuilder &b, Operation *op,
                            ArrayRef<Value> buffers, Value i) {
  Location loc = op->getLoc();
  auto ptrTy = LLVM::LLVMPointerType::get(b.getContext());
  auto i64 = b.getI64Type();
  Type t = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
  auto rateAttr = op->getAttrOfType<FloatAttr>("rate");
  if (!rateAttr)
    return op->emitError() << "needs its rate to become a dropout kernel";
  const double rate = rateAttr.getValueAsDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return op->emitError() << "has a rate outside [0, 1): " << rate;
  auto c64 = [&](uint64_t v) -> Value {
    return b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(int64_t(v)));
  };
  Value xAt = b.create<LLVM::GEPOp>(loc, ptrTy, t, buffers[0],
                                    ArrayRef<LLVM::GEPArg>{i});
  Value outAt = b.create<LLVM::GEPOp>(loc, ptrTy, t, buffers[1],
                                      ArrayRef<LLVM::GEPArg>{i});
  Value keyAt = buffers[2];
  Value firstAt = b.create<LLVM::GEPOp>(loc, ptrTy, i64, buffers[2],
                                        ArrayRef<LLVM::GEPArg>{int32_t(1)});
  Value key = b.create<LLVM::LoadOp>(loc, i64, keyAt);
  Value first = b.create<LLVM::LoadOp>(loc, i64, firstAt);
  // z = key + (first + i + 1) * golden, then SplitMix64's finalizer.
  Value n = b.create<arith::AddIOp>(loc, b.create<arith::AddIOp>(loc, first, i),
                                    c64(1));
  Value z = b.create<arith::AddIOp>(
      loc, key, b.create<arith::MulIOp>(loc, n, c64(0x9e3779b97f4a7c15ull)));
  auto round = [&](Value z, uint64_t shift, uint64_t mul) -> Value {
    Value s = b.create<arith::ShRUIOp>(loc, z, c64(shift));
    Value x = b.create<arith::XOrIOp>(loc, z, s);
    return mul ? Value(b.create<arith::MulIOp>(loc, x, c64(mul))) : x;
  };
  z = round(z, 30, 0xbf58476d1ce4e5b9ull);
  z = round(z, 27, 0x94d049bb133111ebull);
  z = round(z, 31, 0);
  // float(z >> 40) * 2^-24: exact (24 bits), compared in f32 with
  // float(rate), as uniformAt(key, first + i) >= r.
  Value bits = b.create<arith::ShRUIOp>(loc, z, c64(40));
  Value u = b.create<arith::MulFOp>(
      loc, b.create<arith::UIToFPOp>(loc, b.getF32Type(), bits),
      b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(1.0f / 16777216.0f)));
  Value keep = b.create<arith::CmpFOp>(
      loc, arith::CmpFPredicate::OGE, u,
      b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(float(rate))));
  // scale = T(1 / (1 - rate)), computed in double as Random.cpp does.
  const double scale = 1.0 / (1.0 - rate);
  Value scaleC = b.create<arith::ConstantOp>(
      loc, t.isF32() ? b.getF32FloatAttr(float(scale))
                     : FloatAttr(b.getF64FloatAttr(scale)));
  Value x = b.create<LLVM::LoadOp>(loc, t, xAt);
  Value kept = b.create<arith::MulFOp>(loc, x, scaleC);
  Value zero = b.create<arith::ConstantOp>(loc, b.getFloatAttr(t, 0.0));
  b.create<LLVM::StoreOp>(loc, b.create<arith::SelectOp>(loc, keep, kept, zero),
                          outAt);
  return success();
}

} // namespace

LogicalResult mlir::dtf::buildCpuDropoutFunc(FusedOp fused, Operation *dropout,
                                             OpBuilder &b, StringRef name) {
  Location loc = fused.getLoc();
  SmallVector<Value> buffers;
  func::FuncOp func = createCpuKernelEntry(b, loc, name, 3, buffers);
  Block *entry = &func.getBody().front();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  Value i;
  OpBuilder lb = createCpuRangeLoop(fb, loc, entry, i);
  return emitDropoutAt(lb, dropout, buffers, i);
}

LogicalResult mlir::dtf::buildGpuDropoutFunc(FusedOp fused, Operation *dropout,
                                             OpBuilder &b, StringRef name) {
  SmallVector<Value> buffers, i64s;
  Value i;
  OpBuilder lb =
      createGpuKernelLoop(b, fused.getLoc(), name, 3, 0, buffers, i64s, i);
  return emitDropoutAt(lb, dropout, buffers, i);
}
