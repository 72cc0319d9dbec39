// What both sides know of a plan beyond its protobuf: types and ops as
// messages name them, and which ops update their operands in place.
#include "schema/PlanSchema.h"

#include "schema/Status.h"

#include "dtf/OpNames.h"

namespace dtf::plan {

const char *dtypeName(int planDType) {
  switch (planDType) {
  case F32:
    return "f32";
  case F64:
    return "f64";
  case F16:
    return "f16";
  case BF16:
    return "bf16";
  case I32:
    return "i32";
  case I64:
    return "i64";
  case BOOL:
    return "bool";
  default:
    return "?";
  }
}

int64_t elementBytes(int planDType) {
  switch (planDType) {
  case F16:
  case BF16:
    return 2;
  case I64:
  case F64:
    return 8;
  case BOOL:
    return 1;
  default:
    return 4;
  }
}

std::vector<int64_t> dimsOf(const Shape &shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

std::string dimsString(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += ',';
    s += dims[i] == -1 ? std::string("B") : std::to_string(dims[i]);
  }
  return s + ']';
}

bool shapeFits(const std::vector<int64_t> &declared,
               const std::vector<int64_t> &actual) {
  if (declared.size() != actual.size())
    return false;
  for (size_t i = 0; i < declared.size(); ++i)
    if (declared[i] != -1 && declared[i] != actual[i])
      return false;
  return true;
}

int64_t staticElements(const std::vector<int64_t> &dims, int64_t limit) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return -1;
    if (d != 0 && n > limit / d)
      return -1;
    n *= d;
  }
  return n;
}

std::string printable(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      s += "\\x";
      s += kHex[u >> 4];
      s += kHex[u & 15];
    } else {
      s += c;
    }
  }
  return s;
}

std::string typeString(const TensorType &type) {
  return dtypeName(type.dtype()) + dimsString(dimsOf(type.shape()));
}

std::string describeOp(const Program &program, int index) {
  const Op &op = program.ops(index);
  std::string name = op.name().empty() ? "(unnamed op)" : printable(op.name());
  if (!op.location().empty())
    return printable(op.location()) + ": " + name;
  return strCat("op #", index, " ", name);
}

int updatedOperands(const Op &op) {
  const std::string &n = op.name();
  if (n == dtf::ops::kApplySgd || n == dtf::ops::kSparseApplySgd ||
      n == dtf::ops::kAssignAdd || n == dtf::ops::kMovingAverageUpdate ||
      n == dtf::ops::kAssignMovingAverage)
    return 1;
  if (n == dtf::ops::kApplyMomentum || n == dtf::ops::kApplyAdagrad ||
      n == dtf::ops::kAdjustLossScale ||
      n == dtf::ops::kSparseApplyMomentum || n == dtf::ops::kSparseApplyAdagrad)
    return 2;
  if (n == dtf::ops::kApplyAdam || n == dtf::ops::kSparseApplyAdam ||
      n == dtf::ops::kApplyFtrl || n == dtf::ops::kSparseApplyFtrl ||
      n == dtf::ops::kSparseApplyRmsprop)
    return 3;
  if (n == dtf::ops::kFused) {
    // A generated optimizer update: its first `inplace` inputs (the variable
    // and its slots) are written in place.
    auto it = op.attrs().find("inplace");
    if (it != op.attrs().end() && it->second.value_case() == AttrValue::kI &&
        it->second.i() > 0 && it->second.i() <= op.inputs_size())
      return int(it->second.i());
    return 0;
  }
  if (n == dtf::ops::kApplyRmsprop) {
    auto it = op.attrs().find("centered");
    const AttrValue *centered = it == op.attrs().end() ? nullptr : &it->second;
    bool isCentered =
        centered && centered->value_case() == AttrValue::kB && centered->b();
    return isCentered ? 4 : 3;
  }
  return 0;
}

bool isRecurrentLayerOp(std::string_view opName) {
  for (const char *name : {ops::kLstm, ops::kLstmTrain, ops::kLstmGrad, ops::kGru,
                           ops::kGruTrain, ops::kGruGrad})
    if (opName == name)
      return true;
  return false;
}

std::string lowPrecisionOpsPhrase(int total, int recurrent) {
  std::string phrase = std::to_string(total - recurrent) + " matmuls and convolutions";
  if (recurrent > 0)
    phrase += " and " + std::to_string(recurrent) + " LSTM/GRU ops";
  return phrase;
}

bool isDenseUpdate(std::string_view opName) {
  for (const char *name : {ops::kApplySgd, ops::kApplyMomentum, ops::kApplyAdam,
                           ops::kApplyAdagrad, ops::kApplyFtrl,
                           ops::kApplyRmsprop})
    if (opName == name)
      return true;
  return false;
}

} // namespace dtf::plan
