// Stand-in GPU code for tests: minimal cubins and PTX that declare kernels'
// parameters as ptxas and the MLIR NVVM target write them.
#include "tests/unit/gpu/FakeCubin.h"

#include <elf.h>

#include <cstring>

namespace dtf::gpu {
namespace {

// A .nv.info.<kernel> section: one KPARAM_INFO record per parameter and the
// parameter bank's size.
std::vector<uint8_t> nvInfo(const std::vector<uint32_t> &sizes) {
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
  return info;
}

} // namespace

std::vector<uint8_t> cubin(const std::vector<FakeKernel> &kernels,
                           uint16_t machine) {
  // Section 0 is null, 1 the section names, then one .nv.info per kernel.
  std::string names("\0.shstrtab\0", 11);
  std::vector<std::vector<uint8_t>> infos;
  std::vector<uint32_t> nameAt;
  for (const FakeKernel &k : kernels) {
    nameAt.push_back(uint32_t(names.size()));
    names += ".nv.info." + k.name + std::string("\0", 1);
    infos.push_back(nvInfo(k.paramSizes));
  }
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
  eh.e_shnum = uint16_t(2 + kernels.size());
  eh.e_shstrndx = 1;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  size_t at = sizeof(eh);
  sh[1].sh_name = 1;
  sh[1].sh_type = SHT_STRTAB;
  sh[1].sh_offset = at;
  sh[1].sh_size = names.size();
  at += names.size();
  for (size_t k = 0; k < kernels.size(); ++k) {
    sh[2 + k].sh_name = nameAt[k];
    sh[2 + k].sh_type = SHT_LOPROC;
    sh[2 + k].sh_offset = at;
    sh[2 + k].sh_size = infos[k].size();
    at += infos[k].size();
  }
  eh.e_shoff = (at + 7) / 8 * 8;
  std::vector<uint8_t> out(eh.e_shoff + sh.size() * sizeof(Elf64_Shdr));
  std::memcpy(out.data(), &eh, sizeof(eh));
  std::memcpy(out.data() + sh[1].sh_offset, names.data(), names.size());
  for (size_t k = 0; k < kernels.size(); ++k)
    std::memcpy(out.data() + sh[2 + k].sh_offset, infos[k].data(),
                infos[k].size());
  std::memcpy(out.data() + eh.e_shoff, sh.data(),
              sh.size() * sizeof(Elf64_Shdr));
  return out;
}

std::vector<uint8_t> cubin(const std::string &kernel,
                           const std::vector<uint32_t> &sizes,
                           uint16_t machine) {
  return cubin(std::vector<FakeKernel>{{kernel, sizes}}, machine);
}

std::string ptx(const std::vector<std::pair<std::string, int>> &kernels) {
  std::string text = ".version 8.0\n.target sm_80\n.address_size 64\n";
  for (const auto &[kernel, numParams] : kernels) {
    text += "\n.visible .entry " + kernel + "(\n";
    for (int i = 0; i < numParams; ++i)
      text += "\t.param .u64 " + kernel + "_param_" + std::to_string(i) +
              (i + 1 < numParams ? ",\n" : "\n");
    text += ")\n{\n\tret;\n}\n";
  }
  return text;
}

// llc 19 (-march=nvptx64 -mcpu=sm_75) of the kernel's LLVM IR, less its
// comments; ptxas 13.0 accepts it for sm_90.
const char *scalePtx() {
  return ".version 6.3\n"
         ".target sm_75\n"
         ".address_size 64\n"
         ".visible .entry scale(\n"
         "  .param .u64 scale_param_0,\n"
         "  .param .u64 scale_param_1,\n"
         "  .param .u64 scale_param_2\n"
         ")\n"
         "{\n"
         "  .reg .pred %p<2>;\n"
         "  .reg .b32 %r<5>;\n"
         "  .reg .f32 %f<3>;\n"
         "  .reg .b64 %rd<10>;\n"
         "  ld.param.u64 %rd7, [scale_param_2];\n"
         "  mov.u32 %r1, %tid.x;\n"
         "  mov.u32 %r2, %ctaid.x;\n"
         "  mov.u32 %r3, %ntid.x;\n"
         "  mad.lo.s32 %r4, %r2, %r3, %r1;\n"
         "  cvt.u64.u32 %rd8, %r4;\n"
         "  setp.ge.s64 %p1, %rd8, %rd7;\n"
         "  @%p1 bra $L__BB0_2;\n"
         "  ld.param.u64 %rd3, [scale_param_0];\n"
         "  ld.param.u64 %rd4, [scale_param_1];\n"
         "  cvta.to.global.u64 %rd5, %rd4;\n"
         "  cvta.to.global.u64 %rd6, %rd3;\n"
         "  mul.wide.u32 %rd9, %r4, 4;\n"
         "  add.s64 %rd1, %rd6, %rd9;\n"
         "  add.s64 %rd2, %rd5, %rd9;\n"
         "  ld.global.f32 %f1, [%rd1];\n"
         "  add.rn.f32 %f2, %f1, %f1;\n"
         "  st.global.f32 [%rd2], %f2;\n"
         "$L__BB0_2:\n"
         "  ret;\n"
         "}\n";
}

} // namespace dtf::gpu
