// Stand-in GPU code for tests (no CUDA toolkit needed): minimal cubins, EM_CUDA
// ELFs whose .nv.info.<kernel> sections declare parameters of the given sizes
// (KPARAM_INFO records, as ptxas writes them), and PTX text whose .entry
// points declare 8-byte parameters. Neither holds GPU instructions: they are
// for the emulation, which runs a registered CPU twin. And one real kernel
// (scalePtx) that a real driver compiles and runs, for the tests that also
// run on a real GPU (DTF_GPU=real).
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

/// PTX of a real kernel, `scale(in, out, n)`: out[i] = 2 * in[i] for
/// i < n, one thread per element. A real driver JIT-compiles it; the
/// emulation reads its three 8-byte parameters and runs the CPU twin the
/// test registers as "scale" with kinds "bbi".
const char *scalePtx();

} // namespace dtf::gpu
