// What a plan's program says about the data it reads: its inputs, the
// loss's classes and labels, the bound of integer ids. Used by Feeding.cpp to
// open and check datasets against the plan.
#pragma once

#include "plan.pb.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtf::train {

/// A data input of a program: a feed other than the learning rate, or a
/// dtf.input without a Feed entry.
struct PlanInput {
  std::string name;
  int32_t value = -1;
  const plan::TensorType *type = nullptr;
};

/// The type of value `id`, or null.
const plan::TensorType *typeOf(const plan::Program &program, int32_t id);
/// The program's data inputs, feeds first.
std::vector<PlanInput> planInputs(const plan::Program &program);
bool isFloatType(const plan::TensorType &t);
bool isIntegerType(const plan::TensorType &t);
/// The class count of the program's loss: the last dim of the logits of its
/// first sparse_softmax_cross_entropy; none without one.
std::optional<int32_t> lossClassesIfAny(const plan::Program &program);
/// lossClassesIfAny, or 10.
int32_t lossClasses(const plan::Program &program);
/// The input that holds the loss's labels, or -1.
int labelInputOf(const plan::Program &program,
                 const std::vector<PlanInput> &inputs);
/// The bound of the integer ids an input holds (2 when nothing says).
int64_t idBound(const plan::Program &program, int32_t value);

} // namespace dtf::train
