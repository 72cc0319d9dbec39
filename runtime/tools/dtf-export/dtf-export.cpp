// dtf-export: writes a plan's evaluation graph with a checkpoint's trained
// weights as an ONNX model.
#include "dtf/Version.h"

#include "OnnxExport.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/plan/FusedKernels.h"
#include "runtime/plan/ModelOutput.h"
#include "runtime/plan/PlanReader.h"

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

namespace {

constexpr const char *kUsage =
    R"(usage: dtf-export PLAN --model-dir DIR -o model.onnx

Writes the evaluation graph of PLAN (a plan.bin written by dtfc) with the
weights of the latest checkpoint in DIR (a dtf-run --model-dir run) as an
ONNX model (opset 13, which onnxruntime runs):

  - the graph computes the model's logits (the first operand of its
    softmax cross-entropy loss), or without such a loss its last value,
    from the inputs it needs (the labels are left out), as the eval
    program does: dropout off, and the moving averages in place of the
    weights when the plan keeps them;
  - inputs keep the model's input names and types, with the batch
    dimension a free dimension named "batch"; the one output is named
    "logits" (or "output");
  - every variable the graph reads is an initializer under its name;
  - dtf's NHWC conv2d, max_pool and avg_pool become ONNX's NCHW Conv,
    MaxPool and AveragePool between Transposes, the HWIO filter an OIHW one.

An op without an ONNX translation stops the export and is named with its
place in the model (models/x.dtf:12:9: dtf.one_hot), one line each.

The checkpoint is checked whole first (index, data file headers, every
tensor's CRC32C) and named with its step on stderr; a damaged one is refused
(exit 4) with its damage named.

options:
  --model-dir DIR   the run whose latest checkpoint holds the weights
  --restore latest|latest-valid  which checkpoint: the newest, refused when
                    damaged (latest, the default), or the newest whole one,
                    with a warning naming each damaged one passed over
  -o, --output FILE where the model goes (model.onnx)
  --help            print this help and exit
  --version         print the version and exit

exit codes:
  0  written
  2  usage error
  3  the graph holds an op dtf-export cannot translate
  4  I/O: the plan, the checkpoint or the output file
)";

// Opens the checkpoint of `modelDir` that `policy` picks, checked whole, and
// says which on stderr.
dtf::Status
openCheckpoint(const std::string &modelDir,
               dtf::checkpoint::RestorePolicy policy, int64_t *step,
               std::unique_ptr<dtf::checkpoint::CheckpointReader> *reader) {
  dtf::checkpoint::RestoreChoice choice;
  dtf::Status s =
      dtf::checkpoint::chooseCheckpoint(modelDir, policy, nullptr, &choice);
  for (const std::string &why : choice.warnings())
    std::fprintf(stderr, "dtf-export: warning: %s\n", why.c_str());
  DTF_RETURN_IF_ERROR(s);
  *step = choice.step;
  if (*step < 0)
    return dtf::errorStatus(modelDir,
                            " holds no checkpoint: train with "
                            "dtf-run --model-dir ",
                            modelDir, " first");
  std::fprintf(stderr, "dtf-export: reading checkpoint %s (step %lld)\n",
               dtf::checkpoint::checkpointPath(modelDir, *step).c_str(),
               (long long)*step);
  return dtf::checkpoint::CheckpointReader::open(modelDir, *step, reader);
}

} // namespace

int main(int argc, char **argv) {
  std::string planPath, modelDir, output;
  auto policy = dtf::checkpoint::RestorePolicy::kLatest;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool hasValue = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("dtf-export %s\n", DTF_VERSION_STRING);
      return 0;
    }
    if (arg == "--model-dir" || arg == "-o" || arg == "--output" ||
        arg == "--restore") {
      if (!hasValue) {
        if (i + 1 >= argc) {
          std::fprintf(stderr, "dtf-export: error: %s needs a value\n",
                       arg.c_str());
          return 2;
        }
        value = argv[++i];
      }
      if (arg == "--restore" &&
          !dtf::checkpoint::parseRestorePolicy(value, &policy)) {
        std::fprintf(stderr,
                     "dtf-export: error: --restore expects latest or "
                     "latest-valid, got '%s'\n",
                     value.c_str());
        return 2;
      }
      if (arg != "--restore")
        (arg == "--model-dir" ? modelDir : output) = value;
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr,
                   "dtf-export: error: unknown option '%s' (see dtf-export "
                   "--help)\n",
                   argv[i]);
      return 2;
    }
    if (!planPath.empty()) {
      std::fprintf(stderr, "dtf-export: error: more than one plan given\n");
      return 2;
    }
    planPath = arg;
  }
  if (planPath.empty() || modelDir.empty() || output.empty()) {
    std::fprintf(stderr, "dtf-export: error: %s\n%s",
                 planPath.empty() ? "no plan given"
                 : modelDir.empty()
                     ? "--model-dir DIR is needed (the trained weights)"
                     : "-o FILE is needed (where the model goes)",
                 kUsage);
    return 2;
  }
  google::protobuf::SetLogHandler(nullptr);
  auto fail = [](int code, const dtf::Status &s) {
    std::fprintf(stderr, "dtf-export: error: %s\n", s.message().c_str());
    return code;
  };

  dtf::plan::Plan plan;
  dtf::Status s = dtf::plan::readPlanFile(planPath, &plan);
  if (!s.isOk())
    return fail(4, s);
  // ONNX gets the ops of each fused region, which it has operators for.
  s = dtf::plan::expandAllFusedOps(&plan);
  if (!s.isOk())
    return fail(4, dtf::errorStatus(planPath, ": ", s.message()));
  dtf::plan::ModelOutput modelOutput;
  s = dtf::plan::findModelOutput(plan.eval(), &modelOutput);
  if (!s.isOk())
    return fail(4, dtf::errorStatus(planPath, ": ", s.message()));
  const dtf::plan::Program program =
      dtf::plan::inferenceProgram(plan.eval(), modelOutput);

  int64_t step = -1;
  std::unique_ptr<dtf::checkpoint::CheckpointReader> reader;
  s = openCheckpoint(modelDir, policy, &step, &reader);
  if (!s.isOk())
    return fail(4, s);
  auto read = [&](const std::string &name, dtf::Tensor *out) {
    if (!reader->find(name))
      return dtf::errorStatus("checkpoint ",
                              dtf::checkpoint::checkpointName(step), " in ",
                              modelDir, " has no variable '", name,
                              "': it was saved by a different model");
    return reader->read(name, out);
  };

  onnx::ModelProto model;
  std::vector<std::string> unsupported;
  s = dtf::onnxexport::exportModel(program, read, plan.model(), &model,
                                   &unsupported);
  if (!unsupported.empty()) {
    for (const std::string &u : unsupported)
      std::fprintf(stderr, "dtf-export: error: %s has no ONNX translation\n",
                   u.c_str());
    std::fprintf(stderr, "dtf-export: the ops it translates: %s\n",
                 dtf::onnxexport::supportedOps().c_str());
    return 3;
  }
  if (!s.isOk())
    return fail(4, s);
  model.set_producer_version(DTF_VERSION_STRING);
  model.set_doc_string("dtf model " + plan.model() + " from " + planPath +
                       ", weights of " + dtf::checkpoint::checkpointName(step) +
                       " in " + modelDir);
  {
    std::ofstream f(output, std::ios::binary | std::ios::trunc);
    if (!f || !model.SerializeToOstream(&f) || !f.flush())
      return fail(4, dtf::errorStatus(
                         output, ": cannot write: ", std::strerror(errno)));
  }
  std::printf("wrote %s: %s, %d nodes, %d initializers, weights of %s in "
              "%s; input%s",
              output.c_str(), plan.model().c_str(), model.graph().node_size(),
              model.graph().initializer_size(),
              dtf::checkpoint::checkpointName(step).c_str(), modelDir.c_str(),
              model.graph().input_size() == 1 ? "" : "s");
  for (const onnx::ValueInfoProto &v : model.graph().input())
    std::printf(" %s", v.name().c_str());
  std::printf(", output %s\n", modelOutput.name.c_str());
  return 0;
}
