// One element of a dtf elementwise op in arith and math: the body of every
// generated loop, CPU and GPU alike.
#pragma once

#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Operation.h"

namespace mlir::dtf {

/// Creates, at `b`, `name(ptr buffers, ptr scalars, i64 begin, i64 end)`:
/// the C ABI of every generated CPU kernel, and loads the first
/// `numBuffers` pointers of `buffers` at the top of its body, once.
func::FuncOp createCpuKernelEntry(OpBuilder &b, Location loc, StringRef name,
                                  unsigned numBuffers,
                                  SmallVectorImpl<Value> &pointers);

/// Ends the entry block `entry` of a CPU kernel (createCpuKernelEntry) with
/// one scf.parallel over [begin, end) (its arguments 2 and 3) and a return:
/// sets `i` to the loop's index (i64) and returns a builder at the start of
/// the loop body.
OpBuilder createCpuRangeLoop(OpBuilder &fb, Location loc, Block *entry,
                             Value &i);

/// Creates, at `b`, the GPU host function `name(ptr x numBuffers, index
/// elements, i64 x numI64s)` of a kernel whose loop is one scf.parallel over
/// [0, elements): fills `buffers` and `i64s` with its arguments and `i` with
/// the loop's index (i64); returns a builder at the start of the loop body.
OpBuilder createGpuKernelLoop(OpBuilder &b, Location loc, StringRef name,
                              unsigned numBuffers, unsigned numI64s,
                              SmallVectorImpl<Value> &buffers,
                              SmallVectorImpl<Value> &i64s, Value &i);

/// Emits `op` (a fusable dtf elementwise op) on one element of each operand
/// (`operands`, scalars of the operands' element types) and returns the
/// result's element; null (with a diagnostic on `op`) when it cannot. The
/// arithmetic is the op-by-op CPU kernels', so results agree bit for bit
/// (f32 exp, log and tanh: MLIR's polynomial approximations on the CPU,
/// within a few ulps; lowerKernelsToLLVM).
Value emitScalarOp(OpBuilder &b, Operation *op, ValueRange operands);

/// Emits, at the builder's point (a loop body), one element `i` (i64) of
/// `fused`'s region: loads each input from its pointer at i, 0 or i mod its
/// size (Fusion.h), the region's ops on scalars, and stores each result at
/// i. `pointers` holds one !llvm.ptr per input, then one per output.
/// `total` (i64) is the iteration space's element count (a mean's
/// reduce_grad scales by it). With `readUnusedInputs`, an input that only
/// gives a shape (reduce_grad's x, sum_to_shape's like) is still read once,
/// at element 0, with a volatile load: on the GPU every buffer must stay a
/// kernel parameter, in order.
/// With `rowStart` (i64, the first element of i's row of `rowSize`
/// elements), a bias of `rowSize` elements is read at i - rowStart instead
/// of i mod rowSize: a contiguous load the vectorizer turns into vector
/// loads rather than gathers.
LogicalResult emitRegionAt(OpBuilder &lb, FusedOp fused,
                           ArrayRef<Value> pointers, Value i, Value total,
                           bool readUnusedInputs, Value rowStart = {},
                           int64_t rowSize = 0);

/// emitRegionAt's work, which also gives in `scalars` each region value's
/// element i (the reductions' operands among them) and leaves the
/// reductions to the caller (ReducedRegions.cpp): loads each input at i (or
/// 0, or i mod its size), emits the region's elementwise ops on scalars and
/// stores each elementwise result at i.
LogicalResult emitElementsAt(OpBuilder &lb, FusedOp fused,
                             ArrayRef<Value> pointers, Value i, Value total,
                             Value rowStart, int64_t rowSize,
                             IRMapping &scalars, bool readUnusedInputs);

/// A scalar constant of type `t` (float or integer) with value `v`.
Value scalarConstant(OpBuilder &b, Location loc, Type t, double v);

/// Whether `fused` holds reductions (dtf.sum, dtf.mean, dtf.sum_to_shape):
/// its kernel then loops over the reduced outputs' elements.
bool hasReductions(FusedOp fused);

/// Emits, at the builder's point (a loop body), output element `t` (i64) of
/// a region with reductions, whose iteration space is viewed as [O, R, N]
/// (R = `reduced`, N = `inner`, O * N = `elements`, all i64): sums the R
/// values each reduction reads for (o, n) = (t / N, t mod N) in the
/// op-by-op kernels' order (16 interleaved partial sums when N == 1, else
/// one after the other), stores the elementwise results met on the way and
/// each reduction's result at t (divided by R for a mean).
/// `readUnusedInputs`: as for emitRegionAt (the GPU sets it). Without
/// `interleave` (the GPU) rows are summed one element after the other too:
/// the region's body is emitted once instead of 18 times (the CPU's 16
/// unrolled partial sums, their tail and the column loop), and the sums of
/// rows differ from the CPU's by rounding.
///
/// With `tree` (the GPU; without `interleave`) the threads of a block share
/// each output element: this thread sums the rows rowLane, rowLane +
/// rowLanes, ... (none when !valid), stores its sums in its slot of the
/// workgroup arrays `shared` (one per reduction, in the region's order),
/// and a tree over the row lanes, log2(rowLanes) levels with a gpu.barrier
/// after each, combines them: at level h the lanes below h combine the slot
/// h * slotStride above theirs. Row lane 0 then stores the results.
struct ReductionTree {
  Value rowLane;      // i64: this thread's first row and its lane in the tree
  int64_t rowLanes;   // threads per output element (a power of 2)
  Value valid;        // i1: t is one of the output elements
  Value slot;         // index: this thread's slot in `shared`
  int64_t slotStride; // slots between two neighbouring row lanes
  SmallVector<Value> shared;
  /// Columns over chunks of rows (the grid's y, docs/kernels.md "Column
  /// reductions over the whole GPU"): this block sums only the rows of its
  /// chunk (ceil(R / chunks) each) and, when chunks > 1, row lane 0 stores
  /// them into the workspace's partials; the block that finds itself the
  /// last of its column group (an atomic counter after a fence) sums the
  /// partials in chunk order with the same tree and stores the results.
  /// With chunks == 1 it is the tree above.
  bool split = false;
  Value chunk, chunks;   // i64: this block's chunk (block y) and grid y
  Value group, groups;   // i64: this block's column group (block x), grid x
  Value firstThread;     // i1: thread (0, 0) of the block
  Value workspace;       // llvm.ptr: groups i32 counters (8 bytes each),
                         // then per reduction chunks x elements partials
                         // (8 bytes each)
  Value lastFlag;        // memref<1xi32, workgroup>: "this block is last"
};
LogicalResult emitReducedRegionAt(OpBuilder &b, FusedOp fused,
                                  ArrayRef<Value> pointers, Value t,
                                  Value elements, Value reduced, Value inner,
                                  bool readUnusedInputs, bool interleave,
                                  const ReductionTree *tree = nullptr);

/// The CPU's loop for columns (N > 1) of a region with reductions: output
/// elements [lo, hi) of one row o of [O, N] (i64; `offset` = o * N * (R - 1),
/// so that element t's reduced row r is t + offset + r * N; `rowStart` =
/// o * N; a bias of N elements is read at t - rowStart). The rows of the
/// reduced run one after the other, each a loop over [lo, hi) adding to the
/// outputs in memory: the op-by-op kernel's order for each output element
/// (so bit for bit the same), and contiguous accesses the vectorizer takes,
/// where a loop per output element would stride through memory.
/// With `chunk`, only the reduced rows [rowBegin, rowEnd) (i64) are summed,
/// from the reductions' identity, into partial rows (`partials`: one pointer
/// per reduction, in the region's order; output element t's partial at t +
/// partialOffset), with no mean: the first phase of a column reduction cut
/// into chunks (runtime/kernels/ColumnChunks.h).
struct ColumnChunk {
  Value rowBegin, rowEnd;
  SmallVector<Value> partials;
  Value partialOffset;
};
LogicalResult emitColumnSums(OpBuilder &b, FusedOp fused,
                             ArrayRef<Value> pointers, Value lo, Value hi,
                             Value offset, Value rowStart, Value elements,
                             Value reduced, Value inner,
                             const ColumnChunk *chunk = nullptr);

/// The second phase: output elements [lo, hi) of one row of [O, N] (i64)
/// from the `chunks` partial rows emitColumnSums wrote: the identity
/// combined with partial 0, 1, ... in chunk order (partial c of element t at
/// t + partialOffset + c * N in `partials`, one pointer per reduction in the
/// region's order), a mean then divided by R (`reduced`).
LogicalResult emitColumnCombine(OpBuilder &b, FusedOp fused,
                                ArrayRef<Value> pointers,
                                ArrayRef<Value> partials, Value lo, Value hi,
                                Value partialOffset, Value chunks,
                                Value reduced, Value inner);

/// Whether `fused` has a reduction that keeps axes after its reduced run
/// (N > 1 possible: a column reduction); its CPU code then also has the
/// chunked column entry point (Kernel.cpu_columns_symbol).
bool hasColumnReductions(FusedOp fused);

/// The reductions of `fused` in the region's order, and for each the index
/// of its result among the region's reduced outputs in output order (the
/// order of the column entry point's partial buffers).
SmallVector<Operation *> regionReductions(FusedOp fused,
                                          SmallVectorImpl<unsigned> *slot);

/// The element count of the largest bias ("suffix" input) of `fused`; 0
/// when it has none.
int64_t largestSuffix(FusedOp fused);

/// The element type of a tensor value.
Type elementTypeOf(Value v);

/// Memory holds bools as one byte: i1 is stored as i8.
Type storageType(Type element);

} // namespace mlir::dtf
