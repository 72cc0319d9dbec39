// The verifiers of the ps/worker cut's ops (DtfDistOps.td): pushes, what a ps
// takes of them, and the shards of partitioned variables.
#include "dialects/Dtf/IR/DtfDialect.h"

using namespace mlir;
using namespace mlir::dtf;

RankedTensorType mlir::dtf::variableTypeOf(Operation *from, StringAttr name) {
  Operation *symbol = SymbolTable::lookupNearestSymbolFrom(from, name);
  if (auto var = dyn_cast_or_null<VariableOp>(symbol))
    return var.getTensorType();
  if (auto shard = dyn_cast_or_null<VariableShardOp>(symbol))
    return shard.getTensorType();
  return RankedTensorType();
}

// A push or pushed value: one value, or a sparse gradient's ids and rows.
static LogicalResult verifyTransfer(Operation *op, TypeRange types, bool sparse) {
  if (types.size() != (sparse ? 2u : 1u))
    return op->emitOpError() << "carries " << (sparse ? "ids and rows" : "one value")
                             << ", not " << types.size() << " values";
  if (sparse && !isa<IntegerType>(cast<RankedTensorType>(types[0]).getElementType()))
    return op->emitOpError() << "takes integer ids first, not " << types[0];
  return success();
}

LogicalResult PushOp::verify() {
  return verifyTransfer(*this, getValues().getTypes(), getSparse());
}

LogicalResult PushedOp::verify() {
  if (failed(verifyTransfer(*this, getValues().getTypes(), getSparse())))
    return failure();
  IntegerAttr offset = getRowOffsetAttr(), rows = getRowsAttr();
  if (offset && !rows)
    return emitOpError() << "has a row_offset but no rows; a shard's rows "
                            "are [row_offset, row_offset + rows)";
  if (offset && offset.getInt() < 0)
    return emitOpError() << "needs a row_offset of at least 0, got "
                         << offset.getInt();
  if (!rows)
    return success();
  if (rows.getInt() < 1)
    return emitOpError() << "needs rows of at least 1, got " << rows.getInt();
  // A dense shard of a value holds its rows; a sparse one's ids say which.
  auto type = cast<RankedTensorType>(getValues()[0].getType());
  if (!getSparse() &&
      (type.getRank() < 1 || type.getDimSize(0) != rows.getInt()))
    return emitOpError() << "takes " << rows.getInt()
                         << " rows of the pushed value, but its type is "
                         << type;
  return success();
}

LogicalResult
VariableShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto whole = symbolTable.lookupNearestSymbolFrom<VariableOp>(*this, getOfAttr());
  if (!whole)
    return emitOpError() << "is a shard of " << getOfAttr()
                         << ", which is not a dtf.variable in scope";
  RankedTensorType of = whole.getTensorType(), type = getTensorType();
  if (of.getRank() < 1 || type.getRank() != of.getRank() ||
      type.getElementType() != of.getElementType() ||
      type.getShape().drop_front() != of.getShape().drop_front() ||
      !type.hasStaticShape())
    return emitOpError() << "has type " << type << ", which is not rows of "
                         << getOfAttr() << "'s " << of;
  const int64_t offset = getRowOffsetAttr().getInt();
  if (offset < 0 || type.getDimSize(0) < 1 ||
      offset + type.getDimSize(0) > of.getDimSize(0))
    return emitOpError() << "holds rows [" << offset << ", "
                         << offset + type.getDimSize(0) << ") of "
                         << getOfAttr() << ", which has " << of.getDimSize(0);
  return success();
}
