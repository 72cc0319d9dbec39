// Shape and dtype rules of the dtf ops, shared by the dialect and the front end.
#include "dialects/Dtf/IR/ShapeInference.h"
#include "dialects/Dtf/IR/DtfDialect.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

namespace mlir::dtf {
namespace {

constexpr int64_t kDynamic = ShapedType::kDynamic;

bool isDynamic(int64_t d) { return ShapedType::isDynamic(d); }

RankedTensorType withShape(RankedTensorType like, ArrayRef<int64_t> shape,
                           Type element = {}) {
  return RankedTensorType::get(shape, element ? element : like.getElementType());
}

} // namespace

std::function<InFlightDiagnostic()>
errorEmitterAt(std::optional<Location> loc) {
  return [loc]() -> InFlightDiagnostic {
    if (loc)
      return mlir::emitError(*loc);
    return InFlightDiagnostic();
  };
}

FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align at the right; a missing leading dimension acts as 1.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    // A dynamic size is the batch, B: it matches itself and broadcasts with
    // 1, never with a fixed size (B is not known to be 784).
    if (da == db)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else if (db == 1)
      out[i] = da;
    else
      return failure();
  }
  return out;
}

FailureOr<RankedTensorType> inferBroadcast(StringRef opName,
                                           RankedTensorType lhs,
                                           RankedTensorType rhs,
                                           EmitErrorFn emitError,
                                           Type resultElement) {
  if (lhs.getElementType() != rhs.getElementType()) {
    emitError() << opName << " expects operands of the same dtype, got "
                << lhs.getElementType() << " and " << rhs.getElementType()
                << " (use cast to convert one)";
    return failure();
  }
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(lhs.getShape(), rhs.getShape());
  if (failed(shape)) {
    emitError() << opName << " expects shapes that broadcast, got " << lhs
                << " and " << rhs
                << " (sizes must be equal or 1 in each dimension, aligned at "
                   "the right)";
    return failure();
  }
  return withShape(lhs, *shape, resultElement);
}

FailureOr<RankedTensorType> inferMatmul(RankedTensorType a, RankedTensorType b,
                                        bool transposeA, bool transposeB,
                                        EmitErrorFn emitError) {
  if (a.getElementType() != b.getElementType()) {
    emitError() << "matmul expects operands of the same dtype, got "
                << a.getElementType() << " and " << b.getElementType();
    return failure();
  }
  if (a.getRank() < 2 || b.getRank() < 2) {
    emitError() << "matmul expects operands of rank 2 or more, got " << a
                << " and " << b;
    return failure();
  }
  // The batch dimensions (all but the last two) broadcast as NumPy's
  // matmul does (TensorFlow's BatchMatMulV2): [B, T, K] @ [K, N] shares the
  // matrix over B and T.
  ArrayRef<int64_t> sa = a.getShape(), sb = b.getShape();
  const int64_t ra = a.getRank(), rb = b.getRank();
  FailureOr<SmallVector<int64_t>> batch =
      broadcastShapes(sa.drop_back(2), sb.drop_back(2));
  if (failed(batch)) {
    emitError() << "matmul expects batch dimensions that broadcast, got " << a
                << " and " << b;
    return failure();
  }
  SmallVector<int64_t> out(*batch);
  int64_t m = transposeA ? sa[ra - 1] : sa[ra - 2];
  int64_t ka = transposeA ? sa[ra - 2] : sa[ra - 1];
  int64_t kb = transposeB ? sb[rb - 1] : sb[rb - 2];
  int64_t n = transposeB ? sb[rb - 2] : sb[rb - 1];
  if (ka != kb) {
    emitError() << "matmul expects inner dimensions to match, got " << a
                << (transposeA ? " (transposed)" : "") << " and " << b
                << (transposeB ? " (transposed)" : "");
    return failure();
  }
  out.push_back(m);
  out.push_back(n);
  return withShape(a, out);
}

int64_t windowOutputSize(int64_t in, int64_t window, int64_t stride,
                         int64_t dilation, Padding padding) {
  if (isDynamic(in) || isDynamic(window))
    return kDynamic;
  if (padding == Padding::same)
    return (in + stride - 1) / stride;
  int64_t effective = (window - 1) * dilation + 1;
  if (in < effective)
    return 0;
  return (in - effective) / stride + 1;
}

static LogicalResult checkPositivePair(StringRef opName, StringRef what,
                                       ArrayRef<int64_t> values,
                                       EmitErrorFn emitError) {
  auto inRange = [](int64_t v) { return v >= 1 && v <= kMaxDimSize; };
  if (values.size() != 2 || !inRange(values[0]) || !inRange(values[1])) {
    auto diag = emitError();
    diag << opName << " expects " << what << " to be two numbers in [1, "
         << kMaxDimSize << "] [height, width], got [";
    llvm::interleaveComma(values, diag);
    diag << "]";
    return failure();
  }
  return success();
}

FailureOr<RankedTensorType>
inferConv2D(RankedTensorType input, RankedTensorType filter,
            ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
            Padding padding, EmitErrorFn emitError) {
  if (input.getRank() != 4) {
    emitError() << "conv2d expects an NHWC input of rank 4, got " << input;
    return failure();
  }
  if (filter.getRank() != 4) {
    emitError() << "conv2d expects a filter [height, width, in_channels, "
                   "out_channels] of rank 4, got "
                << filter;
    return failure();
  }
  if (input.getElementType() != filter.getElementType()) {
    emitError() << "conv2d expects input and filter of the same dtype, got "
                << input.getElementType() << " and "
                << filter.getElementType();
    return failure();
  }
  if (failed(checkPositivePair("conv2d", "strides", strides, emitError)) ||
      failed(checkPositivePair("conv2d", "dilations", dilations, emitError)))
    return failure();
  ArrayRef<int64_t> in = input.getShape(), f = filter.getShape();
  if (in[3] != f[2]) {
    emitError() << "conv2d expects the filter's input channels (dimension 2, "
                << f[2] << ") to match the input's channels (dimension 3, "
                << in[3] << "), got " << input << " and " << filter;
    return failure();
  }
  int64_t oh = windowOutputSize(in[1], f[0], strides[0], dilations[0], padding);
  int64_t ow = windowOutputSize(in[2], f[1], strides[1], dilations[1], padding);
  if (oh == 0 || ow == 0) {
    emitError() << "conv2d with valid padding needs an input at least as "
                   "large as the dilated filter, got "
                << input << " and " << filter;
    return failure();
  }
  return withShape(input, {in[0], oh, ow, f[3]});
}

FailureOr<RankedTensorType> inferPool(StringRef opName, RankedTensorType input,
                                      ArrayRef<int64_t> window,
                                      ArrayRef<int64_t> strides,
                                      Padding padding, EmitErrorFn emitError) {
  if (input.getRank() != 4) {
    emitError() << opName << " expects an NHWC input of rank 4, got " << input;
    return failure();
  }
  if (failed(checkPositivePair(opName, "window", window, emitError)) ||
      failed(checkPositivePair(opName, "strides", strides, emitError)))
    return failure();
  ArrayRef<int64_t> in = input.getShape();
  int64_t oh = windowOutputSize(in[1], window[0], strides[0], 1, padding);
  int64_t ow = windowOutputSize(in[2], window[1], strides[1], 1, padding);
  if (oh == 0 || ow == 0) {
    emitError() << opName
                << " with valid padding needs an input at least as large as "
                   "the window, got "
                << input << " and window [" << window[0] << ", " << window[1]
                << "]";
    return failure();
  }
  return withShape(input, {in[0], oh, ow, in[3]});
}

FailureOr<RankedTensorType> inferTranspose(RankedTensorType x,
                                           ArrayRef<int64_t> permutation,
                                           EmitErrorFn emitError) {
  int64_t rank = x.getRank();
  llvm::SmallBitVector seen(rank);
  bool valid = static_cast<int64_t>(permutation.size()) == rank;
  for (int64_t p : permutation) {
    if (!valid)
      break;
    valid = p >= 0 && p < rank && !seen.test(p);
    if (valid)
      seen.set(p);
  }
  if (!valid) {
    auto diag = emitError();
    if (rank == 0)
      diag << "transpose of a rank-0 input expects an empty permutation, got [";
    else
      diag << "transpose expects a permutation of 0.." << rank - 1
           << " for an input of rank " << rank << ", got [";
    llvm::interleaveComma(permutation, diag);
    diag << "]";
    return failure();
  }
  SmallVector<int64_t> out;
  for (int64_t p : permutation)
    out.push_back(x.getDimSize(p));
  return withShape(x, out);
}

FailureOr<int64_t> normalizeAxis(StringRef opName, int64_t axis, int64_t rank,
                                 EmitErrorFn emitError) {
  if (axis < -rank || axis >= rank) {
    emitError() << opName << " expects an axis in [" << -rank << ", " << rank
                << ") for an input of rank " << rank << ", got " << axis;
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

FailureOr<RankedTensorType> inferConcat(ArrayRef<RankedTensorType> inputs,
                                        int64_t axis, EmitErrorFn emitError) {
  if (inputs.empty()) {
    emitError() << "concat expects at least one input";
    return failure();
  }
  RankedTensorType first = inputs.front();
  FailureOr<int64_t> a =
      normalizeAxis("concat", axis, first.getRank(), emitError);
  if (failed(a))
    return failure();
  SmallVector<int64_t> out(first.getShape());
  for (auto [i, t] : llvm::enumerate(inputs.drop_front())) {
    if (t.getElementType() != first.getElementType() ||
        t.getRank() != first.getRank()) {
      emitError() << "concat expects inputs of the same dtype and rank, got "
                  << first << " and " << t << " (input " << i + 1 << ")";
      return failure();
    }
    for (int64_t d = 0; d < first.getRank(); ++d) {
      int64_t size = t.getDimSize(d);
      if (d == *a) {
        out[d] = isDynamic(out[d]) || isDynamic(size) ? kDynamic : out[d] + size;
      } else if (size != out[d]) {
        emitError() << "concat expects inputs of equal sizes except along axis "
                    << *a << ", got " << first << " and " << t << " (input "
                    << i + 1 << ", dimension " << d << ")";
        return failure();
      }
    }
  }
  return withShape(first, out);
}

FailureOr<RankedTensorType> inferSlice(RankedTensorType x,
                                       ArrayRef<int64_t> begin,
                                       ArrayRef<int64_t> size,
                                       EmitErrorFn emitError) {
  int64_t rank = x.getRank();
  if (static_cast<int64_t>(begin.size()) != rank ||
      static_cast<int64_t>(size.size()) != rank) {
    emitError() << "slice expects begin and size with one entry per dimension ("
                << rank << "), got " << begin.size() << " and " << size.size();
    return failure();
  }
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = x.getDimSize(d);
    if (begin[d] < 0 || size[d] < -1) {
      emitError() << "slice expects begin >= 0 and size >= -1, got begin "
                  << begin[d] << " and size " << size[d] << " in dimension "
                  << d;
      return failure();
    }
    // Compare without adding, so huge sizes cannot wrap around.
    if (!isDynamic(dim) &&
        (begin[d] > dim || (size[d] >= 0 && size[d] > dim - begin[d]))) {
      emitError() << "slice of dimension " << d << " (size " << dim
                  << ") from " << begin[d] << " with size " << size[d]
                  << " goes past its end";
      return failure();
    }
    if (size[d] >= 0)
      out.push_back(size[d]);
    else
      out.push_back(isDynamic(dim) ? kDynamic : dim - begin[d]);
  }
  return withShape(x, out);
}

FailureOr<RankedTensorType> inferTile(RankedTensorType x,
                                      ArrayRef<int64_t> multiples,
                                      EmitErrorFn emitError) {
  if (static_cast<int64_t>(multiples.size()) != x.getRank()) {
    emitError() << "tile expects one multiple per dimension ("
                << x.getRank() << "), got " << multiples.size();
    return failure();
  }
  SmallVector<int64_t> out;
  for (auto [d, m] : llvm::enumerate(multiples)) {
    int64_t size = x.getDimSize(d);
    if (m == kBatchMultiple) {
      if (size != 1) {
        emitError() << "tile repeats only a dimension of size 1 over the "
                       "batch, got size "
                    << (isDynamic(size) ? std::string("B")
                                        : std::to_string(size))
                    << " in dimension " << d;
        return failure();
      }
      out.push_back(kDynamic);
      continue;
    }
    if (m < 1 || m > kMaxDimSize) {
      emitError() << "tile multiples must be positive (or -1 for the batch), "
                     "got "
                  << m << " in dimension " << d;
      return failure();
    }
    if (isDynamic(size))
      out.push_back(kDynamic);
    else if (size > kMaxDimSize / m) {
      emitError() << "tile of dimension " << d << " (size " << size << ") "
                  << m << " times is too large";
      return failure();
    } else
      out.push_back(size * m);
  }
  return withShape(x, out);
}

LogicalResult verifyBroadcastable(ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                                  EmitErrorFn emitError) {
  bool ok = from.size() <= to.size();
  for (size_t i = 0; ok && i < from.size(); ++i) {
    int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    ok = f == t || f == 1 || isDynamic(f) || isDynamic(t);
  }
  if (!ok) {
    auto diag = emitError();
    diag << "broadcast_to expects a shape that broadcasts to the result, got [";
    llvm::interleaveComma(from, diag);
    diag << "] to [";
    llvm::interleaveComma(to, diag);
    diag << "]";
    return failure();
  }
  return success();
}

FailureOr<RankedTensorType> inferReduce(StringRef opName, RankedTensorType x,
                                        std::optional<ArrayRef<int64_t>> axes,
                                        bool keepDims, EmitErrorFn emitError) {
  int64_t rank = x.getRank();
  llvm::SmallBitVector reduced(rank, !axes);
  if (axes) {
    for (int64_t axis : *axes) {
      FailureOr<int64_t> a = normalizeAxis(opName, axis, rank, emitError);
      if (failed(a))
        return failure();
      if (reduced.test(*a)) {
        emitError() << opName << " names axis " << *a << " twice";
        return failure();
      }
      reduced.set(*a);
    }
  }
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced.test(d))
      out.push_back(x.getDimSize(d));
    else if (keepDims)
      out.push_back(1);
  }
  return withShape(x, out);
}

FailureOr<SmallVector<int64_t>> inferArgmaxShape(RankedTensorType x,
                                                 int64_t axis,
                                                 EmitErrorFn emitError) {
  FailureOr<int64_t> a = normalizeAxis("argmax", axis, x.getRank(), emitError);
  if (failed(a))
    return failure();
  SmallVector<int64_t> out(x.getShape());
  out.erase(out.begin() + *a);
  return out;
}

FailureOr<RankedTensorType> inferSoftmaxCrossEntropy(RankedTensorType logits,
                                                     RankedTensorType labels,
                                                     EmitErrorFn emitError) {
  if (logits.getRank() < 1 || logits.getElementType() != labels.getElementType() ||
      logits.getRank() != labels.getRank() ||
      failed(verifyCompatibleShape(logits.getShape(), labels.getShape()))) {
    emitError() << "softmax_cross_entropy expects logits and labels of the "
                   "same shape and dtype [..., classes], got "
                << logits << " and " << labels
                << " (for class indices, use sparse_softmax_cross_entropy)";
    return failure();
  }
  return withShape(logits, logits.getShape().drop_back());
}

FailureOr<RankedTensorType>
inferSparseSoftmaxCrossEntropy(RankedTensorType logits,
                               RankedTensorType labels, EmitErrorFn emitError) {
  ArrayRef<int64_t> batch = logits.getShape();
  if (!batch.empty())
    batch = batch.drop_back();
  if (logits.getRank() < 1 || labels.getRank() != logits.getRank() - 1 ||
      failed(verifyCompatibleShape(batch, labels.getShape()))) {
    emitError() << "sparse_softmax_cross_entropy expects logits [..., classes] "
                   "and class indices [...] with the leading shape of the "
                   "logits, got "
                << logits << " and " << labels;
    return failure();
  }
  return withShape(logits, batch);
}

FailureOr<RankedTensorType> inferGather(RankedTensorType params,
                                        RankedTensorType indices,
                                        EmitErrorFn emitError) {
  if (params.getRank() < 1) {
    emitError() << "gather expects params of rank 1 or more, got " << params;
    return failure();
  }
  SmallVector<int64_t> out(indices.getShape());
  llvm::append_range(out, params.getShape().drop_front());
  return withShape(params, out);
}

LogicalResult verifyReshape(RankedTensorType from, RankedTensorType to,
                            EmitErrorFn emitError) {
  if (from.getElementType() != to.getElementType()) {
    emitError() << "reshape keeps the dtype, got " << from.getElementType()
                << " to " << to.getElementType() << " (use cast to convert)";
    return failure();
  }
  // The product of the static sizes, or nullopt when it overflows int64.
  auto staticProduct = [](ArrayRef<int64_t> shape,
                          int &dynamicDims) -> std::optional<int64_t> {
    int64_t product = 1;
    dynamicDims = 0;
    for (int64_t d : shape) {
      if (isDynamic(d))
        ++dynamicDims;
      else if (llvm::MulOverflow(product, d, product))
        return std::nullopt;
    }
    return product;
  };
  int dynFrom, dynTo;
  std::optional<int64_t> countFrom = staticProduct(from.getShape(), dynFrom);
  std::optional<int64_t> countTo = staticProduct(to.getShape(), dynTo);
  if (!countFrom || !countTo) {
    emitError() << "reshape of " << from << " to " << to
                << " has more elements than fit in 64 bits";
    return failure();
  }
  int64_t pFrom = *countFrom, pTo = *countTo;
  bool ok;
  if (dynFrom == 0 && dynTo == 0)
    ok = pFrom == pTo;
  else if (dynFrom == 0)
    ok = pTo != 0 && pFrom % pTo == 0;
  else if (dynTo == 0)
    ok = pFrom != 0 && pTo % pFrom == 0;
  else
    ok = pFrom == 0 || pTo == 0 || pFrom % pTo == 0 || pTo % pFrom == 0;
  if (!ok) {
    emitError() << "reshape cannot change the number of elements, got " << from
                << " (" << pFrom << (dynFrom ? " x batch" : "")
                << " elements) to " << to << " (" << pTo
                << (dynTo ? " x batch" : "") << " elements)";
    return failure();
  }
  return success();
}

LogicalResult verifyBucketize(RankedTensorType from, RankedTensorType to,
                              ArrayRef<double> boundaries,
                              EmitErrorFn emitError) {
  if (failed(verifyCompatibleShape(from.getShape(), to.getShape())))
    return emitError() << "keeps the shape of its input, got " << from << " to "
                       << to;
  for (auto [i, b] : llvm::enumerate(boundaries)) {
    if (!std::isfinite(b))
      return emitError() << "boundaries must be finite, got " << b
                         << " at position " << i;
    if (i > 0 && b < boundaries[i - 1])
      return emitError() << "boundaries must be sorted ascending, got " << b
                         << " after " << boundaries[i - 1] << " at position "
                         << i;
  }
  return success();
}

} // namespace mlir::dtf
