// What a plan's program says about the data it reads (PlanInputs.h).
#include "runtime/train/PlanInputs.h"
#include "dtf/OpNames.h"

#include "runtime/train/Feeding.h"

namespace dtf::train {

const plan::TensorType *typeOf(const plan::Program &program, int32_t id) {
  for (const plan::Value &v : program.values())
    if (v.id() == id)
      return &v.type();
  return nullptr;
}

std::vector<PlanInput> planInputs(const plan::Program &program) {
  std::vector<PlanInput> inputs;
  auto add = [&](const std::string &name, int32_t value) {
    if (name == kLearningRateFeed)
      return;
    for (const PlanInput &in : inputs)
      if (in.value == value)
        return;
    if (const plan::TensorType *t = typeOf(program, value))
      inputs.push_back({name, value, t});
  };
  for (const plan::Feed &feed : program.feeds())
    add(feed.name(), feed.value());
  for (const plan::Op &op : program.ops()) {
    if (op.name() != dtf::ops::kInput || op.outputs_size() != 1)
      continue;
    auto name = op.attrs().find("name");
    if (name != op.attrs().end())
      add(name->second.s(), op.outputs(0));
  }
  return inputs;
}

bool isFloatType(const plan::TensorType &t) {
  return t.dtype() == plan::F32 || t.dtype() == plan::F64 ||
         t.dtype() == plan::F16 || t.dtype() == plan::BF16;
}

bool isIntegerType(const plan::TensorType &t) {
  return t.dtype() == plan::I32 || t.dtype() == plan::I64;
}

std::optional<int32_t> lossClassesIfAny(const plan::Program &program) {
  for (const plan::Op &op : program.ops()) {
    if (op.name() != dtf::ops::kSparseSoftmaxCrossEntropy || op.inputs_size() < 1)
      continue;
    const plan::TensorType *t = typeOf(program, op.inputs(0));
    if (t && t->shape().dims_size() > 0) {
      int64_t c = t->shape().dims(t->shape().dims_size() - 1);
      if (c >= 2 && c <= (int64_t(1) << 24))
        return int32_t(c);
    }
  }
  return std::nullopt;
}

int32_t lossClasses(const plan::Program &program) {
  return lossClassesIfAny(program).value_or(10);
}

// The input that holds the loss's labels (operand 1 of a
// sparse_softmax_cross_entropy), or -1.
int labelInputOf(const plan::Program &program,
                 const std::vector<PlanInput> &inputs) {
  for (const plan::Op &op : program.ops()) {
    if (op.name() != dtf::ops::kSparseSoftmaxCrossEntropy || op.inputs_size() < 2)
      continue;
    for (size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k].value == op.inputs(1) && isIntegerType(*inputs[k].type))
        return int(k);
  }
  return -1;
}

// The bound of the integer ids an input holds: the rows of the table a
// dtf.gather indexes with it, the depth of a dtf.one_hot, the classes of a
// loss; the smallest if several; 2 when nothing says.
int64_t idBound(const plan::Program &program, int32_t value) {
  int64_t bound = 0;
  auto take = [&](int64_t b) {
    if (b > 0 && (bound == 0 || b < bound))
      bound = b;
  };
  for (const plan::Op &op : program.ops()) {
    if (op.name() == dtf::ops::kGather && op.inputs_size() >= 2 &&
        op.inputs(1) == value) {
      const plan::TensorType *params = typeOf(program, op.inputs(0));
      if (params && params->shape().dims_size() > 0)
        take(params->shape().dims(0));
    } else if (op.name() == dtf::ops::kDynamicRows && op.inputs_size() == 1 &&
               op.outputs_size() == 1 && op.inputs(0) == value) {
      // Ids of a dynamic table: as many as it has rows.
      take(idBound(program, op.outputs(0)));
    } else if (op.name() == dtf::ops::kOneHot && op.inputs_size() >= 1 &&
               op.inputs(0) == value) {
      auto depth = op.attrs().find("depth");
      if (depth != op.attrs().end())
        take(depth->second.i());
    } else if (op.name() == dtf::ops::kSparseSoftmaxCrossEntropy &&
               op.inputs_size() >= 2 && op.inputs(1) == value) {
      take(lossClasses(program));
    }
  }
  return bound > 0 ? bound : 2;
}

} // namespace dtf::train
