// dtf-test-add-gpu-code IN OUT MODE: gives every generated kernel of a plan
// stand-in GPU code (dtfc emits none yet), so that tests can run dtf.fused
// ops on an emulated GPU, where a launch runs the kernel's CPU code from the
// same plan. MODE "ptx": PTX only. MODE "cubin": a cubin for sm_90 (the
// emulated GPU's chip) and a PTX declaring one parameter too few, so that a
// run that works shows the cubin was chosen over the PTX.
#include "tests/unit/gpu/FakeCubin.h"

#include "tests/unit/gpu/PlanFile.h"

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  if (argc != 4 ||
      (std::string(argv[3]) != "ptx" && std::string(argv[3]) != "cubin")) {
    std::fprintf(stderr, "usage: dtf-test-add-gpu-code IN OUT ptx|cubin\n");
    return 2;
  }
  dtf::plan::Plan plan;
  if (!dtf::testtools::readPlanFile("dtf-test-add-gpu-code", argv[1], &plan))
    return 1;
  // One module for the plan, as dtfc writes it (Plan.gpu_ptx, gpu_cubins).
  const bool cubin = std::string(argv[3]) == "cubin";
  std::vector<std::pair<std::string, int>> entries;
  std::vector<dtf::gpu::FakeKernel> tables;
  for (dtf::plan::Kernel &k : *plan.mutable_kernels()) {
    const int n = k.params_size();
    k.set_block(256);
    k.set_launch("grid.x = ceil(elements / block), block.x = block");
    entries.emplace_back(k.name(), cubin ? n - 1 : n);
    tables.push_back({k.name(), std::vector<uint32_t>(size_t(n), 8)});
  }
  plan.set_gpu_ptx(dtf::gpu::ptx(entries));
  plan.clear_gpu_cubins();
  if (cubin) {
    std::vector<uint8_t> c = dtf::gpu::cubin(tables);
    (*plan.mutable_gpu_cubins())["sm_90"] = std::string(c.begin(), c.end());
  }
  // Sealed again, as dtfc would have written the plan with this code.
  if (!dtf::testtools::writeSealedPlanFile("dtf-test-add-gpu-code", argv[2],
                                           plan))
    return 1;
  std::printf("%d kernels given %s GPU code\n", plan.kernels_size(), argv[3]);
  return 0;
}
