// The only two reasons a test of generated kernels may not run, shared so
// that every such test says the same thing: what is missing, what runs in
// its place, and which test covers that.
#pragma once

#include "runtime/kernels/GeneratedKernels.h"

#include "plan.pb.h"

#include <string>

namespace dtf::test {

/// Empty when this CPU runs `plan`'s generated kernels (compiled for
/// x86-64-v3: AVX2 and FMA, every x86 server since 2013-2015, and every
/// machine this project builds on); else why not. dtf-run itself never
/// loads them on such a CPU: it runs the fused regions op by op, which
/// fusion.GeneratedKernels.UnknownBaselineFallsBackOpByOp checks.
inline std::string cannotRunGeneratedKernels(const plan::Plan &plan) {
  std::string why;
  if (cpuSupportsTarget(plan.cpu_target(), &why))
    return "";
  return "this CPU cannot run the generated kernels (" + why +
         "); dtf-run never loads them here and runs the fused regions op by "
         "op instead, as fusion.GeneratedKernels.UnknownBaselineFallsBackOpByOp "
         "checks";
}

/// Empty when the build found the CUDA toolkit (/usr/local/cuda on every
/// machine of this project, CI's included: there the GPU tests always run,
/// and a ptxas that disappears afterwards is a failure, not a skip); else
/// why the GPU code cannot be tested.
inline std::string noCudaToolkit(bool haveToolkit, const std::string &ptxas) {
  if (haveToolkit)
    return "";
  return "this build was configured without a CUDA toolkit (cmake found no " +
         ptxas +
         "), so dtfc writes no GPU code to assemble or launch; set "
         "-DDTF_CUDA_TOOLKIT=DIR to test it (the CPU code of the same "
         "kernels is checked by fusion.Models/EveryKernel)";
}

} // namespace dtf::test
