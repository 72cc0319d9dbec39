// Stand-in GPU code for tests: minimal cubins and PTX that declare a kernel's
// parameters as ptxas and the MLIR NVVM target write them.
#include "tests/unit/gpu/FakeCubin.h"

#include <elf.h>

#include <cstring>

namespace dtf::gpu {

std::vector<uint8_t> cubin(const std::string &kernel,
                           const std::vector<uint32_t> &sizes,
                           uint16_t machine) {
  std::vector<uint8_t> info;
  auto put = [&](const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    info.insert(info.end(), b, b + n);
  };
  uint32_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint8_t head[2] = {4, 0x17};
    const uint16_t size = 12;
    const uint32_t index = 0;
    const uint16_t ordinal = uint16_t(i), off = uint16_t(offset);
    const uint32_t flags = (sizes[i] << 18) | 0x1f000;
    put(head, 2);
    put(&size, 2);
    put(&index, 4);
    put(&ordinal, 2);
    put(&off, 2);
    put(&flags, 4);
    offset += sizes[i];
  }
  const uint8_t cbank[2] = {3, 0x19};
  const uint16_t total = uint16_t(offset);
  put(cbank, 2);
  put(&total, 2);
  const std::string names = std::string("\0.shstrtab\0.nv.info.", 20) + kernel +
                            std::string("\0", 1);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_EXEC;
  eh.e_machine = machine;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 3;
  eh.e_shstrndx = 1;
  const size_t namesAt = sizeof(eh), infoAt = namesAt + names.size();
  eh.e_shoff = (infoAt + info.size() + 7) / 8 * 8;
  std::vector<uint8_t> out(eh.e_shoff + 3 * sizeof(Elf64_Shdr));
  std::memcpy(out.data(), &eh, sizeof(eh));
  std::memcpy(out.data() + namesAt, names.data(), names.size());
  std::memcpy(out.data() + infoAt, info.data(), info.size());
  Elf64_Shdr sh[3]{};
  sh[1].sh_name = 1;
  sh[1].sh_type = SHT_STRTAB;
  sh[1].sh_offset = namesAt;
  sh[1].sh_size = names.size();
  sh[2].sh_name = 11;
  sh[2].sh_type = SHT_LOPROC;
  sh[2].sh_offset = infoAt;
  sh[2].sh_size = info.size();
  std::memcpy(out.data() + eh.e_shoff, sh, sizeof(sh));
  return out;
}

std::string ptx(const std::string &kernel, int numParams) {
  std::string text = ".version 8.0\n.target sm_80\n.address_size 64\n\n"
                     ".visible .entry " +
                     kernel + "(\n";
  for (int i = 0; i < numParams; ++i)
    text += "\t.param .u64 " + kernel + "_param_" + std::to_string(i) +
            (i + 1 < numParams ? ",\n" : "\n");
  return text + ")\n{\n\tret;\n}\n";
}

} // namespace dtf::gpu
