// Modules in the CUDA emulation: a cubin's (EM_CUDA ELF) or PTX's kernels and
// their parameter tables, and launches that run a kernel's CPU twin.
#pragma once

#include "runtime/gpu/emu/EmuState.h"

#include <array>
#include <map>
#include <string>
#include <vector>

namespace dtf::gpu::emu {

/// One kernel parameter as the module declares it.
struct KernelParamInfo {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct ModuleKernel {
  std::string name;
  std::vector<KernelParamInfo> params; // by ordinal
  uint32_t paramBytes = 0;
};

struct Module {
  std::map<std::string, ModuleKernel> kernels;
};

/// Reads a cubin (its .nv.info.<kernel> sections' KPARAM_INFO records) or
/// PTX text (its .entry parameter lists). False with `why` for anything
/// else: the real driver takes both and refuses other images.
bool loadModuleImage(const void *image, Module *module, std::string *why);

/// Checks a launch against the kernel's parameter table and the registered
/// twin, and makes the work that runs the twin.
int prepareLaunch(const ModuleKernel &kernel, std::array<unsigned, 3> grid,
                  std::array<unsigned, 3> block, void **params, void **extra,
                  Work *work);

} // namespace dtf::gpu::emu
