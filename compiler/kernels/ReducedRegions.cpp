// The loops of generated kernels that reduce: output element t of a region
// with reductions (rows summed in the op-by-op kernels' order, or a tree
// over a GPU block), and the CPU's column sums and their chunked combine.
#include "compiler/kernels/ScalarOps.h"

#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/Transforms/Fusion.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>
#include <optional>

using namespace mlir;
using namespace mlir::dtf;

namespace {

// Where a reduction's results start: 0 for sums and means, -inf for dtf.max
// (runtime/kernels/cpu/Reduce.cpp's identity()).
Value identityOf(OpBuilder &b, Location loc, Operation *r, Type t) {
  return scalarConstant(b, loc, t,
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

// A fence over the GPU's memory (PTX fence.acq_rel.gpu, CUDA's
// __threadfence): LLVM 19's NVPTX selects no acq_rel `fence`, so inline PTX,
// with a memory clobber so that no load or store moves across it.
void gpuFence(OpBuilder &b, Location loc) {
  b.create<LLVM::InlineAsmOp>(
      loc, Type(), ValueRange{}, b.getStringAttr("fence.acq_rel.gpu;"),
      b.getStringAttr("~{memory}"), b.getUnitAttr(), UnitAttr(),
      LLVM::AsmDialectAttr(), ArrayAttr());
}

/// Output element t of a region with reductions (emitReducedRegionAt): the
/// region's reductions, t's place in the iteration space viewed as
/// [O, R, N], and the loops that sum its rows.
class ReducedRegion {
public:
  ReducedRegion(FusedOp fused, ArrayRef<Value> pointers, Value t,
                Value elements, Value reduced, Value inner,
                bool readUnusedInputs)
      : fused(fused), loc(fused.getLoc()), pointers(pointers), t(t),
        elements(elements), reduced(reduced), inner(inner),
        readUnusedInputs(readUnusedInputs),
        reductions(regionReductions(fused, nullptr)), nr(reductions.size()) {
    for (Operation *r : reductions)
      types.push_back(elementTypeOf(r->getResult(0)));
  }

  LogicalResult emit(OpBuilder &b, bool interleave, const ReductionTree *tree);

private:
  Value i64c(OpBuilder &bb, int64_t v) {
    return bb.create<arith::ConstantOp>(loc, bb.getI64IntegerAttr(v));
  }
  Value idx(OpBuilder &bb, Value v) {
    return bb.create<arith::IndexCastOp>(loc, bb.getIndexType(), v);
  }
  SmallVector<Value> zeros(OpBuilder &bb) { // each reduction's identity
    SmallVector<Value> z;
    for (auto [r, ty] : llvm::zip(reductions, types))
      z.push_back(identityOf(bb, loc, r, ty));
    return z;
  }
  LogicalResult valuesAt(OpBuilder &bb, Value at, SmallVector<Value> &out);
  scf::ForOp sumLoop(OpBuilder &bb, Value from, Value stride, ValueRange init,
                     Value upper = {}, Value step = {});
  OpBuilder combineTree(OpBuilder &b, const ReductionTree &tree,
                        SmallVectorImpl<Value> &sums);
  scf::IfOp sumInterleaved(OpBuilder &b, Value contiguous);
  void storeResults(OpBuilder &sb, Value contiguous, ArrayRef<Value> sums);
  Value partialAt(OpBuilder &bb, const ReductionTree &tree, size_t q,
                  Value chunk);
  void combineChunks(OpBuilder &b, OpBuilder &treeEnd,
                     const ReductionTree &tree, Value contiguous,
                     ArrayRef<Value> sums);

  FusedOp fused;
  Location loc;
  ArrayRef<Value> pointers;
  Value t, elements, reduced, inner;
  bool readUnusedInputs;
  SmallVector<Operation *> reductions;
  size_t nr;
  SmallVector<Type> types;
  Value total; // elements * reduced: the iteration space
  Value base;  // the flat index of x[o, 0, n]
  Value one;
  LogicalResult status = success();
};

// The values the reductions read at flat index `at` of the iteration
// space (emitting the elementwise ops there, and storing their results).
LogicalResult ReducedRegion::valuesAt(OpBuilder &bb, Value at,
                                      SmallVector<Value> &out) {
  IRMapping m;
  if (failed(emitElementsAt(bb, fused, pointers, at, total, {}, 0, m,
                            readUnusedInputs)))
    return failure();
  for (Operation *r : reductions)
    out.push_back(m.lookup(r->getOperand(0)));
  return success();
}

// For k in [from, R): the values at base + k * stride added to the sums
// (acc[0, nr)), and kept as the last values (acc[nr, 2 nr)).
scf::ForOp ReducedRegion::sumLoop(OpBuilder &bb, Value from, Value stride,
                                  ValueRange init, Value upper, Value step) {
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
}

// Each thread's sums into shared memory, then a tree over the row lanes:
// at each level the lower half adds the upper half's slots, with a
// barrier between levels (every thread of the block reaches each one).
// Returns a builder in the tree's root (row lane 0), where `sums` become
// the block's.
OpBuilder ReducedRegion::combineTree(OpBuilder &b, const ReductionTree &tree,
                                     SmallVectorImpl<Value> &sums) {
  Value lane = idx(b, tree.rowLane);
  for (size_t q = 0; q < nr; ++q)
    b.create<memref::StoreOp>(loc, sums[q], tree.shared[q], tree.slot);
  b.create<gpu::BarrierOp>(loc);
  for (int64_t half = tree.rowLanes / 2; half >= 1; half /= 2) {
    Value lower =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, lane,
                                b.create<arith::ConstantIndexOp>(loc, half));
    auto level = b.create<scf::IfOp>(loc, lower, /*withElse=*/false);
    OpBuilder lb = level.getThenBodyBuilder();
    Value partner = lb.create<arith::AddIOp>(
        loc, tree.slot,
        lb.create<arith::ConstantIndexOp>(loc, half * tree.slotStride));
    for (size_t q = 0; q < nr; ++q) {
      Value mine = lb.create<memref::LoadOp>(loc, tree.shared[q], tree.slot);
      Value theirs = lb.create<memref::LoadOp>(loc, tree.shared[q], partner);
      lb.create<memref::StoreOp>(
          loc, combineOf(lb, loc, reductions[q], mine, theirs), tree.shared[q],
          tree.slot);
    }
    b.create<gpu::BarrierOp>(loc);
  }
  Value root = b.create<arith::AndIOp>(
      loc, tree.valid,
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, tree.rowLane,
                              i64c(b, 0)));
  auto store = b.create<scf::IfOp>(loc, root, /*withElse=*/false);
  OpBuilder treeEnd = store.getThenBodyBuilder();
  // The block's sums; row lane 0 read row 0 last when R == 1.
  for (size_t q = 0; q < nr; ++q)
    sums[q] = treeEnd.create<memref::LoadOp>(loc, tree.shared[q], tree.slot);
  return treeEnd;
}

// The CPU's sums, as the op-by-op kernels add: an scf.if on N == 1 whose
// results are the sums, then the last values.
scf::IfOp ReducedRegion::sumInterleaved(OpBuilder &b, Value contiguous) {
  SmallVector<Type> resultTypes(types);
  resultTypes.append(types.begin(), types.end()); // the sum, the last value
  auto branch = b.create<scf::IfOp>(loc, resultTypes, contiguous,
                                    /*withElse=*/true);
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
  return branch;
}

// The op-by-op kernel adds the sum to a zeroed output, except where it
// copies: one reduced element (R == 1) gives that element, and a whole
// reduction to one element (O = N = 1) gives the sum itself; only a zero's
// sign tells them apart.
void ReducedRegion::storeResults(OpBuilder &sb, Value contiguous,
                                 ArrayRef<Value> sums) {
  auto ptr = LLVM::LLVMPointerType::get(sb.getContext());
  Value single =
      sb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, reduced, one);
  Value whole = sb.create<arith::AndIOp>(
      loc, contiguous,
      sb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, elements, one));
  Operation *yield = fused.getBody().front().getTerminator();
  for (size_t q = 0; q < nr; ++q) {
    Value sum = sums[q];
    // A max is its accumulator: combine(-inf, m) is m, bit for bit, and so
    // is the copy of one element.
    Value r = sum;
    if (!isa<MaxOp>(reductions[q])) {
      r = sb.create<arith::SelectOp>(
          loc, whole, sum,
          sb.create<arith::AddFOp>(loc, scalarConstant(sb, loc, types[q], 0),
                                   sum));
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
}

LogicalResult ReducedRegion::emit(OpBuilder &b, bool interleave,
                                  const ReductionTree *tree) {
  total = b.create<arith::MulIOp>(loc, elements, reduced);
  // Output element t is (o, n) of [O, N]; it sums x[o, 0..R, n] of the
  // iteration space viewed as [O, R, N]. (R * N first: the GPU kernel takes
  // its i64 parameters in their first use's order: elements, reduced, inner.)
  Value rn = b.create<arith::MulIOp>(loc, reduced, inner);
  Value o = b.create<arith::DivSIOp>(loc, t, inner);
  Value n = b.create<arith::RemSIOp>(loc, t, inner);
  base = b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, o, rn), n);
  one = i64c(b, 1);
  Value contiguous =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, inner, one);
  SmallVector<Value> sums; // the sums, then the last values
  if (!interleave) {
    // One element after the other for rows too: the region's body once.
    SmallVector<Value> init = zeros(b);
    SmallVector<Value> z = zeros(b);
    init.append(z.begin(), z.end());
    // In a tree: this thread's rows rowLane, rowLane + rowLanes, ... (none
    // past the last output element).
    // Split over chunks of rows: this block's rows [rowBegin, rowEnd), of
    // ceil(R / chunks) rows each.
    Value rowBegin, rowEnd = reduced;
    if (tree && tree->split) {
      Value per = b.create<arith::DivSIOp>(
          loc,
          b.create<arith::SubIOp>(
              loc, b.create<arith::AddIOp>(loc, reduced, tree->chunks), one),
          tree->chunks);
      rowBegin = b.create<arith::MulIOp>(loc, tree->chunk, per);
      rowEnd = b.create<arith::MinSIOp>(
          loc, reduced, b.create<arith::AddIOp>(loc, rowBegin, per));
    }
    auto loop =
        tree ? sumLoop(b,
                       rowBegin ? b.create<arith::AddIOp>(loc, rowBegin,
                                                          tree->rowLane)
                                : tree->rowLane,
                       inner, init,
                       b.create<arith::SelectOp>(loc, tree->valid, rowEnd,
                                                 i64c(b, 0)),
                       i64c(b, tree->rowLanes))
             : sumLoop(b, i64c(b, 0), inner, init);
    if (failed(status))
      return failure();
    sums.append(loop.getResults().begin(), loop.getResults().end());
  }
  std::optional<OpBuilder> treeEnd; // the tree's root: row lane 0
  if (tree)
    treeEnd.emplace(combineTree(b, *tree, sums));
  if (interleave) {
    scf::IfOp branch = sumInterleaved(b, contiguous);
    if (failed(status))
      return failure();
    sums.append(branch.getResults().begin(), branch.getResults().end());
  }
  if (tree && tree->split)
    combineChunks(b, *treeEnd, *tree, contiguous, sums);
  else
    storeResults(treeEnd ? *treeEnd : b, contiguous, sums);
  return success();
}

// Reduction q's partial sum of output element t over chunk `chunk`, in the
// workspace: after the column groups' counters (8 bytes each), one array of
// chunks x elements 8-byte slots per reduction (an f32 uses half of each).
Value ReducedRegion::partialAt(OpBuilder &bb, const ReductionTree &tree,
                               size_t q, Value chunk) {
  auto ptr = LLVM::LLVMPointerType::get(bb.getContext());
  Value slots = bb.create<arith::MulIOp>(loc, tree.chunks, elements);
  Value bytes = bb.create<arith::AddIOp>(
      loc, bb.create<arith::MulIOp>(loc, tree.groups, i64c(bb, 8)),
      bb.create<arith::MulIOp>(loc, slots, i64c(bb, int64_t(8 * q))));
  Value array = bb.create<LLVM::GEPOp>(loc, ptr, bb.getI8Type(),
                                       tree.workspace,
                                       ArrayRef<LLVM::GEPArg>{bytes});
  Value at = bb.create<arith::AddIOp>(
      loc, bb.create<arith::MulIOp>(loc, chunk, elements), t);
  return bb.create<LLVM::GEPOp>(loc, ptr, types[q], array,
                                ArrayRef<LLVM::GEPArg>{at});
}

// The second phase of a split tree. One chunk: the tree's root stores the
// results. Several: the root stores the chunk's partial sums; after a fence
// and a barrier thread (0, 0) counts the block in its column group's
// counter, and the block that counts last (chunks - 1 before it) sums the
// group's partials in a fixed order (thread (x, y): chunks y, y + rowLanes,
// ..., then the same tree), so the result does not depend on which block
// finishes last; it stores the results and sets the counter back to 0 for
// the next launch (dtf-run zeroes a new workspace once).
void ReducedRegion::combineChunks(OpBuilder &b, OpBuilder &treeEnd,
                                  const ReductionTree &tree, Value contiguous,
                                  ArrayRef<Value> sums) {
  Value several = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt,
                                          tree.chunks, one);
  {
    // (The results before the partials: the outputs stay parameters before
    // the workspace, which outlining orders by first use.)
    Value alone = treeEnd.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                                tree.chunks, one);
    auto root = treeEnd.create<scf::IfOp>(loc, alone, /*withElse=*/true);
    OpBuilder tb = root.getThenBodyBuilder();
    storeResults(tb, contiguous, sums);
    OpBuilder eb = root.getElseBodyBuilder();
    for (size_t q = 0; q < nr; ++q)
      eb.create<LLVM::StoreOp>(loc, sums[q], partialAt(eb, tree, q, tree.chunk));
  }
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto i32 = b.getI32Type();
  auto split = b.create<scf::IfOp>(loc, several, /*withElse=*/false);
  OpBuilder sb = split.getThenBodyBuilder();
  gpuFence(sb, loc); // the partials before the count (__threadfence)
  sb.create<gpu::BarrierOp>(loc);
  Value zero = sb.create<arith::ConstantIndexOp>(loc, 0);
  auto counterOf = [&](OpBuilder &cb) -> Value {
    return cb.create<LLVM::GEPOp>(loc, ptr, i32, tree.workspace,
                                  ArrayRef<LLVM::GEPArg>{tree.group});
  };
  {
    auto first = sb.create<scf::IfOp>(loc, tree.firstThread, false);
    OpBuilder fb = first.getThenBodyBuilder();
    Value before = fb.create<LLVM::AtomicRMWOp>(
        loc, LLVM::AtomicBinOp::add, counterOf(fb),
        fb.create<arith::ConstantOp>(loc, fb.getI32IntegerAttr(1)),
        LLVM::AtomicOrdering::monotonic);
    Value last = fb.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::eq, before,
        fb.create<arith::TruncIOp>(
            loc, i32, fb.create<arith::SubIOp>(loc, tree.chunks, one)));
    fb.create<memref::StoreOp>(loc, fb.create<arith::ExtUIOp>(loc, i32, last),
                               tree.lastFlag, ValueRange{zero});
  }
  sb.create<gpu::BarrierOp>(loc);
  Value flag = sb.create<memref::LoadOp>(loc, tree.lastFlag, ValueRange{zero});
  auto lastBlock = sb.create<scf::IfOp>(
      loc,
      sb.create<arith::CmpIOp>(
          loc, arith::CmpIPredicate::ne, flag,
          sb.create<arith::ConstantOp>(loc, sb.getI32IntegerAttr(0))),
      false);
  OpBuilder lb = lastBlock.getThenBodyBuilder();
  gpuFence(lb, loc); // the count before the other blocks' partials
  SmallVector<Value> init = zeros(lb);
  auto loop = lb.create<scf::ForOp>(
      loc, idx(lb, tree.rowLane),
      idx(lb, lb.create<arith::SelectOp>(loc, tree.valid, tree.chunks,
                                         i64c(lb, 0))),
      idx(lb, i64c(lb, tree.rowLanes)), init,
      [&](OpBuilder &fb, Location, Value c, ValueRange acc) {
        Value chunk = fb.create<arith::IndexCastOp>(loc, fb.getI64Type(), c);
        SmallVector<Value> next;
        for (size_t q = 0; q < nr; ++q)
          next.push_back(combineOf(
              fb, loc, reductions[q], acc[q],
              fb.create<LLVM::LoadOp>(loc, types[q],
                                      partialAt(fb, tree, q, chunk))));
        fb.create<scf::YieldOp>(loc, next);
      });
  // The sums, then stand-ins for the last values (R > 1 here: unread).
  SmallVector<Value> chunkSums(loop.getResults().begin(),
                               loop.getResults().end());
  chunkSums.append(sums.begin() + nr, sums.end());
  OpBuilder end = combineTree(lb, tree, chunkSums);
  storeResults(end, contiguous, chunkSums);
  auto reset = lb.create<scf::IfOp>(loc, tree.firstThread, false);
  OpBuilder rb = reset.getThenBodyBuilder();
  rb.create<LLVM::StoreOp>(
      loc, rb.create<arith::ConstantOp>(loc, rb.getI32IntegerAttr(0)),
      counterOf(rb));
}

} // namespace

LogicalResult mlir::dtf::emitReducedRegionAt(OpBuilder &b, FusedOp fused,
                                             ArrayRef<Value> pointers, Value t,
                                             Value elements, Value reduced,
                                             Value inner, bool readUnusedInputs,
                                             bool interleave,
                                             const ReductionTree *tree) {
  ReducedRegion region(fused, pointers, t, elements, reduced, inner,
                       readUnusedInputs);
  return region.emit(b, interleave, tree);
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
    Value at =
        lb.create<arith::AddIOp>(loc, lb.create<arith::AddIOp>(loc, t, offset),
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
            lb.create<arith::AddFOp>(loc, scalarConstant(lb, loc, ty, 0), v));
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
