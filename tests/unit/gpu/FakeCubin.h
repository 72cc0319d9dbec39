// Stand-in GPU code for tests (no CUDA toolkit needed): a minimal cubin, an
// EM_CUDA ELF whose .nv.info.<kernel> section declares parameters of the
// given sizes (KPARAM_INFO records, as ptxas writes them), and PTX text whose
// .entry declares 8-byte parameters. Neither holds real GPU instructions:
// they are for the emulation, which runs a registered CPU twin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtf::gpu {

std::vector<uint8_t> cubin(const std::string &kernel,
                           const std::vector<uint32_t> &sizes,
                           uint16_t machine = 190);

std::string ptx(const std::string &kernel, int numParams);

} // namespace dtf::gpu
