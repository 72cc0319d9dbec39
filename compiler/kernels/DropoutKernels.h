// Kernels of dropout regions (dtf-fuse's dtf.fused ops that hold one
// dtf.dropout or dtf.dropout_grad): element i's mask drawn exactly as
// runtime/kernels/cpu/Random.cpp draws it, from the stream key and the
// first element that dtf-run writes into the kernel's "dropout-key" word
// before each run.
#pragma once

#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/IR/Builders.h"

namespace mlir::dtf {

/// The CPU entry point of a dropout region, with the C ABI of every
/// generated kernel: `buffers` holds x (or dy), the output and the
/// dropout-key word (two i64: the stream key, the first element);
/// `scalars[0]` the element count; the call computes elements [begin, end).
LogicalResult buildCpuDropoutFunc(FusedOp fused, Operation *dropout,
                                  OpBuilder &b, StringRef name);

/// The GPU host function of a dropout region: `(ptr x, ptr out, ptr key,
/// index elements)`, one scf.parallel over [0, elements) that first uses
/// the buffers in that order (the parameter order).
LogicalResult buildGpuDropoutFunc(FusedOp fused, Operation *dropout,
                                  OpBuilder &b, StringRef name);

} // namespace mlir::dtf
