// Kernels of optimizer-update regions (dtf-fuse's dtf.fused ops that hold
// one dense apply_*): the variable and its slots are read and written in
// place at each element, with the op-by-op kernel's arithmetic
// (runtime/kernels/cpu/Optimizers.cpp) bit for bit.
#pragma once

#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/IR/Builders.h"

namespace mlir::dtf {

/// The CPU entry point of an update region, with the C ABI of every
/// generated kernel: `buffers` holds the variable and slots (params
/// "inout"), then the region's inputs (gradient, learning rate, step);
/// `scalars[0]` the element count. The hyperparameters are read once,
/// before the loop over [begin, end).
LogicalResult buildCpuUpdateFunc(FusedOp fused, Operation *update, OpBuilder &b,
                                 StringRef name);

/// The GPU host function of an update region: `(ptr..., index elements)`,
/// one scf.parallel over [0, elements) that reads the buffers in the
/// parameter order (variable and slots first) and the hyperparameters in
/// each thread (so that every kernel parameter stays a buffer or an i64).
LogicalResult buildGpuUpdateFunc(FusedOp fused, Operation *update, OpBuilder &b,
                                 StringRef name);

} // namespace mlir::dtf
