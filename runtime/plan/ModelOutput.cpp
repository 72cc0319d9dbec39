// Finding a model's output and cutting the program that computes it.
#include "runtime/plan/ModelOutput.h"
#include "dtf/OpNames.h"

#include <set>

namespace dtf::plan {

namespace {

/// Whether `op` is a softmax cross-entropy, op by op or as a row kernel of
/// `kernels`.
bool isCrossEntropy(const Op &op,
                    const google::protobuf::RepeatedPtrField<Kernel> *kernels) {
  auto isLoss = [](const std::string &name) {
    return name == dtf::ops::kSparseSoftmaxCrossEntropy ||
           name == dtf::ops::kSoftmaxCrossEntropy;
  };
  if (isLoss(op.name()))
    return true;
  auto k = op.attrs().find("kernel");
  if (op.name() != dtf::ops::kFused || !kernels || k == op.attrs().end() ||
      k->second.i() < 0 || k->second.i() >= kernels->size())
    return false;
  const Kernel &kernel = kernels->Get(int(k->second.i()));
  return kernel.ops_size() == 1 && isLoss(kernel.ops(0));
}

} // namespace

Status findModelOutput(const Program &eval, ModelOutput *out,
                       const google::protobuf::RepeatedPtrField<Kernel> *kernels) {
  if (eval.ops_size() == 0)
    return errorStatus("the plan has no eval program (compile it again with "
                       "this version's dtfc)");
  for (const Op &op : eval.ops())
    if (isCrossEntropy(op, kernels) && op.inputs_size() >= 1) {
      *out = {op.inputs(0), "logits"};
      return Status::ok();
    }
  std::set<int32_t> read;
  for (const Op &op : eval.ops())
    read.insert(op.inputs().begin(), op.inputs().end());
  for (int i = eval.ops_size() - 1; i >= 0; --i) {
    const Op &op = eval.ops(i);
    // A fused region may yield several values; the output is the one that
    // nothing reads.
    if (op.name() == dtf::ops::kInput || op.name() == dtf::ops::kReadVariable ||
        op.name() == dtf::ops::kConstant ||
        (op.outputs_size() != 1 && op.name() != dtf::ops::kFused))
      continue;
    for (int32_t v : op.outputs())
      if (!read.count(v)) {
        *out = {v, "output"};
        return Status::ok();
      }
  }
  return errorStatus("the eval program computes no value from its inputs");
}

Program inferenceProgram(const Program &program, const ModelOutput &output) {
  std::set<int32_t> needed = {output.value};
  std::vector<bool> keep(size_t(program.ops_size()), false);
  for (int i = program.ops_size() - 1; i >= 0; --i) {
    const Op &op = program.ops(i);
    bool used = false;
    for (int32_t v : op.outputs())
      used |= needed.count(v) > 0;
    if (!used)
      continue;
    keep[size_t(i)] = true;
    needed.insert(op.inputs().begin(), op.inputs().end());
  }
  Program out;
  out.set_name(program.name() + ":" + output.name);
  for (const Value &v : program.values())
    if (needed.count(v.id()))
      *out.add_values() = v;
  for (int i = 0; i < program.ops_size(); ++i)
    if (keep[size_t(i)])
      *out.add_ops() = program.ops(i);
  for (const Feed &f : program.feeds())
    if (needed.count(f.value()))
      *out.add_feeds() = f;
  Fetch *fetch = out.add_fetches();
  fetch->set_name(output.name);
  fetch->set_value(output.value);
  return out;
}

} // namespace dtf::plan
