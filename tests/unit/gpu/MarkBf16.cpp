// dtf-test-mark-bf16 IN OUT: marks every matmul and convolution of a plan's
// training step that is placed on a GPU with compute_dtype "bf16", and seals
// the plan again. dtfc never writes such a plan (dtf-mixed-precision leaves
// GPU-placed ops in f32); tests/e2e/mixed_precision_gpu.sh checks that
// dtf-run says so rather than computing in f32 silently when one does.
#include "dtf/OpNames.h"
#include "schema/DeviceName.h"
#include "tests/unit/gpu/PlanFile.h"

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dtf-test-mark-bf16 IN OUT\n");
    return 2;
  }
  dtf::plan::Plan plan;
  if (!dtf::testtools::readPlanFile("dtf-test-mark-bf16", argv[1], &plan))
    return 1;
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
  if (!dtf::testtools::writeSealedPlanFile("dtf-test-mark-bf16", argv[2], plan))
    return 1;
  std::printf("%d GPU ops marked compute_dtype bf16\n", marked);
  return 0;
}
