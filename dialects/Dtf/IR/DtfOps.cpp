// Verifiers and result-type inference of the dtf ops.
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>

using namespace mlir;
using namespace mlir::dtf;

#define GET_OP_CLASSES
#include "dialects/Dtf/IR/DtfOps.cpp.inc"

namespace {

/// The ranked tensor type of `value`, or a diagnostic when it has none (the
/// parser asks for inference before the operand constraints are verified).
FailureOr<RankedTensorType> rankedType(Value value, StringRef opName,
                                       EmitErrorFn emitError) {
  if (auto type = dyn_cast<RankedTensorType>(value.getType()))
    return type;
  emitError() << opName << " expects ranked tensor operands, got "
              << value.getType();
  return failure();
}

LogicalResult pushResult(FailureOr<RankedTensorType> type,
                         SmallVectorImpl<Type> &results) {
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

/// inferReturnTypes of the broadcasting binary ops; `resultElement` replaces
/// the result dtype (i1 for comparisons).
LogicalResult inferBinary(StringRef opName, std::optional<Location> loc,
                          Value lhs, Value rhs,
                          SmallVectorImpl<Type> &results,
                          Type resultElement = {}) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> l = rankedType(lhs, opName, emitError);
  FailureOr<RankedTensorType> r = rankedType(rhs, opName, emitError);
  if (failed(l) || failed(r))
    return failure();
  return pushResult(inferBroadcast(opName, *l, *r, emitError, resultElement),
                    results);
}

} // namespace

//===----------------------------------------------------------------------===//
// Variables, inputs, constants
//===----------------------------------------------------------------------===//

LogicalResult VariableOp::verify() {
  RankedTensorType type = getTensorType();
  if (!type.hasStaticShape())
    return emitOpError() << "@" << getSymName()
                         << " needs a static shape (a variable has no batch "
                            "dimension), got "
                         << type;
  InitializerAttr init = getInitializer();
  Type element = type.getElementType();
  if (init.isRandom() && !isa<FloatType>(element))
    return emitOpError() << "@" << getSymName() << ": initializer "
                         << stringifyInitKind(init.getKind())
                         << " draws floating-point numbers, but the variable "
                            "is "
                         << type << " (use zeros, ones or constant)";
  if (init.getKind() == InitKind::orthogonal && type.getRank() < 2)
    return emitOpError() << "@" << getSymName() << ": the orthogonal "
                         << "initializer needs a matrix, got " << type;
  if (init.getKind() == InitKind::constant && !isa<FloatType>(element)) {
    double value = init.getParam("value", 0.0);
    if (value != std::trunc(value) || (element.isInteger(1) && value != 0 && value != 1))
      return emitOpError() << "@" << getSymName() << ": constant " << value
                           << " does not fit the variable's dtype "
                           << element;
  }
  if (getTrainable() && !isa<FloatType>(element))
    return emitOpError() << "@" << getSymName()
                         << " cannot be trainable: only floating-point "
                            "variables have gradients, got "
                         << type;
  return success();
}

LogicalResult
ReadVariableOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto variable =
      symbolTable.lookupNearestSymbolFrom<VariableOp>(*this, getNameAttr());
  if (!variable)
    return emitOpError() << "reads " << getNameAttr()
                         << ", which is not a dtf.variable in scope";
  if (variable.getType() != getType())
    return emitOpError() << "reads " << getNameAttr() << " of type "
                         << variable.getType() << " as " << getType();
  return success();
}

LogicalResult InputOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty name";
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define DTF_INFER_BINARY(OP, NAME)                                             \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc,\
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &results) {         \
    return inferBinary(NAME, loc, adaptor.getLhs(), adaptor.getRhs(), results);\
  }
DTF_INFER_BINARY(AddOp, "add")
DTF_INFER_BINARY(SubOp, "sub")
DTF_INFER_BINARY(MulOp, "mul")
DTF_INFER_BINARY(DivOp, "div")
DTF_INFER_BINARY(MaximumOp, "maximum")
DTF_INFER_BINARY(MinimumOp, "minimum")
DTF_INFER_BINARY(PowOp, "pow")
DTF_INFER_BINARY(FloorModOp, "floor_mod")
#undef DTF_INFER_BINARY

LogicalResult CompareOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferBinary("compare", loc, adaptor.getLhs(), adaptor.getRhs(),
                     results, IntegerType::get(context, 1));
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> c =
      rankedType(adaptor.getCondition(), "select", emitError);
  FailureOr<RankedTensorType> t =
      rankedType(adaptor.getOnTrue(), "select", emitError);
  FailureOr<RankedTensorType> f =
      rankedType(adaptor.getOnFalse(), "select", emitError);
  if (failed(c) || failed(t) || failed(f))
    return failure();
  FailureOr<RankedTensorType> values =
      inferBroadcast("select", *t, *f, emitError);
  if (failed(values))
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(c->getShape(), values->getShape());
  if (failed(shape)) {
    emitError() << "select expects a condition that broadcasts with the "
                   "values, got "
                << *c << " and " << *values;
    return failure();
  }
  results.push_back(RankedTensorType::get(*shape, values->getElementType()));
  return success();
}

LogicalResult CastOp::verify() {
  auto from = cast<RankedTensorType>(getX().getType());
  auto to = cast<RankedTensorType>(getType());
  if (failed(verifyCompatibleShape(from.getShape(), to.getShape())))
    return emitOpError() << "keeps the shape and changes only the dtype, got "
                         << from << " to " << to;
  return success();
}

LogicalResult BucketizeOp::verify() {
  return verifyBucketize(cast<RankedTensorType>(getX().getType()),
                         cast<RankedTensorType>(getType()), getBoundaries(),
                         [&] { return emitOpError(); });
}

//===----------------------------------------------------------------------===//
// Fused regions
//===----------------------------------------------------------------------===//

LogicalResult FusedOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size()
                         << " inputs but its region takes "
                         << body.getNumArguments() << " arguments";
  for (auto [input, arg] : llvm::zip(getInputs(), body.getArguments()))
    if (input.getType() != arg.getType())
      return emitOpError() << "passes " << input.getType()
                           << " to a region argument of type "
                           << arg.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "needs a dtf.yield at the end of its region";
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values whose types differ from its results";
  // An optimizer update's region (dtf-fuse) writes its variable and slots
  // in place and has no results; the op is alone there.
  if (llvm::any_of(body, [](Operation &op) {
        return isa<ApplySgdOp, ApplyMomentumOp, ApplyAdamOp, ApplyAdagradOp,
                   ApplyRmspropOp>(op);
      })) {
    if (getNumResults() != 0 || body.getOperations().size() != 2)
      return emitOpError() << "holds an optimizer update, which stands alone "
                              "in its region and has no results";
    return success();
  }
  if (getNumResults() == 0)
    return emitOpError() << "needs at least one result";
  // Results in the iteration shape, and those of reductions (sum, mean,
  // sum_to_shape, max) over it; the reductions' operands have that shape.
  std::optional<ArrayRef<int64_t>> shape;
  for (Operation &op : body)
    if (isa<SumOp, MeanOp, SumToShapeOp, MaxOp>(op)) {
      auto s = cast<RankedTensorType>(op.getOperand(0).getType()).getShape();
      if (shape && *shape != s)
        return emitOpError() << "reduces operands of different shapes; all "
                                "have the iteration shape";
      shape = s;
    }
  for (Value v : yield.getValues()) {
    Operation *def = v.getDefiningOp();
    if (def && isa<SumOp, MeanOp, SumToShapeOp, MaxOp>(def))
      continue;
    auto s = cast<RankedTensorType>(v.getType()).getShape();
    if (!shape)
      shape = s;
    if (*shape != s)
      return emitOpError() << "has results of different shapes; all have the "
                              "iteration shape, or are reductions over it";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra, convolution, pooling
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> a = rankedType(adaptor.getA(), "matmul", emitError);
  FailureOr<RankedTensorType> b = rankedType(adaptor.getB(), "matmul", emitError);
  if (failed(a) || failed(b))
    return failure();
  return pushResult(inferMatmul(*a, *b, adaptor.getTransposeA(),
                                adaptor.getTransposeB(), emitError),
                    results);
}

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> input =
      rankedType(adaptor.getInput(), "conv2d", emitError);
  FailureOr<RankedTensorType> filter =
      rankedType(adaptor.getFilter(), "conv2d", emitError);
  if (failed(input) || failed(filter))
    return failure();
  return pushResult(inferConv2D(*input, *filter, adaptor.getStrides(),
                                adaptor.getDilations(), adaptor.getPadding(),
                                emitError),
                    results);
}

LogicalResult Conv2DBiasOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> input =
      rankedType(adaptor.getInput(), "conv2d_bias", emitError);
  FailureOr<RankedTensorType> filter =
      rankedType(adaptor.getFilter(), "conv2d_bias", emitError);
  FailureOr<RankedTensorType> bias =
      rankedType(adaptor.getBias(), "conv2d_bias", emitError);
  if (failed(input) || failed(filter) || failed(bias))
    return failure();
  if (bias->getRank() != 1 || filter->getRank() != 4 ||
      bias->getDimSize(0) != filter->getDimSize(3) ||
      bias->getElementType() != input->getElementType())
    return emitError() << "conv2d_bias expects a bias of one "
                       << input->getElementType()
                       << " per output channel (the filter's last dimension), "
                          "got "
                       << *bias << " for filter " << *filter;
  return pushResult(inferConv2D(*input, *filter, adaptor.getStrides(),
                                adaptor.getDilations(), adaptor.getPadding(),
                                emitError),
                    results);
}

template <typename PoolOp>
static LogicalResult inferPoolOp(StringRef name, std::optional<Location> loc,
                                 typename PoolOp::Adaptor adaptor,
                                 SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> input =
      rankedType(adaptor.getInput(), name, emitError);
  if (failed(input))
    return failure();
  return pushResult(inferPool(name, *input, adaptor.getWindow(),
                              adaptor.getStrides(), adaptor.getPadding(),
                              emitError),
                    results);
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferPoolOp<MaxPoolOp>("max_pool", loc, adaptor, results);
}

LogicalResult AvgPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferPoolOp<AvgPoolOp>("avg_pool", loc, adaptor, results);
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  return verifyReshape(cast<RankedTensorType>(getX().getType()),
                       cast<RankedTensorType>(getType()),
                       [&] { return emitError(); });
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> x = rankedType(adaptor.getX(), "transpose", emitError);
  if (failed(x))
    return failure();
  return pushResult(inferTranspose(*x, adaptor.getPermutation(), emitError),
                    results);
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  SmallVector<RankedTensorType> inputs;
  for (Value input : adaptor.getInputs()) {
    FailureOr<RankedTensorType> t = rankedType(input, "concat", emitError);
    if (failed(t))
      return failure();
    inputs.push_back(*t);
  }
  return pushResult(
      inferConcat(inputs, adaptor.getAxisAttr().getInt(), emitError), results);
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> x = rankedType(adaptor.getX(), "slice", emitError);
  if (failed(x))
    return failure();
  return pushResult(
      inferSlice(*x, adaptor.getBegin(), adaptor.getSize(), emitError),
      results);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename ReduceOp>
static LogicalResult inferReduceOp(StringRef name, std::optional<Location> loc,
                                   typename ReduceOp::Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> x = rankedType(adaptor.getX(), name, emitError);
  if (failed(x))
    return failure();
  return pushResult(inferReduce(name, *x, adaptor.getAxes(),
                                adaptor.getKeepDims(), emitError),
                    results);
}

#define DTF_INFER_REDUCE(OP, NAME)                                             \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &results) {         \
    return inferReduceOp<OP>(NAME, loc, adaptor, results);                     \
  }
DTF_INFER_REDUCE(SumOp, "sum")
DTF_INFER_REDUCE(MeanOp, "mean")
DTF_INFER_REDUCE(MaxOp, "max")
#undef DTF_INFER_REDUCE

LogicalResult ArgmaxOp::verify() {
  auto x = cast<RankedTensorType>(getX().getType());
  auto out = cast<RankedTensorType>(getType());
  int64_t axis = getAxisAttr().getInt();
  FailureOr<SmallVector<int64_t>> shape =
      inferArgmaxShape(x, axis, [&] { return emitError(); });
  if (failed(shape))
    return failure();
  if (out.getShape() != ArrayRef<int64_t>(*shape))
    return emitOpError() << "result must have the input's shape without axis "
                         << axis << ", expected "
                         << RankedTensorType::get(*shape, out.getElementType())
                         << ", got " << out;
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax and losses
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  return normalizeAxis("softmax", getAxisAttr().getInt(),
                       cast<RankedTensorType>(getType()).getRank(),
                       [&] { return emitError(); });
}

LogicalResult LogSoftmaxOp::verify() {
  return normalizeAxis("log_softmax", getAxisAttr().getInt(),
                       cast<RankedTensorType>(getType()).getRank(),
                       [&] { return emitError(); });
}

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> logits =
      rankedType(adaptor.getLogits(), "softmax_cross_entropy", emitError);
  FailureOr<RankedTensorType> labels =
      rankedType(adaptor.getLabels(), "softmax_cross_entropy", emitError);
  if (failed(logits) || failed(labels))
    return failure();
  return pushResult(inferSoftmaxCrossEntropy(*logits, *labels, emitError),
                    results);
}

LogicalResult SparseSoftmaxCrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> logits = rankedType(
      adaptor.getLogits(), "sparse_softmax_cross_entropy", emitError);
  FailureOr<RankedTensorType> labels = rankedType(
      adaptor.getLabels(), "sparse_softmax_cross_entropy", emitError);
  if (failed(logits) || failed(labels))
    return failure();
  return pushResult(inferSparseSoftmaxCrossEntropy(*logits, *labels, emitError),
                    results);
}

LogicalResult OneHotOp::verify() {
  // I64Attr's getter is unsigned; depth is read signed so -5 is caught.
  int64_t depth = getDepthAttr().getInt();
  if (depth < 1 || depth > kMaxDimSize)
    return emitOpError() << "needs depth in [1, " << kMaxDimSize << "], got "
                         << depth;
  auto indices = cast<RankedTensorType>(getIndices().getType());
  auto out = cast<RankedTensorType>(getType());
  SmallVector<int64_t> expected(indices.getShape());
  expected.push_back(depth);
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result must be the indices' shape followed by "
                            "depth, expected "
                         << RankedTensorType::get(expected,
                                                  out.getElementType())
                         << ", got " << out;
  return success();
}

//===----------------------------------------------------------------------===//
// Gather and dropout
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto emitError = errorEmitterAt(loc);
  FailureOr<RankedTensorType> params =
      rankedType(adaptor.getParams(), "gather", emitError);
  FailureOr<RankedTensorType> indices =
      rankedType(adaptor.getIndices(), "gather", emitError);
  if (failed(params) || failed(indices))
    return failure();
  return pushResult(inferGather(*params, *indices, emitError), results);
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return emitOpError() << "needs a rate in [0, 1), got " << rate;
  return success();
}

//===----------------------------------------------------------------------===//
// Sparse updates
//===----------------------------------------------------------------------===//

/// Pairs (indices, rows): integer ids, and rows shaped as the ids followed by
/// the variable's row shape (when the variable can be found), of lr's dtype.
LogicalResult mlir::dtf::verifySparseSlices(Operation *op, FlatSymbolRefAttr var,
                                            Value lr, OperandRange slices) {
  if (slices.empty() || slices.size() % 2 != 0)
    return op->emitOpError() << "expects pairs of (indices, rows), got "
                             << slices.size() << " slice operands";
  // A shard's rows have the row shape of its whole variable.
  RankedTensorType varType = variableTypeOf(op, var.getAttr());
  Type element = cast<RankedTensorType>(lr.getType()).getElementType();
  for (unsigned i = 0; i < slices.size(); i += 2) {
    auto ids = cast<RankedTensorType>(slices[i].getType());
    auto rows = cast<RankedTensorType>(slices[i + 1].getType());
    if (!ids.getElementType().isInteger(32) &&
        !ids.getElementType().isInteger(64))
      return op->emitOpError() << "expects integer indices in slice " << i / 2
                               << ", got " << ids;
    if (rows.getElementType() != element)
      return op->emitOpError() << "expects rows of the learning rate's dtype "
                               << element << " in slice " << i / 2 << ", got "
                               << rows;
    if (!varType)
      continue;
    SmallVector<int64_t> expected(ids.getShape());
    llvm::append_range(expected, varType.getShape().drop_front());
    if (varType.getRank() < 1 || rows.getShape() != ArrayRef(expected))
      return op->emitOpError()
             << "expects rows shaped as the indices " << ids
             << " followed by the row shape of " << varType << ", got "
             << rows;
  }
  return success();
}

LogicalResult SparseApplySgdOp::verify() {
  return verifySparseSlices(*this, getVarAttr(), getLr(), getSlices());
}
LogicalResult SparseApplyMomentumOp::verify() {
  return verifySparseSlices(*this, getVarAttr(), getLr(), getSlices());
}
LogicalResult SparseApplyAdamOp::verify() {
  return verifySparseSlices(*this, getVarAttr(), getLr(), getSlices());
}
LogicalResult SparseApplyAdagradOp::verify() {
  return verifySparseSlices(*this, getVarAttr(), getLr(), getSlices());
}
LogicalResult SparseApplyRmspropOp::verify() {
  return verifySparseSlices(*this, getVarAttr(), getLr(), getSlices());
}

//===----------------------------------------------------------------------===//
// Max pooling with its argmax (dtf-fuse-library)
//===----------------------------------------------------------------------===//

/// The argmax type of a max pool whose output is `output`: i32, the output's
/// shape with ceil(C / 4) as its last dimension (four bytes to an element).
static RankedTensorType argmaxTypeOf(RankedTensorType output) {
  SmallVector<int64_t> shape(output.getShape());
  if (!ShapedType::isDynamic(shape.back()))
    shape.back() = (shape.back() + 3) / 4;
  return RankedTensorType::get(shape,
                               IntegerType::get(output.getContext(), 32));
}

/// The checks both ops share: the window has at most 127 positions, the
/// pooled type follows from `input`, and `argmax` has the type that
/// pooled output calls for.
static LogicalResult
verifyPoolArgmax(Operation *op, RankedTensorType input, RankedTensorType output,
                 RankedTensorType argmax, ArrayRef<int64_t> window,
                 ArrayRef<int64_t> strides, Padding padding) {
  auto emitError = [op]() { return op->emitOpError(); };
  if (window.size() == 2 && window[0] * window[1] > 127)
    return op->emitOpError() << "keeps a window position in seven bits, so "
                                "its window has at most 127 positions, got ["
                             << window[0] << ", " << window[1] << "]";
  FailureOr<RankedTensorType> pooled = inferPool(
      op->getName().getStringRef(), input, window, strides, padding, emitError);
  if (failed(pooled))
    return failure();
  if (*pooled != output)
    return op->emitOpError()
           << "pools " << input << " to " << *pooled << ", got " << output;
  if (argmax != argmaxTypeOf(output))
    return op->emitOpError()
           << "expects its argmax of type " << argmaxTypeOf(output)
           << " (the pooled shape, four bytes to an i32 in the last "
              "dimension), got "
           << argmax;
  return success();
}

LogicalResult MaxPoolWithArgmaxOp::verify() {
  return verifyPoolArgmax(*this, cast<RankedTensorType>(getInput().getType()),
                          cast<RankedTensorType>(getOutput().getType()),
                          cast<RankedTensorType>(getArgmax().getType()),
                          getWindow(), getStrides(), getPadding());
}

LogicalResult MaxPoolGradWithArgmaxOp::verify() {
  auto output = cast<RankedTensorType>(getOutput().getType());
  ArrayRef<int64_t> inputShape = getInputShape();
  bool matches = static_cast<int64_t>(inputShape.size()) == output.getRank();
  for (size_t i = 0; matches && i < inputShape.size(); ++i)
    matches =
        inputShape[i] == (output.isDynamicDim(i) ? -1 : output.getDimSize(i));
  if (!matches)
    return emitOpError() << "expects input_shape to be its result's shape "
                            "(-1 where dynamic), got "
                         << output << " and input_shape of "
                         << inputShape.size() << " dimensions";
  auto dy = cast<RankedTensorType>(getDy().getType());
  if (dy.getElementType() != output.getElementType())
    return emitOpError() << "expects dy and the result of one dtype, got " << dy
                         << " and " << output;
  return verifyPoolArgmax(*this, output, dy,
                          cast<RankedTensorType>(getArgmax().getType()),
                          getWindow(), getStrides(), getPadding());
}

//===----------------------------------------------------------------------===//
// The LSTM and GRU layers as one op
//===----------------------------------------------------------------------===//

namespace {

/// x [B, T, F], kernel [F, G U], recurrent_kernel [U, G U], biases [G U]
/// (the LSTM's one, G = 4; the GRU's two, G = 3) of one float type, and the
/// output [B, U] ([B, T, U] with return_sequences).
LogicalResult verifyRecurrent(Operation *op, int64_t gates, Value x, Value kernel,
                              Value recurrent, ArrayRef<Value> biases, Value output,
                              bool sequences, Value workspace = Value()) {
  if (workspace && cast<RankedTensorType>(workspace.getType()).getRank() != 1)
    return op->emitOpError() << "expects a workspace of rank 1, got "
                             << workspace.getType();
  auto xt = cast<RankedTensorType>(x.getType());
  auto kt = cast<RankedTensorType>(kernel.getType());
  auto rt = cast<RankedTensorType>(recurrent.getType());
  auto ot = cast<RankedTensorType>(output.getType());
  SmallVector<RankedTensorType> bts;
  for (Value b : biases)
    bts.push_back(cast<RankedTensorType>(b.getType()));
  const std::string g = std::to_string(gates);
  // "x, kernel, ... and the last" of the operands' types (and the output's).
  auto operandList = [&](InFlightDiagnostic &diag, bool withOutput) -> LogicalResult {
    SmallVector<Type> types = {xt, kt, rt};
    types.append(bts.begin(), bts.end());
    if (withOutput)
      types.push_back(ot);
    for (size_t i = 0; i < types.size(); ++i)
      diag << (i == 0 ? "" : i + 1 == types.size() ? " and " : ", ") << types[i];
    return diag;
  };
  Type element = xt.getElementType();
  SmallVector<Type> elements = {kt.getElementType(), rt.getElementType(),
                                ot.getElementType()};
  for (RankedTensorType bt : bts)
    elements.push_back(bt.getElementType());
  for (Type t : elements)
    if (t != element) {
      auto diag = op->emitOpError()
                  << "expects x, its variables and its output of one float type, got ";
      return operandList(diag, true);
    }
  const bool biasRanks = llvm::all_of(bts, [](RankedTensorType t) { return t.getRank() == 1; });
  const std::string biasText =
      bts.size() == 1 ? "bias [" + g + " U]" : "bias and recurrent_bias [" + g + " U]";
  if (xt.getRank() != 3 || kt.getRank() != 2 || rt.getRank() != 2 || !biasRanks ||
      kt.isDynamicDim(1) || rt.isDynamicDim(0)) {
    auto diag = op->emitOpError() << "expects x [B, T, F], kernel [F, " << g
                                  << " U], recurrent_kernel [U, " << g << " U] and "
                                  << biasText << " with U known, got ";
    return operandList(diag, false);
  }
  const int64_t u = rt.getDimSize(0);
  auto dimIs = [](RankedTensorType t, int64_t i, int64_t want) {
    return t.isDynamicDim(i) || ShapedType::isDynamic(want) || t.getDimSize(i) == want;
  };
  if (kt.getDimSize(1) != gates * u || !dimIs(rt, 1, gates * u) ||
      !llvm::all_of(bts, [&](RankedTensorType t) { return dimIs(t, 0, gates * u); }) ||
      !dimIs(kt, 0, xt.getDimSize(2))) {
    auto diag = op->emitOpError() << "expects kernel [F, " << g
                                  << " U], recurrent_kernel [U, " << g << " U] and "
                                  << biasText << " for x [B, T, F], got ";
    return operandList(diag, false);
  }
  const bool shapeOk =
      sequences ? ot.getRank() == 3 && dimIs(ot, 0, xt.getDimSize(0)) &&
                      dimIs(ot, 1, xt.getDimSize(1)) && dimIs(ot, 2, u)
                : ot.getRank() == 2 && dimIs(ot, 0, xt.getDimSize(0)) &&
                      dimIs(ot, 1, u);
  if (!shapeOk)
    return op->emitOpError() << "expects its output "
                             << (sequences ? "[B, T, U]" : "[B, U]") << " with U = "
                             << u << " for x " << xt << ", got " << ot;
  return success();
}

/// A gradient op's dy has its output's type, and each result its operand's.
LogicalResult verifyRecurrentGrad(Operation *op, Value output, Value dy,
                                  ArrayRef<Value> operands, ValueRange results) {
  if (dy.getType() != output.getType())
    return op->emitOpError() << "expects dy of its output's type " << output.getType()
                             << ", got " << dy.getType();
  for (size_t i = 0; i < operands.size(); ++i)
    if (operands[i].getType() != results[i].getType())
      return op->emitOpError() << "expects result " << i << " of operand " << i
                               << "'s type " << operands[i].getType() << ", got "
                               << results[i].getType();
  return success();
}

} // namespace

LogicalResult LstmOp::verify() {
  return verifyRecurrent(*this, 4, getX(), getKernel(), getRecurrentKernel(),
                         {getBias()}, getOutput(), getReturnSequences());
}

LogicalResult LstmTrainOp::verify() {
  return verifyRecurrent(*this, 4, getX(), getKernel(), getRecurrentKernel(),
                         {getBias()}, getOutput(), getReturnSequences(), getWorkspace());
}

LogicalResult LstmGradOp::verify() {
  if (failed(verifyRecurrentGrad(*this, getOutput(), getDy(),
                                 {getX(), getKernel(), getRecurrentKernel(), getBias()},
                                 getResults())))
    return failure();
  return verifyRecurrent(*this, 4, getX(), getKernel(), getRecurrentKernel(),
                         {getBias()}, getOutput(), getReturnSequences(), getWorkspace());
}

LogicalResult GruOp::verify() {
  return verifyRecurrent(*this, 3, getX(), getKernel(), getRecurrentKernel(),
                         {getBias(), getRecurrentBias()}, getOutput(),
                         getReturnSequences());
}

LogicalResult GruTrainOp::verify() {
  return verifyRecurrent(*this, 3, getX(), getKernel(), getRecurrentKernel(),
                         {getBias(), getRecurrentBias()}, getOutput(),
                         getReturnSequences(), getWorkspace());
}

LogicalResult GruGradOp::verify() {
  if (failed(verifyRecurrentGrad(
          *this, getOutput(), getDy(),
          {getX(), getKernel(), getRecurrentKernel(), getBias(), getRecurrentBias()},
          getResults())))
    return failure();
  return verifyRecurrent(*this, 3, getX(), getKernel(), getRecurrentKernel(),
                         {getBias(), getRecurrentBias()}, getOutput(),
                         getReturnSequences(), getWorkspace());
}
