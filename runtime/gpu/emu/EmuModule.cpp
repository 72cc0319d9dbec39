// Cubin and PTX parameter tables, and launches that run registered CPU twins.
#include "runtime/gpu/emu/EmuModule.h"

#include <cstring>
#include <elf.h>

namespace dtf::gpu::emu {
namespace {

constexpr uint16_t kEmCuda = 190;
// .nv.info record formats and the attribute that describes one parameter.
constexpr uint8_t kFmtNval = 1, kFmtBval = 2, kFmtHval = 3, kFmtSval = 4;
constexpr uint8_t kAttrKparamInfo = 0x17, kAttrCbankParamSize = 0x19;

using Twin = void (*)(void *const *, const int64_t *, int64_t, int64_t);
struct TwinInfo {
  Twin fn = nullptr;
  std::string kinds; // per parameter: 'b' a buffer, 'i' an i64
  int rangeParam = -1;
};
std::map<std::string, TwinInfo> &twins() {
  static std::map<std::string, TwinInfo> t;
  return t;
}

bool parseNvInfo(const uint8_t *p, size_t size, ModuleKernel *k,
                 std::string *why) {
  size_t at = 0;
  while (at + 4 <= size) {
    const uint8_t fmt = p[at], attr = p[at + 1];
    uint16_t value;
    std::memcpy(&value, p + at + 2, 2);
    at += 4;
    if (fmt == kFmtSval) {
      if (at + value > size) {
        *why = "a truncated .nv.info record in " + k->name;
        return false;
      }
      if (attr == kAttrKparamInfo && value >= 12) {
        uint16_t ordinal, offset;
        uint32_t flags;
        std::memcpy(&ordinal, p + at + 4, 2);
        std::memcpy(&offset, p + at + 6, 2);
        std::memcpy(&flags, p + at + 8, 4);
        if (k->params.size() <= ordinal)
          k->params.resize(size_t(ordinal) + 1);
        k->params[ordinal] = {offset, (flags >> 18) & 0x3fff};
      }
      at += value;
    } else if (fmt == kFmtHval) {
      if (attr == kAttrCbankParamSize)
        k->paramBytes = value;
    } else if (fmt != kFmtNval && fmt != kFmtBval) {
      *why = "an unknown .nv.info record format in " + k->name;
      return false;
    }
  }
  if (k->paramBytes == 0)
    for (const KernelParamInfo &q : k->params)
      k->paramBytes = std::max(k->paramBytes, q.offset + q.size);
  return true;
}

bool loadCubin(const uint8_t *image, Module *module, std::string *why) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, image, sizeof(eh));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
    *why = "not a 64-bit ELF";
    return false;
  }
  if (eh.e_machine != kEmCuda) {
    *why = "an ELF for machine " + std::to_string(eh.e_machine) +
           ", not a cubin (EM_CUDA, 190)";
    return false;
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum) {
    *why = "a cubin without a readable section table";
    return false;
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), image + eh.e_shoff, sizeof(Elf64_Shdr) * eh.e_shnum);
  const char *names =
      reinterpret_cast<const char *>(image + sh[eh.e_shstrndx].sh_offset);
  const std::string prefix = ".nv.info.";
  for (const Elf64_Shdr &s : sh) {
    std::string name = names + s.sh_name;
    if (name.rfind(prefix, 0) != 0)
      continue;
    ModuleKernel k;
    k.name = name.substr(prefix.size());
    if (!parseNvInfo(image + s.sh_offset, s.sh_size, &k, why))
      return false;
    module->kernels[k.name] = k;
  }
  return true;
}

uint32_t ptxTypeSize(const std::string &decl) {
  for (const char *t : {".u64", ".s64", ".b64", ".f64"})
    if (decl.find(t) != std::string::npos)
      return 8;
  for (const char *t : {".u32", ".s32", ".b32", ".f32"})
    if (decl.find(t) != std::string::npos)
      return 4;
  for (const char *t : {".u16", ".s16", ".b16", ".f16"})
    if (decl.find(t) != std::string::npos)
      return 2;
  return 1;
}

bool loadPtx(const char *text, Module *module, std::string *why) {
  std::string ptx(text);
  if (ptx.find(".version") == std::string::npos ||
      ptx.find(".target") == std::string::npos) {
    *why = "neither a cubin nor PTX text (.version and .target missing)";
    return false;
  }
  size_t at = 0;
  while ((at = ptx.find(".entry", at)) != std::string::npos) {
    at += 6;
    size_t open = ptx.find('(', at), close = ptx.find(')', open);
    if (open == std::string::npos || close == std::string::npos) {
      *why = "an .entry without a parameter list";
      return false;
    }
    std::string name = ptx.substr(at, open - at);
    name.erase(0, name.find_first_not_of(" \t\n"));
    name.erase(name.find_last_not_of(" \t\n") + 1);
    ModuleKernel k;
    k.name = name;
    std::string list = ptx.substr(open + 1, close - open - 1);
    uint32_t offset = 0;
    size_t p = 0;
    while (p < list.size()) {
      size_t comma = list.find(',', p);
      std::string decl = list.substr(
          p, comma == std::string::npos ? std::string::npos : comma - p);
      p = comma == std::string::npos ? list.size() : comma + 1;
      if (decl.find(".param") == std::string::npos)
        continue;
      uint32_t size = ptxTypeSize(decl);
      size_t bracket = decl.find('[');
      if (bracket != std::string::npos)
        size *= uint32_t(std::atoi(decl.c_str() + bracket + 1));
      offset = (offset + std::min<uint32_t>(size, 8) - 1) /
               std::min<uint32_t>(size, 8) * std::min<uint32_t>(size, 8);
      k.params.push_back({offset, size});
      offset += size;
    }
    k.paramBytes = offset;
    module->kernels[k.name] = k;
    at = close;
  }
  return true;
}

} // namespace

bool loadModuleImage(const void *image, Module *module, std::string *why) {
  if (!image) {
    *why = "no image";
    return false;
  }
  const auto *bytes = static_cast<const uint8_t *>(image);
  if (std::memcmp(bytes, ELFMAG, SELFMAG) == 0)
    return loadCubin(bytes, module, why);
  return loadPtx(static_cast<const char *>(image), module, why);
}

int prepareLaunch(const ModuleKernel &kernel, std::array<unsigned, 3> grid,
                  std::array<unsigned, 3> block, void **params, void **extra,
                  Work *work) {
  const std::string who = "cuLaunchKernel(" + kernel.name + ")";
  if (grid[0] * grid[1] * grid[2] == 0 || block[0] * block[1] * block[2] == 0 ||
      block[0] * block[1] * block[2] > 1024)
    return refuse(CUDA_ERROR_INVALID_VALUE, who + ": an empty grid or a block "
                                                  "of more than 1024 threads");
  // The parameters as one buffer laid out as the module says.
  std::vector<uint8_t> buffer(kernel.paramBytes);
  if (extra) {
    const void *ptr = nullptr;
    size_t size = 0;
    bool gotSize = false;
    for (int i = 0; extra[i] != reinterpret_cast<void *>(CU_LAUNCH_PARAM_END);
         i += 2) {
      if (extra[i] == reinterpret_cast<void *>(CU_LAUNCH_PARAM_BUFFER_POINTER))
        ptr = extra[i + 1];
      else if (extra[i] ==
               reinterpret_cast<void *>(CU_LAUNCH_PARAM_BUFFER_SIZE)) {
        size = *static_cast<size_t *>(extra[i + 1]);
        gotSize = true;
      } else
        return refuse(CUDA_ERROR_INVALID_VALUE, who + ": an unknown extra key");
    }
    if (!ptr || !gotSize)
      return refuse(CUDA_ERROR_INVALID_VALUE,
                    who + ": extra needs a buffer pointer and its size");
    if (size != kernel.paramBytes)
      return refuse(CUDA_ERROR_INVALID_VALUE,
                    who + ": the parameter buffer is " + std::to_string(size) +
                        " bytes, the kernel takes " +
                        std::to_string(kernel.paramBytes) + " (" +
                        std::to_string(kernel.params.size()) + " parameters)");
    std::memcpy(buffer.data(), ptr, size);
  } else if (params) {
    for (size_t i = 0; i < kernel.params.size(); ++i)
      std::memcpy(buffer.data() + kernel.params[i].offset, params[i],
                  kernel.params[i].size);
  } else if (!kernel.params.empty()) {
    return refuse(CUDA_ERROR_INVALID_VALUE, who + ": no parameters given");
  }
  auto twin = twins().find(kernel.name);
  if (twin == twins().end())
    return refuse(CUDA_ERROR_NOT_SUPPORTED,
                  who + ": no CPU twin registered (dtfEmuRegisterKernel)");
  const TwinInfo &t = twin->second;
  if (t.kinds.size() != kernel.params.size())
    return refuse(
        CUDA_ERROR_INVALID_VALUE,
        who + ": the module declares " + std::to_string(kernel.params.size()) +
            " parameters, the twin takes " + std::to_string(t.kinds.size()));
  std::vector<void *> buffers;
  std::vector<int64_t> scalars;
  int64_t range =
      int64_t(grid[0]) * grid[1] * grid[2] * block[0] * block[1] * block[2];
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const KernelParamInfo &q = kernel.params[i];
    if (q.size != 8)
      return refuse(CUDA_ERROR_INVALID_VALUE, who + ": parameter " +
                                                  std::to_string(i) + " is " +
                                                  std::to_string(q.size) +
                                                  " bytes in the module, 8 in "
                                                  "dtf's layout");
    uint64_t v;
    std::memcpy(&v, buffer.data() + q.offset, 8);
    if (t.kinds[i] == 'b') {
      if (int r = checkDevice(uintptr_t(v), 1,
                              who + " parameter " + std::to_string(i), work,
                              CUDA_ERROR_ILLEGAL_ADDRESS))
        return r;
      buffers.push_back(reinterpret_cast<void *>(uintptr_t(v)));
    } else {
      scalars.push_back(int64_t(v));
      if (int(i) == t.rangeParam)
        range = int64_t(v);
    }
  }
  work->what = who;
  Twin fn = t.fn;
  const uint64_t blocks = uint64_t(grid[0]) * grid[1] * grid[2];
  work->run = [fn, buffers, scalars, range, blocks] {
    fn(buffers.data(), scalars.data(), 0, range);
    ++machine().counters.kernelLaunches;
    machine().counters.kernelBlocks += blocks;
    return CUDA_SUCCESS;
  };
  return CUDA_SUCCESS;
}

} // namespace dtf::gpu::emu

extern "C" {
/// Emulation only: the CPU twin that a launch of `name` runs, over [0, range)
/// where range is parameter `rangeParam` (an i64; -1: grid x block threads).
/// `kinds` has one letter per parameter: 'b' a buffer, 'i' an i64.
int dtfEmuRegisterKernel(const char *name, dtf::gpu::emu::Twin fn,
                         const char *kinds, int rangeParam) {
  std::lock_guard<std::recursive_mutex> lock(dtf::gpu::emu::machine().mutex);
  dtf::gpu::emu::twins()[name] = {fn, kinds, rangeParam};
  return 0;
}
}
