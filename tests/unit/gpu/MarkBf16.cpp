// dtf-test-mark-bf16 IN OUT: marks every matmul and convolution of a plan's
// training step that is placed on a GPU with compute_dtype "bf16", and seals
// the plan again. dtfc never writes such a plan (dtf-mixed-precision leaves
// GPU-placed ops in f32); tests/e2e/mixed_precision_gpu.sh checks that
// dtf-run says so rather than computing in f32 silently when one does.
#include "dtf/OpNames.h"
#include "plan.pb.h"
#include "schema/DeviceName.h"
#include "schema/PlanSeal.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dtf-test-mark-bf16 IN OUT\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  dtf::plan::Plan plan;
  if (!in || !plan.ParseFromString(bytes.str())) {
    std::fprintf(stderr, "dtf-test-mark-bf16: cannot read a plan from %s\n",
                 argv[1]);
    return 1;
  }
  int marked = 0;
  for (dtf::plan::Op &op : *plan.mutable_train_step()->mutable_ops()) {
    dtf::DeviceNameParse device = dtf::parseDeviceName(op.device());
    const bool product = op.name() == dtf::ops::kMatmul ||
                         op.name().rfind(dtf::ops::kConv2d, 0) == 0;
    if (product && device.name && device.name->type == dtf::DeviceType::GPU) {
      (*op.mutable_attrs())["compute_dtype"].set_s("bf16");
      ++marked;
    }
  }
  std::ofstream out(argv[2], std::ios::binary);
  out << dtf::plan::sealPlan(plan);
  if (!out.flush()) {
    std::fprintf(stderr, "dtf-test-mark-bf16: cannot write %s\n", argv[2]);
    return 1;
  }
  std::printf("%d GPU ops marked compute_dtype bf16\n", marked);
  return 0;
}
