// The device code of a plan's generated kernels (Plan.gpu_ptx,
// Plan.gpu_cubins, Kernel.gpu_*): what a dtf.fused op placed on a device
// loads and launches.
#pragma once

#include <map>
#include <memory>
#include <string>

namespace dtf::device {

/// The plan's GPU module: every generated kernel's entry point.
struct ModuleCode {
  std::string ptx;                           // sm_80 PTX
  std::map<std::string, std::string> cubins; // "sm_90" -> cubin
};

/// One generated kernel's device side (plan.proto's Kernel).
struct KernelCode {
  std::string name; // the kernel's entry point in the module
  int block = 0;    // threads per block; 0: the plan has no GPU code
  int blockY = 1;   // threads per block along y (a column reduction's tree)
  // Output elements per block (a reduction's tree); 0: one per thread.
  int outputsPerBlock = 0;
  std::shared_ptr<const ModuleCode> module;
  bool present() const {
    return block > 0 && module &&
           (!module->ptx.empty() || !module->cubins.empty());
  }
};

} // namespace dtf::device
