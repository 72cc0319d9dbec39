// The scalar semantics of each fusable dtf op, matching runtime/kernels/cpu.
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

namespace {

Value constantOf(OpBuilder &b, Location loc, Type t, double v) {
  if (auto f = dyn_cast<FloatType>(t))
    return b.create<arith::ConstantOp>(loc, b.getFloatAttr(f, v));
  return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(t, int64_t(v)));
}

bool isFloat(Type t) { return isa<FloatType>(t); }

// Float -> integer as the runtime's convert(): NaN gives 0, values at or past
// 2^(bits-1) the largest integer, below -2^(bits-1) the smallest.
Value floatToInt(OpBuilder &b, Location loc, Value v, IntegerType to) {
  Type from = v.getType();
  const unsigned bits = to.getWidth();
  const double lo = -std::ldexp(1.0, int(bits) - 1);
  Value loC = constantOf(b, loc, from, lo);
  Value hiC = constantOf(b, loc, from, -lo);
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
                                     constantOf(b, loc, from, 0));
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, v,
                                   constantOf(b, loc, from, 0));
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
  auto one = [&] { return constantOf(b, loc, t, 1); };
  auto zero = [&] { return constantOf(b, loc, t, 0); };
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

// Where a reduction's results start: 0 for sums and means, -inf for dtf.max
// (runtime/kernels/cpu/Reduce.cpp's identity()).
Value identityOf(OpBuilder &b, Location loc, Operation *r, Type t) {
  return constantOf(b, loc, t,
                    isa<MaxOp>(r) ? -std::numeric_limits<double>::infinity()
                                  : 0.0);
}

// How a reduction adds one value to its accumulator, as Reduce.cpp's
// combine(): a + v, or for dtf.max `(v > a || v != v) ? v : a` (NaN wins,
// and of two equal values, +0 and -0, the first stays).
Value combineOf(OpBuilder &b, Location loc, Operation *r, Value acc, Value v) {
  if (!isa<MaxOp>(r))
    return b.create<arith::AddFOp>(loc, acc, v);
  Value greater =
      b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, v, acc);
  Value nan = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, v, v);
  Value take = b.create<arith::OrIOp>(loc, greater, nan);
  return b.create<arith::SelectOp>(loc, take, v, acc);
}

/// Loads each input at `i` (or 0, or i mod its size), emits the region's
/// elementwise ops on scalars into `scalars` and stores each elementwise
/// result at `i`; reductions are left to the caller. With
/// `readUnusedInputs`, an input no scalar op reads (the `like` of a
/// sum_to_shape) is still read once, at element 0, with a volatile load: on
/// the GPU every buffer must stay a kernel parameter, in order.
LogicalResult emitElementsAt(OpBuilder &lb, FusedOp fused,
                             ArrayRef<Value> pointers, Value i, Value total,
                             Value rowStart, int64_t rowSize,
                             IRMapping &scalars, bool readUnusedInputs) {
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
        Value scale = lb.create<arith::DivFOp>(
            loc, constantOf(lb, loc, t, 1),
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

} // namespace

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

LogicalResult mlir::dtf::emitReducedRegionAt(OpBuilder &b, FusedOp fused,
                                             ArrayRef<Value> pointers, Value t,
                                             Value elements, Value reduced,
                                             Value inner, bool readUnusedInputs,
                                             bool interleave,
                                             const ReductionTree *tree) {
  Location loc = fused.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  Block &body = fused.getBody().front();
  SmallVector<Operation *> reductions;
  for (Operation &op : body)
    if (isReduction(&op))
      reductions.push_back(&op);
  const size_t nr = reductions.size();
  SmallVector<Type> types;
  for (Operation *r : reductions)
    types.push_back(elementTypeOf(r->getResult(0)));
  auto i64c = [&](OpBuilder &bb, int64_t v) -> Value {
    return bb.create<arith::ConstantOp>(loc, bb.getI64IntegerAttr(v));
  };
  auto idx = [&](OpBuilder &bb, Value v) -> Value {
    return bb.create<arith::IndexCastOp>(loc, bb.getIndexType(), v);
  };
  auto zeros = [&](OpBuilder &bb) { // each reduction's identity
    SmallVector<Value> z;
    for (auto [r, ty] : llvm::zip(reductions, types))
      z.push_back(identityOf(bb, loc, r, ty));
    return z;
  };
  Value total = b.create<arith::MulIOp>(loc, elements, reduced);
  // The values the reductions read at flat index `at` of the iteration
  // space (emitting the elementwise ops there, and storing their results).
  auto valuesAt = [&](OpBuilder &bb, Value at,
                      SmallVector<Value> &out) -> LogicalResult {
    IRMapping m;
    if (failed(emitElementsAt(bb, fused, pointers, at, total, {}, 0, m,
                              readUnusedInputs)))
      return failure();
    for (Operation *r : reductions)
      out.push_back(m.lookup(r->getOperand(0)));
    return success();
  };
  // Output element t is (o, n) of [O, N]; it sums x[o, 0..R, n] of the
  // iteration space viewed as [O, R, N]. (R * N first: the GPU kernel takes
  // its i64 parameters in their first use's order: elements, reduced, inner.)
  Value rn = b.create<arith::MulIOp>(loc, reduced, inner);
  Value o = b.create<arith::DivSIOp>(loc, t, inner);
  Value n = b.create<arith::RemSIOp>(loc, t, inner);
  Value base = b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, o, rn), n);
  Value one = i64c(b, 1);
  // For k in [from, R): the values at base + k * stride added to the sums
  // (acc[0, nr)), and kept as the last values (acc[nr, 2 nr)).
  LogicalResult status = success();
  auto sumLoop = [&](OpBuilder &bb, Value from, Value stride, ValueRange init,
                     Value upper = {}, Value step = {}) {
    return bb.create<scf::ForOp>(
        loc, idx(bb, from), idx(bb, upper ? upper : reduced),
        idx(bb, step ? step : one), init,
        [&](OpBuilder &fb, Location, Value k, ValueRange acc) {
          Value at = fb.create<arith::AddIOp>(
              loc, base,
              fb.create<arith::MulIOp>(
                  loc, fb.create<arith::IndexCastOp>(loc, fb.getI64Type(), k),
                  stride));
          SmallVector<Value> v;
          if (failed(valuesAt(fb, at, v)) || v.size() != nr) {
            status = failure();
            fb.create<scf::YieldOp>(loc, acc);
            return;
          }
          SmallVector<Value> next;
          for (size_t q = 0; q < nr; ++q)
            next.push_back(combineOf(fb, loc, reductions[q], acc[q], v[q]));
          next.append(v.begin(), v.end());
          fb.create<scf::YieldOp>(loc, next);
        });
  };
  Value contiguous = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                             inner, one);
  SmallVector<Type> resultTypes(types);
  resultTypes.append(types.begin(), types.end()); // the sum, the last value
  SmallVector<Value> sums; // the sums, then the last values
  if (!interleave) {
    // One element after the other for rows too: the region's body once.
    SmallVector<Value> init = zeros(b);
    SmallVector<Value> z = zeros(b);
    init.append(z.begin(), z.end());
    // In a tree: this thread's rows rowLane, rowLane + rowLanes, ... (none
    // past the last output element).
    auto loop = tree ? sumLoop(b, tree->rowLane, inner, init,
                               b.create<arith::SelectOp>(loc, tree->valid,
                                                         reduced, i64c(b, 0)),
                               i64c(b, tree->rowLanes))
                     : sumLoop(b, i64c(b, 0), inner, init);
    if (failed(status))
      return failure();
    sums.append(loop.getResults().begin(), loop.getResults().end());
  }
  std::optional<OpBuilder> treeEnd; // the tree's root: row lane 0
  if (tree) {
    // Each thread's sums into shared memory, then a tree over the row lanes:
    // at each level the lower half adds the upper half's slots, with a
    // barrier between levels (every thread of the block reaches each one).
    Value lane = idx(b, tree->rowLane);
    for (size_t q = 0; q < nr; ++q)
      b.create<memref::StoreOp>(loc, sums[q], tree->shared[q], tree->slot);
    b.create<gpu::BarrierOp>(loc);
    for (int64_t half = tree->rowLanes / 2; half >= 1; half /= 2) {
      Value lower =
          b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, lane,
                                  b.create<arith::ConstantIndexOp>(loc, half));
      auto level = b.create<scf::IfOp>(loc, lower, /*withElse=*/false);
      OpBuilder lb = level.getThenBodyBuilder();
      Value partner = lb.create<arith::AddIOp>(
          loc, tree->slot,
          lb.create<arith::ConstantIndexOp>(loc, half * tree->slotStride));
      for (size_t q = 0; q < nr; ++q) {
        Value mine =
            lb.create<memref::LoadOp>(loc, tree->shared[q], tree->slot);
        Value theirs = lb.create<memref::LoadOp>(loc, tree->shared[q], partner);
        lb.create<memref::StoreOp>(
            loc, combineOf(lb, loc, reductions[q], mine, theirs),
            tree->shared[q], tree->slot);
      }
      b.create<gpu::BarrierOp>(loc);
    }
    Value root = b.create<arith::AndIOp>(
        loc, tree->valid,
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, tree->rowLane,
                                i64c(b, 0)));
    auto store = b.create<scf::IfOp>(loc, root, /*withElse=*/false);
    treeEnd.emplace(store.getThenBodyBuilder());
    // The block's sums; row lane 0 read row 0 last when R == 1.
    for (size_t q = 0; q < nr; ++q)
      sums[q] =
          treeEnd->create<memref::LoadOp>(loc, tree->shared[q], tree->slot);
  }
  auto branch = interleave ? b.create<scf::IfOp>(loc, resultTypes, contiguous,
                                                 /*withElse=*/true)
                           : scf::IfOp();
  if (branch) {
  {
    // N == 1: the op-by-op kernel's reduceContig: 16 accumulators over the
    // blocks of 16, summed in order, then the rest one by one.
    OpBuilder tb = branch.getThenBodyBuilder();
    Value full = tb.create<arith::SubIOp>(
        loc, reduced, tb.create<arith::RemSIOp>(loc, reduced, i64c(tb, 16)));
    SmallVector<Value> init;
    for (int j = 0; j < 16; ++j) {
      SmallVector<Value> z = zeros(tb);
      init.append(z.begin(), z.end());
    }
    auto blocks = tb.create<scf::ForOp>(
        loc, idx(tb, i64c(tb, 0)), idx(tb, full), idx(tb, i64c(tb, 16)), init,
        [&](OpBuilder &fb, Location, Value c, ValueRange acc) {
          Value start = fb.create<arith::AddIOp>(
              loc, base,
              fb.create<arith::IndexCastOp>(loc, fb.getI64Type(), c));
          SmallVector<Value> next;
          for (int j = 0; j < 16; ++j) {
            SmallVector<Value> v;
            if (failed(valuesAt(
                    fb, fb.create<arith::AddIOp>(loc, start, i64c(fb, j)), v)))
              status = failure();
            for (size_t q = 0; q < nr; ++q)
              next.push_back(v.size() == nr ? combineOf(fb, loc, reductions[q],
                                                        acc[j * nr + q], v[q])
                                            : acc[j * nr + q]);
          }
          fb.create<scf::YieldOp>(loc, next);
        });
    SmallVector<Value> sums = zeros(tb);
    for (int j = 0; j < 16; ++j)
      for (size_t q = 0; q < nr; ++q)
        sums[q] = combineOf(tb, loc, reductions[q], sums[q],
                            blocks.getResult(j * nr + q));
    SmallVector<Value> tailInit(sums);
    SmallVector<Value> z = zeros(tb);
    tailInit.append(z.begin(), z.end());
    auto tail = sumLoop(tb, full, one, tailInit);
    tb.create<scf::YieldOp>(loc, tail.getResults());
  }
  {
    // N > 1: one after the other over the reduced elements, as the
    // op-by-op kernel adds rows.
    OpBuilder eb = branch.getElseBodyBuilder();
    SmallVector<Value> init = zeros(eb);
    SmallVector<Value> z = zeros(eb);
    init.append(z.begin(), z.end());
    auto loop = sumLoop(eb, i64c(eb, 0), inner, init);
    eb.create<scf::YieldOp>(loc, loop.getResults());
  }
  if (failed(status))
    return failure();
  sums.append(branch.getResults().begin(), branch.getResults().end());
  } // interleave
  // The op-by-op kernel adds the sum to a zeroed output, except where it
  // copies: one reduced element (R == 1) gives that element, and a whole
  // reduction to one element (O = N = 1) gives the sum itself; only a zero's
  // sign tells them apart.
  OpBuilder &sb = treeEnd ? *treeEnd : b;
  Value single =
      sb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, reduced, one);
  Value whole = sb.create<arith::AndIOp>(
      loc, contiguous,
      sb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, elements, one));
  Operation *yield = body.getTerminator();
  for (size_t q = 0; q < nr; ++q) {
    Value sum = sums[q];
    // A max is its accumulator: combine(-inf, m) is m, bit for bit, and so
    // is the copy of one element.
    Value r = sum;
    if (!isa<MaxOp>(reductions[q])) {
      r = sb.create<arith::SelectOp>(
          loc, whole, sum,
          sb.create<arith::AddFOp>(loc, constantOf(sb, loc, types[q], 0), sum));
      r = sb.create<arith::SelectOp>(loc, single, sums[nr + q], r);
    }
    if (isa<MeanOp>(reductions[q]))
      r = sb.create<arith::DivFOp>(
          loc, r, sb.create<arith::SIToFPOp>(loc, types[q], reduced));
    for (auto [pos, v] : llvm::enumerate(yield->getOperands()))
      if (v == reductions[q]->getResult(0)) {
        Value addr = sb.create<LLVM::GEPOp>(
            loc, ptr, types[q], pointers[fused.getInputs().size() + pos],
            ArrayRef<LLVM::GEPArg>{t});
        sb.create<LLVM::StoreOp>(loc, r, addr);
      }
  }
  return success();
}

namespace {

/// Where reduction `r`'s result (an output of `fused`) has element t.
Value reducedOutputAt(OpBuilder &b, Location loc, FusedOp fused,
                      ArrayRef<Value> pointers, Operation *r, Value t) {
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  Operation *yield = fused.getBody().front().getTerminator();
  for (auto [pos, v] : llvm::enumerate(yield->getOperands()))
    if (v == r->getResult(0))
      return b.create<LLVM::GEPOp>(loc, ptr, elementTypeOf(v),
                                   pointers[fused.getInputs().size() + pos],
                                   ArrayRef<LLVM::GEPArg>{t});
  return Value();
}

/// A loop over output elements [lo, hi) dividing each mean's sum by R.
void divideMeans(OpBuilder &b, Location loc, ArrayRef<Operation *> reductions,
                 Value lo, Value hi, Value reduced,
                 llvm::function_ref<Value(OpBuilder &, size_t, Value)> outAt) {
  if (llvm::none_of(reductions, [](Operation *r) { return isa<MeanOp>(r); }))
    return;
  auto idx = [&](Value v) -> Value {
    return b.create<arith::IndexCastOp>(loc, b.getIndexType(), v);
  };
  auto loop = b.create<scf::ParallelOp>(
      loc, ValueRange{idx(lo)}, ValueRange{idx(hi)},
      ValueRange{b.create<arith::ConstantIndexOp>(loc, 1)});
  OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
  Value t = lb.create<arith::IndexCastOp>(loc, lb.getI64Type(),
                                          loop.getInductionVars()[0]);
  for (size_t q = 0; q < reductions.size(); ++q) {
    if (!isa<MeanOp>(reductions[q]))
      continue;
    Type ty = elementTypeOf(reductions[q]->getResult(0));
    Value addr = outAt(lb, q, t);
    lb.create<LLVM::StoreOp>(
        loc,
        lb.create<arith::DivFOp>(loc, lb.create<LLVM::LoadOp>(loc, ty, addr),
                                 lb.create<arith::SIToFPOp>(loc, ty, reduced)),
        addr);
  }
}

} // namespace

LogicalResult mlir::dtf::emitColumnSums(OpBuilder &b, FusedOp fused,
                                        ArrayRef<Value> pointers, Value lo,
                                        Value hi, Value offset, Value rowStart,
                                        Value elements, Value reduced,
                                        Value inner, const ColumnChunk *chunk) {
  Location loc = fused.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  SmallVector<Operation *> reductions = regionReductions(fused, nullptr);
  Value total = b.create<arith::MulIOp>(loc, elements, reduced);
  Value one = b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(1));
  Value zero64 = b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(0));
  // N when the dims after the reduced run are static: a bias of N elements
  // (the kept channels) is then read at its place in the row, contiguously,
  // instead of at i mod N (a gather).
  int64_t rowSize = 0;
  {
    SmallVector<int64_t> shape = fusedIterationShape(fused);
    std::string spec;
    for (const std::string &r : fusedResultSpecs(fused))
      if (!r.empty())
        spec = r;
    const size_t last = spec.find_last_not_of('k');
    if (last != std::string::npos && spec.size() == shape.size()) {
      rowSize = 1;
      for (size_t d = last + 1; d < shape.size(); ++d)
        rowSize = ShapedType::isDynamic(shape[d]) ? 0 : rowSize * shape[d];
    }
  }
  Value single =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, reduced, one);
  auto idx = [&](OpBuilder &bb, Value v) -> Value {
    return bb.create<arith::IndexCastOp>(loc, bb.getIndexType(), v);
  };
  // Output q's element t (in a chunk: t's element of the chunk's partial
  // row).
  auto outAt = [&](OpBuilder &bb, size_t q, Value t) -> Value {
    if (chunk) {
      Value at = bb.create<arith::AddIOp>(loc, t, chunk->partialOffset);
      return bb.create<LLVM::GEPOp>(
          loc, ptr, elementTypeOf(reductions[q]->getResult(0)),
          chunk->partials[q], ArrayRef<LLVM::GEPArg>{at});
    }
    return reducedOutputAt(bb, loc, fused, pointers, reductions[q], t);
  };
  LogicalResult status = success();
  // One pass over [lo, hi) at reduced row r: `first` stores (R == 1 ? v :
  // 0 + v), the others add v to the output, as the op-by-op kernel's column
  // loop (out[j] = out[j] + row[j]) does.
  auto pass = [&](OpBuilder &ob, Value r, bool first) {
    auto loop = ob.create<scf::ParallelOp>(
        loc, ValueRange{idx(ob, lo)}, ValueRange{idx(ob, hi)},
        ValueRange{ob.create<arith::ConstantIndexOp>(loc, 1)});
    OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
    Value t = lb.create<arith::IndexCastOp>(loc, lb.getI64Type(),
                                            loop.getInductionVars()[0]);
    Value at = lb.create<arith::AddIOp>(
        loc, lb.create<arith::AddIOp>(loc, t, offset),
        lb.create<arith::MulIOp>(loc, r, inner));
    // The first element of at's row of N in the iteration space.
    Value atRow = lb.create<arith::SubIOp>(
        loc, at, lb.create<arith::SubIOp>(loc, t, rowStart));
    IRMapping m;
    if (failed(emitElementsAt(lb, fused, pointers, at, total,
                              rowSize > 0 ? atRow : Value(), rowSize, m,
                              /*readUnusedInputs=*/false))) {
      status = failure();
      return;
    }
    for (size_t q = 0; q < reductions.size(); ++q) {
      Value v = m.lookup(reductions[q]->getOperand(0));
      Value addr = outAt(lb, q, t);
      Type ty = v.getType();
      Value sum;
      if (first && chunk) // a partial row starts from the identity
        sum = combineOf(lb, loc, reductions[q],
                        identityOf(lb, loc, reductions[q], ty), v);
      else if (first && isa<MaxOp>(reductions[q]))
        sum = v; // combine(-inf, v) is v
      else if (first)
        sum = lb.create<arith::SelectOp>(
            loc, single, v,
            lb.create<arith::AddFOp>(loc, constantOf(lb, loc, ty, 0), v));
      else
        sum = combineOf(lb, loc, reductions[q],
                        lb.create<LLVM::LoadOp>(loc, ty, addr), v);
      lb.create<LLVM::StoreOp>(loc, sum, addr);
    }
  };
  if (chunk) {
    // Rows [rowBegin, rowEnd) of the chunk into its partial row (never empty;
    // no mean: the combining pass divides).
    pass(b, chunk->rowBegin, /*first=*/true);
    b.create<scf::ForOp>(
        loc, idx(b, b.create<arith::AddIOp>(loc, chunk->rowBegin, one)),
        idx(b, chunk->rowEnd), b.create<arith::ConstantIndexOp>(loc, 1),
        ValueRange{}, [&](OpBuilder &fb, Location, Value r, ValueRange) {
          pass(fb, fb.create<arith::IndexCastOp>(loc, fb.getI64Type(), r),
               /*first=*/false);
          fb.create<scf::YieldOp>(loc);
        });
    return status;
  }
  Value empty =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, reduced, zero64);
  auto branch = b.create<scf::IfOp>(loc, empty, /*withElse=*/true);
  {
    // R == 0: the sums are 0 (and a mean's 0 / 0 below).
    OpBuilder tb = branch.getThenBodyBuilder();
    auto loop = tb.create<scf::ParallelOp>(
        loc, ValueRange{idx(tb, lo)}, ValueRange{idx(tb, hi)},
        ValueRange{tb.create<arith::ConstantIndexOp>(loc, 1)});
    OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
    Value t = lb.create<arith::IndexCastOp>(loc, lb.getI64Type(),
                                            loop.getInductionVars()[0]);
    for (size_t q = 0; q < reductions.size(); ++q)
      lb.create<LLVM::StoreOp>(
          loc,
          identityOf(lb, loc, reductions[q],
                     elementTypeOf(reductions[q]->getResult(0))),
          outAt(lb, q, t));
  }
  {
    OpBuilder eb = branch.getElseBodyBuilder();
    pass(eb, zero64, /*first=*/true);
    eb.create<scf::ForOp>(
        loc, idx(eb, one), idx(eb, reduced),
        eb.create<arith::ConstantIndexOp>(loc, 1), ValueRange{},
        [&](OpBuilder &fb, Location, Value r, ValueRange) {
          pass(fb, fb.create<arith::IndexCastOp>(loc, fb.getI64Type(), r),
               /*first=*/false);
          fb.create<scf::YieldOp>(loc);
        });
  }
  if (failed(status))
    return failure();
  divideMeans(b, loc, reductions, lo, hi, reduced, outAt);
  return success();
}

LogicalResult mlir::dtf::emitColumnCombine(OpBuilder &b, FusedOp fused,
                                           ArrayRef<Value> pointers,
                                           ArrayRef<Value> partials, Value lo,
                                           Value hi, Value partialOffset,
                                           Value chunks, Value reduced,
                                           Value inner) {
  Location loc = fused.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  SmallVector<Operation *> reductions = regionReductions(fused, nullptr);
  auto idx = [&](OpBuilder &bb, Value v) -> Value {
    return bb.create<arith::IndexCastOp>(loc, bb.getIndexType(), v);
  };
  // One contiguous loop over [lo, hi): body(builder, t).
  auto overOutputs = [&](OpBuilder &ob,
                         llvm::function_ref<void(OpBuilder &, Value)> fn) {
    auto loop = ob.create<scf::ParallelOp>(
        loc, ValueRange{idx(ob, lo)}, ValueRange{idx(ob, hi)},
        ValueRange{ob.create<arith::ConstantIndexOp>(loc, 1)});
    OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
    fn(lb, lb.create<arith::IndexCastOp>(loc, lb.getI64Type(),
                                         loop.getInductionVars()[0]));
  };
  auto outAt = [&](OpBuilder &bb, size_t q, Value t) -> Value {
    return reducedOutputAt(bb, loc, fused, pointers, reductions[q], t);
  };
  // Partial c of output t: partials[q][t + partialOffset + c * N].
  auto partialAt = [&](OpBuilder &bb, size_t q, Value t, Value c) {
    Type ty = elementTypeOf(reductions[q]->getResult(0));
    Value at = bb.create<arith::AddIOp>(
        loc, bb.create<arith::AddIOp>(loc, t, partialOffset),
        bb.create<arith::MulIOp>(loc, c, inner));
    return bb.create<LLVM::LoadOp>(
        loc, ty,
        bb.create<LLVM::GEPOp>(loc, ptr, ty, partials[q],
                               ArrayRef<LLVM::GEPArg>{at}));
  };
  // The identity combined with partial 0, then partials 1, 2, ... in order
  // (a loop over contiguous outputs per chunk, which LLVM vectorizes).
  Value zero = b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(0));
  overOutputs(b, [&](OpBuilder &lb, Value t) {
    for (size_t q = 0; q < reductions.size(); ++q) {
      Type ty = elementTypeOf(reductions[q]->getResult(0));
      lb.create<LLVM::StoreOp>(loc,
                               combineOf(lb, loc, reductions[q],
                                         identityOf(lb, loc, reductions[q], ty),
                                         partialAt(lb, q, t, zero)),
                               outAt(lb, q, t));
    }
  });
  b.create<scf::ForOp>(
      loc, b.create<arith::ConstantIndexOp>(loc, 1), idx(b, chunks),
      b.create<arith::ConstantIndexOp>(loc, 1), ValueRange{},
      [&](OpBuilder &fb, Location, Value ci, ValueRange) {
        Value c = fb.create<arith::IndexCastOp>(loc, fb.getI64Type(), ci);
        overOutputs(fb, [&](OpBuilder &lb, Value t) {
          for (size_t q = 0; q < reductions.size(); ++q) {
            Type ty = elementTypeOf(reductions[q]->getResult(0));
            Value addr = outAt(lb, q, t);
            lb.create<LLVM::StoreOp>(
                loc,
                combineOf(lb, loc, reductions[q],
                          lb.create<LLVM::LoadOp>(loc, ty, addr),
                          partialAt(lb, q, t, c)),
                addr);
          }
        });
        fb.create<scf::YieldOp>(loc);
      });
  divideMeans(b, loc, reductions, lo, hi, reduced, outAt);
  return success();
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
