// dtf ops to ONNX (opset 13) nodes, one translation per op kind.
#include "OnnxExport.h"
#include "dtf/OpNames.h"

#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>

namespace dtf::onnxexport {
namespace {

int onnxType(int planDType) {
  switch (planDType) {
  case plan::F32:
    return onnx::TensorProto::FLOAT;
  case plan::F64:
    return onnx::TensorProto::DOUBLE;
  case plan::F16:
    return onnx::TensorProto::FLOAT16;
  case plan::BF16:
    return onnx::TensorProto::BFLOAT16;
  case plan::I32:
    return onnx::TensorProto::INT32;
  case plan::I64:
    return onnx::TensorProto::INT64;
  case plan::BOOL:
    return onnx::TensorProto::BOOL;
  default:
    return onnx::TensorProto::UNDEFINED;
  }
}

const plan::AttrValue *attr(const plan::Op &op, const char *name) {
  auto it = op.attrs().find(name);
  return it == op.attrs().end() ? nullptr : &it->second;
}

std::vector<int64_t> ints(const plan::Op &op, const char *name) {
  const plan::AttrValue *a = attr(op, name);
  if (!a || !a->has_ints())
    return {};
  return {a->ints().values().begin(), a->ints().values().end()};
}

int64_t intOr(const plan::Op &op, const char *name, int64_t fallback) {
  const plan::AttrValue *a = attr(op, name);
  return a && a->value_case() == plan::AttrValue::kI ? a->i() : fallback;
}

bool flag(const plan::Op &op, const char *name) {
  const plan::AttrValue *a = attr(op, name);
  return a && a->value_case() == plan::AttrValue::kB && a->b();
}

std::string text(const plan::Op &op, const char *name) {
  const plan::AttrValue *a = attr(op, name);
  return a && a->value_case() == plan::AttrValue::kS ? a->s() : "";
}

const char *kUnary[][2] = {
    {dtf::ops::kRelu, "Relu"}, {dtf::ops::kSigmoid, "Sigmoid"},  {dtf::ops::kTanh, "Tanh"},
    {dtf::ops::kExp, "Exp"},   {dtf::ops::kLog, "Log"},          {dtf::ops::kSqrt, "Sqrt"},
    {dtf::ops::kNeg, "Neg"},   {dtf::ops::kDropout, "Identity"},
    {dtf::ops::kErf, "Erf"},   {dtf::ops::kFloor, "Floor"},      {dtf::ops::kCeil, "Ceil"},
    {dtf::ops::kRound, "Round"}, {dtf::ops::kAbs, "Abs"}, // Round: halves to even, as dtf's
};
const char *kBinary[][2] = {
    {dtf::ops::kAdd, "Add"}, {dtf::ops::kSub, "Sub"},     {dtf::ops::kMul, "Mul"},
    {dtf::ops::kDiv, "Div"}, {dtf::ops::kMaximum, "Max"}, {dtf::ops::kMinimum, "Min"},
    {dtf::ops::kPow, "Pow"},
};
const char *kReduce[][2] = {
    {dtf::ops::kSum, "ReduceSum"},
    {dtf::ops::kMean, "ReduceMean"},
    {dtf::ops::kMax, "ReduceMax"},
};
const char *kCompare[][2] = {
    {"eq", "Equal"},   {"lt", "Less"},           {"le", "LessOrEqual"},
    {"gt", "Greater"}, {"ge", "GreaterOrEqual"},
};

class Translator {
public:
  Translator(const plan::Program &program, const VariableSource &read,
             onnx::GraphProto *graph)
      : program_(program), read_(read), graph_(graph) {
    for (const plan::Value &v : program.values())
      types_[v.id()] = &v.type();
  }

  Status run(std::vector<std::string> *unsupported) {
    if (program_.fetches_size() != 1)
      return errorStatus("the program to export has ", program_.fetches_size(),
                         " outputs, not one");
    const plan::Fetch &fetch = program_.fetches(0);
    names_[fetch.value()] = fetch.name();
    for (const plan::Op &op : program_.ops()) {
      Status s = translate(op);
      if (!s.isOk()) {
        if (s.message() != kUnsupported)
          return s;
        unsupported->push_back((op.location().empty()
                                    ? std::string("(no location)")
                                    : op.location()) +
                               ": " + op.name());
      }
    }
    if (!unsupported->empty())
      return errorStatus(unsupported->size(), " op",
                         unsupported->size() == 1 ? "" : "s",
                         " of the model have no ONNX translation");
    DTF_RETURN_IF_ERROR(
        valueInfo(fetch.value(), fetch.name(), graph_->add_output()));
    return Status::ok();
  }

private:
  static constexpr const char *kUnsupported = "unsupported";

  std::string name(int32_t id) {
    auto it = names_.find(id);
    if (it != names_.end())
      return it->second;
    return names_[id] = "v" + std::to_string(id);
  }
  std::string fresh(const std::string &stem) {
    return stem + "_" + std::to_string(++counter_);
  }
  const plan::TensorType &type(int32_t id) { return *types_.at(id); }
  std::vector<int64_t> dims(int32_t id) {
    return plan::dimsOf(type(id).shape());
  }

  Status valueInfo(int32_t id, const std::string &name,
                   onnx::ValueInfoProto *out) {
    out->set_name(name);
    onnx::TypeProto::Tensor *t = out->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnxType(type(id).dtype()));
    onnx::TensorShapeProto *shape = t->mutable_shape();
    for (int64_t d : dims(id)) {
      if (d < 0)
        shape->add_dim()->set_dim_param("batch");
      else
        shape->add_dim()->set_dim_value(d);
    }
    return Status::ok();
  }

  onnx::NodeProto *node(const plan::Op &src, const std::string &opType,
                        std::vector<std::string> inputs,
                        std::vector<std::string> outputs) {
    onnx::NodeProto *n = graph_->add_node();
    n->set_op_type(opType);
    n->set_name(fresh(opType));
    n->set_doc_string(src.name() + " at " + src.location());
    for (std::string &i : inputs)
      n->add_input(std::move(i));
    for (std::string &o : outputs)
      n->add_output(std::move(o));
    return n;
  }

  static void setInt(onnx::NodeProto *n, const char *name, int64_t v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void setInts(onnx::NodeProto *n, const char *name,
                      const std::vector<int64_t> &v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  static void setString(onnx::NodeProto *n, const char *name,
                        const std::string &v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  // An int64 vector as an initializer; returns its name.
  std::string int64Constant(const std::string &stem,
                            const std::vector<int64_t> &values) {
    onnx::TensorProto *t = graph_->add_initializer();
    t->set_name(fresh(stem));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(values.size()));
    t->set_raw_data(std::string(reinterpret_cast<const char *>(values.data()),
                                values.size() * sizeof(int64_t)));
    return t->name();
  }

  Status tensorInitializer(const std::string &name, const Tensor &value) {
    onnx::TensorProto *t = graph_->add_initializer();
    t->set_name(name);
    int planType = 0;
    switch (value.dtype()) {
    case DType::F32:
      planType = plan::F32;
      break;
    case DType::F64:
      planType = plan::F64;
      break;
    case DType::I32:
      planType = plan::I32;
      break;
    case DType::I64:
      planType = plan::I64;
      break;
    case DType::Bool:
      planType = plan::BOOL;
      break;
    default:
      return errorStatus("variable '", name, "' is ", value.describe(),
                         ", a type ONNX initializers here do not take");
    }
    t->set_data_type(onnxType(planType));
    for (int64_t d : value.shape())
      t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char *>(value.rawData()),
                                value.byteSize()));
    return Status::ok();
  }

  // NHWC -> NCHW, the ONNX op, NCHW -> NHWC.
  /// `after` (an elementwise ONNX op, e.g. Relu) runs on the result before
  /// it goes back to NHWC.
  void nchw(const plan::Op &op, const std::string &opType,
            std::vector<std::string> extraInputs,
            const std::function<void(onnx::NodeProto *)> &setAttrs,
            const char *after = nullptr) {
    const std::string in = fresh("nchw");
    setInts(node(op, "Transpose", {name(op.inputs(0))}, {in}), "perm",
            {0, 3, 1, 2});
    std::string out = fresh("nchw");
    extraInputs.insert(extraInputs.begin(), in);
    onnx::NodeProto *n = node(op, opType, extraInputs, {out});
    setAttrs(n);
    if (after) {
      const std::string next = fresh("nchw");
      node(op, after, {out}, {next});
      out = next;
    }
    setInts(node(op, "Transpose", {out}, {name(op.outputs(0))}), "perm",
            {0, 2, 3, 1});
  }

  // Numbers as an initializer of a plan dtype: a scalar, or a vector.
  std::string numbers(const std::string &stem, int planType,
                      const std::vector<double> &values, bool vector) {
    onnx::TensorProto *t = graph_->add_initializer();
    t->set_name(fresh(stem));
    t->set_data_type(onnxType(planType));
    if (vector)
      t->add_dims(int64_t(values.size()));
    std::string raw;
    auto put = [&](auto v) {
      raw.append(reinterpret_cast<const char *>(&v), sizeof(v));
    };
    for (double v : values) {
      if (planType == plan::F32)
        put(float(v));
      else if (planType == plan::F64)
        put(v);
      else if (planType == plan::I32)
        put(int32_t(v));
      else
        put(int64_t(v));
    }
    t->set_raw_data(raw);
    return t->name();
  }

  // TensorFlow's FloorMod. Integers: Mod with fmod = 0 (the divisor's sign).
  // Floats: Mod with fmod = 1 (C's fmod, exact), plus the divisor where that
  // remainder is non-zero and of the other sign, as TensorFlow computes it.
  Status floorMod(const plan::Op &op) {
    const int t = type(op.outputs(0)).dtype();
    const std::string x = name(op.inputs(0)), y = name(op.inputs(1));
    const std::string out = name(op.outputs(0));
    if (t != plan::F32 && t != plan::F64) {
      setInt(node(op, "Mod", {x, y}, {out}), "fmod", 0);
      return Status::ok();
    }
    const std::string r = fresh("fmod"), zero = numbers("zero", t, {0}, false);
    setInt(node(op, "Mod", {x, y}, {r}), "fmod", 1);
    const std::string isZero = fresh("is_zero"), nonZero = fresh("non_zero");
    const std::string rNeg = fresh("r_neg"), yNeg = fresh("y_neg");
    const std::string signs = fresh("signs"), fix = fresh("fix");
    const std::string shifted = fresh("shifted");
    node(op, "Equal", {r, zero}, {isZero});
    node(op, "Not", {isZero}, {nonZero});
    node(op, "Less", {r, zero}, {rNeg});
    node(op, "Less", {y, zero}, {yNeg});
    node(op, "Xor", {rNeg, yNeg}, {signs});
    node(op, "And", {nonZero, signs}, {fix});
    node(op, "Add", {r, y}, {shifted});
    node(op, "Where", {fix, shifted, r}, {out});
    return Status::ok();
  }

  // No ONNX operator: the count of boundaries b with !(x < b), over a new
  // last axis, summed (floats in their precision, integers as double).
  Status bucketize(const plan::Op &op) {
    int t = type(op.inputs(0)).dtype();
    const plan::AttrValue *a = attr(op, "boundaries");
    std::vector<double> bounds;
    if (a && a->has_floats())
      bounds.assign(a->floats().values().begin(), a->floats().values().end());
    std::string x = name(op.inputs(0));
    if (t != plan::F32 && t != plan::F64) {
      const std::string d = fresh("as_double");
      setInt(node(op, "Cast", {x}, {d}), "to", onnx::TensorProto::DOUBLE);
      x = d, t = plan::F64;
    }
    if (bounds.empty()) { // every element in bucket 0 (NaN < NaN is false)
      const std::string none = fresh("none");
      node(op, "Less", {x, x}, {none});
      setInt(node(op, "Cast", {none}, {name(op.outputs(0))}), "to",
             onnx::TensorProto::INT32);
      return Status::ok();
    }
    const std::string axes = int64Constant("axes", {-1});
    const std::string column = fresh("column"), below = fresh("below");
    const std::string past = fresh("past"), counts = fresh("counts");
    node(op, "Unsqueeze", {x, axes}, {column});
    node(op, "Less", {column, numbers("boundaries", t, bounds, true)}, {below});
    node(op, "Not", {below}, {past});
    setInt(node(op, "Cast", {past}, {counts}), "to", onnx::TensorProto::INT32);
    setInt(node(op, "ReduceSum", {counts, axes}, {name(op.outputs(0))}),
           "keepdims", 0);
    return Status::ok();
  }

  // Expand's shape or Tile's repeats: `sizes`, except where `fromBatch`
  // holds, which take that dimension of the op's second input (batch_of) at
  // run time.
  std::string batchSizes(const plan::Op &op, const std::vector<int64_t> &sizes,
                         const std::vector<bool> &fromBatch) {
    if (std::find(fromBatch.begin(), fromBatch.end(), true) == fromBatch.end())
      return int64Constant("sizes", sizes);
    const std::string shape = fresh("batch_shape");
    node(op, "Shape", {name(op.inputs(1))}, {shape});
    std::vector<std::string> pieces;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (!fromBatch[d]) {
        pieces.push_back(int64Constant("size", {sizes[d]}));
        continue;
      }
      pieces.push_back(fresh("batch"));
      node(op, "Slice",
           {shape, int64Constant("starts", {int64_t(d)}),
            int64Constant("ends", {int64_t(d) + 1})},
           {pieces.back()});
    }
    const std::string joined = fresh("sizes");
    setInt(node(op, "Concat", pieces, {joined}), "axis", 0);
    return joined;
  }

  // broadcast_to: Expand, whose 1s keep x's sizes (its batch); tile: Tile,
  // a multiple of -1 the batch of batch_of.
  Status batchShapeOp(const plan::Op &op) {
    const bool tile = op.name() == dtf::ops::kTile;
    const bool batchOf = op.inputs_size() > 1;
    std::vector<int64_t> sizes =
        tile ? ints(op, "multiples") : dims(op.outputs(0));
    const std::vector<int64_t> x = dims(op.inputs(0));
    const int64_t pad = int64_t(sizes.size()) - int64_t(x.size());
    std::vector<bool> fromBatch(sizes.size(), false);
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] >= 0)
        continue;
      const bool xHasIt = !tile && int64_t(d) >= pad && x[d - pad] < 0;
      if (batchOf && !xHasIt)
        fromBatch[d] = true;
      else if (xHasIt)
        sizes[d] = 1;
      else
        return errorStatus(op.location(), ": ", op.name(),
                           " has no batch to take dimension ", d, " from");
    }
    node(op, tile ? "Tile" : "Expand",
         {name(op.inputs(0)), batchSizes(op, sizes, fromBatch)},
         {name(op.outputs(0))});
    return Status::ok();
  }

  static std::string autoPad(const plan::Op &op) {
    return text(op, "padding") == "same" ? "SAME_UPPER" : "VALID";
  }

  Status translate(const plan::Op &op) {
    const std::string &kind = op.name();
    auto in = [&](int k) { return name(op.inputs(k)); };
    auto out = [&]() { return name(op.outputs(0)); };
    if (kind == dtf::ops::kInput) {
      names_[op.outputs(0)] = text(op, "name");
      return valueInfo(op.outputs(0), text(op, "name"), graph_->add_input());
    }
    if (kind == dtf::ops::kReadVariable) {
      const std::string var = text(op, "name");
      if (!initialized_.count(var)) {
        Tensor value;
        DTF_RETURN_IF_ERROR(read_(var, &value));
        DTF_RETURN_IF_ERROR(tensorInitializer(var, value));
        initialized_.insert(var);
      }
      if (names_.count(op.outputs(0)))
        node(op, "Identity", {var}, {out()});
      else
        names_[op.outputs(0)] = var;
      return Status::ok();
    }
    if (kind == dtf::ops::kConstant) {
      const plan::AttrValue *v = attr(op, "value");
      if (!v || !v->has_tensor())
        return errorStatus(op.location(), ": dtf.constant has no value");
      Tensor value;
      DTF_RETURN_IF_ERROR(plan::tensorFromValue(v->tensor(), &value));
      const std::string c = fresh("constant");
      DTF_RETURN_IF_ERROR(tensorInitializer(c, value));
      node(op, "Identity", {c}, {out()});
      return Status::ok();
    }
    if (kind == dtf::ops::kFloorMod)
      return floorMod(op);
    if (kind == dtf::ops::kBucketize)
      return bucketize(op);
    for (const auto &u : kUnary)
      if (kind == u[0]) {
        node(op, u[1], {in(0)}, {out()});
        return Status::ok();
      }
    for (const auto &b : kBinary)
      if (kind == b[0]) {
        node(op, b[1], {in(0), in(1)}, {out()});
        return Status::ok();
      }
    if (kind == dtf::ops::kRsqrt) {
      const std::string root = fresh("sqrt");
      node(op, "Sqrt", {in(0)}, {root});
      node(op, "Reciprocal", {root}, {out()});
      return Status::ok();
    }
    if (kind == dtf::ops::kMatmul) {
      std::string a = in(0), b = in(1);
      auto transposed = [&](int k, std::string v) {
        const size_t rank = dims(op.inputs(k)).size();
        std::vector<int64_t> perm;
        for (size_t i = 0; i < rank; ++i)
          perm.push_back(int64_t(i));
        if (rank >= 2)
          std::swap(perm[rank - 1], perm[rank - 2]);
        const std::string t = fresh("transposed");
        setInts(node(op, "Transpose", {std::move(v)}, {t}), "perm", perm);
        return t;
      };
      if (flag(op, "transpose_a"))
        a = transposed(0, a);
      if (flag(op, "transpose_b"))
        b = transposed(1, b);
      node(op, "MatMul", {a, b}, {out()});
      return Status::ok();
    }
    if (kind == dtf::ops::kConv2d || kind == dtf::ops::kConv2dBias) {
      // The filter HWIO -> OIHW; conv2d_bias adds ONNX Conv's bias input B
      // and, with `relu`, a Relu.
      const std::string filter = fresh("oihw");
      setInts(node(op, "Transpose", {in(1)}, {filter}), "perm", {3, 2, 0, 1});
      const std::vector<int64_t> f = dims(op.inputs(1));
      std::vector<std::string> inputs = {filter};
      const bool biased = kind == dtf::ops::kConv2dBias;
      if (biased)
        inputs.push_back(in(2));
      const bool withRelu = biased && flag(op, "relu");
      nchw(
          op, "Conv", inputs,
          [&](onnx::NodeProto *n) {
            setString(n, "auto_pad", autoPad(op));
            if (f.size() == 4)
              setInts(n, "kernel_shape", {f[0], f[1]});
            std::vector<int64_t> strides = ints(op, "strides");
            std::vector<int64_t> dilations = ints(op, "dilations");
            setInts(n, "strides",
                    strides.size() == 2 ? strides : std::vector<int64_t>{1, 1});
            setInts(n, "dilations",
                    dilations.size() == 2 ? dilations
                                          : std::vector<int64_t>{1, 1});
          },
          withRelu ? "Relu" : nullptr);
      return Status::ok();
    }
    if (kind == dtf::ops::kMaxPool || kind == dtf::ops::kAvgPool) {
      nchw(op, kind == dtf::ops::kMaxPool ? "MaxPool" : "AveragePool", {},
           [&](onnx::NodeProto *n) {
             setString(n, "auto_pad", autoPad(op));
             setInts(n, "kernel_shape", ints(op, "window"));
             setInts(n, "strides", ints(op, "strides"));
           });
      return Status::ok();
    }
    if (kind == dtf::ops::kReshape) {
      // The result's own type: static dims, and -1 for the batch.
      std::vector<int64_t> shape = dims(op.outputs(0));
      int free = 0;
      for (int64_t d : shape)
        free += d < 0;
      if (free > 1)
        return errorStatus(op.location(), ": ", kind,
                           " to a shape with more than one unknown dimension");
      node(op, "Reshape", {in(0), int64Constant("shape", shape)}, {out()});
      return Status::ok();
    }
    if (kind == dtf::ops::kBroadcastTo || kind == dtf::ops::kTile)
      return batchShapeOp(op);
    if (kind == dtf::ops::kTranspose) {
      setInts(node(op, "Transpose", {in(0)}, {out()}), "perm",
              ints(op, "permutation"));
      return Status::ok();
    }
    if (kind == dtf::ops::kConcat) {
      std::vector<std::string> inputs;
      for (int k = 0; k < op.inputs_size(); ++k)
        inputs.push_back(in(k));
      setInt(node(op, "Concat", inputs, {out()}), "axis", intOr(op, "axis", 0));
      return Status::ok();
    }
    if (kind == dtf::ops::kGather) {
      setInt(node(op, "Gather", {in(0), in(1)}, {out()}), "axis", 0);
      return Status::ok();
    }
    if (kind == dtf::ops::kSlice) {
      std::vector<int64_t> begin = ints(op, "begin"), size = ints(op, "size");
      std::vector<int64_t> ends, axes;
      for (size_t i = 0; i < begin.size(); ++i) {
        ends.push_back(i < size.size() && size[i] >= 0
                           ? begin[i] + size[i]
                           : std::numeric_limits<int64_t>::max());
        axes.push_back(int64_t(i));
      }
      node(op, "Slice",
           {in(0), int64Constant("starts", begin), int64Constant("ends", ends),
            int64Constant("axes", axes)},
           {out()});
      return Status::ok();
    }
    for (const auto &r : kReduce)
      if (kind == r[0]) {
        std::vector<int64_t> axes = ints(op, "axes");
        if (axes.empty())
          for (size_t i = 0; i < dims(op.inputs(0)).size(); ++i)
            axes.push_back(int64_t(i));
        onnx::NodeProto *n =
            kind == dtf::ops::kSum
                ? node(op, r[1], {in(0), int64Constant("axes", axes)}, {out()})
                : node(op, r[1], {in(0)}, {out()});
        if (kind != dtf::ops::kSum)
          setInts(n, "axes", axes);
        setInt(n, "keepdims", flag(op, "keep_dims") ? 1 : 0);
        return Status::ok();
      }
    if (kind == dtf::ops::kSoftmax || kind == dtf::ops::kLogSoftmax) {
      setInt(node(op, kind == dtf::ops::kSoftmax ? "Softmax" : "LogSoftmax", {in(0)},
                  {out()}),
             "axis", intOr(op, "axis", -1));
      return Status::ok();
    }
    if (kind == dtf::ops::kArgmax) {
      const int target = onnxType(type(op.outputs(0)).dtype());
      const std::string index =
          target == onnx::TensorProto::INT64 ? out() : fresh("argmax");
      onnx::NodeProto *n = node(op, "ArgMax", {in(0)}, {index});
      setInt(n, "axis", intOr(op, "axis", 0));
      setInt(n, "keepdims", 0);
      if (index != out())
        setInt(node(op, "Cast", {index}, {out()}), "to", target);
      return Status::ok();
    }
    if (kind == dtf::ops::kCast) {
      setInt(node(op, "Cast", {in(0)}, {out()}), "to",
             onnxType(type(op.outputs(0)).dtype()));
      return Status::ok();
    }
    if (kind == dtf::ops::kCompare) {
      const std::string predicate = text(op, "predicate");
      if (predicate == "ne") {
        const std::string eq = fresh("equal");
        node(op, "Equal", {in(0), in(1)}, {eq});
        node(op, "Not", {eq}, {out()});
        return Status::ok();
      }
      for (const auto &c : kCompare)
        if (predicate == c[0]) {
          node(op, c[1], {in(0), in(1)}, {out()});
          return Status::ok();
        }
      return Status::error(kUnsupported);
    }
    if (kind == dtf::ops::kSelect) {
      node(op, "Where", {in(0), in(1), in(2)}, {out()});
      return Status::ok();
    }
    if (kind == dtf::ops::kLstm)
      return lstm(op);
    if (kind == dtf::ops::kGru)
      return gru(op);
    return Status::error(kUnsupported);
  }

  // dtf.lstm as ONNX's LSTM: x [B, T, F] to [T, B, F]; Keras' kernel
  // [F, 4 U] and recurrent_kernel [U, 4 U] (gates i, f, c, o) to W [1, 4 U,
  // F] and R [1, 4 U, U] in ONNX's gate order i, o, f, c; the bias, with the
  // layer's 1 added to the forget gate, as B's input half [1, 8 U] (the
  // recurrent half zero); then Y_h [1, B, U] or Y [T, 1, B, U] back to the
  // layer's [B, U] or [B, T, U].
  Status lstm(const plan::Op &op) {
    int64_t u = 0;
    DTF_RETURN_IF_ERROR(units(op, &u));
    auto gates = [&](const std::string &v, int axis) {
      std::vector<std::string> parts;
      for (int g = 0; g < 4; ++g)
        parts.push_back(fresh("gate"));
      setInt(node(op, "Split", {v, int64Constant("split", {u, u, u, u})}, parts),
             "axis", axis);
      return parts; // i, f, c, o
    };
    auto onnxWeights = [&](int k) {
      std::vector<std::string> p = gates(name(op.inputs(k)), 1);
      const std::string iofc = fresh("iofc"), t = fresh("transposed"),
                        result = fresh("weights");
      setInt(node(op, "Concat", {p[0], p[3], p[1], p[2]}, {iofc}), "axis", 1);
      setInts(node(op, "Transpose", {iofc}, {t}), "perm", {1, 0});
      node(op, "Unsqueeze", {t, int64Constant("axes", {0})}, {result});
      return result;
    };
    const std::string x = timeMajor(op);
    const std::string wOnnx = onnxWeights(1), rOnnx = onnxWeights(2);
    std::vector<std::string> b = gates(name(op.inputs(3)), 0);
    Tensor one = Tensor::allocate(DType::F32, {});
    one.data<float>()[0] = 1.0f;
    Tensor zeros = Tensor::zeros(DType::F32, {4 * u});
    const std::string oneName = fresh("forget_offset"), zeroName = fresh("zeros");
    DTF_RETURN_IF_ERROR(tensorInitializer(oneName, one));
    DTF_RETURN_IF_ERROR(tensorInitializer(zeroName, zeros));
    const std::string forget = fresh("forget"), bias = fresh("bias"),
                      bias2 = fresh("bias");
    node(op, "Add", {b[1], oneName}, {forget});
    setInt(node(op, "Concat", {b[0], b[3], forget, b[2], zeroName}, {bias}), "axis", 0);
    node(op, "Unsqueeze", {bias, int64Constant("axes", {0})}, {bias2});
    const std::string y = fresh("y"), yh = fresh("y_h");
    setInt(node(op, "LSTM", {x, wOnnx, rOnnx, bias2}, {y, yh}), "hidden_size", u);
    layerOutput(op, y, yh);
    return Status::ok();
  }

  // dtf.gru as ONNX's GRU with linear_before_reset (TensorFlow 2's
  // reset_after), whose gate order z, r, h is Keras': kernel [F, 3 U] and
  // recurrent_kernel [U, 3 U] transposed to W [1, 3 U, F] and R [1, 3 U, U],
  // B [1, 6 U] the bias then the recurrent bias; x and the result as for
  // the LSTM.
  Status gru(const plan::Op &op) {
    int64_t u = 0;
    DTF_RETURN_IF_ERROR(units(op, &u));
    auto onnxWeights = [&](int k) {
      const std::string t = fresh("transposed"), result = fresh("weights");
      setInts(node(op, "Transpose", {name(op.inputs(k))}, {t}), "perm", {1, 0});
      node(op, "Unsqueeze", {t, int64Constant("axes", {0})}, {result});
      return result;
    };
    const std::string x = timeMajor(op);
    const std::string wOnnx = onnxWeights(1), rOnnx = onnxWeights(2);
    const std::string bias = fresh("bias"), bias2 = fresh("bias");
    setInt(node(op, "Concat", {name(op.inputs(3)), name(op.inputs(4))}, {bias}), "axis", 0);
    node(op, "Unsqueeze", {bias, int64Constant("axes", {0})}, {bias2});
    const std::string y = fresh("y"), yh = fresh("y_h");
    onnx::NodeProto *gru = node(op, "GRU", {x, wOnnx, rOnnx, bias2}, {y, yh});
    setInt(gru, "hidden_size", u);
    setInt(gru, "linear_before_reset", 1);
    layerOutput(op, y, yh);
    return Status::ok();
  }

  // A recurrent layer's units: recurrent_kernel's [U, G U] first dimension.
  Status units(const plan::Op &op, int64_t *u) {
    const std::vector<int64_t> w = dims(op.inputs(2));
    if (w.size() != 2 || w[0] <= 0)
      return errorStatus(op.location(), ": ", op.name(),
                         " with a recurrent kernel of unknown size");
    *u = w[0];
    return Status::ok();
  }

  // A recurrent layer's x [B, T, F] as ONNX's [T, B, F].
  std::string timeMajor(const plan::Op &op) {
    const std::string x = fresh("tnf");
    setInts(node(op, "Transpose", {name(op.inputs(0))}, {x}), "perm", {1, 0, 2});
    return x;
  }

  // ONNX's Y [T, 1, B, U] or Y_h [1, B, U] as the layer's [B, T, U] or [B, U].
  void layerOutput(const plan::Op &op, const std::string &y, const std::string &yh) {
    if (flag(op, "return_sequences")) {
      const std::string squeezed = fresh("squeezed");
      node(op, "Squeeze", {y, int64Constant("axes", {1})}, {squeezed});
      setInts(node(op, "Transpose", {squeezed}, {name(op.outputs(0))}), "perm",
              {1, 0, 2});
    } else {
      node(op, "Squeeze", {yh, int64Constant("axes", {0})}, {name(op.outputs(0))});
    }
  }

  const plan::Program &program_;
  const VariableSource &read_;
  onnx::GraphProto *graph_;
  std::map<int32_t, const plan::TensorType *> types_;
  std::map<int32_t, std::string> names_;
  std::set<std::string> initialized_;
  int counter_ = 0;
};

} // namespace

std::string supportedOps() {
  std::string s = "input, read_variable, constant, rsqrt, matmul, conv2d, "
                  "max_pool, avg_pool, reshape, flatten, transpose, concat, "
                  "gather, slice, softmax, log_softmax, argmax, cast, "
                  "compare, select, lstm, gru";
  for (const auto &u : kUnary)
    s += std::string(", ") + (u[0] + 4);
  for (const auto &b : kBinary)
    s += std::string(", ") + (b[0] + 4);
  for (const auto &r : kReduce)
    s += std::string(", ") + (r[0] + 4);
  return s;
}

Status exportModel(const plan::Program &program, const VariableSource &read,
                   const std::string &modelName, onnx::ModelProto *out,
                   std::vector<std::string> *unsupported) {
  out->set_ir_version(7); // the IR of opset 13
  out->set_producer_name("dtf-export");
  out->set_model_version(1);
  onnx::OperatorSetIdProto *opset = out->add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto *graph = out->mutable_graph();
  graph->set_name(modelName);
  Translator t(program, read, graph);
  return t.run(unsupported);
}

} // namespace dtf::onnxexport
