// Every generated kernel of every model (models/*.dtf and tests/e2e/*.dtf),
// compiled by dtfc, against the op-by-op kernels running the same region on
// random inputs of several batch sizes: bit for bit, or within a few ulps
// where the region calls exp, log or tanh. Also the loader's and the plan
// reader's errors for broken kernels.
#include "runtime/plan/FusedKernels.h"
#include "runtime/core/ThreadPool.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/PlanKernels.h"
#include "runtime/kernels/ColumnChunks.h"
#include "runtime/kernels/CpuKernels.h"
#include "runtime/kernels/GeneratedKernels.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"
#include "schema/PlanSeal.h"
#include "tests/unit/fusion/KernelInputs.h"
#include "tests/unit/fusion/SkipReasons.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace fs = std::filesystem;

namespace {

// A model file name with this suffix: the model with its graph on /gpu:0.
constexpr const char *kOnGpu = "@gpu";

std::vector<std::string> modelFiles() {
  std::vector<std::string> files;
  for (const char *dir :
       {"models", "tests/e2e", "tests/unit/fusion/updates",
        "tests/unit/fusion/rows", "tests/unit/fusion/dropout",
        "tests/unit/fusion/elementwise"}) {
    fs::path p = fs::path(DTF_SOURCE_DIR) / dir;
    for (const auto &entry : fs::directory_iterator(p))
      if (entry.path().extension() == ".dtf")
        files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  // The seed CNN and the MLP with their graphs on /gpu:0 (as the e2e.gpu_*
  // tests place them): dtf-fuse then makes regions of single ops and lone
  // reductions too, which only GPU-placed ops get.
  for (const char *model : {"models/mnist_cnn", "models/mlp",
                            "tests/unit/fusion/elementwise/every_op"})
    files.push_back((fs::path(DTF_SOURCE_DIR) / model).string() + ".dtf" +
                    kOnGpu);
  return files;
}

/// `model`'s text with its whole graph in `on "/gpu:0" { ... }`, as
/// tests/e2e/gpu_model.py writes it.
std::string graphOnGpu(const std::string &model) {
  std::ifstream in(model);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::string open = "  graph {\n", close = "\n  }\n";
  const size_t start = text.find(open);
  if (start == std::string::npos)
    return "";
  const size_t bodyStart = start + open.size();
  const size_t end = text.find(close, bodyStart);
  if (end == std::string::npos)
    return "";
  std::string body;
  std::istringstream lines(text.substr(bodyStart, end - bodyStart));
  for (std::string line; std::getline(lines, line);)
    body += (body.empty() ? "" : "\n") + (line.empty() ? line : "  " + line);
  return text.substr(0, bodyStart) + "    on \"/gpu:0\" {\n" + body +
         "\n    }" + text.substr(end);
}

std::string testName(const ::testing::TestParamInfo<std::string> &info) {
  std::string name = fs::path(info.param).parent_path().filename().string() +
                     "_" + fs::path(info.param).stem().string();
  if (fs::path(info.param).extension() == std::string(".dtf") + kOnGpu)
    name += "_on_gpu";
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return name;
}

/// Compiles `model` with dtfc (fusion on: its default) into `plan`.
void compileModel(const std::string &model, dtf::plan::Plan *plan,
                  const std::string &extra = "") {
  const std::string out =
      (fs::temp_directory_path() /
       ("dtf-fusion-test-" + std::to_string(::getpid()) + ".bin"))
          .string();
  std::string source = model;
  const std::string suffix = kOnGpu;
  if (model.size() > suffix.size() &&
      model.compare(model.size() - suffix.size(), suffix.size(), suffix) == 0) {
    source = out + ".dtf";
    const std::string text =
        graphOnGpu(model.substr(0, model.size() - suffix.size()));
    ASSERT_FALSE(text.empty()) << model << ": no `graph {` block to place";
    std::ofstream(source) << text;
  }
  const std::string cmd = std::string(DTF_DTFC_PATH) + " '" + source +
                          "' --no-data-check " + extra + " -o '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  dtf::Status s = dtf::plan::readPlanFile(out, plan);
  fs::remove(out);
  if (source != model)
    fs::remove(source);
  ASSERT_TRUE(s.isOk()) << s.message();
}

/// Random values of `dtype`: floats in [-4, 4] with exact zeros mixed in
/// (relu's kink), integers in [-50, 50], bools.
dtf::Tensor randomTensor(dtf::DType dtype, std::vector<int64_t> shape,
                         std::mt19937 &rng) {
  dtf::Tensor t = dtf::Tensor::allocate(dtype, std::move(shape));
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  std::uniform_int_distribution<int> integer(-50, 50);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    const bool zero = integer(rng) == 0;
    switch (dtype) {
    case dtf::DType::F32:
      t.data<float>()[i] = zero ? 0.0f : float(real(rng));
      break;
    case dtf::DType::F64:
      t.data<double>()[i] = zero ? 0.0 : real(rng);
      break;
    case dtf::DType::I32:
      t.data<int32_t>()[i] = integer(rng);
      break;
    case dtf::DType::I64:
      t.data<int64_t>()[i] = integer(rng);
      break;
    case dtf::DType::Bool:
      t.data<bool>()[i] = integer(rng) > 0;
      break;
    default:
      break;
    }
  }
  return t;
}

/// Distance in units in the last place; 0 for equal bits or two NaNs.
template <typename T, typename Bits> uint64_t ulps(T a, T b) {
  if (std::isnan(a) && std::isnan(b))
    return 0;
  Bits ia, ib;
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  if (ia == ib)
    return 0;
  if (std::isnan(a) || std::isnan(b) || (a < 0) != (b < 0))
    return UINT64_MAX;
  return ia > ib ? uint64_t(ia - ib) : uint64_t(ib - ia);
}

/// The error of `got` against `want` in float32 epsilons, relative to
/// max(|want|, 1): what a chain of ops makes of a function's few ulps once
/// a later op cancels (tanh_grad's 1 - y * y near |y| = 1) or scales them.
uint64_t scaledError(float got, float want) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) ? 0 : UINT64_MAX;
  if (got == want)
    return 0;
  const double e = std::fabs(double(got) - double(want)) /
                   std::max(std::fabs(double(want)), 1.0) /
                   double(std::numeric_limits<float>::epsilon());
  return std::isfinite(e) ? uint64_t(std::ceil(e)) : UINT64_MAX;
}

/// The largest ulp distance between two tensors of one dtype (integers and
/// bools: 0 or "different"); with `scaled`, float32 elements count the
/// smaller of their ulps and their scaledError.
uint64_t maxUlps(const dtf::Tensor &a, const dtf::Tensor &b, int64_t *where,
                 bool scaled = false) {
  uint64_t worst = 0;
  for (int64_t i = 0; i < a.numElements(); ++i) {
    uint64_t d = 0;
    switch (a.dtype()) {
    case dtf::DType::F32:
      d = ulps<float, uint32_t>(a.data<float>()[i], b.data<float>()[i]);
      if (scaled)
        d = std::min(d, scaledError(a.data<float>()[i], b.data<float>()[i]));
      break;
    case dtf::DType::F64:
      d = ulps<double, uint64_t>(a.data<double>()[i], b.data<double>()[i]);
      break;
    default:
      d = std::memcmp(static_cast<const char *>(a.rawData()) +
                          i * dtf::dtypeSize(a.dtype()),
                      static_cast<const char *>(b.rawData()) +
                          i * dtf::dtypeSize(a.dtype()),
                      dtf::dtypeSize(a.dtype())) == 0
              ? 0
              : UINT64_MAX;
    }
    if (d > worst) {
      worst = d;
      *where = i;
    }
  }
  return worst;
}

/// Regions with exp, log, tanh, sigmoid or erf: in float32 the generated code
/// computes them with MLIR's polynomial approximations (within 5 ulps of
/// libm, docs/kernels.md), in float64 with libm, as the op-by-op kernels.
bool approximates(const dtf::plan::Kernel &kernel) {
  for (const std::string &op : kernel.ops())
    if (op == "dtf.exp" || op == "dtf.log" || op == "dtf.tanh" ||
        op == "dtf.sigmoid" || op == "dtf.erf")
      return true;
  return false;
}

/// Whether output `o` of `kernel` is a reduction to one element (a
/// "reduce:" spec with no kept axis).
bool reducesToOneElement(const dtf::plan::Kernel &kernel, int o) {
  for (const auto &p : kernel.params())
    if (p.kind() == "buffer" && p.operand() == kernel.inputs_size() + o &&
        p.meaning().rfind("reduce:", 0) == 0)
      return p.meaning().find('k', 7) == std::string::npos;
  return false;
}

/// Whether output `o` of `kernel` is a reduction (a "reduce:" spec).
bool reduces(const dtf::plan::Kernel &kernel, int o) {
  for (const auto &p : kernel.params())
    if (p.kind() == "buffer" && p.operand() == kernel.inputs_size() + o &&
        p.meaning().rfind("reduce:", 0) == 0)
      return true;
  return false;
}

/// The largest |a - b| / |b| of two float tensors.
double maxRelative(const dtf::Tensor &a, const dtf::Tensor &b) {
  double worst = 0;
  for (int64_t i = 0; i < a.numElements(); ++i) {
    double x =
        a.dtype() == dtf::DType::F64 ? a.data<double>()[i] : a.data<float>()[i];
    double y =
        b.dtype() == dtf::DType::F64 ? b.data<double>()[i] : b.data<float>()[i];
    if (x != y)
      worst = std::max(worst, std::abs(x - y) / std::abs(y));
  }
  return worst;
}

using dtf::plan::inPlaceInputs;

/// Sets each "row-index" input of `kernel` to random classes in [0, C),
/// C the last dim of its "same" input (the rows).
void fillRowIndices(const dtf::plan::Kernel &kernel,
                    std::vector<dtf::Tensor> &inputs, std::mt19937 &rng) {
  int64_t classes = 0;
  for (const auto &p : kernel.params())
    if (p.kind() == "buffer" && p.meaning() == "same" &&
        p.operand() < int(inputs.size()) &&
        inputs[size_t(p.operand())].rank() > 0)
      classes = inputs[size_t(p.operand())].shape().back();
  for (const auto &p : kernel.params()) {
    if (p.kind() != "buffer" || p.meaning() != "row-index" || classes <= 0)
      continue;
    dtf::Tensor &t = inputs[size_t(p.operand())];
    std::uniform_int_distribution<int64_t> label(0, classes - 1);
    for (int64_t e = 0; e < t.numElements(); ++e) {
      if (t.dtype() == dtf::DType::I64)
        t.data<int64_t>()[e] = label(rng);
      else
        t.data<int32_t>()[e] = int32_t(label(rng));
    }
  }
}

dtf::Tensor copyOf(const dtf::Tensor &t) {
  dtf::Tensor c = dtf::Tensor::allocate(t.dtype(), t.shape());
  std::memcpy(c.rawData(), t.rawData(),
              size_t(t.numElements()) * dtf::dtypeSize(t.dtype()));
  return c;
}

class EveryKernel : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryKernel, MatchesTheOpByOpKernels) {
  dtf::plan::Plan plan;
  // Every reduction dtf-fuse can fuse, columns too (not the default).
  ASSERT_NO_FATAL_FAILURE(
      compileModel(GetParam(), &plan, "--fuse-reductions=all"));
  if (plan.kernels_size() == 0) {
    // Still a check: no dtf.fused op may then appear.
    EXPECT_FALSE(dtf::plan::hasFusedOps(plan.train_step()));
    std::printf("[ fusion   ] %s: no fused kernels\n", GetParam().c_str());
    return;
  }
  ASSERT_FALSE(plan.cpu_object().empty());
  if (std::string why = dtf::test::cannotRunGeneratedKernels(plan);
      !why.empty())
    GTEST_SKIP() << why;
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;

  dtf::KernelRegistry registry;
  dtf::registerCpuKernels(registry);
  dtf::ThreadPool pool(2); // chunks on two threads, as dtf-run's pool
  std::mt19937 rng(1234);
  int checked = 0;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const dtf::plan::Kernel &kernel = plan.kernels(k);
    const bool approximate = approximates(kernel);
    // Approximated functions: 16 epsilons relative to max(|value|, 1) (the
    // worst seen over every model: 9, in the LSTM's tanh_grad chains).
    const uint64_t tolerance = approximate ? 16 : 0;
    // The region as a program of its own, for the op-by-op executor.
    const int inPlace = inPlaceInputs(kernel);
    dtf::plan::Program body = inPlace > 0
                                  ? dtf::plan::updateKernelBodyProgram(kernel)
                                  : dtf::plan::kernelBodyProgram(kernel);
    for (auto &op : *body.mutable_ops())
      op.clear_device(); // this process's CPU, as the fused kernel
    dtf::exec::VariableStore variables;
    for (int i = 0; i < inPlace; ++i) {
      // Placeholders of the right type and shape, replaced before each run.
      dtf::Tensor zeros = dtf::test::kernelInputZeros(kernel, i);
      ASSERT_TRUE(zeros.defined()) << kernel.name() << " input " << i;
      ASSERT_TRUE(variables.add("input" + std::to_string(i), zeros).isOk());
    }
    dtf::exec::ExecutorOptions options;
    options.intraOpPool = &pool;
    // A dropout kernel's mask follows the run's seed, the step and a
    // tower's offset in the batch: none of them the default.
    constexpr uint64_t kRunSeed = 20261124, kStep = 7;
    options.seed = kRunSeed;
    std::unique_ptr<dtf::exec::Executor> opByOp;
    dtf::Status s = dtf::exec::Executor::create(body, variables, registry,
                                                options, &opByOp);
    ASSERT_TRUE(s.isOk()) << kernel.name() << ": " << s.message();

    // Batches of 1, an odd partial one, and ones past the pool's 16k chunk.
    std::vector<bool> changed(size_t(inPlace), false);
    for (int64_t batch : {1, 7, 50, 333}) {
      std::vector<dtf::Tensor> inputs;
      std::vector<dtf::Tensor *> pointers;
      for (int i = 0; i < kernel.inputs_size(); ++i) {
        const dtf::plan::Value *value = nullptr;
        for (const auto &v : kernel.values())
          if (v.id() == kernel.inputs(i))
            value = &v;
        ASSERT_NE(value, nullptr);
        dtf::DType dtype = dtf::DType::F32;
        ASSERT_TRUE(dtf::plan::toDType(value->type().dtype(), &dtype).isOk());
        std::vector<int64_t> dims = dtf::plan::dimsOf(value->type().shape());
        for (int64_t &d : dims)
          if (d < 0)
            d = batch;
        inputs.push_back(randomTensor(dtype, dims, rng));
        if (inPlace > 0 &&
            (dtype == dtf::DType::I64 || dtype == dtf::DType::I32))
          for (int64_t e = 0; e < inputs.back().numElements(); ++e) {
            // An update's step counts updates: >= 0.
            if (dtype == dtf::DType::I64)
              inputs.back().data<int64_t>()[e] =
                  std::abs(inputs.back().data<int64_t>()[e]);
            else
              inputs.back().data<int32_t>()[e] =
                  std::abs(inputs.back().data<int32_t>()[e]);
          }
      }
      // A row kernel's class indices ("row-index") lie in [0, C), C the
      // last dim of its rows (the op-by-op kernel refuses others).
      fillRowIndices(kernel, inputs, rng);
      // An update writes its variable and slots in place: each side gets
      // its own copy of them.
      std::vector<dtf::Tensor> before;
      for (int i = 0; i < inPlace; ++i) {
        before.push_back(copyOf(inputs[size_t(i)]));
        dtf::Tensor *var = variables.find("input" + std::to_string(i));
        ASSERT_EQ(var->shape(), inputs[size_t(i)].shape());
        std::memcpy(var->rawData(), inputs[size_t(i)].rawData(),
                    size_t(var->numElements()) * dtf::dtypeSize(var->dtype()));
      }
      for (dtf::Tensor &t : inputs)
        pointers.push_back(&t);

      dtf::FusedKernelContext fused(kernels->loaded, k);
      fused.setInputs(pointers);
      fused.setNumOutputs(kernel.outputs_size());
      fused.setThreadPool(&pool);
      fused.setStep(kStep, kRunSeed);
      fused.setBatchOffset(2 * batch, batch); // the third tower's share
      s = dtf::callKernel(dtf::fusedKernel, fused);
      ASSERT_TRUE(s.isOk()) << kernel.name() << ": " << s.message();

      for (int i = inPlace; i < kernel.inputs_size(); ++i)
        ASSERT_TRUE(opByOp->setFeed(i - inPlace, inputs[i]).isOk());
      opByOp->setBatchOffset(2 * batch, batch);
      s = opByOp->run(kStep);
      ASSERT_TRUE(s.isOk()) << kernel.name() << ": " << s.message();
      for (int i = 0; i < inPlace; ++i) {
        const dtf::Tensor &want = *variables.find("input" + std::to_string(i));
        const dtf::Tensor &got = inputs[size_t(i)];
        int64_t where = -1;
        ASSERT_EQ(got.shape(), want.shape()) << kernel.name();
        // (A zero gradient or learning rate, which the random inputs hold
        // now and then, leaves a one-element variable as it was.)
        if (maxUlps(got, before[size_t(i)], &where) != 0)
          changed[size_t(i)] = true;
        uint64_t d = maxUlps(got, want, &where);
        EXPECT_EQ(d, 0u) << GetParam() << ": " << kernel.name()
                         << " updates input " << i << " at batch " << batch
                         << " differently at element " << where << " (ulps "
                         << d << ")";
      }
      for (int o = 0; o < kernel.outputs_size(); ++o) {
        const dtf::Tensor &want = opByOp->fetch(o);
        const dtf::Tensor &got = fused.output(o);
        ASSERT_EQ(got.shape(), want.shape()) << kernel.name();
        ASSERT_EQ(got.dtype(), want.dtype()) << kernel.name();
        int64_t largest = 0;
        for (const dtf::Tensor &t : inputs)
          largest = std::max(largest, t.numElements());
        if (reducesToOneElement(kernel, o) && largest >= 32768 &&
            (got.dtype() == dtf::DType::F32 ||
             got.dtype() == dtf::DType::F64)) {
          // The documented exception (docs/kernels.md): the op-by-op kernel
          // splits a reduction to one element of 32,768 or more over the
          // pool's threads and adds the partial sums; the generated loop
          // sums in one pass. Another order: equal within rounding.
          const double rel = maxRelative(got, want);
          EXPECT_LE(rel, got.dtype() == dtf::DType::F32 ? 1e-5 : 1e-13)
              << GetParam() << ": " << kernel.name() << " output " << o
              << " at batch " << batch << " (a sum to one element)";
          continue;
        }
        // A reduction of n terms of an approximating kernel (gelu's
        // gradient summed into a bias, vit.dtf): each term within a few
        // ulps of libm's, their errors add up as a random walk, sqrt(n)
        // times a term's (relative to max(|sum|, 1), scaledError).
        uint64_t allowed = tolerance;
        if (approximate && reduces(kernel, o) && got.numElements() > 0)
          allowed *= uint64_t(std::ceil(
              std::sqrt(double(largest) / double(got.numElements()))));
        int64_t where = -1;
        uint64_t d = maxUlps(got, want, &where, approximate);
        EXPECT_LE(d, allowed)
            << GetParam() << ": " << kernel.name() << " output " << o
            << " at batch " << batch << " differs at element " << where
            << " (ulps " << d << ")";
      }
      ++checked;
    }
    for (int i = 0; i < inPlace; ++i)
      EXPECT_TRUE(changed[size_t(i)])
          << kernel.name() << " never updated input " << i;
  }
  if (!HasFailure())
    std::printf("[ fusion   ] %s: %d kernels, %d runs match the op-by-op "
                "kernels\n",
                GetParam().c_str(), plan.kernels_size(), checked);
}

// The parameter table ptxas writes into a cubin: per kernel, the section
// .nv.info.<name> holds EIATTR_KPARAM_INFO (0x17: ordinal, offset, size of
// each parameter) and EIATTR_PARAM_CBANK (0x0a: the parameters' total size
// in the constant bank).
struct ParamTable {
  std::map<int, std::pair<int, int>> params; // ordinal -> (offset, size)
  int cbankSize = -1;
};

bool readNvInfo(const std::string &elf, std::map<std::string, ParamTable> *out,
                std::string *error) {
  auto fail = [&](const char *what) {
    *error = what;
    return false;
  };
  if (elf.size() < sizeof(Elf64_Ehdr) || elf.compare(0, 4,
                                                     "\x7f"
                                                     "ELF") != 0)
    return fail("not an ELF file");
  Elf64_Ehdr h;
  std::memcpy(&h, elf.data(), sizeof h);
  if (h.e_machine != 190 /* EM_CUDA */)
    return fail("not an EM_CUDA ELF");
  if (h.e_shoff + uint64_t(h.e_shnum) * sizeof(Elf64_Shdr) > elf.size() ||
      h.e_shstrndx >= h.e_shnum)
    return fail("section headers out of bounds");
  std::vector<Elf64_Shdr> sections(h.e_shnum);
  std::memcpy(sections.data(), elf.data() + h.e_shoff,
              h.e_shnum * sizeof(Elf64_Shdr));
  const Elf64_Shdr &names = sections[h.e_shstrndx];
  for (const Elf64_Shdr &sec : sections) {
    // A NOBITS section (.nv.shared.<kernel>, a reduction's workgroup
    // memory) has a size but no bytes in the file.
    if ((sec.sh_type != SHT_NOBITS &&
         sec.sh_offset + sec.sh_size > elf.size()) ||
        sec.sh_name >= names.sh_size)
      return fail("a section out of bounds");
    std::string name(elf.data() + names.sh_offset + sec.sh_name);
    const std::string prefix = ".nv.info.";
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    ParamTable &table = (*out)[name.substr(prefix.size())];
    const auto *p =
        reinterpret_cast<const uint8_t *>(elf.data() + sec.sh_offset);
    const uint8_t *end = p + sec.sh_size;
    while (p + 2 <= end) {
      const uint8_t format = p[0], attr = p[1];
      p += 2;
      size_t size = 0;
      // No value, a byte or a half word: two bytes (entries stay 4-byte
      // aligned); a sized value: its u16 size, then the bytes.
      if (format == 0x01 || format == 0x02 || format == 0x03)
        size = 2;
      else if (format == 0x04) {
        if (p + 2 > end)
          return fail("truncated attribute");
        size = size_t(p[0]) | size_t(p[1]) << 8;
        p += 2;
      } else
        return fail("unknown attribute format");
      if (p + size > end)
        return fail("truncated attribute value");
      if (attr == 0x17 && size >= 12) { // EIATTR_KPARAM_INFO
        uint16_t ordinal, offset;
        uint32_t flags;
        std::memcpy(&ordinal, p + 4, 2);
        std::memcpy(&offset, p + 6, 2);
        std::memcpy(&flags, p + 8, 4);
        table.params[ordinal] = {offset, int((flags >> 18) & 0x3fff)};
      } else if (attr == 0x0a && size >= 8) { // EIATTR_PARAM_CBANK
        uint16_t bankSize;
        std::memcpy(&bankSize, p + 6, 2);
        table.cbankSize = bankSize;
      }
      p += size;
    }
  }
  return true;
}

/// Checks that `cubin` has, for every kernel of `plan`, a parameter table
/// of its params: 8 bytes each, at offsets 0, 8, 16...
void expectParamTables(const dtf::plan::Plan &plan, const std::string &cubin,
                       const std::string &what) {
  std::map<std::string, ParamTable> tables;
  std::string error;
  ASSERT_TRUE(readNvInfo(cubin, &tables, &error)) << what << ": " << error;
  for (const dtf::plan::Kernel &k : plan.kernels()) {
    auto it = tables.find(k.name());
    ASSERT_NE(it, tables.end()) << what << " has no .nv.info." << k.name();
    const ParamTable &t = it->second;
    ASSERT_EQ(int(t.params.size()), k.params_size())
        << what << ": " << k.name();
    EXPECT_EQ(t.cbankSize, 8 * k.params_size()) << what << ": " << k.name();
    for (int i = 0; i < k.params_size(); ++i) {
      auto p = t.params.find(i);
      ASSERT_NE(p, t.params.end())
          << what << ": " << k.name() << " param " << i;
      EXPECT_EQ(p->second.first, 8 * i)
          << what << ": " << k.name() << " param " << i;
      EXPECT_EQ(p->second.second, 8)
          << what << ": " << k.name() << " param " << i;
    }
  }
}

constexpr const char *kToolkit = DTF_CUDA_TOOLKIT;

TEST_P(EveryKernel, GpuCodeAssemblesAndItsParameterTablesMatchThePlan) {
  const std::string ptxas = std::string(kToolkit) + "/bin/ptxas";
  // Where the build found the toolkit (every machine this project builds
  // on has it), a missing ptxas is a failure, never a skip.
  if (std::string why = dtf::test::noCudaToolkit(DTF_HAVE_CUDA_TOOLKIT, ptxas);
      !why.empty())
    GTEST_SKIP() << why;
  ASSERT_TRUE(fs::exists(ptxas))
      << ptxas << " was there when the build was configured and is gone";
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(
      GetParam(), &plan, "--gpu-kernels=on --fuse-reductions=all"));
  if (plan.kernels_size() == 0) {
    EXPECT_TRUE(plan.gpu_ptx().empty());
    return;
  }
  ASSERT_FALSE(plan.gpu_ptx().empty());
  EXPECT_NE(plan.gpu_ptx().back(), '\0');
  EXPECT_EQ(plan.gpu_ptx().find("__nv_"), std::string::npos)
      << "libdevice was not linked: a call of __nv_* is left in the PTX";
  for (const dtf::plan::Kernel &k : plan.kernels()) {
    // A reduction: a block-wide tree (256 threads for one output element
    // of a row, or 32 x 8 for 32 columns, split over chunks of rows with a
    // workspace) over workgroup memory; else 256 threads, one per element.
    bool reduced = false, column = false, workspace = false;
    for (const auto &p : k.params()) {
      if (p.meaning().rfind("reduce:", 0) == 0) {
        reduced = true;
        column = column || p.meaning().back() == 'k';
      }
      workspace |= p.meaning() == "workspace";
    }
    EXPECT_EQ(k.block() * std::max(1, k.block_y()), 256) << k.name();
    const bool tile = k.block() == 32;
    EXPECT_EQ(tile, column) << k.name() << ": a column reduction is a tile";
    EXPECT_EQ(workspace, column) << k.name() << ": a tile has a workspace";
    EXPECT_EQ(k.outputs_per_block(), reduced ? (tile ? 32 : 1) : 0) << k.name();
    EXPECT_EQ(k.shared_bytes() > 0, reduced) << k.name();
    const size_t entry = plan.gpu_ptx().find(".entry " + k.name() + "(");
    ASSERT_NE(entry, std::string::npos)
        << k.name() << " is not an entry of the PTX";
    // Its barriers: one after the threads' sums, one per tree level.
    const size_t next = plan.gpu_ptx().find(".entry ", entry + 1);
    const std::string body = plan.gpu_ptx().substr(
        entry, next == std::string::npos ? std::string::npos : next - entry);
    int barriers = 0;
    for (size_t at = body.find("bar.sync"); at != std::string::npos;
         at = body.find("bar.sync", at + 1))
      ++barriers;
    // A split tile: 4 for its chunk's tree, 2 around the count of the
    // column group's blocks (atom.global.add after a fence), 4 for the
    // last block's tree over the partials.
    EXPECT_EQ(barriers, reduced ? (tile ? 10 : 9) : 0) << k.name();
    if (tile) {
      EXPECT_NE(body.find("%nctaid.y"), std::string::npos) << k.name();
      EXPECT_NE(body.find("atom.global.add.u32"), std::string::npos)
          << k.name();
      EXPECT_NE(body.find("fence.acq_rel.gpu"), std::string::npos)
          << k.name();
    }
  }
  const fs::path dir =
      fs::temp_directory_path() / ("dtf-ptx-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  { std::ofstream(dir / "k.ptx", std::ios::binary) << plan.gpu_ptx(); }
  for (const char *chip : {"sm_80", "sm_90"}) {
    const fs::path cubin = dir / (std::string(chip) + ".cubin");
    const std::string cmd = ptxas + " -arch=" + chip + " -o '" +
                            cubin.string() + "' '" + (dir / "k.ptx").string() +
                            "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(cubin, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    expectParamTables(plan, bytes, std::string("ptxas -arch=") + chip);
    auto stored = plan.gpu_cubins().find(chip);
    ASSERT_NE(stored, plan.gpu_cubins().end())
        << "the plan has no " << chip << " cubin";
    expectParamTables(plan, stored->second,
                      std::string("the plan's ") + chip + " cubin");
  }
  fs::remove_all(dir);
  if (!HasFailure())
    std::printf(
        "[ gpu      ] %s: %d kernels; ptxas accepts the PTX for sm_80 and "
        "sm_90, and every parameter table matches\n",
        GetParam().c_str(), plan.kernels_size());
}

INSTANTIATE_TEST_SUITE_P(Models, EveryKernel, ::testing::ValuesIn(modelFiles()),
                         testName);

std::string seedModel() {
  return (fs::path(DTF_SOURCE_DIR) / "models" / "mnist_cnn.dtf").string();
}

std::string residualModel() {
  return (fs::path(DTF_SOURCE_DIR) / "models" / "resnet.dtf").string();
}

// The float32 exp, log, tanh and erf of the generated code (MLIR's polynomial
// approximations, vectorized) against libm over a sweep of their ranges:
// tanh within 5 ulps, exp and log within 1, erf within 4 (measured: 5, 1, 1
// and 4; erf keeps the sign of zero by a select around the polynomial).
TEST(GeneratedKernels, ApproximatedFunctionsStayWithinAFewUlpsOfLibm) {
  const fs::path model = fs::temp_directory_path() /
                         ("dtf-approx-" + std::to_string(::getpid()) + ".dtf");
  {
    std::ofstream out(model);
    out << "model approx {\n  input x: f32[B]\n  var w: f32[1] = ones\n"
           "  graph {\n    t = tanh(maximum(x, -100.0))\n"
           "    e = exp(maximum(x, -87.0))\n    l = log(maximum(x, 1e-30))\n"
           "    r = erf(maximum(x, -99.0))\n"
           "    loss = mean(t) + mean(e) + mean(l) + mean(r) + sum(w * w)\n  "
           "}\n"
           "  train {\n    optimizer = sgd(learning_rate = 0.1)\n    batch = "
           "4\n"
           "    steps = 1\n    data = synthetic(examples = 8)\n  }\n}\n";
  }
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(
      compileModel(model.string(), &plan, "--fuse-reductions=none"));
  fs::remove(model);
  if (std::string why = dtf::test::cannotRunGeneratedKernels(plan);
      !why.empty())
    GTEST_SKIP() << why;
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;
  struct Function {
    const char *op;
    float (*libm)(float);
    float lo, hi;
    uint64_t bound;
    bool checked = false;
  };
  Function functions[] = {
      {"dtf.tanh", [](float x) { return std::tanh(x); }, -20.0f, 20.0f, 5},
      {"dtf.exp", [](float x) { return std::exp(x); }, -87.0f, 88.0f, 1},
      {"dtf.log", [](float x) { return std::log(x); }, 1e-30f, 1e30f, 1},
      {"dtf.erf", [](float x) { return std::erf(x); }, -10.0f, 10.0f, 4}};
  dtf::ThreadPool pool(2);
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const dtf::plan::Kernel &kernel = plan.kernels(k);
    Function *f = nullptr;
    for (Function &c : functions)
      if (kernel.ops_size() == 2 && kernel.ops(1) == c.op && !c.checked)
        f = &c;
    if (!f)
      continue;
    f->checked = true;
    // Every 4099th float of [lo, hi]; the maximum's bound is the lowest
    // float, so the kernel computes f(x).
    std::vector<float> xs;
    for (uint32_t u = 0; u < 0xff800000u; u += 4099) {
      float x;
      std::memcpy(&x, &u, sizeof x);
      for (float v : {x, -x})
        if (v >= f->lo && v <= f->hi)
          xs.push_back(v);
    }
    std::vector<dtf::Tensor> inputs;
    for (int i = 0; i < kernel.inputs_size(); ++i) {
      bool scalar = false;
      for (const auto &v : kernel.values())
        if (v.id() == kernel.inputs(i))
          scalar = v.type().shape().dims_size() == 0;
      dtf::Tensor t = dtf::Tensor::allocate(dtf::DType::F32,
                                            {scalar ? 1 : int64_t(xs.size())});
      if (scalar)
        t = dtf::Tensor::allocate(dtf::DType::F32, {});
      float *d = t.data<float>();
      if (scalar)
        d[0] = std::numeric_limits<float>::lowest();
      else
        std::copy(xs.begin(), xs.end(), d);
      inputs.push_back(std::move(t));
    }
    std::vector<dtf::Tensor *> pointers;
    for (dtf::Tensor &t : inputs)
      pointers.push_back(&t);
    dtf::FusedKernelContext fused(kernels->loaded, k);
    fused.setInputs(pointers);
    fused.setNumOutputs(1);
    fused.setThreadPool(&pool);
    dtf::Status s = dtf::callKernel(dtf::fusedKernel, fused);
    ASSERT_TRUE(s.isOk()) << s.message();
    uint64_t worst = 0;
    float at = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      uint64_t d = ulps<float, uint32_t>(fused.output(0).data<float>()[i],
                                         f->libm(xs[i]));
      if (d > worst) {
        worst = d;
        at = xs[i];
      }
    }
    EXPECT_LE(worst, f->bound) << f->op << " at " << at;
    std::printf("[ fusion   ] %s: %zu values, at most %llu ulps from libm\n",
                f->op, xs.size(), static_cast<unsigned long long>(worst));
  }
  for (const Function &f : functions)
    EXPECT_TRUE(f.checked) << "no kernel computes " << f.op;
}

TEST(GeneratedKernels, ObjectThatIsNotElfIsAPreciseError) {
  std::unique_ptr<dtf::GeneratedKernels> loaded;
  dtf::Status s =
      dtf::GeneratedKernels::load(std::string(200, 'x'), {}, &loaded);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("is not an ELF shared object"), std::string::npos)
      << s.message();
}

TEST(GeneratedKernels, TruncatedObjectIsAPreciseError) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  std::unique_ptr<dtf::GeneratedKernels> loaded;
  dtf::Status s = dtf::GeneratedKernels::load(
      plan.cpu_object().substr(0, plan.cpu_object().size() / 3), {}, &loaded);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("past its end (truncated?)"), std::string::npos)
      << s.message();
}

TEST(GeneratedKernels, MissingSymbolIsAPreciseError) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  dtf::GeneratedKernelInfo info;
  info.name = "dtf_fused_99";
  info.cpuSymbol = "dtf_fused_99";
  std::unique_ptr<dtf::GeneratedKernels> loaded;
  dtf::Status s =
      dtf::GeneratedKernels::load(plan.cpu_object(), {info}, &loaded);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("(it lacks 'dtf_fused_99')"), std::string::npos)
      << s.message();
}

// The object's dynamic symbol table must be exactly the kernels' functions:
// code the plan does not name is not loaded.
TEST(GeneratedKernels, AFunctionNoKernelNamesIsRefused) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  ASSERT_GT(plan.kernels_size(), 1);
  std::vector<dtf::GeneratedKernelInfo> infos;
  for (const dtf::plan::Kernel &k : plan.kernels()) {
    dtf::GeneratedKernelInfo &info = infos.emplace_back();
    info.name = k.name();
    info.cpuSymbol = k.cpu_symbol();
    info.cpuColumnsSymbol = k.cpu_columns_symbol();
  }
  std::unique_ptr<dtf::GeneratedKernels> loaded;
  ASSERT_TRUE(dtf::GeneratedKernels::load(plan.cpu_object(), infos, &loaded).isOk());
  // (The last kernel without a columns function, so that one name goes.)
  while (!infos.back().cpuColumnsSymbol.empty())
    infos.pop_back();
  const std::string last = infos.back().cpuSymbol;
  infos.pop_back();
  dtf::Status s = dtf::GeneratedKernels::load(plan.cpu_object(), infos, &loaded);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("(it has '" + last + "', unnamed)"),
            std::string::npos)
      << s.message();
}

// A kernel whose cpu_symbol names another kernel's function would run that
// code over its buffers (an outside trial: SIGSEGV): the reader refuses it,
// even in a plan sealed again after the change.
TEST(GeneratedKernels, ACpuSymbolNamingAnotherKernelIsRefused) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  ASSERT_GT(plan.kernels_size(), 1);
  plan.mutable_kernels(0)->set_cpu_symbol(plan.kernels(1).name());
  dtf::plan::Plan out;
  dtf::Status s =
      dtf::plan::parsePlan(dtf::plan::sealPlan(plan), "cnn.bin", &out);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("cnn.bin: kernel 0 '" + plan.kernels(0).name() +
                             "' names the CPU function '" +
                             plan.kernels(1).name() + "' where dtfc writes"),
            std::string::npos)
      << s.message();
}

// Code changed after the seal (in memory: the reader has checked the file)
// is not run: the kernels run op by op, and the reason says why.
TEST(GeneratedKernels, CodeThatIsNotTheSealedCodeRunsOpByOp) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  ASSERT_TRUE(plan.has_integrity());
  std::string object = plan.cpu_object();
  object[object.size() / 2] ^= 1;
  plan.set_cpu_object(object);
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels);
  EXPECT_FALSE(kernels->loaded);
  EXPECT_NE(kernels->fallbackReason.find("SHA-256 is not the one dtfc sealed"),
            std::string::npos)
      << kernels->fallbackReason;
}

TEST(GeneratedKernels, UnknownBaselineFallsBackOpByOp) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  ASSERT_GT(plan.kernels_size(), 0);
  plan.set_cpu_target("x86-64-v9");
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels);
  EXPECT_FALSE(kernels->loaded);
  EXPECT_NE(kernels->fallbackReason.find("x86-64-v9"), std::string::npos)
      << kernels->fallbackReason;
  // The op-by-op path still loads the program: its fused ops expanded.
  dtf::plan::Program expanded = plan.train_step();
  ASSERT_TRUE(dtf::plan::expandFusedOps(plan.kernels(), &expanded).isOk());
  EXPECT_FALSE(dtf::plan::hasFusedOps(expanded));
  EXPECT_TRUE(dtf::plan::validateProgram(expanded, "expanded").isOk());
}

TEST(PlanReader, RejectsAFusedOpNamingAMissingKernel) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  for (auto &op : *plan.mutable_train_step()->mutable_ops())
    if (op.name() == "dtf.fused") {
      (*op.mutable_attrs())["kernel"].set_i(plan.kernels_size() + 3);
      break;
    }
  dtf::Status s = dtf::plan::validatePlan(plan, "p.bin");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("but the plan has"), std::string::npos)
      << s.message();
}

TEST(PlanReader, RejectsAKernelParameterOfUnknownMeaning) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  ASSERT_GT(plan.kernels_size(), 0);
  plan.mutable_kernels(0)->mutable_params(0)->set_meaning("diagonal");
  dtf::Status s = dtf::plan::validatePlan(plan, "p.bin");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("unknown meaning 'diagonal'"), std::string::npos)
      << s.message();
}

/// The index of the plan's first update kernel (an "inout" parameter); -1
/// when there is none.
int firstUpdateKernel(const dtf::plan::Plan &plan) {
  for (int k = 0; k < plan.kernels_size(); ++k)
    if (inPlaceInputs(plan.kernels(k)) > 0)
      return k;
  return -1;
}

/// validatePlan refuses `plan` with a message holding `text`.
void expectRefused(const dtf::plan::Plan &plan, const std::string &text) {
  dtf::Status s = dtf::plan::validatePlan(plan, "p.bin");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
}

/// Gives the buffer parameter of `kernel`'s operand `operand` `meaning`.
void setBufferMeaning(dtf::plan::Kernel *kernel, int operand,
                      const std::string &meaning) {
  for (auto &param : *kernel->mutable_params())
    if (param.kind() == "buffer" && param.operand() == operand)
      param.set_meaning(meaning);
}

TEST(PlanReader, RejectsInPlaceParametersOutsideAnUpdateKernel) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  ASSERT_GT(firstUpdateKernel(plan), 0);
  // An elementwise kernel (kernel 0: a bias add and relu) told to write its
  // first input in place.
  ASSERT_EQ(inPlaceInputs(plan.kernels(0)), 0);
  setBufferMeaning(plan.mutable_kernels(0), 0, "inout");
  expectRefused(plan, "in-place (inout) parameters but is not one dense "
                      "optimizer update");
}

TEST(PlanReader, RejectsAnUpdateOpWhoseInplaceDiffersFromItsKernel) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  const int k = firstUpdateKernel(plan);
  ASSERT_GE(k, 0);
  bool changed = false;
  for (auto &op : *plan.mutable_train_step()->mutable_ops())
    if (op.name() == "dtf.fused" && op.attrs().at("kernel").i() == k) {
      EXPECT_EQ(op.attrs().at("inplace").i(), 3); // Adam: var, m, v
      (*op.mutable_attrs())["inplace"].set_i(2);
      changed = true;
    }
  ASSERT_TRUE(changed);
  expectRefused(plan, "updates 2 inputs in place (attribute 'inplace'); its "
                      "kernel");
}

TEST(Dtfc, FuseUpdatesOffKeepsTheOpByOpUpdates) {
  dtf::plan::Plan on, off;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &on));
  ASSERT_NO_FATAL_FAILURE(
      compileModel(seedModel(), &off, "--fuse-updates=off"));
  auto count = [](const dtf::plan::Program &p, const std::string &name) {
    int n = 0;
    for (const auto &op : p.ops())
      n += op.name() == name;
    return n;
  };
  // The seed CNN's 8 variables, each updated by Adam.
  EXPECT_EQ(count(on.train_step(), "dtf.apply_adam"), 0);
  EXPECT_EQ(count(off.train_step(), "dtf.apply_adam"), 8);
  EXPECT_EQ(on.kernels_size(), off.kernels_size() + 8);
  int updates = 0;
  for (const auto &kernel : on.kernels())
    updates += inPlaceInputs(kernel) == 3 && kernel.outputs_size() == 0;
  EXPECT_EQ(updates, 8);
}

TEST(PlanReader, RejectsAnObjectWithoutItsBaseline) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  plan.clear_cpu_target();
  dtf::Status s = dtf::plan::validatePlan(plan, "p.bin");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("no cpu_target"), std::string::npos)
      << s.message();
}

TEST(Dtfc, FusionOffWritesNoKernels) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan, "--fusion=off"));
  EXPECT_EQ(plan.kernels_size(), 0);
  EXPECT_TRUE(plan.cpu_object().empty());
  EXPECT_FALSE(dtf::plan::hasFusedOps(plan.train_step()));
}

} // namespace

// The launch rule of a kernel with reductions and prefix inputs (the CPU and
// the GPU path share it): the iteration shape from the inputs, each output's
// shape from its spec, and the [O, R, N] counts as the i64 parameters.
TEST(FusedLaunch, ReducedOutputsAndCountsFollowTheSpec) {
  dtf::GeneratedKernelInfo info;
  info.name = "dtf_fused_9";
  info.inputDTypes = {dtf::DType::F32, dtf::DType::F32};
  info.outputDTypes = {dtf::DType::F32, dtf::DType::F32};
  auto param = [](const char *kind, const char *meaning, int operand) {
    dtf::GeneratedParam p;
    EXPECT_TRUE(dtf::parseGeneratedParam(kind, meaning, operand, &p))
        << kind << " " << meaning;
    return p;
  };
  info.params = {param("i64", "elements", 0),      param("i64", "reduced", 0),
                 param("i64", "inner", 0),         param("buffer", "same", 0),
                 param("buffer", "suffix", 1),     param("buffer", "output", 2),
                 param("buffer", "reduce:rrrk", 3)};
  dtf::FusedLaunch launch;
  ASSERT_TRUE(dtf::fusedLaunchOf(info, {{7, 5, 5, 32}, {32}}, &launch).isOk());
  EXPECT_EQ(launch.shape, (std::vector<int64_t>{7, 5, 5, 32}));
  EXPECT_EQ(launch.outputShapes[0], (std::vector<int64_t>{7, 5, 5, 32}));
  EXPECT_EQ(launch.outputShapes[1], (std::vector<int64_t>{32}));
  EXPECT_EQ(launch.elements, 32);
  EXPECT_EQ(launch.scalars, (std::vector<int64_t>{32, 175, 32}));

  // A row reduction kept as [B, 1]: O = 6, R = 10, N = 1.
  info.params.back() = param("buffer", "reduce:k1", 3);
  ASSERT_TRUE(dtf::fusedLaunchOf(info, {{6, 10}, {10}}, &launch).isOk());
  EXPECT_EQ(launch.outputShapes[1], (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(launch.scalars, (std::vector<int64_t>{6, 10, 1}));

  // A spec for another rank is an error naming the kernel, not a bad read.
  dtf::Status s = dtf::fusedLaunchOf(info, {{6, 10, 2}, {2}}, &launch);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("dtf_fused_9"), std::string::npos) << s.message();

  // Specs that are not one run of reduced axes, and bad prefix divisors,
  // are refused when the plan is read.
  dtf::GeneratedParam p;
  EXPECT_FALSE(dtf::parseGeneratedParam("buffer", "reduce:rkr", 3, &p));
  EXPECT_FALSE(dtf::parseGeneratedParam("buffer", "reduce:kk", 3, &p));
  EXPECT_FALSE(dtf::parseGeneratedParam("buffer", "reduce:kx", 3, &p));
  EXPECT_FALSE(dtf::parseGeneratedParam("buffer", "prefix:1", 0, &p));
  EXPECT_FALSE(dtf::parseGeneratedParam("buffer", "prefix:", 0, &p));
  EXPECT_TRUE(dtf::parseGeneratedParam("buffer", "prefix:64", 0, &p));
  EXPECT_EQ(p.divisor, 64);
  EXPECT_FALSE(dtf::parseGeneratedParam("i64", "outer", 0, &p));
}

// A prefix input whose shape does not match the divisor the kernel was
// compiled with is an error naming the input, never an out-of-bounds read.
TEST(FusedLaunch, APrefixInputOfTheWrongShapeIsRefused) {
  dtf::plan::Plan plan;
  const std::string model =
      (fs::path(DTF_SOURCE_DIR) / "models" / "transformer.dtf").string();
  ASSERT_NO_FATAL_FAILURE(compileModel(model, &plan));
  // The check refuses before any generated code runs, but only a CPU that
  // loads the kernels reaches it.
  if (std::string why = dtf::test::cannotRunGeneratedKernels(plan);
      !why.empty())
    GTEST_SKIP() << why;
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const dtf::plan::Kernel &kernel = plan.kernels(k);
    int prefix = -1;
    for (const auto &p : kernel.params())
      if (p.meaning() == "prefix:64")
        prefix = p.operand();
    if (prefix < 0)
      continue;
    // Every input [3, 16, 64], the prefix one [3, 1, 1]: it broadcasts, but
    // the kernel would read it at i / 64 (it must be [3, 16, 1]).
    std::vector<dtf::Tensor> inputs;
    std::vector<dtf::Tensor *> pointers;
    for (int i = 0; i < kernel.inputs_size(); ++i) {
      std::vector<int64_t> dims = {3, i == prefix ? 1 : 16,
                                   i == prefix ? 1 : 64};
      for (const auto &p : kernel.params())
        if (p.operand() == i && p.meaning() == "suffix")
          dims = {64};
        else if (p.operand() == i && p.meaning() == "scalar")
          dims = {};
      inputs.push_back(dtf::Tensor::allocate(dtf::DType::F32, dims));
    }
    for (dtf::Tensor &t : inputs)
      pointers.push_back(&t);
    dtf::FusedKernelContext fused(kernels->loaded, k);
    fused.setInputs(pointers);
    fused.setNumOutputs(kernel.outputs_size());
    dtf::Status s = dtf::callKernel(dtf::fusedKernel, fused);
    ASSERT_FALSE(s.isOk()) << kernel.name();
    EXPECT_NE(s.message().find("input " + std::to_string(prefix) + " is"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("cannot index"), std::string::npos)
        << s.message();
    return;
  }
  FAIL() << "the transformer has no kernel with a prefix:64 input";
}

// --- Row kernels: softmax, the cross-entropies, their gradients, argmax ---

namespace {

/// The index of the plan's kernel whose one op is `op`; -1 when none.
int kernelOf(const dtf::plan::Plan &plan, const std::string &op) {
  for (int k = 0; k < plan.kernels_size(); ++k)
    if (plan.kernels(k).ops_size() == 1 && plan.kernels(k).ops(0) == op)
      return k;
  return -1;
}

int countOps(const dtf::plan::Program &p, const std::string &name) {
  int n = 0;
  for (const auto &op : p.ops())
    n += op.name() == name;
  return n;
}

TEST(RowKernels, SeedCnnLossGradientAndArgmaxAreRowKernels) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  for (const char *op :
       {"dtf.sparse_softmax_cross_entropy",
        "dtf.sparse_softmax_cross_entropy_grad", "dtf.argmax"}) {
    const int k = kernelOf(plan, op);
    ASSERT_GE(k, 0) << op << " has no row kernel";
    std::string meanings;
    for (const auto &p : plan.kernels(k).params())
      meanings += p.meaning() + " ";
    EXPECT_NE(meanings.find("row-size"), std::string::npos) << meanings;
    EXPECT_EQ(countOps(plan.train_step(), op), 0) << op << " left op by op";
  }
  // The labels are class indices, one per row: checked at run time.
  const int k = kernelOf(plan, "dtf.sparse_softmax_cross_entropy");
  std::string meanings;
  for (const auto &p : plan.kernels(k).params())
    meanings += p.kind() + ":" + p.meaning() + " ";
  // (With GPU code the i64s come first: the GPU kernel's order.)
  // A label outside [0, C) is reported in the row-index-error word.
  EXPECT_EQ(meanings, plan.gpu_ptx().empty()
                          ? "buffer:same buffer:row-index buffer:row "
                            "buffer:row-index-error i64:elements i64:row-size "
                          : "i64:elements i64:row-size buffer:same "
                            "buffer:row-index buffer:row "
                            "buffer:row-index-error ");
}

TEST(Dtfc, FuseRowsOffKeepsTheOpByOpLossKernels) {
  dtf::plan::Plan off;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &off, "--fuse-rows=off"));
  EXPECT_EQ(kernelOf(off, "dtf.sparse_softmax_cross_entropy"), -1);
  EXPECT_EQ(countOps(off.train_step(), "dtf.sparse_softmax_cross_entropy"), 1);
  EXPECT_EQ(countOps(off.train_step(), "dtf.sparse_softmax_cross_entropy_grad"),
            1);
}

/// Logits [3, 10] and labels [3] (i32 or i64, as the kernel declares) with
/// label `bad` at example 1.
std::vector<dtf::Tensor> lossInputs(const dtf::plan::Kernel &kernel,
                                    int64_t bad) {
  std::mt19937 rng(7);
  std::vector<dtf::Tensor> inputs;
  inputs.push_back(randomTensor(dtf::DType::F32, {3, 10}, rng));
  int at = -1; // the labels: the "row-index" input
  for (const auto &p : kernel.params())
    if (p.meaning() == "row-index")
      at = p.operand();
  dtf::Tensor labels = dtf::test::kernelInputZeros(kernel, at, 3);
  EXPECT_TRUE(labels.defined());
  for (int64_t e = 0; e < 3; ++e) {
    const int64_t v = e == 1 ? bad : e;
    if (labels.dtype() == dtf::DType::I64)
      labels.data<int64_t>()[e] = v;
    else
      labels.data<int32_t>()[e] = int32_t(v);
  }
  inputs.push_back(labels);
  return inputs;
}

} // namespace

// The op-by-op kernel refuses a label outside [0, C); so does dtf-run's call
// of the generated kernel (a check on the host, before the call).
TEST(RowKernels, LabelOutsideTheClassesIsAPreciseError) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  if (std::string why = dtf::test::cannotRunGeneratedKernels(plan);
      !why.empty())
    GTEST_SKIP() << why;
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;
  const int k = kernelOf(plan, "dtf.sparse_softmax_cross_entropy");
  ASSERT_GE(k, 0);
  for (int64_t bad : {int64_t(10), int64_t(-1)}) {
    std::vector<dtf::Tensor> inputs = lossInputs(plan.kernels(k), bad);
    std::vector<dtf::Tensor *> pointers = {&inputs[0], &inputs[1]};
    dtf::FusedKernelContext fused(kernels->loaded, k);
    fused.setInputs(pointers);
    fused.setNumOutputs(1);
    dtf::Status s = dtf::callKernel(dtf::fusedKernel, fused);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("label " + std::to_string(bad) +
                               " of example 1 is outside the classes [0, 10)"),
              std::string::npos)
        << s.message();
  }
}

// The generated code itself (what a GPU runs: no host check there) makes a
// row with a label outside [0, C) NaN, reads nothing outside the row, and
// leaves the other rows as they are; it reports that row and its label in
// its row-index-error word (row + 1, label), which a good batch leaves
// clear.
TEST(RowKernels, GeneratedCodeMakesARowWithABadLabelNaN) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  if (std::string why = dtf::test::cannotRunGeneratedKernels(plan);
      !why.empty())
    GTEST_SKIP() << why;
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;
  for (const char *op : {"dtf.sparse_softmax_cross_entropy",
                         "dtf.sparse_softmax_cross_entropy_grad"}) {
    const int k = kernelOf(plan, op);
    ASSERT_GE(k, 0) << op;
    const bool grad = std::string(op).find("_grad") != std::string::npos;
    std::vector<dtf::Tensor> inputs = lossInputs(plan.kernels(k), 1000);
    dtf::Tensor dloss = dtf::Tensor::allocate(dtf::DType::F32, {3});
    for (int e = 0; e < 3; ++e)
      dloss.data<float>()[e] = 0.5f;
    std::vector<void *> buffers;
    if (grad)
      buffers.push_back(dloss.rawData());
    buffers.push_back(inputs[0].rawData());
    buffers.push_back(inputs[1].rawData());
    dtf::Tensor out = dtf::Tensor::allocate(dtf::DType::F32,
                                            grad ? std::vector<int64_t>{3, 10}
                                                 : std::vector<int64_t>{3});
    buffers.push_back(out.rawData());
    int64_t word[2] = {0, 0}; // the row-index-error word, last
    buffers.push_back(word);
    const int64_t scalars[] = {3, 10};
    kernels->loaded->function(k)(buffers.data(), scalars, 0, 3);
    EXPECT_EQ(word[0], 2) << op << ": the bad row (1) + 1";
    EXPECT_EQ(word[1], 1000) << op << ": the bad label";
    // A good batch leaves the word clear.
    std::vector<dtf::Tensor> good = lossInputs(plan.kernels(k), 9);
    buffers[grad ? 2 : 1] = good[1].rawData();
    word[0] = word[1] = 0;
    kernels->loaded->function(k)(buffers.data(), scalars, 0, 3);
    EXPECT_EQ(word[0], 0) << op << ": a good batch reported row "
                          << word[0] - 1;
    buffers[grad ? 2 : 1] = inputs[1].rawData();
    kernels->loaded->function(k)(buffers.data(), scalars, 0, 3);
    const int64_t per = grad ? 10 : 1;
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t j = 0; j < per; ++j) {
        const float v = out.data<float>()[r * per + j];
        EXPECT_EQ(std::isnan(v), r == 1)
            << op << " row " << r << " element " << j << ": " << v;
      }
  }
}

TEST(FusedLaunch, RowKernelsLoopOverRowsOfTheLastAxis) {
  dtf::GeneratedKernelInfo info;
  info.name = "dtf_fused_4";
  info.inputDTypes = {dtf::DType::F32, dtf::DType::I32};
  info.outputDTypes = {dtf::DType::F32};
  auto param = [](const char *kind, const char *meaning, int operand) {
    dtf::GeneratedParam p;
    EXPECT_TRUE(dtf::parseGeneratedParam(kind, meaning, operand, &p))
        << kind << " " << meaning;
    return p;
  };
  info.params = {param("buffer", "same", 0), param("buffer", "row-index", 1),
                 param("buffer", "row", 2), param("i64", "elements", 0),
                 param("i64", "row-size", 0)};
  EXPECT_TRUE(dtf::isRowKernel(info));
  dtf::FusedLaunch launch;
  ASSERT_TRUE(dtf::fusedLaunchOf(info, {{2, 7, 10}, {2, 7}}, &launch).isOk());
  EXPECT_EQ(launch.shape, (std::vector<int64_t>{2, 7, 10}));
  EXPECT_EQ(launch.outputShapes[0], (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(launch.elements, 14);
  EXPECT_EQ(launch.scalars, (std::vector<int64_t>{14, 10}));
  // Labels that are not one per row, and rows of no element: errors naming
  // the kernel, never a read past a buffer.
  dtf::Status s = dtf::fusedLaunchOf(info, {{6, 10}, {10}}, &launch);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("dtf_fused_4: input 1 is [10], one element per "
                             "row of [6,10] is [6]"),
            std::string::npos)
      << s.message();
  s = dtf::fusedLaunchOf(info, {{6, 0}, {6}}, &launch);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("rows of at least one element"), std::string::npos)
      << s.message();
  dtf::GeneratedParam p;
  EXPECT_FALSE(dtf::parseGeneratedParam("i64", "row", 0, &p));
  EXPECT_FALSE(dtf::parseGeneratedParam("buffer", "row-size", 0, &p));
}

TEST(PlanReader, RejectsPerRowParametersOutsideARowKernel) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  ASSERT_GT(plan.kernels_size(), 0);
  ASSERT_EQ(plan.kernels(0).ops_size() > 1, true); // a bias add and relu
  setBufferMeaning(plan.mutable_kernels(0), 0, "row");
  expectRefused(plan, "has a per-row (row, row-index) parameter but no i64 "
                      "row-size");
}

TEST(PlanReader, RejectsARowKernelWithOtherCounts) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  const int k = kernelOf(plan, "dtf.argmax");
  ASSERT_GE(k, 0);
  auto *p = plan.mutable_kernels(k)->add_params();
  p->set_kind("i64");
  p->set_meaning("reduced");
  expectRefused(plan, "is a row kernel (an i64 row-size) and takes one i64 "
                      "elements, one row-size");
}

TEST(PlanReader, RejectsAFloatRowIndex) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  const int k = kernelOf(plan, "dtf.sparse_softmax_cross_entropy");
  ASSERT_GE(k, 0);
  // The logits (f32) declared as class indices.
  for (auto &p : *plan.mutable_kernels(k)->mutable_params())
    if (p.meaning() == "same")
      p.set_meaning("row-index");
  expectRefused(plan, "a row-index parameter is an i32 or i64 input");
}

// A row kernel that reads labels reports the bad ones in its row-index-error
// word: a plan without the word (made before it) or with a word naming
// another operand is refused.
TEST(PlanReader, RejectsARowIndexWithoutItsErrorWordOrAWordNamingNoLabels) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  const int k = kernelOf(plan, "dtf.sparse_softmax_cross_entropy");
  ASSERT_GE(k, 0);
  dtf::plan::Plan without = plan;
  auto *params = without.mutable_kernels(k)->mutable_params();
  for (int i = 0; i < params->size(); ++i)
    if (params->Get(i).meaning() == "row-index-error") {
      params->DeleteSubrange(i, 1);
      break;
    }
  expectRefused(without, "has 1 row-index and 0 row-index-error parameters");
  dtf::plan::Plan elsewhere = plan;
  int logits = -1;
  for (const auto &p : plan.kernels(k).params())
    if (p.meaning() == "same")
      logits = p.operand();
  ASSERT_GE(logits, 0);
  for (auto &p : *elsewhere.mutable_kernels(k)->mutable_params())
    if (p.meaning() == "row-index-error")
      p.set_operand(logits);
  expectRefused(elsewhere, "a row-index-error parameter names operand " +
                               std::to_string(logits) +
                               ", which is not a row-index input");
}

// A kernel with a column reduction (a reduce:<spec> ending in 'k': bias
// gradients, batch statistics) has the chunked entry point; no other has.
TEST(ColumnReductions, EveryColumnKernelHasItsChunkedEntryPoint) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(
      compileModel(residualModel(), &plan, "--fuse-reductions=all"));
  int columns = 0;
  for (const dtf::plan::Kernel &k : plan.kernels()) {
    bool column = false;
    for (const auto &p : k.params()) {
      const std::string &m = p.meaning();
      column = column || (m.rfind("reduce:", 0) == 0 && m.back() == 'k');
    }
    EXPECT_EQ(k.cpu_columns_symbol(), column ? k.name() + "_columns" : "")
        << k.name();
    columns += column;
  }
  // The residual CNN's batch statistics and their gradients: 18 kernels.
  EXPECT_EQ(columns, 18);
}

// The chunked column kernels sum in an order fixed by the shape: the same
// bits on 1, 2 and 3 threads (and, fusion.Models/EveryKernel, the same bits
// as the op-by-op kernel, which sums in that order too).
TEST(ColumnReductions, ChunkedKernelsGiveTheSameBitsOnAnyThreadCount) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(
      compileModel(residualModel(), &plan, "--fuse-reductions=all"));
  if (std::string why = dtf::test::cannotRunGeneratedKernels(plan);
      !why.empty())
    GTEST_SKIP() << why;
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;
  std::mt19937 rng(99);
  int chunked = 0;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const dtf::plan::Kernel &kernel = plan.kernels(k);
    if (kernel.cpu_columns_symbol().empty())
      continue;
    std::vector<dtf::Tensor> inputs;
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 0; i < kernel.inputs_size(); ++i) {
      dtf::Tensor zeros = dtf::test::kernelInputZeros(kernel, i, 50);
      ASSERT_TRUE(zeros.defined()) << kernel.name() << " input " << i;
      inputs.push_back(randomTensor(zeros.dtype(), zeros.shape(), rng));
      shapes.push_back(zeros.shape());
    }
    dtf::FusedLaunch launch;
    ASSERT_TRUE(
        dtf::fusedLaunchOf(kernels->loaded->info(k), shapes, &launch).isOk());
    chunked +=
        dtf::columnChunkRows(launch.elements / launch.inner, launch.reduced,
                             launch.inner) < launch.reduced;
    std::vector<dtf::Tensor> first;
    for (int threads : {1, 2, 3}) {
      dtf::ThreadPool pool(threads);
      std::vector<dtf::Tensor *> pointers;
      for (dtf::Tensor &t : inputs)
        pointers.push_back(&t);
      dtf::FusedKernelContext fused(kernels->loaded, k);
      fused.setInputs(pointers);
      fused.setNumOutputs(kernel.outputs_size());
      fused.setThreadPool(threads == 1 ? nullptr : &pool);
      // Twice: the second call reuses the context's partial rows.
      for (int call = 0; call < 2; ++call) {
        dtf::Status s = dtf::callKernel(dtf::fusedKernel, fused);
        ASSERT_TRUE(s.isOk()) << kernel.name() << ": " << s.message();
        for (int o = 0; o < kernel.outputs_size(); ++o) {
          if (first.size() < size_t(kernel.outputs_size())) {
            first.push_back(copyOf(fused.output(o)));
            continue;
          }
          int64_t where = -1;
          EXPECT_EQ(maxUlps(fused.output(o), first[size_t(o)], &where), 0u)
              << kernel.name() << " output " << o << " on " << threads
              << " threads, call " << call << ", element " << where;
        }
      }
    }
  }
  // The residual CNN's batch statistics and their gradients over [50, H, W,
  // C] are cut into chunks. (The seed CNN has none left to cut: its
  // convolutions' relu_grads fold into max_pool_grad, dtf-fuse-library, so
  // their bias gradients are lone sums, which the op-by-op kernel cuts the
  // same way, kernels.ColumnChunks.*.)
  EXPECT_EQ(chunked, 18);
}

TEST(PlanReader, RejectsAColumnsSymbolWithoutAColumnReduction) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  ASSERT_GT(plan.kernels_size(), 0);
  plan.mutable_kernels(0)->set_cpu_columns_symbol("dtf_fused_0_columns");
  expectRefused(plan, "has a cpu_columns_symbol but no column reduction");
}

TEST(PlanReader, RejectsAGpuBlockOfMoreThan1024Threads) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  ASSERT_GT(plan.kernels_size(), 0);
  plan.mutable_kernels(0)->set_block(256);
  plan.mutable_kernels(0)->set_block_y(8);
  expectRefused(plan, "(at most 1024 in all)");
}

// outputs_per_block is one of the two tree shapes dtfc compiles, on a kernel
// with a reduction: another value would launch a grid that leaves outputs
// unwritten (too many outputs per block) or runs the tree off its slots.
TEST(PlanReader, RejectsAnOutputsPerBlockOtherThanTheTwoTreeShapes) {
  dtf::plan::Plan plan;
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), &plan));
  int reduced = -1, plain = -1;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    bool reduces = false;
    for (const auto &p : plan.kernels(k).params())
      reduces |= p.meaning().rfind("reduce:", 0) == 0;
    (reduces ? reduced : plain) = k;
  }
  ASSERT_GE(reduced, 0);
  ASSERT_GE(plain, 0);
  auto shape = [](dtf::plan::Kernel *k, int x, int y, int perBlock) {
    k->set_block(x);
    k->set_block_y(y);
    k->set_outputs_per_block(perBlock);
    // (A split column tile's workspace goes with its shape: ColumnReduce-
    // GpuTest.cpp checks it.)
    if (x != 32 || y != 8)
      for (int p = k->params_size() - 1; p >= 0; --p)
        if (k->params(p).meaning() == "workspace")
          k->mutable_params()->erase(k->mutable_params()->begin() + p);
  };
  // The two shapes pass on a reduced kernel.
  for (auto [x, y, per] : {std::tuple{256, 1, 1}, std::tuple{32, 8, 32}}) {
    dtf::plan::Plan ok = plan;
    shape(ok.mutable_kernels(reduced), x, y, per);
    dtf::Status s = dtf::plan::validatePlan(ok, "p.bin");
    EXPECT_TRUE(s.isOk()) << s.message();
  }
  for (auto [x, y, per] : {std::tuple{256, 1, 64}, std::tuple{32, 8, 64},
                           std::tuple{128, 1, 1}, std::tuple{32, 4, 32}}) {
    dtf::plan::Plan bad = plan;
    shape(bad.mutable_kernels(reduced), x, y, per);
    expectRefused(bad, "has outputs_per_block " + std::to_string(per));
  }
  shape(plan.mutable_kernels(plain), 256, 1, 1);
  expectRefused(plan, "with a block of 256 x 1 and no reduction");
}

/// The seed CNN's plan and its sparse cross-entropy gradient's row kernel.
void lossGradientKernel(dtf::plan::Plan *plan, int *k) {
  ASSERT_NO_FATAL_FAILURE(compileModel(seedModel(), plan));
  *k = kernelOf(*plan, "dtf.sparse_softmax_cross_entropy_grad");
  ASSERT_GE(*k, 0);
}

// The generated row code reads C as the second i64 and indexes each buffer
// by its rank: a plan whose i64s come out of order, or whose meanings
// disagree with the declared types (a full-row output called "row", which
// dtf-run would allocate one element per row for), is refused, never run.
TEST(PlanReader, RejectsARowKernelWhoseScalarsComeOutOfOrder) {
  dtf::plan::Plan plan;
  int k = -1;
  ASSERT_NO_FATAL_FAILURE(lossGradientKernel(&plan, &k));
  for (auto &p : *plan.mutable_kernels(k)->mutable_params())
    if (p.kind() == "i64")
      p.set_meaning(p.meaning() == "elements" ? "row-size" : "elements");
  expectRefused(plan, "and the i64s elements and row-size, in that order");
}

TEST(PlanReader, RejectsARowKernelBufferMissingOrOutOfOrder) {
  dtf::plan::Plan plan;
  int k = -1;
  ASSERT_NO_FATAL_FAILURE(lossGradientKernel(&plan, &k));
  // The buffers of operands 0 and 1 swapped; then operand 0's left out.
  std::vector<int> buffers;
  for (int p = 0; p < plan.kernels(k).params_size(); ++p)
    if (plan.kernels(k).params(p).kind() == "buffer")
      buffers.push_back(p);
  ASSERT_GE(buffers.size(), 2u);
  dtf::plan::Plan swapped = plan;
  auto *params = swapped.mutable_kernels(k)->mutable_params();
  params->Mutable(buffers[0])->set_operand(1);
  params->Mutable(buffers[1])->set_operand(0);
  expectRefused(swapped, "one buffer per operand, in operand order");
  plan.mutable_kernels(k)->mutable_params()->DeleteSubrange(buffers[0], 1);
  expectRefused(plan, "one buffer per operand, in operand order");
}

TEST(PlanReader, RejectsARowKernelMeaningThatDisagreesWithItsType) {
  dtf::plan::Plan plan;
  int k = -1;
  ASSERT_NO_FATAL_FAILURE(lossGradientKernel(&plan, &k));
  const dtf::plan::Kernel &kernel = plan.kernels(k);
  // The gradient (rows of C) declared one element per row.
  setBufferMeaning(plan.mutable_kernels(k), kernel.inputs_size(), "row");
  expectRefused(plan, "is 'row' (rank 1), but its operand is declared f32[");
}
