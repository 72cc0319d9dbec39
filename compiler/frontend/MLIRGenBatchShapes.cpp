// broadcast_to and tile, whose sizes may name the batch (B, or -1 as in
// reshape): how a variable is repeated over the batch, as a class token is.
#include "compiler/frontend/ModelGen.h"

#include "compiler/frontend/Diagnostics.h"
#include "dialects/Dtf/IR/DtfDialect.h"

namespace mlir::dtf::frontend {

std::optional<SmallVector<int64_t>>
ModelGen::batchListValue(const ast::Expr *expr, StringRef what,
                         SmallVectorImpl<ast::Loc> &itemLocs) {
  expr = resolve(expr);
  auto *list = dyn_cast<ast::ListExpr>(expr);
  if (!list) {
    error(expr->getLoc()) << what
                          << " must be a list of integers (B for the batch), "
                             "as in [B, 1, 64]";
    return std::nullopt;
  }
  SmallVector<int64_t> values;
  bool ok = true;
  for (const ast::ExprPtr &item : list->items) {
    const ast::Expr *e = resolve(item.get());
    itemLocs.push_back(e->getLoc());
    if (auto *name = dyn_cast<ast::NameExpr>(e); name && name->name == "B") {
      values.push_back(kDynamic);
      continue;
    }
    if (isa<ast::NameExpr>(e)) {
      error(e->getLoc()) << what
                         << " must hold integers, or B for the batch, got '"
                         << cast<ast::NameExpr>(e)->name << "'";
      ok = false;
      values.push_back(0);
      continue;
    }
    std::optional<int64_t> v = intValue(e, what);
    ok &= v.has_value();
    values.push_back(v.value_or(0));
  }
  if (!ok)
    return std::nullopt;
  return values;
}

Value ModelGen::batchSource(ast::Loc at, StringRef what) {
  // The first floating-point input with a batch (the features rather than
  // the labels, so a prediction needs no more inputs than before), else the
  // first input with one.
  Value first;
  for (InputOp input : graph.getBody().getOps<InputOp>()) {
    auto t = cast<RankedTensorType>(input.getType());
    if (t.getRank() == 0 || !t.isDynamicDim(0))
      continue;
    if (isa<FloatType>(t.getElementType()))
      return input;
    if (!first)
      first = input;
  }
  if (!first)
    error(at) << what
              << " repeats over the batch, but the model has no input with a "
                 "batch dimension (declare one, as in input x: f32[B, 784])";
  return first;
}

/// broadcast_to(x, shape): the batch (B or -1) only as the first size. Where
/// x has no batch there, the result takes it from an input at run time.
Value ModelGen::genBroadcastTo(const OpCall &op) {
  const ast::Expr *shapeExpr = op.args.get("shape");
  SmallVector<ast::Loc> locs;
  std::optional<SmallVector<int64_t>> shape =
      batchListValue(shapeExpr, "shape", locs);
  if (!shape)
    return nullptr;
  RankedTensorType xt = op.xt;
  SmallVector<int64_t> target(*shape);
  bool ok = true;
  for (auto [i, d] : llvm::enumerate(target)) {
    if (d == -1)
      d = kDynamic; // -1 as in reshape: the batch
    if (ShapedType::isDynamic(d)) {
      if (i != 0) {
        error(locs[i]) << "broadcast_to takes the batch (B or -1) only as the "
                          "first size, got it at position "
                       << i;
        ok = false;
      }
      continue;
    }
    if (d < 1 || d > kMaxDimSize) {
      error(locs[i]) << "broadcast_to sizes must be positive (or B for the "
                        "batch, first), got "
                     << d << " at position " << i;
      ok = false;
    }
  }
  if (!ok)
    return nullptr;
  const int64_t pad = int64_t(target.size()) - xt.getRank();
  Value batchOf;
  if (!target.empty() && ShapedType::isDynamic(target[0])) {
    const int64_t from = pad > 0 ? 1 : xt.getDimSize(0);
    if (pad >= 0 && ShapedType::isDynamic(from) && batchFactor(op.x) != 1) {
      auto diag = error(locs[0])
                  << "broadcast_to keeps the batch of " << formatType(xt)
                  << ", whose first dimension holds B * " << batchFactor(op.x)
                  << " rows (a reshape merged the batch with other axes)";
      noteOrigin(diag, op.args.get("x"), op.x);
      return nullptr;
    }
    if (pad >= 0 && !ShapedType::isDynamic(from) && from != 1) {
      auto diag = error(locs[0])
                  << "broadcast_to stretches only a size of 1 over the batch, "
                     "got "
                  << formatType(xt) << " to B at position 0";
      noteOrigin(diag, op.args.get("x"), op.x);
      return nullptr;
    }
    if (pad > 0 || !ShapedType::isDynamic(from))
      if (!(batchOf = batchSource(op.at, "broadcast_to")))
        return nullptr;
  }
  auto type = RankedTensorType::get(target, xt.getElementType());
  std::pair<const ast::Expr *, Value> operands[] = {{op.args.get("x"), op.x}};
  return buildChecked<BroadcastToOp>(
      op.at, operands,
      [&](EmitErrorFn emit) -> FailureOr<RankedTensorType> {
        if (failed(verifyBroadcastable(xt.getShape(), type.getShape(), emit)))
          return failure();
        return type;
      },
      op.x, batchOf);
}

/// tile(x, multiples): TensorFlow's tf.tile; B as the first multiple repeats
/// a first dimension of size 1 over the batch.
Value ModelGen::genTile(const OpCall &op) {
  SmallVector<ast::Loc> locs;
  std::optional<SmallVector<int64_t>> multiples =
      batchListValue(op.args.get("multiples"), "multiples", locs);
  if (!multiples)
    return nullptr;
  RankedTensorType xt = op.xt;
  std::pair<const ast::Expr *, Value> operands[] = {{op.args.get("x"), op.x}};
  bool ok = true, overBatch = false;
  for (auto [i, m] : llvm::enumerate(*multiples)) {
    if (ShapedType::isDynamic(m)) {
      if (i != 0) {
        error(locs[i]) << "tile repeats over the batch (B) only along the "
                          "first dimension, got B at position "
                       << i;
        ok = false;
      }
      overBatch = true;
      m = kBatchMultiple;
      continue;
    }
    if (m < 1 || m > kMaxDimSize) {
      error(locs[i]) << "tile multiples must be positive (or B, first, to "
                        "repeat over the batch), got "
                     << m << " at position " << i;
      ok = false;
    } else if (i == 0 && m != 1 && xt.getRank() > 0 && xt.isDynamicDim(0)) {
      auto diag = error(locs[i])
                  << "tile cannot repeat the batch dimension of "
                  << formatType(xt) << " (its first multiple must be 1, got "
                  << m << ")";
      noteOrigin(diag, op.args.get("x"), op.x);
      ok = false;
    }
  }
  if (!ok)
    return nullptr;
  Value batchOf;
  if (overBatch && xt.getRank() == int64_t(multiples->size()) &&
      xt.getDimSize(0) == 1 && !(batchOf = batchSource(op.at, "tile")))
    return nullptr;
  return buildChecked<TileOp>(
      op.at, operands,
      [&](EmitErrorFn emit) { return inferTile(xt, *multiples, emit); }, op.x,
      *multiples, batchOf);
}

} // namespace mlir::dtf::frontend
