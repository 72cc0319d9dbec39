// TensorFlow's variable initializers over a SplitMix64 stream per variable.
//
// The draws use only raw generator output and explicit formulas (no
// <random> distributions, whose results differ between standard libraries),
// so a seed gives the same variables everywhere.
#include "runtime/train/Initializers.h"

#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace dtf::train {
namespace {

uint64_t splitMix(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform draws and standard normals (Box-Muller, both results used).
class Stream {
public:
  explicit Stream(uint64_t seed) : state_(seed) {}

  // Uniform in [0, 1), 53 bits.
  double uniform() { return double(splitMix(state_) >> 11) * 0x1.0p-53; }

  double normal() {
    if (hasSpare_) {
      hasSpare_ = false;
      return spare_;
    }
    // u1 in (0, 1] keeps log finite.
    const double u1 = 1.0 - uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 6.283185307179586476925 * u2;
    spare_ = r * std::sin(theta);
    hasSpare_ = true;
    return r * std::cos(theta);
  }

  // A unit normal redrawn until it lies within 2 (TensorFlow's
  // truncated_normal).
  double truncatedNormal() {
    while (true) {
      double z = normal();
      if (std::fabs(z) <= 2.0)
        return z;
    }
  }

private:
  uint64_t state_;
  double spare_ = 0;
  bool hasSpare_ = false;
};

// The stddev of a unit normal truncated to [-2, 2], by which TensorFlow's
// variance-scaling initializers divide so the result has the wanted stddev.
constexpr double kTruncatedStddev = .87962566103423978;

template <typename T> void fill(Tensor &t, T value) {
  T *p = t.data<T>();
  for (int64_t i = 0; i < t.numElements(); ++i)
    p[i] = value;
}

Status fillConstant(Tensor &t, double value, const std::string &where) {
  switch (t.dtype()) {
  case DType::F32:
    fill<float>(t, float(value));
    return Status::ok();
  case DType::F64:
    fill<double>(t, value);
    return Status::ok();
  case DType::I32:
    fill<int32_t>(t, int32_t(value));
    return Status::ok();
  case DType::I64:
    fill<int64_t>(t, int64_t(value));
    return Status::ok();
  case DType::Bool:
    fill<bool>(t, value != 0.0);
    return Status::ok();
  default:
    return errorStatus(where, ": ", dtypeName(t.dtype()),
                       " variables are not supported by this runtime");
  }
}

} // namespace

void computeFans(const std::vector<int64_t> &shape, double *fanIn,
                 double *fanOut) {
  if (shape.empty()) {
    *fanIn = *fanOut = 1;
  } else if (shape.size() == 1) {
    *fanIn = *fanOut = double(shape[0]);
  } else if (shape.size() == 2) {
    *fanIn = double(shape[0]);
    *fanOut = double(shape[1]);
  } else {
    double receptive = 1;
    for (size_t i = 0; i + 2 < shape.size(); ++i)
      receptive *= double(shape[i]);
    *fanIn = double(shape[shape.size() - 2]) * receptive;
    *fanOut = double(shape.back()) * receptive;
  }
}

uint64_t variableSeed(uint64_t runSeed, const plan::Variable &var) {
  uint64_t state;
  if (var.initializer().has_seed()) {
    state = uint64_t(var.initializer().seed()) ^ 0x5eedull;
  } else {
    // FNV-1a of the name, mixed with the run's seed.
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : var.name()) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    state = runSeed ^ (h * 0xd1b54a32d192ed03ull);
  }
  splitMix(state);
  return splitMix(state);
}

// Keras' Orthogonal of a shape [..., cols] seen as a matrix [rows, cols]
// (rows the product of the other dims): the Q of the QR decomposition of a
// [max, min] matrix of unit normals, each column's sign made that of R's
// diagonal, transposed when rows < cols, times gain; row-major [rows, cols]
// in double. Gram-Schmidt, run twice over each column for orthogonality to
// the rounding of double, gives R a positive diagonal, which is that sign
// correction. The draws come from one stream, so a shard of the variable
// costs the whole matrix (recurrent kernels are small).
std::vector<double> orthogonalMatrix(uint64_t seed, int64_t rows, int64_t cols,
                                     double gain) {
  const int64_t m = std::max(rows, cols), k = std::min(rows, cols);
  std::vector<double> q(size_t(m * k)); // column-major: column j at j * m
  Stream stream(seed);
  for (double &x : q)
    x = stream.normal();
  for (int64_t j = 0; j < k; ++j) {
    double *col = q.data() + j * m;
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t p = 0; p < j; ++p) {
        const double *prev = q.data() + p * m;
        double dot = 0;
        for (int64_t i = 0; i < m; ++i)
          dot += prev[i] * col[i];
        for (int64_t i = 0; i < m; ++i)
          col[i] -= dot * prev[i];
      }
    double norm = 0;
    for (int64_t i = 0; i < m; ++i)
      norm += col[i] * col[i];
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < m; ++i)
      col[i] = norm > 0 ? col[i] / norm : 0.0;
  }
  // Q is [m, k]: as [rows, cols] when rows >= cols, else its transpose.
  std::vector<double> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[size_t(r * cols + c)] =
          gain * (rows >= cols ? q[size_t(c * m + r)] : q[size_t(r * m + c)]);
  return out;
}

// The random initializers for a float element type T (float or double): the
// numbers are drawn in double and rounded once to T.
// Each row (along axis 0; a scalar is one row) draws from a stream of its
// own, seeded by the variable's seed and the row, so that elements [begin,
// begin + t's size) of the whole variable (a shard, in t) are made from the
// rows they lie in alone: a ps makes its rows of a large table without
// drawing the others'.
template <typename T>
static Status fillRandom(const plan::Variable &var, uint64_t runSeed,
                         const std::vector<int64_t> &shape, const std::string &where,
                         Tensor &t, int64_t begin) {
  const plan::Initializer &init = var.initializer();
  const std::string &kind = init.kind();
  const uint64_t seed = variableSeed(runSeed, var);
  T *p = t.data<T>() - begin; // written only at [begin, n)
  const int64_t n = begin + t.numElements();
  const int64_t width =
      shape.empty() || shape[0] == 0 ? 1 : numElementsOf(shape) / shape[0];
  const int64_t start = begin / std::max<int64_t>(width, 1) * width;
  Stream stream(0);
  // The stream of element i's row, from the row's first element on.
  auto at = [&](int64_t i) -> Stream & {
    if (width > 0 && i % width == 0) {
      uint64_t state = seed ^ (uint64_t(i / width) * 0x9e3779b97f4a7c15ull);
      stream = Stream(splitMix(state));
    }
    return stream;
  };
  double fanIn = 1, fanOut = 1;
  computeFans(shape, &fanIn, &fanOut);
  if (kind == "uniform" || kind == "glorot_uniform") {
    double lo = initializerParam(init, "minval", 0.0), hi = initializerParam(init, "maxval", 1.0);
    if (kind == "glorot_uniform") {
      const double limit = std::sqrt(6.0 * initializerParam(init, "scale", 1.0) /
                                     std::max(1.0, fanIn + fanOut));
      lo = -limit;
      hi = limit;
    }
    if (!(hi >= lo))
      return errorStatus(where, ": uniform needs minval <= maxval, got ", lo,
                         " and ", hi);
    for (int64_t i = start; i < n; ++i) {
      T x = T(lo + (hi - lo) * at(i).uniform());
      // Rounding to T may reach hi; keep the interval half-open.
      if (i >= begin)
        p[i] = x < T(hi) || lo == hi ? x : std::nextafter(T(hi), T(lo));
    }
  } else if (kind == "normal" || kind == "truncated_normal") {
    const double mean = initializerParam(init, "mean", 0.0),
                 stddev = initializerParam(init, "stddev", 1.0);
    if (!(stddev >= 0))
      return errorStatus(where, ": stddev must be >= 0, got ", stddev);
    for (int64_t i = start; i < n; ++i) {
      Stream &row = at(i);
      const T x = T(mean + stddev * (kind == "normal" ? row.normal()
                                                      : row.truncatedNormal()));
      if (i >= begin)
        p[i] = x;
    }
  } else if (kind == "orthogonal") {
    if (shape.size() < 2)
      return errorStatus(where,
                         ": the orthogonal initializer needs rank 2 or "
                         "more, got ",
                         plan::typeString(var.type()));
    const int64_t cols = shape.back();
    const int64_t rows = cols ? numElementsOf(shape) / cols : 0;
    const std::vector<double> whole =
        orthogonalMatrix(seed, rows, cols, initializerParam(init, "gain", 1.0));
    for (int64_t i = begin; i < n; ++i)
      p[i] = T(whole[size_t(i)]);
  } else if (kind == "he_normal") {
    const double stddev =
        std::sqrt(2.0 * initializerParam(init, "scale", 1.0) / std::max(1.0, fanIn)) /
        kTruncatedStddev;
    for (int64_t i = start; i < n; ++i) {
      const T x = T(stddev * at(i).truncatedNormal());
      if (i >= begin)
        p[i] = x;
    }
  } else {
    return errorStatus(where, " has an unknown initializer '",
                       plan::printable(kind), "'");
  }
  return Status::ok();
}

Status initializeVariable(const plan::Variable &var, uint64_t runSeed,
                          Tensor *out) {
  return initializeRows(var, runSeed, 0, -1, out);
}

Status initializeRows(const plan::Variable &var, uint64_t runSeed,
                      int64_t rowOffset, int64_t rows, Tensor *out) {
  const std::string where =
      strCat("variable '", plan::printable(var.name()), "'");
  DType dtype = DType::F32;
  Status s = plan::toDType(var.type().dtype(), &dtype);
  if (!s.isOk())
    return errorStatus(where, " has ", s.message());
  std::vector<int64_t> shape = plan::dimsOf(var.type().shape());
  for (int64_t d : shape)
    if (d < 0)
      return errorStatus(where, " needs a static shape, got ",
                         plan::typeString(var.type()));
  std::vector<int64_t> part = shape;
  int64_t begin = 0;
  if (rows >= 0 && !shape.empty()) {
    if (rowOffset < 0 || rowOffset > shape[0] || rows > shape[0] - rowOffset)
      return errorStatus(where, " has ", shape[0], " rows, not rows ",
                         rowOffset, " to ", rowOffset + rows);
    part[0] = rows;
    int64_t width = 1;
    for (size_t d = 1; d < shape.size(); ++d)
      width *= shape[d];
    begin = rowOffset * width;
  }
  if (var.dynamic().enabled()) {
    // A dynamic table (or its slot): rows are made as ids come
    // (DynamicTables); until then the capacity is reserved, not used.
    *out = Tensor::reserveZeros(dtype, part);
    if (!out->defined())
      return errorStatus("cannot reserve memory for ", where, " of type ",
                         plan::typeString(var.type()),
                         " (a dynamic table's capacity)");
    return Status::ok();
  }
  Tensor t = Tensor::allocate(dtype, part);
  if (!t.defined())
    return errorStatus("out of memory for ", where, " of type ",
                       plan::typeString(var.type()));

  const plan::Initializer &init = var.initializer();
  const std::string &kind = init.kind();
  if (kind.empty() || kind == "zeros") {
    if (t.byteSize())
      std::memset(t.rawData(), 0, t.byteSize());
    *out = std::move(t);
    return Status::ok();
  }
  if (kind == "ones" || kind == "constant") {
    if (kind == "constant" && !init.params().count("value"))
      return errorStatus(where, ": the constant initializer needs a value");
    DTF_RETURN_IF_ERROR(fillConstant(
        t, kind == "ones" ? 1.0 : initializerParam(init, "value", 0.0), where));
    *out = std::move(t);
    return Status::ok();
  }

  if (dtype == DType::F32)
    DTF_RETURN_IF_ERROR(
        fillRandom<float>(var, runSeed, shape, where, t, begin));
  else if (dtype == DType::F64)
    DTF_RETURN_IF_ERROR(
        fillRandom<double>(var, runSeed, shape, where, t, begin));
  else
    return errorStatus(where, " of type ", plan::typeString(var.type()),
                       " cannot use the random initializer '", kind,
                       "': random initializers need f32 or f64");
  *out = std::move(t);
  return Status::ok();
}

Status initializeVariables(const plan::Plan &plan, uint64_t runSeed,
                           exec::VariableStore *store) {
  // Moving averages start at their variable's first value, so they come
  // after every other variable.
  auto isAverage = [](const plan::Variable &var) {
    return var.role() == "moving_average" && !var.slot_of().empty();
  };
  for (const plan::Variable &var : plan.variables()) {
    if (isAverage(var))
      continue;
    Tensor t;
    DTF_RETURN_IF_ERROR(initializeVariable(var, runSeed, &t));
    DTF_RETURN_IF_ERROR(store->add(var.name(), std::move(t)));
  }
  for (const plan::Variable &var : plan.variables()) {
    if (!isAverage(var))
      continue;
    Tensor t;
    DTF_RETURN_IF_ERROR(initializeVariable(var, runSeed, &t));
    const Tensor *of = store->find(var.slot_of());
    if (!of)
      return errorStatus("variable '", plan::printable(var.name()),
                         "' is the moving average of '",
                         plan::printable(var.slot_of()),
                         "', which the plan does not declare");
    if (of->dtype() != t.dtype() || of->shape() != t.shape())
      return errorStatus("variable '", plan::printable(var.name()),
                         "' of type ", t.describe(), " cannot average '",
                         plan::printable(var.slot_of()), "' of type ",
                         of->describe());
    if (t.byteSize())
      std::memcpy(t.rawData(), of->rawData(), t.byteSize());
    DTF_RETURN_IF_ERROR(store->add(var.name(), std::move(t)));
  }
  return Status::ok();
}

double initializerParam(const plan::Initializer &init, const char *name, double dflt) {
  auto it = init.params().find(name);
  return it == init.params().end() ? dflt : it->second;
}

} // namespace dtf::train
