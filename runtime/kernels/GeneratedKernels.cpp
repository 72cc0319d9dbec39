// Loading a plan's generated CPU kernels from memory and running dtf.fused.
#include "runtime/kernels/GeneratedKernels.h"

#include "runtime/core/ThreadPool.h"
#include "runtime/kernels/ColumnChunks.h"
#include "runtime/kernels/DropoutMask.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <iterator>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

namespace dtf {

bool parseGeneratedParam(std::string_view kind, std::string_view meaning,
                         int operand, GeneratedParam *out) {
  using M = GeneratedParam::Meaning;
  out->operand = operand;
  if (kind == "buffer") {
    out->kind = GeneratedParam::Kind::kBuffer;
    if (meaning == "same")
      out->meaning = M::kSame;
    else if (meaning == "scalar")
      out->meaning = M::kScalar;
    else if (meaning == "suffix")
      out->meaning = M::kSuffix;
    else if (meaning == "output")
      out->meaning = M::kOutput;
    else if (meaning == "inout")
      out->meaning = M::kInOut;
    else if (meaning == "row")
      out->meaning = M::kRow;
    else if (meaning == "row-index")
      out->meaning = M::kRowIndex;
    else if (meaning == "row-index-error")
      out->meaning = M::kRowIndexError;
    else if (meaning == "dropout-key")
      out->meaning = M::kDropoutKey;
    else if (meaning == "workspace") {
      out->meaning = M::kWorkspace;
      out->operand = -1; // no operand of the op
    }
    else if (meaning.rfind("prefix:", 0) == 0) {
      out->meaning = M::kPrefix;
      const std::string_view d = meaning.substr(7);
      if (d.empty() || d.size() > 15 ||
          d.find_first_not_of("0123456789") != std::string_view::npos)
        return false;
      out->divisor = std::stoll(std::string(d));
      if (out->divisor < 2)
        return false;
    }
    else if (meaning.rfind("reduce:", 0) == 0) {
      out->meaning = M::kReduce;
      out->spec = std::string(meaning.substr(7));
      // One contiguous run of reduced axes ('r' or '1') among kept ones.
      const size_t first = out->spec.find_first_not_of('k');
      const size_t last = out->spec.find_last_not_of('k');
      if (first == std::string::npos ||
          out->spec.find_first_not_of("kr1") != std::string::npos ||
          out->spec.substr(first, last - first + 1).find('k') !=
              std::string::npos)
        return false;
    } else
      return false;
    return true;
  }
  if (kind == "i64") {
    out->kind = GeneratedParam::Kind::kI64;
    if (meaning == "elements")
      out->meaning = M::kElements;
    else if (meaning == "reduced")
      out->meaning = M::kReduced;
    else if (meaning == "inner")
      out->meaning = M::kInner;
    else if (meaning == "row-size")
      out->meaning = M::kRowSize;
    else
      return false;
    return true;
  }
  return false;
}

bool isRowKernel(const GeneratedKernelInfo &info) {
  for (const GeneratedParam &p : info.params)
    if (p.kind == GeneratedParam::Kind::kI64 &&
        p.meaning == GeneratedParam::Meaning::kRowSize)
      return true;
  return false;
}

bool isDropoutKernel(const GeneratedKernelInfo &info) {
  for (const GeneratedParam &p : info.params)
    if (p.kind == GeneratedParam::Kind::kBuffer &&
        p.meaning == GeneratedParam::Meaning::kDropoutKey)
      return true;
  return false;
}

void dropoutKeyWord(const GeneratedKernelInfo &info, uint64_t step,
                    uint64_t seed, const std::vector<int64_t> &shape,
                    int64_t first, int64_t rows, int64_t word[2]) {
  word[0] = int64_t(dropout::streamKey(seed, info.dropoutSeed, step));
  word[1] = dropout::firstElement(shape, first, rows);
}

namespace {

/// Whether input `i` of `info` is a row kernel's per-row buffer.
bool isPerRowInput(const GeneratedKernelInfo &info, size_t i) {
  for (const GeneratedParam &p : info.params)
    if (p.kind == GeneratedParam::Kind::kBuffer && p.operand == int(i))
      return p.meaning == GeneratedParam::Meaning::kRow ||
             p.meaning == GeneratedParam::Meaning::kRowIndex;
  return false;
}

/// The launch of a row kernel: rows of the shape's last axis.
Status rowLaunchOf(const GeneratedKernelInfo &info,
                   const std::vector<std::vector<int64_t>> &inputShapes,
                   FusedLaunch *out) {
  using M = GeneratedParam::Meaning;
  std::vector<int64_t> &shape = out->shape;
  shape.clear();
  bool found = false;
  for (size_t i = 0; i < inputShapes.size(); ++i) {
    if (isPerRowInput(info, i))
      continue;
    if (found && inputShapes[i] != shape)
      return errorStatus(info.name, ": input ", i, " is ",
                         shapeString(inputShapes[i]), ", the rows are ",
                         shapeString(shape));
    shape = inputShapes[i];
    found = true;
  }
  if (!found || shape.empty() || shape.back() <= 0)
    return errorStatus(info.name, ": a row kernel needs inputs with rows of ",
                       "at least one element, got ",
                       found ? shapeString(shape) : "none");
  const int64_t c = shape.back();
  const std::vector<int64_t> perRow(shape.begin(), shape.end() - 1);
  for (size_t i = 0; i < inputShapes.size(); ++i)
    if (isPerRowInput(info, i) && inputShapes[i] != perRow)
      return errorStatus(info.name, ": input ", i, " is ",
                         shapeString(inputShapes[i]), ", one element per row ",
                         "of ", shapeString(shape), " is ",
                         shapeString(perRow));
  out->outputShapes.assign(info.outputDTypes.size(), shape);
  for (const GeneratedParam &p : info.params) {
    const int o = p.operand - int(info.inputDTypes.size());
    if (p.kind == GeneratedParam::Kind::kBuffer && p.meaning == M::kRow &&
        o >= 0 && o < int(out->outputShapes.size()))
      out->outputShapes[size_t(o)] = perRow;
  }
  out->elements = numElementsOf(perRow);
  out->reduced = c;
  out->scalars.clear();
  for (const GeneratedParam &p : info.params)
    if (p.kind == GeneratedParam::Kind::kI64)
      out->scalars.push_back(p.meaning == M::kRowSize ? c : out->elements);
  return Status::ok();
}

} // namespace

Status fusedLaunchOf(const GeneratedKernelInfo &info,
                     const std::vector<std::vector<int64_t>> &inputShapes,
                     FusedLaunch *out) {
  using M = GeneratedParam::Meaning;
  if (isRowKernel(info))
    return rowLaunchOf(info, inputShapes, out);
  std::vector<int64_t> &shape = out->shape;
  shape.clear();
  for (size_t i = 0; i < inputShapes.size(); ++i) {
    const std::vector<int64_t> &s = inputShapes[i];
    if (s.size() > shape.size())
      shape.insert(shape.begin(), s.size() - shape.size(), 1);
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t &o = shape[shape.size() - s.size() + d];
      if (o == 1)
        o = s[d];
      else if (s[d] != 1 && s[d] != o)
        return errorStatus(info.name, ": the inputs do not broadcast: input ",
                           i, " is ", shapeString(s));
    }
  }
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  // The [O, R, N] view of the shape, from the reduced outputs' spec.
  int64_t outer = 1, reduced = 1, inner = 1;
  const std::string *spec = nullptr;
  out->outputShapes.assign(info.outputDTypes.size(), shape);
  for (const GeneratedParam &p : info.params) {
    if (p.meaning != M::kReduce)
      continue;
    if (p.spec.size() != shape.size())
      return errorStatus(info.name, ": output ",
                         p.operand - int(info.inputDTypes.size()),
                         " reduces the axes '", p.spec, "' of a rank-",
                         shape.size(), " shape; its inputs give ",
                         shapeString(shape));
    if (spec && *spec != p.spec) {
      for (size_t d = 0; d < spec->size(); ++d)
        if (((*spec)[d] == 'k') != (p.spec[d] == 'k'))
          return errorStatus(info.name,
                             ": its outputs reduce different axes");
    }
    spec = &p.spec;
    std::vector<int64_t> reducedShape;
    for (size_t d = 0; d < shape.size(); ++d)
      if (p.spec[d] == 'k')
        reducedShape.push_back(shape[d]);
      else if (p.spec[d] == '1')
        reducedShape.push_back(1);
    const int o = p.operand - int(info.inputDTypes.size());
    if (o >= 0 && o < int(out->outputShapes.size()))
      out->outputShapes[size_t(o)] = std::move(reducedShape);
  }
  if (spec) {
    const size_t first = spec->find_first_not_of('k');
    const size_t last = spec->find_last_not_of('k');
    for (size_t d = 0; d < shape.size(); ++d)
      (d < first ? outer : d > last ? inner : reduced) *= shape[d];
  }
  out->elements = spec ? outer * inner : total;
  out->reduced = reduced;
  out->inner = inner;
  out->scalars.clear();
  for (const GeneratedParam &p : info.params) {
    if (p.kind != GeneratedParam::Kind::kI64)
      continue;
    out->scalars.push_back(p.meaning == M::kReduced ? reduced
                           : p.meaning == M::kInner ? inner
                                                    : out->elements);
  }
  return Status::ok();
}

namespace {

// dlopen maps the object's segments and faults (SIGBUS) on one that runs
// past the end of a truncated file: check the headers and segments first.
Status checkElf(std::string_view object) {
  auto bad = [&](const char *what) {
    return errorStatus("cannot load the plan's cpu_object (", object.size(),
                       " bytes): ", what, "; compile the model again with dtfc");
  };
  if (object.size() < sizeof(Elf64_Ehdr))
    return bad("it is shorter than an ELF header");
  Elf64_Ehdr header;
  std::memcpy(&header, object.data(), sizeof header);
  if (header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_type != ET_DYN)
    return bad("it is not a 64-bit little-endian shared object");
  if (header.e_machine != EM_X86_64)
    return bad("it is not x86-64 code");
  if (header.e_phentsize != sizeof(Elf64_Phdr) ||
      header.e_phoff > object.size() ||
      uint64_t(header.e_phnum) * sizeof(Elf64_Phdr) >
          object.size() - header.e_phoff)
    return bad("its program headers run past its end (truncated?)");
  if (header.e_shoff > object.size() ||
      uint64_t(header.e_shnum) * header.e_shentsize >
          object.size() - header.e_shoff)
    return bad("its section headers run past its end (truncated?)");
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, object.data() + header.e_phoff + i * sizeof ph,
                sizeof ph);
    if (ph.p_offset > object.size() || ph.p_filesz > object.size() - ph.p_offset)
      return bad("a segment runs past its end (truncated?)");
  }
  return Status::ok();
}

// The functions `object` defines and exports: the global and weak FUNC
// symbols of its dynamic symbol table. checkElf has bounded its section
// headers; each table is bounded here before it is read.
Status exportedFunctions(std::string_view object,
                         std::vector<std::string> *out) {
  auto bad = [&](const char *what) {
    return errorStatus("cannot load the plan's cpu_object: its dynamic "
                       "symbol table ",
                       what, "; compile the model again with dtfc");
  };
  Elf64_Ehdr header;
  std::memcpy(&header, object.data(), sizeof header);
  if (header.e_shentsize != sizeof(Elf64_Shdr))
    return bad("cannot be found (odd section headers)");
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, object.data() + header.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
  };
  auto fits = [&](const Elf64_Shdr &sh) {
    return sh.sh_offset <= object.size() &&
           sh.sh_size <= object.size() - sh.sh_offset;
  };
  for (size_t i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr symtab = section(i);
    if (symtab.sh_type != SHT_DYNSYM)
      continue;
    if (!fits(symtab) || symtab.sh_entsize != sizeof(Elf64_Sym) ||
        symtab.sh_link >= header.e_shnum)
      return bad("runs past the object's end");
    const Elf64_Shdr strtab = section(symtab.sh_link);
    if (!fits(strtab))
      return bad("names run past the object's end");
    const std::string_view names = object.substr(strtab.sh_offset, strtab.sh_size);
    for (size_t k = 0; k < symtab.sh_size / sizeof(Elf64_Sym); ++k) {
      Elf64_Sym sym;
      std::memcpy(&sym, object.data() + symtab.sh_offset + k * sizeof sym,
                  sizeof sym);
      const int bind = ELF64_ST_BIND(sym.st_info);
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
          (bind != STB_GLOBAL && bind != STB_WEAK))
        continue;
      const size_t end = sym.st_name < names.size()
                             ? names.find('\0', sym.st_name)
                             : std::string_view::npos;
      if (end == std::string_view::npos)
        return bad("names a function outside its names");
      out->emplace_back(names.substr(sym.st_name, end - sym.st_name));
    }
    std::sort(out->begin(), out->end());
    return Status::ok();
  }
  return bad("is missing");
}

// Closes a file descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

Status GeneratedKernels::load(std::string_view object,
                              std::vector<GeneratedKernelInfo> kernels,
                              std::unique_ptr<GeneratedKernels> *out) {
  // An ELF shared object starts with \x7fELF; say so before dlopen, whose
  // message for other bytes is "invalid ELF header" at best.
  if (object.size() < 64 || std::memcmp(object.data(), "\x7f" "ELF", 4) != 0)
    return errorStatus("the plan's cpu_object (", object.size(),
                       " bytes) is not an ELF shared object; compile the "
                       "model again with dtfc");
  DTF_RETURN_IF_ERROR(checkElf(object));
  // Exactly the kernels' functions: a symbol the plan does not name, or one
  // it names that is missing, means other code than dtfc wrote for them.
  std::vector<std::string> exported, expected;
  DTF_RETURN_IF_ERROR(exportedFunctions(object, &exported));
  for (const GeneratedKernelInfo &k : kernels) {
    expected.push_back(k.cpuSymbol);
    if (!k.cpuColumnsSymbol.empty())
      expected.push_back(k.cpuColumnsSymbol);
  }
  std::sort(expected.begin(), expected.end());
  if (exported != expected) {
    std::vector<std::string> extra, missing;
    std::set_difference(exported.begin(), exported.end(), expected.begin(),
                        expected.end(), std::back_inserter(extra));
    std::set_difference(expected.begin(), expected.end(), exported.begin(),
                        exported.end(), std::back_inserter(missing));
    return errorStatus(
        "the plan's cpu_object exports ", exported.size(),
        " functions where its kernels name ", expected.size(),
        extra.empty() ? "" : strCat(" (it has '", extra[0], "', unnamed)"),
        missing.empty() ? "" : strCat(" (it lacks '", missing[0], "')"),
        "; compile the model again with dtfc");
  }
  int fd = ::memfd_create("dtf-plan-kernels", MFD_CLOEXEC);
  if (fd < 0)
    return errorStatus("cannot create a memory file for the plan's kernels: ",
                       std::strerror(errno));
  // Open for as long as the object is loaded: dlopen knows a loaded object
  // by its path, so a second object at a reused /proc/self/fd/N would get
  // the first one's handle.
  FdCloser closer{fd};
  size_t written = 0;
  while (written < object.size()) {
    ssize_t n = ::write(fd, object.data() + written, object.size() - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return errorStatus("cannot write the plan's kernels to a memory file: ",
                         std::strerror(errno));
    written += size_t(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  // RTLD_LOCAL: two plans' objects define the same symbol names.
  void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *err = ::dlerror();
    return errorStatus("cannot load the plan's cpu_object: ",
                       err ? err : "dlopen failed");
  }
  std::unique_ptr<GeneratedKernels> loaded(new GeneratedKernels());
  loaded->handle_ = handle;
  loaded->fd_ = fd;
  closer.fd = -1;
  for (const GeneratedKernelInfo &k : kernels) {
    ::dlerror();
    void *sym = ::dlsym(handle, k.cpuSymbol.c_str());
    if (!sym)
      return errorStatus("the plan's cpu_object has no symbol '", k.cpuSymbol,
                         "' (kernel ", k.name, ")");
    loaded->functions_.push_back(reinterpret_cast<GeneratedCpuFn>(sym));
    void *columns = nullptr;
    if (!k.cpuColumnsSymbol.empty()) {
      ::dlerror();
      columns = ::dlsym(handle, k.cpuColumnsSymbol.c_str());
      if (!columns)
        return errorStatus("the plan's cpu_object has no symbol '",
                           k.cpuColumnsSymbol, "' (kernel ", k.name, ")");
    }
    loaded->columnsFunctions_.push_back(
        reinterpret_cast<GeneratedCpuFn>(columns));
  }
  loaded->kernels_ = std::move(kernels);
  *out = std::move(loaded);
  return Status::ok();
}

GeneratedKernels::~GeneratedKernels() {
  if (handle_)
    ::dlclose(handle_);
  if (fd_ >= 0)
    ::close(fd_);
}

bool cpuSupportsTarget(std::string_view target, std::string *why) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  bool ok = false;
  if (target == "x86-64")
    ok = true;
  else if (target == "x86-64-v2")
    ok = __builtin_cpu_supports("x86-64-v2");
  else if (target == "x86-64-v3")
    ok = __builtin_cpu_supports("x86-64-v3");
  else if (target == "x86-64-v4")
    ok = __builtin_cpu_supports("x86-64-v4");
  else {
    if (why)
      *why = strCat("the kernels were compiled for '", target,
                    "', a baseline this dtf-run does not know");
    return false;
  }
  if (!ok && why)
    *why = strCat("this CPU lacks the ", target,
                  " instructions the kernels were compiled for");
  return ok;
#else
  if (why)
    *why = strCat("the kernels were compiled for '", target,
                  "', and this dtf-run is not an x86-64 build");
  return false;
#endif
}

namespace {

// Does `in`, aligned at the right (leading 1s ignored), equal the trailing
// dims of `out`?
bool isSuffixOf(const std::vector<int64_t> &in,
                const std::vector<int64_t> &out) {
  size_t lead = 0;
  while (lead < in.size() && in[lead] == 1 && in.size() - lead > 0)
    ++lead;
  const size_t n = in.size() - lead;
  if (n > out.size())
    return false;
  for (size_t k = 0; k < n; ++k)
    if (in[lead + k] != out[out.size() - n + k])
      return false;
  return true;
}

// Is `in` the shape `out` with a trailing run of dims set to 1, whose
// product in `out` is `divisor`?
bool isPrefixOf(const std::vector<int64_t> &in,
                const std::vector<int64_t> &out, int64_t divisor) {
  if (in.size() != out.size())
    return false;
  size_t lead = in.size();
  int64_t product = 1;
  while (lead > 0 && in[lead - 1] == 1 && product <= divisor)
    product *= out[--lead];
  for (size_t d = 0; d < lead; ++d)
    if (in[d] != out[d])
      return false;
  return product == divisor;
}

} // namespace

Status checkRowIndices(const GeneratedKernelInfo &info, const Tensor &labels,
                       int64_t classes) {
  if (labels.dtype() != DType::I32 && labels.dtype() != DType::I64)
    return errorStatus(info.name, ": class indices are i32 or i64, not ",
                       labels.describe());
  for (int64_t i = 0; i < labels.numElements(); ++i) {
    const int64_t l = labels.dtype() == DType::I32
                          ? int64_t(labels.data<int32_t>()[i])
                          : labels.data<int64_t>()[i];
    if (l < 0 || l >= classes)
      return errorStatus(info.name, ": label ", l, " of example ", i,
                         " is outside the classes [0, ", classes, ")");
  }
  return Status::ok();
}

Status rowIndexErrorOf(const GeneratedKernelInfo &info, const int64_t word[2],
                       int64_t classes) {
  if (word[0] == 0)
    return Status::ok();
  // The op-by-op kernel's words, with the op the kernel runs.
  return errorStatus(info.opName.empty() ? info.name
                                         : strCat(info.opName, " (kernel ",
                                                  info.name, ")"),
                     ": label ", word[1], " of example ", word[0] - 1,
                     " is outside the classes [0, ", classes, ")");
}

bool reportsRowIndexErrors(const GeneratedKernelInfo &info) {
  for (const GeneratedParam &p : info.params)
    if (p.kind == GeneratedParam::Kind::kBuffer &&
        p.meaning == GeneratedParam::Meaning::kRowIndexError)
      return true;
  return false;
}

Status fusedKernel(KernelContext &ctx) {
  auto *fused = dynamic_cast<FusedKernelContext *>(&ctx);
  if (!fused || !fused->kernels())
    return errorStatus("dtf.fused runs a kernel of the plan, and this "
                       "executor was given none");
  const GeneratedKernels &kernels = *fused->kernels();
  const int k = fused->kernel();
  if (k < 0 || k >= kernels.size())
    return errorStatus("dtf.fused names kernel ", k, "; the plan has ",
                       kernels.size());
  const GeneratedKernelInfo &info = kernels.info(k);
  const int numInputs = static_cast<int>(info.inputDTypes.size());
  const int numOutputs = static_cast<int>(info.outputDTypes.size());
  if (ctx.numInputs() != numInputs)
    return errorStatus(info.name, " takes ", numInputs, " inputs, got ",
                       ctx.numInputs());

  std::vector<std::vector<int64_t>> inputShapes;
  for (int i = 0; i < numInputs; ++i) {
    const Tensor &t = ctx.input(i);
    if (t.dtype() != info.inputDTypes[i])
      return errorStatus(info.name, ": input ", i, " is ", t.describe(),
                         ", the kernel was compiled for ",
                         dtypeName(info.inputDTypes[i]));
    inputShapes.push_back(t.shape());
  }
  FusedLaunch launch;
  DTF_RETURN_IF_ERROR(fusedLaunchOf(info, inputShapes, &launch));
  const std::vector<int64_t> &shape = launch.shape;
  const int64_t elements = launch.elements;

  std::vector<void *> buffers;
  buffers.reserve(info.params.size());
  std::vector<Tensor *> outputs(numOutputs, nullptr);
  for (int o = 0; o < numOutputs; ++o)
    DTF_RETURN_IF_ERROR(ctx.allocateOutput(o, info.outputDTypes[o],
                                           launch.outputShapes[size_t(o)],
                                           &outputs[o]));
  using M = GeneratedParam::Meaning;
  // The kernel's report of a bad label: the labels were checked before the
  // call (below), so it stays clear; read after the call all the same.
  int64_t rowIndexError[2] = {0, 0};
  int64_t dropoutKey[2] = {0, 0};
  for (const GeneratedParam &p : info.params) {
    if (p.kind == GeneratedParam::Kind::kI64 || p.meaning == M::kWorkspace)
      continue; // (the workspace is the GPU code's alone)
    if (p.meaning == M::kRowIndexError) {
      buffers.push_back(rowIndexError);
      continue;
    }
    if (p.meaning == M::kDropoutKey) {
      // This run's key and first element, as the op-by-op kernel's.
      if (p.operand < 0 || p.operand >= numInputs)
        return errorStatus(info.name, ": its dropout-key names operand ",
                           p.operand, ", not an input");
      dropoutKeyWord(info, ctx.step(), ctx.seed(), inputShapes[p.operand],
                     ctx.batchOffset(), ctx.batchRows(), dropoutKey);
      buffers.push_back(dropoutKey);
      continue;
    }
    if (p.operand < 0 || p.operand >= numInputs + numOutputs)
      return errorStatus(info.name, ": a parameter names operand ", p.operand,
                         " of ", numInputs + numOutputs);
    if (p.operand >= numInputs) {
      buffers.push_back(outputs[p.operand - numInputs]->rawData());
      continue;
    }
    if (p.meaning == M::kInOut) {
      // Written in place: the variable's (or slot's) own buffer.
      Tensor &t = ctx.mutableInput(p.operand);
      if (t.shape() != shape)
        return errorStatus(info.name, ": input ", p.operand, " is ",
                           t.describe(),
                           ", which the kernel cannot update "
                           "in place over the shape ",
                           shapeString(shape));
      buffers.push_back(t.rawData());
      continue;
    }
    const Tensor &t = ctx.input(p.operand);
    if (p.meaning == M::kRow || p.meaning == M::kRowIndex) {
      // Shapes checked by fusedLaunchOf; labels against [0, C) here, as
      // the op-by-op kernel does (the generated code would give NaN).
      if (p.meaning == M::kRowIndex)
        DTF_RETURN_IF_ERROR(checkRowIndices(info, t, launch.reduced));
      buffers.push_back(const_cast<void *>(t.rawData()));
      continue;
    }
    const bool fits =
        (p.meaning == M::kSame && t.shape() == shape) ||
        (p.meaning == M::kScalar && t.numElements() == 1) ||
        (p.meaning == M::kSuffix && t.numElements() > 0 &&
         isSuffixOf(t.shape(), shape)) ||
        (p.meaning == M::kPrefix && isPrefixOf(t.shape(), shape, p.divisor));
    if (!fits)
      return errorStatus(info.name, ": input ", p.operand, " is ",
                         t.describe(), ", which the kernel cannot index over "
                         "the shape ", shapeString(shape));
    buffers.push_back(const_cast<void *>(t.rawData()));
  }
  if (elements == 0)
    return Status::ok();
  GeneratedCpuFn fn = kernels.function(k);
  void *const *b = buffers.data();
  const int64_t *s = launch.scalars.data();
  // A column reduction with few outputs: its rows cut into chunks by shape
  // (ColumnChunks.h), the chunks' partial rows summed over the pool, then
  // combined in chunk order; the op-by-op kernel sums in the same order.
  const int64_t inner = launch.inner, reduced = launch.reduced;
  const int64_t outer = inner > 0 ? elements / inner : 0;
  const int64_t rows = columnChunkRows(outer, reduced, inner);
  if (GeneratedCpuFn columns = kernels.columnsFunction(k);
      columns && rows < reduced) {
    const int64_t chunks = columnChunkCount(reduced, rows);
    const int64_t perOutput = outer * chunks * inner;
    // Each reduced output's partial rows (in doubles, for alignment), in
    // output order: the extra buffers of the columns entry point.
    std::vector<size_t> at;
    size_t size = 0;
    for (const GeneratedParam &p : info.params)
      if (p.meaning == M::kReduce) {
        const DType dtype = info.outputDTypes[size_t(p.operand - numInputs)];
        at.push_back(size);
        size += (size_t(perOutput) * dtypeSize(dtype) + 7) / 8;
      }
    std::vector<double> &scratch = fused->partials();
    if (scratch.size() < size)
      scratch.resize(size);
    for (size_t at0 : at)
      buffers.push_back(scratch.data() + at0);
    const int64_t phase0[5] = {elements, reduced, inner, rows, 0};
    const int64_t phase1[5] = {elements, reduced, inner, rows, 1};
    void *const *cb = buffers.data();
    parallelFor(ctx.threadPool(), outer * chunks, 1,
                [&](int64_t lo, int64_t hi) {
                  columns(cb, phase0, lo * inner, hi * inner);
                });
    parallelFor(ctx.threadPool(), elements,
                std::max<int64_t>(64, 16384 / chunks),
                [&](int64_t lo, int64_t hi) { columns(cb, phase1, lo, hi); });
    return Status::ok();
  }
  // About 16k elements per chunk (an output element of a reduced kernel
  // reads R): a chunk costs microseconds, well above the pool's hand-off.
  parallelFor(ctx.threadPool(), elements,
              std::max<int64_t>(1, 16384 / std::max<int64_t>(1, launch.reduced)),
              [&](int64_t lo, int64_t hi) { fn(b, s, lo, hi); });
  return rowIndexErrorOf(info, rowIndexError, launch.reduced);
}

} // namespace dtf
