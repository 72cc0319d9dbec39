// One element of a dtf elementwise op in arith and math: the body of every
// generated loop, CPU and GPU alike.
#pragma once

#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace mlir::dtf {

/// Emits `op` (a fusable dtf elementwise op) on one element of each operand
/// (`operands`, scalars of the operands' element types) and returns the
/// result's element; null (with a diagnostic on `op`) when it cannot. The
/// arithmetic is the op-by-op CPU kernels', so results agree bit for bit
/// (exp, log and tanh: the same libm calls on the CPU).
Value emitScalarOp(OpBuilder &b, Operation *op, ValueRange operands);

/// Emits, at the builder's point (a loop body), one element `i` (i64) of
/// `fused`'s region: loads each input from its pointer at i, 0 or i mod its
/// size (Fusion.h), the region's ops on scalars, and stores each result at
/// i. `pointers` holds one !llvm.ptr per input, then one per output.
LogicalResult emitRegionAt(OpBuilder &lb, FusedOp fused,
                           ArrayRef<Value> pointers, Value i);

/// The element type of a tensor value.
Type elementTypeOf(Value v);

/// Memory holds bools as one byte: i1 is stored as i8.
Type storageType(Type element);

} // namespace mlir::dtf
