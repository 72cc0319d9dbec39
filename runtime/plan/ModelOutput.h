// The model's output in a plan's eval program (its logits, else its last
// value) and the part of the program that computes it: what dtf-run
// --predict runs and dtf-export writes as ONNX.
#pragma once

#include "schema/Status.h"

#include "plan.pb.h"

#include <string>

namespace dtf::plan {

struct ModelOutput {
  int32_t value = -1;
  /// "logits" for the logits a loss reads, else "output".
  std::string name;
};

/// The logits: operand 0 of the eval program's first
/// sparse_softmax_cross_entropy or softmax_cross_entropy. A model without
/// such a loss: the output of its last op that is not a dtf.input,
/// dtf.read_variable or dtf.constant and whose value no other op reads.
/// With `kernels` (the plan's), a dtf.fused op whose kernel is that loss
/// alone (a row kernel) counts as the loss.
Status findModelOutput(
    const Program &eval, ModelOutput *out,
    const google::protobuf::RepeatedPtrField<Kernel> *kernels = nullptr);

/// The ops of `program` that `output` depends on, in their order, with the
/// feeds they read and one fetch, `output` under its name: inputs the output
/// does not need (the labels) are left out.
Program inferenceProgram(const Program &program, const ModelOutput &output);

} // namespace dtf::plan
