// The scalar semantics of each fusable dtf op, matching runtime/kernels/cpu;
// a fused region's elements at one index; the generated kernels' entries.
#include "compiler/kernels/ScalarOps.h"

#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/Transforms/Fusion.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <limits>
#include <optional>

using namespace mlir;
using namespace mlir::dtf;

Type mlir::dtf::elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

Type mlir::dtf::storageType(Type element) {
  return element.isInteger(1) ? IntegerType::get(element.getContext(), 8)
                              : element;
}

Value mlir::dtf::scalarConstant(OpBuilder &b, Location loc, Type t, double v) {
  if (auto f = dyn_cast<FloatType>(t))
    return b.create<arith::ConstantOp>(loc, b.getFloatAttr(f, v));
  return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(t, int64_t(v)));
}

namespace {

bool isFloat(Type t) { return isa<FloatType>(t); }

// Float -> integer as the runtime's convert(): NaN gives 0, values at or past
// 2^(bits-1) the largest integer, below -2^(bits-1) the smallest.
Value floatToInt(OpBuilder &b, Location loc, Value v, IntegerType to) {
  Type from = v.getType();
  const unsigned bits = to.getWidth();
  const double lo = -std::ldexp(1.0, int(bits) - 1);
  Value loC = scalarConstant(b, loc, from, lo);
  Value hiC = scalarConstant(b, loc, from, -lo);
  Value minI = b.create<arith::ConstantOp>(
      loc, b.getIntegerAttr(to, APInt::getSignedMinValue(bits)));
  Value maxI = b.create<arith::ConstantOp>(
      loc, b.getIntegerAttr(to, APInt::getSignedMaxValue(bits)));
  Value zero = b.create<arith::ConstantOp>(loc, b.getIntegerAttr(to, 0));
  Value r = b.create<arith::FPToSIOp>(loc, to, v);
  Value below = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, v, loC);
  r = b.create<arith::SelectOp>(loc, below, minI, r);
  Value above = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGE, v, hiC);
  r = b.create<arith::SelectOp>(loc, above, maxI, r);
  Value nan = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, v, v);
  return b.create<arith::SelectOp>(loc, nan, zero, r);
}

Value castScalar(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  if (to.isInteger(1)) {
    if (isFloat(from))
      return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, v,
                                     scalarConstant(b, loc, from, 0));
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, v,
                                   scalarConstant(b, loc, from, 0));
  }
  if (from.isInteger(1)) {
    if (isFloat(to))
      return b.create<arith::UIToFPOp>(loc, to, v);
    return b.create<arith::ExtUIOp>(loc, to, v);
  }
  if (isFloat(from) && isFloat(to)) {
    if (to.getIntOrFloatBitWidth() > from.getIntOrFloatBitWidth())
      return b.create<arith::ExtFOp>(loc, to, v);
    return b.create<arith::TruncFOp>(loc, to, v);
  }
  if (isFloat(to))
    return b.create<arith::SIToFPOp>(loc, to, v);
  if (isFloat(from))
    return floatToInt(b, loc, v, cast<IntegerType>(to));
  if (to.getIntOrFloatBitWidth() > from.getIntOrFloatBitWidth())
    return b.create<arith::ExtSIOp>(loc, to, v);
  return b.create<arith::TruncIOp>(loc, to, v);
}

Value compare(OpBuilder &b, Location loc, ComparePredicate p, Value l,
              Value r) {
  Type t = l.getType();
  if (isFloat(t)) {
    // C++'s operators: != is true for NaN (une), the others ordered.
    arith::CmpFPredicate fp = arith::CmpFPredicate::OEQ;
    switch (p) {
    case ComparePredicate::eq: fp = arith::CmpFPredicate::OEQ; break;
    case ComparePredicate::ne: fp = arith::CmpFPredicate::UNE; break;
    case ComparePredicate::lt: fp = arith::CmpFPredicate::OLT; break;
    case ComparePredicate::le: fp = arith::CmpFPredicate::OLE; break;
    case ComparePredicate::gt: fp = arith::CmpFPredicate::OGT; break;
    case ComparePredicate::ge: fp = arith::CmpFPredicate::OGE; break;
    }
    return b.create<arith::CmpFOp>(loc, fp, l, r);
  }
  // Bools compare as unsigned (false < true), integers as signed.
  const bool u = t.isInteger(1);
  arith::CmpIPredicate ip = arith::CmpIPredicate::eq;
  switch (p) {
  case ComparePredicate::eq: ip = arith::CmpIPredicate::eq; break;
  case ComparePredicate::ne: ip = arith::CmpIPredicate::ne; break;
  case ComparePredicate::lt: ip = u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt; break;
  case ComparePredicate::le: ip = u ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle; break;
  case ComparePredicate::gt: ip = u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt; break;
  case ComparePredicate::ge: ip = u ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge; break;
  }
  return b.create<arith::CmpIOp>(loc, ip, l, r);
}

// maximum/minimum: (a > b || a != a) ? a : b, NaN propagating like the CPU
// kernels.
Value extremum(OpBuilder &b, Location loc, Value l, Value r, bool max) {
  if (!isFloat(l.getType()))
    return max ? Value(b.create<arith::MaxSIOp>(loc, l, r))
               : Value(b.create<arith::MinSIOp>(loc, l, r));
  Value better = b.create<arith::CmpFOp>(
      loc, max ? arith::CmpFPredicate::OGT : arith::CmpFPredicate::OLT, l, r);
  Value nan = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, l, l);
  Value pick = b.create<arith::OrIOp>(loc, better, nan);
  return b.create<arith::SelectOp>(loc, pick, l, r);
}

// TensorFlow's floor_fmod: fmod, plus the divisor where the remainder is
// non-zero and of the other sign.
Value floorMod(OpBuilder &b, Location loc, Value x, Value y) {
  Type t = x.getType();
  Value zero = scalarConstant(b, loc, t, 0);
  Value r = b.create<arith::RemFOp>(loc, x, y);
  Value nonZero =
      b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, r, zero);
  Value yNeg = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, y, zero);
  Value rNeg = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, r, zero);
  Value signs = b.create<arith::XOrIOp>(loc, yNeg, rNeg);
  Value fix = b.create<arith::AndIOp>(loc, nonZero, signs);
  return b.create<arith::SelectOp>(loc, fix, b.create<arith::AddFOp>(loc, r, y),
                                   r);
}

// The count of boundaries b with !(x < b): std::upper_bound's index over
// sorted boundaries, NaN past all of them, as the CPU kernel. Floats compare
// in their precision, integers as f64; unrolled, branch-free.
Value bucketize(OpBuilder &b, Location loc, Value x, ArrayRef<double> bounds) {
  Type t = x.getType();
  if (!isFloat(t)) {
    t = b.getF64Type();
    x = b.create<arith::SIToFPOp>(loc, t, x);
  }
  Type i32 = b.getI32Type();
  Value count = b.create<arith::ConstantOp>(loc, b.getIntegerAttr(i32, 0));
  for (double bound : bounds) {
    Value past = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UGE, x,
                                         scalarConstant(b, loc, t, bound));
    count = b.create<arith::AddIOp>(loc, count,
                                    b.create<arith::ExtUIOp>(loc, i32, past));
  }
  return count;
}

} // namespace

Value mlir::dtf::emitScalarOp(OpBuilder &b, Operation *op,
                              ValueRange operands) {
  Location loc = op->getLoc();
  Type t = elementTypeOf(op->getResult(0));
  const bool fp = isFloat(t);
  auto binary = [&](auto floatTag, auto intTag) -> Value {
    using F = decltype(floatTag);
    using I = decltype(intTag);
    if (fp)
      return b.create<F>(loc, operands[0], operands[1]);
    return b.create<I>(loc, operands[0], operands[1]);
  };
  auto one = [&] { return scalarConstant(b, loc, t, 1); };
  auto zero = [&] { return scalarConstant(b, loc, t, 0); };
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](AddOp) { return binary(arith::AddFOp(), arith::AddIOp()); })
      .Case([&](SubOp) { return binary(arith::SubFOp(), arith::SubIOp()); })
      .Case([&](MulOp) { return binary(arith::MulFOp(), arith::MulIOp()); })
      .Case([&](DivOp) -> Value {
        if (!fp)
          return nullptr;
        return b.create<arith::DivFOp>(loc, operands[0], operands[1]);
      })
      .Case([&](MaximumOp) {
        return extremum(b, loc, operands[0], operands[1], true);
      })
      .Case([&](MinimumOp) {
        return extremum(b, loc, operands[0], operands[1], false);
      })
      .Case([&](CompareOp c) {
        return compare(b, loc, c.getPredicate(), operands[0], operands[1]);
      })
      .Case([&](SelectOp) -> Value {
        return b.create<arith::SelectOp>(loc, operands[0], operands[1],
                                         operands[2]);
      })
      .Case([&](NegOp) -> Value {
        if (fp)
          return b.create<arith::NegFOp>(loc, operands[0]);
        return b.create<arith::SubIOp>(loc, zero(), operands[0]);
      })
      .Case([&](ReluOp) -> Value {
        Value neg =
            fp ? Value(b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT,
                                               operands[0], zero()))
               : Value(b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt,
                                               operands[0], zero()));
        return b.create<arith::SelectOp>(loc, neg, zero(), operands[0]);
      })
      .Case([&](ExpOp) -> Value {
        return b.create<math::ExpOp>(loc, operands[0]);
      })
      .Case([&](LogOp) -> Value {
        return b.create<math::LogOp>(loc, operands[0]);
      })
      .Case([&](SqrtOp) -> Value {
        return b.create<math::SqrtOp>(loc, operands[0]);
      })
      .Case([&](RsqrtOp) -> Value {
        // 1 / sqrt(x), as the CPU kernel: not an approximate rsqrt.
        return b.create<arith::DivFOp>(
            loc, one(), b.create<math::SqrtOp>(loc, operands[0]));
      })
      .Case([&](SigmoidOp) -> Value {
        Value e = b.create<math::ExpOp>(
            loc, b.create<arith::NegFOp>(loc, operands[0]));
        return b.create<arith::DivFOp>(loc, one(),
                                       b.create<arith::AddFOp>(loc, one(), e));
      })
      .Case([&](TanhOp) -> Value {
        return b.create<math::TanhOp>(loc, operands[0]);
      })
      .Case([&](CastOp) { return castScalar(b, loc, operands[0], t); })
      .Case([&](ErfOp) -> Value {
        // erf(+-0) = +-0 as libm's: float32's polynomial gives +0 for -0.
        Value isZero = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ,
                                               operands[0], zero());
        return b.create<arith::SelectOp>(
            loc, isZero, operands[0], b.create<math::ErfOp>(loc, operands[0]));
      })
      .Case([&](FloorOp) -> Value {
        return b.create<math::FloorOp>(loc, operands[0]);
      })
      .Case([&](CeilOp) -> Value {
        return b.create<math::CeilOp>(loc, operands[0]);
      })
      .Case([&](RoundOp) -> Value {
        // Halves to even, as the CPU kernel's nearbyint. llvm.intr.roundeven:
        // the NVVM lowering has no pattern for math.roundeven.
        return b.create<LLVM::RoundEvenOp>(loc, operands[0]);
      })
      .Case([&](AbsOp) -> Value {
        if (fp)
          return b.create<math::AbsFOp>(loc, operands[0]);
        // Wraps at the smallest integer, as the CPU kernel.
        Value neg = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt,
                                            operands[0], zero());
        return b.create<arith::SelectOp>(
            loc, neg, b.create<arith::SubIOp>(loc, zero(), operands[0]),
            operands[0]);
      })
      .Case([&](FloorModOp) -> Value {
        if (!fp)
          return nullptr;
        return floorMod(b, loc, operands[0], operands[1]);
      })
      .Case([&](BucketizeOp o) -> Value {
        return bucketize(b, loc, operands[0], o.getBoundaries());
      })
      .Case([&](ReluGradOp) -> Value {
        // dy where x > 0, else 0.
        Value pos =
            fp ? Value(b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT,
                                               operands[1], zero()))
               : Value(b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt,
                                               operands[1], zero()));
        return b.create<arith::SelectOp>(loc, pos, operands[0], zero());
      })
      .Case([&](SigmoidGradOp) -> Value {
        // dy * y * (1 - y), left to right.
        Value dyy = b.create<arith::MulFOp>(loc, operands[0], operands[1]);
        return b.create<arith::MulFOp>(
            loc, dyy, b.create<arith::SubFOp>(loc, one(), operands[1]));
      })
      .Case([&](TanhGradOp) -> Value {
        // dy * (1 - y * y), with 1 - y * y one fused multiply-add: what GCC
        // makes of the op-by-op kernel's loop for x86-64-v3 (it contracts
        // a * b + c by default), so the two agree bit for bit.
        Value negY = b.create<arith::NegFOp>(loc, operands[1]);
        // llvm.intr.fma: the CPU and the NVVM lowerings both take it.
        Value oneMinusYY =
            b.create<LLVM::FMAOp>(loc, negY, operands[1], one());
        return b.create<arith::MulFOp>(loc, operands[0], oneMinusYY);
      })
      .Default([&](Operation *) -> Value {
        op->emitError() << "has no generated-kernel lowering";
        return nullptr;
      });
}

int64_t mlir::dtf::largestSuffix(FusedOp fused) {
  SmallVector<int64_t> shape = fusedIterationShape(fused);
  int64_t largest = 0;
  for (Value input : fused.getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    if (fusedIndexOf(type, shape) == FusedIndex::Suffix)
      largest = std::max(largest, type.getNumElements());
  }
  return largest;
}

namespace {

bool isReduction(Operation *op) {
  return isa<SumOp, MeanOp, SumToShapeOp, MaxOp>(op);
}

} // namespace

LogicalResult mlir::dtf::emitElementsAt(OpBuilder &lb, FusedOp fused,
                                        ArrayRef<Value> pointers, Value i,
                                        Value total, Value rowStart,
                                        int64_t rowSize, IRMapping &scalars,
                                        bool readUnusedInputs) {
  Location loc = fused.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(lb.getContext());
  SmallVector<int64_t> shape = fusedIterationShape(fused);
  Block &body = fused.getBody().front();
  for (auto [k, input] : llvm::enumerate(fused.getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    BlockArgument arg = body.getArgument(k);
    // sum_to_shape's `like` and reduce_grad's `x` give only a shape.
    const bool read = llvm::any_of(arg.getUses(), [](OpOperand &use) {
      return !isa<SumToShapeOp, ReduceGradOp>(use.getOwner()) ||
             use.getOperandNumber() == 0;
    });
    if (!read) {
      if (readUnusedInputs) {
        Type stored = storageType(type.getElementType());
        Value zero = lb.create<arith::ConstantOp>(loc, lb.getI64IntegerAttr(0));
        Value addr = lb.create<LLVM::GEPOp>(loc, ptr, stored, pointers[k],
                                            ArrayRef<LLVM::GEPArg>{zero});
        lb.create<LLVM::LoadOp>(loc, stored, addr, /*alignment=*/0,
                                /*isVolatile=*/true);
      }
      continue;
    }
    std::optional<FusedIndex> index = fusedIndexOf(type, shape);
    if (!index)
      return fused.emitError() << "input " << k << " cannot be indexed";
    Value at = i;
    if (*index == FusedIndex::Scalar)
      at = lb.create<arith::ConstantOp>(loc, lb.getI64IntegerAttr(0));
    else if (*index == FusedIndex::Suffix && rowStart &&
             type.getNumElements() == rowSize)
      at = lb.create<arith::SubIOp>(loc, i, rowStart); // contiguous in a row
    else if (*index == FusedIndex::Suffix)
      at = lb.create<arith::RemSIOp>(
          loc, i,
          lb.create<arith::ConstantOp>(
              loc, lb.getI64IntegerAttr(type.getNumElements())));
    else if (*index == FusedIndex::Prefix)
      at = lb.create<arith::DivSIOp>(
          loc, i,
          lb.create<arith::ConstantOp>(
              loc, lb.getI64IntegerAttr(fusedPrefixDivisor(type, shape))));
    Type element = type.getElementType();
    Type stored = storageType(element);
    Value addr = lb.create<LLVM::GEPOp>(loc, ptr, stored, pointers[k],
                                        ArrayRef<LLVM::GEPArg>{at});
    Value v = lb.create<LLVM::LoadOp>(loc, stored, addr);
    if (stored != element)
      v = lb.create<arith::CmpIOp>(
          loc, arith::CmpIPredicate::ne, v,
          lb.create<arith::ConstantOp>(loc, lb.getIntegerAttr(stored, 0)));
    scalars.map(arg, v);
  }
  for (Operation &op : body) {
    if (isReduction(&op))
      continue;
    if (auto yield = dyn_cast<YieldOp>(op)) {
      for (auto [n, v] : llvm::enumerate(yield.getValues())) {
        if (v.getDefiningOp() && isReduction(v.getDefiningOp()))
          continue;
        Value s = scalars.lookup(v);
        Type stored = storageType(s.getType());
        if (stored != s.getType())
          s = lb.create<arith::ExtUIOp>(loc, stored, s);
        Value addr = lb.create<LLVM::GEPOp>(
            loc, ptr, stored, pointers[fused.getInputs().size() + n],
            ArrayRef<LLVM::GEPArg>{i});
        lb.create<LLVM::StoreOp>(loc, s, addr);
      }
      continue;
    }
    if (auto grad = dyn_cast<ReduceGradOp>(op)) {
      // dy broadcast back; for a mean times 1 / count, count = the
      // iteration space's elements per element of dy (as the op-by-op
      // kernel: the scale in T, then one multiplication).
      Value r = scalars.lookup(grad.getDy());
      if (grad.getMean()) {
        auto dy = cast<RankedTensorType>(grad.getDy().getType());
        Type t = r.getType();
        Value count = lb.create<arith::ConstantOp>(loc, lb.getI64IntegerAttr(1));
        if (dy.getShape() != ArrayRef<int64_t>(shape))
          count = lb.create<arith::DivSIOp>(
              loc, total,
              lb.create<arith::ConstantOp>(
                  loc, lb.getI64IntegerAttr(dy.getNumElements())));
        Value scale =
            lb.create<arith::DivFOp>(loc, scalarConstant(lb, loc, t, 1),
                                     lb.create<arith::SIToFPOp>(loc, t, count));
        r = lb.create<arith::MulFOp>(loc, r, scale);
      }
      scalars.map(op.getResult(0), r);
      continue;
    }
    SmallVector<Value> operands;
    for (Value operand : op.getOperands())
      operands.push_back(scalars.lookup(operand));
    Value r = emitScalarOp(lb, &op, operands);
    if (!r)
      return failure();
    scalars.map(op.getResult(0), r);
  }
  return success();
}

bool mlir::dtf::hasReductions(FusedOp fused) {
  return llvm::any_of(fused.getBody().front(),
                      [](Operation &op) { return isReduction(&op); });
}

bool mlir::dtf::hasColumnReductions(FusedOp fused) {
  return llvm::any_of(fusedResultSpecs(fused), [](const std::string &spec) {
    return isColumnSpec(spec);
  });
}

SmallVector<Operation *>
mlir::dtf::regionReductions(FusedOp fused, SmallVectorImpl<unsigned> *slot) {
  Block &body = fused.getBody().front();
  Operation *yield = body.getTerminator();
  SmallVector<Operation *> reductions;
  for (Operation &op : body)
    if (isReduction(&op))
      reductions.push_back(&op);
  if (slot) {
    // Output positions of reduced results, in output order.
    SmallVector<unsigned> positions;
    for (auto [pos, v] : llvm::enumerate(yield->getOperands()))
      if (v.getDefiningOp() && isReduction(v.getDefiningOp()))
        positions.push_back(unsigned(pos));
    slot->clear();
    for (Operation *r : reductions) {
      unsigned s = 0;
      for (auto [k, pos] : llvm::enumerate(positions))
        if (yield->getOperand(pos) == r->getResult(0))
          s = unsigned(k);
      slot->push_back(s);
    }
  }
  return reductions;
}

LogicalResult mlir::dtf::emitRegionAt(OpBuilder &lb, FusedOp fused,
                                      ArrayRef<Value> pointers, Value i,
                                      Value total, bool readUnusedInputs,
                                      Value rowStart, int64_t rowSize) {
  IRMapping scalars;
  return emitElementsAt(lb, fused, pointers, i, total, rowStart, rowSize,
                        scalars, readUnusedInputs);
}

func::FuncOp mlir::dtf::createCpuKernelEntry(OpBuilder &b, Location loc,
                                             StringRef name,
                                             unsigned numBuffers,
                                             SmallVectorImpl<Value> &pointers) {
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto i64 = b.getI64Type();
  auto func = b.create<func::FuncOp>(
      loc, name, b.getFunctionType({ptr, ptr, i64, i64}, {}));
  Block *entry = func.addEntryBlock();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  for (unsigned k = 0; k < numBuffers; ++k) {
    Value slot = fb.create<LLVM::GEPOp>(loc, ptr, ptr, entry->getArgument(0),
                                        ArrayRef<LLVM::GEPArg>{int32_t(k)});
    pointers.push_back(fb.create<LLVM::LoadOp>(loc, ptr, slot));
  }
  return func;
}

OpBuilder mlir::dtf::createGpuKernelLoop(OpBuilder &b, Location loc,
                                         StringRef name, unsigned numBuffers,
                                         unsigned numI64s,
                                         SmallVectorImpl<Value> &buffers,
                                         SmallVectorImpl<Value> &i64s,
                                         Value &i) {
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  SmallVector<Type> args(numBuffers, ptr);
  args.push_back(b.getIndexType());
  args.append(numI64s, b.getI64Type());
  auto func = b.create<func::FuncOp>(loc, name, b.getFunctionType(args, {}));
  Block *entry = func.addEntryBlock();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  buffers.append(entry->getArguments().begin(),
                 entry->getArguments().begin() + numBuffers);
  i64s.append(entry->getArguments().begin() + numBuffers + 1,
              entry->getArguments().end());
  Value zero = fb.create<arith::ConstantIndexOp>(loc, 0);
  Value one = fb.create<arith::ConstantIndexOp>(loc, 1);
  auto loop = fb.create<scf::ParallelOp>(
      loc, ValueRange{zero}, ValueRange{entry->getArgument(numBuffers)},
      ValueRange{one});
  fb.create<func::ReturnOp>(loc);
  OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
  i = lb.create<arith::IndexCastOp>(loc, lb.getI64Type(),
                                    loop.getInductionVars()[0]);
  return lb;
}

OpBuilder mlir::dtf::createCpuRangeLoop(OpBuilder &fb, Location loc,
                                        Block *entry, Value &i) {
  Value lo = fb.create<arith::IndexCastOp>(loc, fb.getIndexType(),
                                           entry->getArgument(2));
  Value hi = fb.create<arith::IndexCastOp>(loc, fb.getIndexType(),
                                           entry->getArgument(3));
  Value step = fb.create<arith::ConstantIndexOp>(loc, 1);
  auto loop = fb.create<scf::ParallelOp>(loc, ValueRange{lo}, ValueRange{hi},
                                         ValueRange{step});
  fb.create<func::ReturnOp>(loc);
  OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
  i = lb.create<arith::IndexCastOp>(loc, lb.getI64Type(),
                                    loop.getInductionVars()[0]);
  return lb;
}
