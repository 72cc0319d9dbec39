// The scalar semantics of each fusable dtf op, matching runtime/kernels/cpu.
#include "compiler/kernels/ScalarOps.h"

#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/Transforms/Fusion.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

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

LogicalResult mlir::dtf::emitRegionAt(OpBuilder &lb, FusedOp fused,
                                      ArrayRef<Value> pointers, Value i) {
  Location loc = fused.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(lb.getContext());
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(fused.getResult(0).getType()).getShape();
  IRMapping scalars;
  Block &body = fused.getBody().front();
  for (auto [k, input] : llvm::enumerate(fused.getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    std::optional<FusedIndex> index = fusedIndexOf(type, shape);
    if (!index)
      return fused.emitError() << "input " << k << " cannot be indexed";
    Value at = i;
    if (*index == FusedIndex::Scalar)
      at = lb.create<arith::ConstantOp>(loc, lb.getI64IntegerAttr(0));
    else if (*index == FusedIndex::Suffix)
      at = lb.create<arith::RemSIOp>(
          loc, i,
          lb.create<arith::ConstantOp>(
              loc, lb.getI64IntegerAttr(type.getNumElements())));
    Type element = type.getElementType();
    Type stored = storageType(element);
    Value addr = lb.create<LLVM::GEPOp>(loc, ptr, stored, pointers[k],
                                        ArrayRef<LLVM::GEPArg>{at});
    Value v = lb.create<LLVM::LoadOp>(loc, stored, addr);
    if (stored != element)
      v = lb.create<arith::CmpIOp>(
          loc, arith::CmpIPredicate::ne, v,
          lb.create<arith::ConstantOp>(loc, lb.getIntegerAttr(stored, 0)));
    scalars.map(body.getArgument(k), v);
  }
  for (Operation &op : body) {
    if (auto yield = dyn_cast<YieldOp>(op)) {
      for (auto [n, v] : llvm::enumerate(yield.getValues())) {
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
