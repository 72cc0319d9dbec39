// Generated row kernels: softmax, log_softmax, the softmax cross-entropies,
// their gradients and argmax, one row of the last axis per iteration, as
// runtime/kernels/cpu/Loss.cpp (and Reduce.cpp's argmax) compute a row:
// the maximum first, then the sum of exp(x - max), then the outputs, each
// pass in the op-by-op kernel's order.
//
// Loss.cpp is compiled by GCC for x86-64-v3, which contracts a product that
// feeds an addition into one fused multiply-add where the loop is
// elementwise (dy - exp(y) * sum, d - dloss * label): spelled here as
// llvm.intr.fma (as UpdateKernels.cpp does). In a sum over the row
// (sum(dy * y), sum(label * (lse - x))) GCC vectorizes the products and adds
// them in order, uncontracted, except in the loop's scalar remainder, where
// it contracts: the code below does the same element by element
// (firstScalar). exp and log are libm's on the CPU (RowEmitter::exp), as in
// Loss.cpp, so rows take the same operations in the same order as the
// op-by-op kernels, f32 and f64 alike; on the GPU they are libdevice's.
//
// A sparse label outside [0, C) makes the row's loss (or every element of
// its gradient row) NaN here, never a read outside the row, and is reported
// in the kernel's "row-index-error" word (row + 1, label), claimed with an
// atomic compare-and-swap so that one bad row's report is whole: dtf-run's
// GPU path reads that word at the step's end and fails the step; its CPU
// path checks the labels before the call as the op-by-op kernel does
// (GeneratedKernels.cpp; docs/kernels.md).
#include "compiler/kernels/RowKernels.h"
#include "compiler/kernels/ScalarOps.h"

#include "dialects/Dtf/Transforms/Fusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::dtf;

namespace {

class RowEmitter {
public:
  RowEmitter(FusedOp fused, Operation *op, ArrayRef<Value> buffers, bool libm)
      : fused(fused), op(op), loc(op->getLoc()), buffers(buffers), libm(libm) {
    t = cast<RankedTensorType>(rowOpRowsOperand(op).getType()).getElementType();
    // The "row-index-error" word follows the output (rowBufferCount).
    if (buffers.size() > fused.getInputs().size() + 1)
      errorWord = buffers.back();
  }

  /// Emits row `r` (i64) of C (i64) elements at `b`.
  LogicalResult emitRow(OpBuilder &b, Value r, Value c) {
    ptrTy = LLVM::LLVMPointerType::get(b.getContext());
    i64 = b.getI64Type();
    rowStart = b.create<arith::MulIOp>(loc, r, c);
    row = r;
    classes = c;
    // Each buffer's row, in the parameter order (inputs, then the output):
    // on the GPU a kernel's parameters come in the order of first use.
    const unsigned n = fused.getInputs().size();
    for (unsigned k = 0; k <= n; ++k) {
      Value v = k < n ? Value(fused.getBody().front().getArgument(k))
                      : Value(op->getResult(0));
      const bool full =
          cast<RankedTensorType>(v.getType()).getRank() ==
          cast<RankedTensorType>(rowOpRowsOperand(op).getType()).getRank();
      Type e = storageType(elementTypeOf(v));
      rows.push_back(
          b.create<LLVM::GEPOp>(loc, ptrTy, e, buffers[k],
                                ArrayRef<LLVM::GEPArg>{full ? rowStart : row}));
    }
    return emitOp(b);
  }

private:
  /// The row pointer of operand `v` of the op (a region argument) or of
  /// its result.
  Value rowOf(Value v) const {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return rows[arg.getArgNumber()];
    return rows.back();
  }
  Value out() const { return rows.back(); }

  Value load(OpBuilder &b, Type e, Value base, Value j) const {
    Value addr =
        b.create<LLVM::GEPOp>(loc, ptrTy, e, base, ArrayRef<LLVM::GEPArg>{j});
    return b.create<LLVM::LoadOp>(loc, e, addr);
  }
  void store(OpBuilder &b, Value v, Value base, Value j) const {
    Value addr = b.create<LLVM::GEPOp>(loc, ptrTy, v.getType(), base,
                                       ArrayRef<LLVM::GEPArg>{j});
    b.create<LLVM::StoreOp>(loc, v, addr);
  }
  Value cst(OpBuilder &b, double v) const {
    return b.create<arith::ConstantOp>(loc, b.getFloatAttr(t, v));
  }
  Value i64c(OpBuilder &b, int64_t v) const {
    return b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(v));
  }

  using Body =
      std::function<SmallVector<Value>(OpBuilder &, Value, ValueRange)>;
  /// for j in [from, C): carries `inits`; returns the final values.
  SmallVector<Value> loop(OpBuilder &b, Value from, ValueRange inits,
                          const Body &body) const {
    auto idx = b.getIndexType();
    auto f = b.create<scf::ForOp>(
        loc, b.create<arith::IndexCastOp>(loc, idx, from),
        b.create<arith::IndexCastOp>(loc, idx, classes),
        b.create<arith::ConstantIndexOp>(loc, 1), inits,
        [&](OpBuilder &lb, Location, Value iv, ValueRange iters) {
          Value j = lb.create<arith::IndexCastOp>(loc, i64, iv);
          lb.create<scf::YieldOp>(loc, body(lb, j, iters));
        });
    return SmallVector<Value>(f.getResults());
  }
  SmallVector<Value> loop(OpBuilder &b, ValueRange inits,
                          const Body &body) const {
    return loop(b, i64c(b, 0), inits, body);
  }

  /// The row's maximum as Loss.cpp's std::max(m, x): m < x ? x : m, from
  /// -inf (a NaN never wins).
  Value maxOf(OpBuilder &b, Value x) const {
    Value init = cst(b, -std::numeric_limits<double>::infinity());
    return loop(b, init, [&](OpBuilder &lb, Value j, ValueRange it) {
      Value v = load(lb, t, x, j);
      Value lt =
          lb.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, it[0], v);
      return SmallVector<Value>{lb.create<arith::SelectOp>(loc, lt, v, it[0])};
    })[0];
  }
  /// sum(exp(x - m)) in order.
  Value sumExp(OpBuilder &b, Value x, Value m) const {
    return loop(b, cst(b, 0.0), [&](OpBuilder &lb, Value j, ValueRange it) {
      Value e = exp(lb, lb.create<arith::SubFOp>(loc, load(lb, t, x, j), m));
      return SmallVector<Value>{lb.create<arith::AddFOp>(loc, it[0], e)};
    })[0];
  }
  /// exp and log: on the CPU libm's expf/exp and logf/log, called as the
  /// op-by-op kernels call them (not the polynomials lowerKernelsToLLVM
  /// makes of math.exp: a row's passes are sums in order, which do not
  /// vectorize anyway, and the losses then equal the op-by-op kernels'); on
  /// the GPU math.exp and math.log (libdevice).
  Value exp(OpBuilder &b, Value x) const {
    if (!libm)
      return b.create<math::ExpOp>(loc, x);
    return callLibm(b, t.isF32() ? "expf" : "exp", x);
  }
  Value log(OpBuilder &b, Value x) const {
    if (!libm)
      return b.create<math::LogOp>(loc, x);
    return callLibm(b, t.isF32() ? "logf" : "log", x);
  }
  /// A call of libm's `name` (declared by declareLibm).
  Value callLibm(OpBuilder &b, StringRef name, Value x) const {
    return b.create<func::CallOp>(loc, name, TypeRange{t}, ValueRange{x})
        .getResult(0);
  }

  Value fma(OpBuilder &b, Value x, Value y, Value z) const {
    return b.create<LLVM::FMAOp>(loc, x, y, z);
  }

  /// The first element of a row that GCC's loop for `acc += x * y` (in
  /// Loss.cpp, -O3, x86-64-v3) handles as a scalar: it takes the row's
  /// first C - C mod V elements in 256-bit vectors (V = 8 floats, 4
  /// doubles), then V / 2 more in a 128-bit epilogue when that many are
  /// left, multiplying in the vector and adding each product in order; the
  /// rest it contracts into fused multiply-adds.
  Value firstScalar(OpBuilder &b) const {
    const int64_t v = t.isF32() ? 8 : 4;
    Value rest = b.create<arith::RemSIOp>(loc, classes, i64c(b, v));
    Value main = b.create<arith::SubIOp>(loc, classes, rest);
    Value epilogue = b.create<arith::SelectOp>(
        loc,
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, rest,
                                i64c(b, v / 2)),
        i64c(b, v / 2), i64c(b, 0));
    return b.create<arith::AddIOp>(loc, main, epilogue);
  }
  /// acc + x * y as GCC computes element `j` of such a sum.
  Value sumStep(OpBuilder &b, Value j, Value scalarFrom, Value x, Value y,
                Value acc) const {
    Value vectorized =
        b.create<arith::AddFOp>(loc, acc, b.create<arith::MulFOp>(loc, x, y));
    Value scalar = fma(b, x, y, acc);
    Value inVector =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, j, scalarFrom);
    return b.create<arith::SelectOp>(loc, inVector, vectorized, scalar);
  }

  /// A sparse label as i64 (`l`), whether it lies in [0, C), and the index
  /// to read (the label, or 0 when outside).
  void label(OpBuilder &b, Value labels, Value &valid, Value &at,
             Value &l) const {
    Type e = elementTypeOf(op->getOperand(op->getNumOperands() - 1));
    l = b.create<LLVM::LoadOp>(loc, e, labels);
    if (!e.isInteger(64))
      l = b.create<arith::ExtSIOp>(loc, i64, l);
    Value nonNeg =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, l, i64c(b, 0));
    Value below =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, l, classes);
    valid = b.create<arith::AndIOp>(loc, nonNeg, below);
    at = b.create<arith::SelectOp>(loc, valid, l, i64c(b, 0));
  }

  /// When the label `l` is not `valid`: claims the error word (0 -> row +
  /// 1, one atomic compare-and-swap: the first claim wins) and, having won,
  /// writes the label after it. No other thread writes a claimed word, so
  /// the pair read after the kernel is one real bad row's.
  void reportBadLabel(OpBuilder &b, Value valid, Value l) const {
    if (!errorWord)
      return;
    Value bad = b.create<arith::XOrIOp>(
        loc, valid, b.create<arith::ConstantIntOp>(loc, 1, 1));
    b.create<scf::IfOp>(loc, bad, [&](OpBuilder &ib, Location) {
      Value claim = ib.create<arith::AddIOp>(loc, row, i64c(ib, 1));
      auto cas = ib.create<LLVM::AtomicCmpXchgOp>(
          loc, errorWord, i64c(ib, 0), claim, LLVM::AtomicOrdering::monotonic,
          LLVM::AtomicOrdering::monotonic);
      Value won = ib.create<LLVM::ExtractValueOp>(loc, cas, 1);
      ib.create<scf::IfOp>(loc, won, [&](OpBuilder &wb, Location) {
        store(wb, l, errorWord, i64c(wb, 1));
        wb.create<scf::YieldOp>(loc);
      });
      ib.create<scf::YieldOp>(loc);
    });
  }

  LogicalResult emitOp(OpBuilder &b) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
      Value x = rowOf(op->getOperand(0)), y = out();
      Value m = maxOf(b, x);
      if (isa<LogSoftmaxOp>(op)) {
        Value lse = b.create<arith::AddFOp>(loc, m, log(b, sumExp(b, x, m)));
        loop(b, {}, [&](OpBuilder &lb, Value j, ValueRange) {
          store(lb, lb.create<arith::SubFOp>(loc, load(lb, t, x, j), lse), y,
                j);
          return SmallVector<Value>{};
        });
        return success();
      }
      Value sum =
          loop(b, cst(b, 0.0), [&](OpBuilder &lb, Value j, ValueRange it) {
            Value e =
                exp(lb, lb.create<arith::SubFOp>(loc, load(lb, t, x, j), m));
            store(lb, e, y, j);
            return SmallVector<Value>{lb.create<arith::AddFOp>(loc, it[0], e)};
          })[0];
      Value inv = b.create<arith::DivFOp>(loc, cst(b, 1.0), sum);
      loop(b, {}, [&](OpBuilder &lb, Value j, ValueRange) {
        store(lb, lb.create<arith::MulFOp>(loc, load(lb, t, y, j), inv), y, j);
        return SmallVector<Value>{};
      });
      return success();
    }
    if (isa<SoftmaxGradOp, LogSoftmaxGradOp>(op)) {
      const bool log = isa<LogSoftmaxGradOp>(op);
      Value g = rowOf(op->getOperand(0)), y = rowOf(op->getOperand(1)),
            dx = out();
      Value scalarFrom = firstScalar(b);
      Value acc =
          loop(b, cst(b, 0.0), [&](OpBuilder &lb, Value j, ValueRange it) {
            Value gj = load(lb, t, g, j);
            if (log)
              return SmallVector<Value>{
                  lb.create<arith::AddFOp>(loc, it[0], gj)};
            return SmallVector<Value>{
                sumStep(lb, j, scalarFrom, gj, load(lb, t, y, j), it[0])};
          })[0];
      loop(b, {}, [&](OpBuilder &lb, Value j, ValueRange) {
        Value gj = load(lb, t, g, j), yj = load(lb, t, y, j);
        Value v =
            log ? fma(lb, lb.create<arith::NegFOp>(loc, exp(lb, yj)), acc, gj)
                : lb.create<arith::MulFOp>(
                      loc, yj, lb.create<arith::SubFOp>(loc, gj, acc));
        store(lb, v, dx, j);
        return SmallVector<Value>{};
      });
      return success();
    }
    if (auto argmax = dyn_cast<ArgmaxOp>(op)) {
      Value x = rowOf(argmax.getX());
      SmallVector<Value> best =
          loop(b, i64c(b, 1), ValueRange{load(b, t, x, i64c(b, 0)), i64c(b, 0)},
               [&](OpBuilder &lb, Value j, ValueRange it) {
                 Value v = load(lb, t, x, j);
                 Value gt = lb.create<arith::CmpFOp>(
                     loc, arith::CmpFPredicate::OGT, v, it[0]);
                 return SmallVector<Value>{
                     lb.create<arith::SelectOp>(loc, gt, v, it[0]),
                     lb.create<arith::SelectOp>(loc, gt, j, it[1])};
               });
      Value at = best[1];
      Type e = elementTypeOf(op->getResult(0));
      if (!e.isInteger(64))
        at = b.create<arith::TruncIOp>(loc, e, at);
      b.create<LLVM::StoreOp>(loc, at, out());
      return success();
    }
    // The cross-entropies: logits, labels (or dloss, logits, labels).
    const bool grad =
        isa<SoftmaxCrossEntropyGradOp, SparseSoftmaxCrossEntropyGradOp>(op);
    const bool sparse =
        isa<SparseSoftmaxCrossEntropyOp, SparseSoftmaxCrossEntropyGradOp>(op);
    if (!grad && !isa<SoftmaxCrossEntropyOp, SparseSoftmaxCrossEntropyOp>(op))
      return op->emitError() << "has no generated row kernel";
    Value x = rowOf(op->getOperand(grad ? 1 : 0));
    Value labels = rowOf(op->getOperand(grad ? 2 : 1));
    Value m = maxOf(b, x);
    Value sum = sumExp(b, x, m);
    Value valid, at, l;
    if (sparse) {
      label(b, labels, valid, at, l);
      reportBadLabel(b, valid, l);
    }
    if (!grad) {
      Value lse = b.create<arith::AddFOp>(loc, m, log(b, sum));
      Value loss;
      if (sparse) {
        loss = b.create<arith::SubFOp>(loc, lse, load(b, t, x, at));
        loss = b.create<arith::SelectOp>(loc, valid, loss, cst(b, nan));
      } else {
        Value scalarFrom = firstScalar(b);
        loss = loop(b, cst(b, 0.0), [&](OpBuilder &lb, Value j, ValueRange it) {
          Value d = lb.create<arith::SubFOp>(loc, lse, load(lb, t, x, j));
          return SmallVector<Value>{
              sumStep(lb, j, scalarFrom, load(lb, t, labels, j), d, it[0])};
        })[0];
      }
      b.create<LLVM::StoreOp>(loc, loss, out());
      return success();
    }
    Value dl = b.create<LLVM::LoadOp>(loc, t, rowOf(op->getOperand(0)));
    Value scale = b.create<arith::DivFOp>(loc, dl, sum);
    Value negDl = b.create<arith::NegFOp>(loc, dl);
    loop(b, {}, [&](OpBuilder &lb, Value j, ValueRange) {
      Value e = lb.create<arith::MulFOp>(
          loc, exp(lb, lb.create<arith::SubFOp>(loc, load(lb, t, x, j), m)),
          scale);
      Value v;
      if (sparse) {
        Value hit =
            lb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, j, at);
        v = lb.create<arith::SelectOp>(loc, hit,
                                       lb.create<arith::SubFOp>(loc, e, dl), e);
        v = lb.create<arith::SelectOp>(loc, valid, v, cst(lb, nan));
      } else {
        v = fma(lb, negDl, load(lb, t, labels, j), e);
      }
      store(lb, v, out(), j);
      return SmallVector<Value>{};
    });
    return success();
  }

  FusedOp fused;
  Operation *op;
  Location loc;
  ArrayRef<Value> buffers;
  bool libm;
  Type t, i64;
  LLVM::LLVMPointerType ptrTy;
  SmallVector<Value> rows; // each buffer's row: inputs, then the output
  Value rowStart, row, classes;
  Value errorWord; // "row-index-error": i64 row + 1, then the label
};

/// The buffers of a row kernel: its inputs, the output, and a
/// "row-index-error" word when it reads sparse labels (PlanEmitter.cpp).
unsigned rowBufferCount(FusedOp fused, Operation *row) {
  return fused.getInputs().size() + 1 +
         (isa<SparseSoftmaxCrossEntropyOp, SparseSoftmaxCrossEntropyGradOp>(row)
              ? 1
              : 0);
}

} // namespace

namespace {

/// Declares libm's exp and log for `t` (expf, logf or exp, log) in the
/// module `b` inserts into, once.
void declareLibm(OpBuilder &b, Location loc, Type t) {
  Operation *parent = b.getInsertionBlock()->getParentOp();
  auto module = dyn_cast<ModuleOp>(parent);
  if (!module)
    module = parent->getParentOfType<ModuleOp>();
  OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
  for (StringRef name : t.isF32() ? SmallVector<StringRef>{"expf", "logf"}
                                  : SmallVector<StringRef>{"exp", "log"})
    if (!module.lookupSymbol<func::FuncOp>(name))
      mb.create<func::FuncOp>(loc, name, mb.getFunctionType({t}, {t}))
          .setPrivate();
}

} // namespace

LogicalResult mlir::dtf::buildCpuRowFunc(FusedOp fused, Operation *row,
                                         OpBuilder &b, StringRef name) {
  Location loc = fused.getLoc();
  declareLibm(
      b, loc,
      cast<RankedTensorType>(rowOpRowsOperand(row).getType()).getElementType());
  SmallVector<Value> buffers;
  func::FuncOp func =
      createCpuKernelEntry(b, loc, name, rowBufferCount(fused, row), buffers);
  Block *entry = &func.getBody().front();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  auto i64 = b.getI64Type();
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  // scalars: the row count, then C.
  Value slot = fb.create<LLVM::GEPOp>(loc, ptr, i64, entry->getArgument(1),
                                      ArrayRef<LLVM::GEPArg>{int32_t(1)});
  Value c = fb.create<LLVM::LoadOp>(loc, i64, slot);
  Value r;
  OpBuilder lb = createCpuRangeLoop(fb, loc, entry, r);
  RowEmitter emitter(fused, row, buffers, /*libm=*/true);
  return emitter.emitRow(lb, r, c);
}

LogicalResult mlir::dtf::buildGpuRowFunc(FusedOp fused, Operation *row,
                                         OpBuilder &b, StringRef name) {
  SmallVector<Value> buffers, i64s;
  Value r;
  OpBuilder lb = createGpuKernelLoop(
      b, fused.getLoc(), name, rowBufferCount(fused, row), 1, buffers, i64s, r);
  RowEmitter emitter(fused, row, buffers, /*libm=*/false);
  return emitter.emitRow(lb, r, i64s[0]);
}
