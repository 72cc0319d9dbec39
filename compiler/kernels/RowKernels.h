// Kernels of row regions (dtf-fuse's dtf.fused ops that hold one softmax,
// log_softmax, cross-entropy, one of their gradients or argmax along the
// last axis): one iteration per row, an inner loop over its C elements, with
// the arithmetic of runtime/kernels/cpu/Loss.cpp and Reduce.cpp's argmax.
#pragma once

#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/IR/Builders.h"

namespace mlir::dtf {

/// The CPU entry point of a row region, with the C ABI of every generated
/// kernel: `buffers` holds the region's inputs, then its output;
/// `scalars[0]` the row count, `scalars[1]` C (the row's size); the call
/// computes rows [begin, end).
LogicalResult buildCpuRowFunc(FusedOp fused, Operation *row, OpBuilder &b,
                              StringRef name);

/// The GPU host function of a row region: `(ptr..., index rows, i64 C)`,
/// one scf.parallel over [0, rows), one thread per row, that reads the
/// buffers in the parameter order.
LogicalResult buildGpuRowFunc(FusedOp fused, Operation *row, OpBuilder &b,
                              StringRef name);

} // namespace mlir::dtf
