// Translating a plan's inference program (runtime/plan/ModelOutput.h) and
// the values of its variables into an ONNX model.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"

#include "onnx_model.pb.h"
#include "plan.pb.h"

#include <functional>
#include <string>
#include <vector>

namespace dtf::onnxexport {

/// The ONNX opset the models use: onnxruntime 1.x runs it.
constexpr int kOpset = 13;

/// The value of a variable the program reads (from a checkpoint).
using VariableSource =
    std::function<Status(const std::string &name, Tensor *out)>;

/// Writes `program` (a plan's inference program: inputs, variable reads and
/// the ops that compute its one fetch) as the graph of `out`: the inputs
/// keep their names with the batch dimension a free "batch", the fetch is
/// the graph's output under its name, each variable an initializer. dtf's
/// NHWC convolutions and pools become ONNX's NCHW ones between Transposes.
/// An op without a translation fails the export; `unsupported` then lists
/// each one as "LOCATION: dtf.OP".
Status exportModel(const plan::Program &program, const VariableSource &read,
                   const std::string &modelName, onnx::ModelProto *out,
                   std::vector<std::string> *unsupported);

/// The ops exportModel translates, for messages and docs.
std::string supportedOps();

} // namespace dtf::onnxexport
