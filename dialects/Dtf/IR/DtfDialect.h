// The dtf dialect: its ops, attributes and enums, for every user of the dialect.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Dtf/IR/DtfOpsDialect.h.inc"
#include "dialects/Dtf/IR/DtfOpsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dtf/IR/DtfOpsAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/Dtf/IR/DtfOps.h.inc"

namespace mlir::dtf {

/// A number held by a float or integer attribute (a bool or an integer wider
/// than 64 bits is none); nullopt for anything else, null included.
std::optional<double> numberOf(Attribute attr);

/// The type of the dtf.variable or dtf.variable_shard `name` names, seen
/// from `from`; null when it names neither.
RankedTensorType variableTypeOf(Operation *from, StringAttr name);

/// The (indices, rows) pairs of a sparse update of `var` (dtf.sparse_apply_*):
/// integer ids, and rows of lr's dtype shaped as the ids followed by the
/// variable's row shape.
LogicalResult verifySparseSlices(Operation *op, FlatSymbolRefAttr var, Value lr,
                                 OperandRange slices);

} // namespace mlir::dtf
