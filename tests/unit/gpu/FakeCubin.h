// Stand-in GPU code for tests (no CUDA toolkit needed): minimal cubins, EM_CUDA
// ELFs whose .nv.info.<kernel> sections declare parameters of the given sizes
// (KPARAM_INFO records, as ptxas writes them), and PTX text whose .entry
// points declare 8-byte parameters. Neither holds GPU instructions: they are
// for the emulation, which runs a registered CPU twin.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtf::gpu {

struct FakeKernel {
  std::string name;
  std::vector<uint32_t> paramSizes;
};

std::vector<uint8_t> cubin(const std::vector<FakeKernel> &kernels,
                           uint16_t machine = 190);
/// One kernel.
std::vector<uint8_t> cubin(const std::string &kernel,
                           const std::vector<uint32_t> &sizes,
                           uint16_t machine = 190);

/// PTX with one .entry per (name, number of 8-byte parameters).
std::string ptx(const std::vector<std::pair<std::string, int>> &kernels);

} // namespace dtf::gpu
