// Column reductions on the (emulated) GPU: the bias gradients of dense
// layers of N = 1 ... 1000 units over R = 1 ... 100,000 rows (the dynamic
// batch) against the float64 kernel of the same model in f64, bit for bit
// the same in two runs, launched as 32 x 8 tiles over chunks of rows
// (grid.y, ColumnChunks.h' gpuColumnChunkCount) with a workspace; and the
// plan reader's checks of that workspace parameter (in the same test: one
// dtfc run with GPU code for both).
//
// The emulation runs each GPU kernel's CPU twin (docs/gpu.md): what runs
// here is the launch (its grid, counted in blocks by the emulation, its
// parameters against the real cubin's table, the workspace dtf-run sizes)
// and the CPU code's sums, not the PTX's chunked sums, which only a real
// GPU runs (scripts/gpu-check.sh).
#include "runtime/exec/PlanKernels.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuFusedContext.h"
#include "runtime/gpu/GpuKernels.h"
#include "runtime/kernels/ColumnChunks.h"
#include "runtime/kernels/GeneratedKernels.h"
#include "runtime/plan/FusedKernels.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"
#include "tests/unit/fusion/EmulatedGpuPlan.h"
#include "tests/unit/fusion/KernelInputs.h"
#include "tests/unit/fusion/SkipReasons.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <regex>

namespace {

namespace fs = std::filesystem;

// The plan of `model` without GPU code (the float64 reference's).
void compileCpuOnly(const std::string &model, dtf::plan::Plan *plan) {
  const std::string out =
      (fs::temp_directory_path() /
       ("dtf-colred64-" + std::to_string(::getpid()) + ".bin"))
          .string();
  const std::string cmd = std::string(DTF_DTFC_PATH) + " '" +
                          (fs::path(DTF_SOURCE_DIR) / model).string() +
                          "' --no-data-check --gpu-kernels=off -o '" + out +
                          "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  dtf::Status s = dtf::plan::readPlanFile(out, plan);
  fs::remove(out);
  ASSERT_TRUE(s.isOk()) << s.message();
}

// A column reduction's reduced output: its operand among the outputs, and
// its N (the output's elements; O = 1 here); -1 when the kernel has none.
int columnOutput(const dtf::plan::Kernel &k, int64_t *n) {
  for (const auto &p : k.params())
    if (p.meaning().rfind("reduce:", 0) == 0 && p.meaning().back() == 'k') {
      const int o = p.operand() - k.inputs_size();
      for (const auto &v : k.values())
        if (v.id() == k.outputs(o))
          *n = dtf::numElementsOf(dtf::plan::dimsOf(v.type().shape()));
      return o;
    }
  return -1;
}

int workspaceParam(const dtf::plan::Kernel &k) {
  for (int p = 0; p < k.params_size(); ++p)
    if (k.params(p).meaning() == "workspace")
      return p;
  return -1;
}
int lastBuffer(const dtf::plan::Kernel &k) {
  int last = -1;
  for (int p = 0; p < k.params_size(); ++p)
    if (k.params(p).kind() == "buffer")
      last = p;
  return last;
}

uint64_t blocksLaunched(dtf::gpu::CudaDriver &driver) {
  std::smatch m;
  const std::string stats = driver.emulationStats();
  static const std::regex re("kernel blocks launched: ([0-9]+)");
  return std::regex_search(stats, m, re) ? std::stoull(m[1]) : 0;
}

// Finds the plan's first kernel with a workspace, and one without a column
// reduction.
void workspaceKernels(const dtf::plan::Plan &plan, int *split, int *plain) {
  *split = *plain = -1;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    bool workspace = false, columns = false;
    for (const auto &p : plan.kernels(k).params()) {
      workspace |= p.meaning() == "workspace";
      columns |= p.meaning().rfind("reduce:", 0) == 0;
    }
    if (workspace && *split < 0)
      *split = k;
    if (!columns && *plain < 0)
      *plain = k;
  }
}

void expectRefused(const dtf::plan::Plan &plan, const std::string &what) {
  dtf::Status s = dtf::plan::validatePlan(plan, "p.bin");
  ASSERT_FALSE(s.isOk()) << "accepted; expected: " << what;
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("p.bin: kernel "), std::string::npos)
      << s.message();
}

// The plan reader's checks of a workspace: one parameter, the last buffer,
// on a 32 x 8 column tile; anything else is refused with the reason, never
// launched. (On the GPU test's plan: one dtfc run for both.)
void checkWorkspaceRefusals(const dtf::plan::Plan &plan) {
  int split, plain;
  workspaceKernels(plan, &split, &plain);
  ASSERT_GE(split, 0);
  ASSERT_GE(plain, 0);
  dtf::Status s = dtf::plan::validatePlan(plan, "p.bin");
  ASSERT_TRUE(s.isOk()) << s.message();
  const int at = workspaceParam(plan.kernels(split));
  ASSERT_GT(at, 0);
  ASSERT_EQ(plan.kernels(split).params(at - 1).kind(), "buffer");
  {
    dtf::plan::Plan bad = plan;
    bad.mutable_kernels(split)->mutable_params()->SwapElements(at, at - 1);
    expectRefused(bad, "its workspace is parameter " + std::to_string(at - 1) +
                           ", not the last buffer");
  }
  {
    dtf::plan::Plan bad = plan;
    *bad.mutable_kernels(split)->add_params() =
        bad.kernels(split).params(at);
    expectRefused(bad, "has 2 workspace parameters");
  }
  {
    dtf::plan::Plan bad = plan;
    dtf::plan::Kernel *k = bad.mutable_kernels(split);
    k->set_block(256);
    k->set_block_y(1);
    k->set_outputs_per_block(1);
    expectRefused(bad, "has a workspace but is not a column reduction's 32 x "
                       "8 tile");
  }
  {
    dtf::plan::Plan bad = plan;
    *bad.mutable_kernels(plain)->add_params() = plan.kernels(split).params(at);
    expectRefused(bad, "has a workspace but is not a column reduction's");
  }
  {
    dtf::plan::Plan bad = plan;
    bad.mutable_kernels(split)->mutable_params(at)->set_meaning("workspaces");
    expectRefused(bad, "unknown meaning 'workspaces'");
  }
}

TEST(ColumnReductionOnTheEmulatedGpu,
     MatchesFloat64InTiledChunksAndIsTheSameBitForBitTwice) {
  // (Also the plan reader's checks of the workspace, on the same plan.)
  dtf::plan::Plan plan, plan64;
  std::string skip;
  ASSERT_NO_FATAL_FAILURE(dtf::test::compileWithGpuCode(
      "tests/unit/fusion/columns/columns.dtf", "colred", &plan, &skip));
  // Skips only where the build has no CUDA toolkit (noCudaToolkit: dtfc
  // then writes no GPU code to launch) or this CPU cannot run the kernels'
  // CPU twins, which the emulation runs (cannotRunGeneratedKernels); the
  // printed reason says which, and which test checks the rest
  // (SkipReasons.h). CI has both, so there it always runs.
  if (!skip.empty())
    GTEST_SKIP() << skip;
  ASSERT_NO_FATAL_FAILURE(checkWorkspaceRefusals(plan));
  ASSERT_NO_FATAL_FAILURE(
      compileCpuOnly("tests/unit/fusion/columns/columns_f64.dtf", &plan64));
  ASSERT_EQ(plan.kernels_size(), plan64.kernels_size());
  auto kernels = dtf::exec::planKernelsOf(plan);
  auto kernels64 = dtf::exec::planKernelsOf(plan64);
  ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;
  ASSERT_TRUE(kernels64 && kernels64->loaded) << kernels64->fallbackReason;
  dtf::gpu::CudaDriver *driver = nullptr;
  std::unique_ptr<dtf::gpu::GpuDevice> device;
  ASSERT_NO_FATAL_FAILURE(dtf::test::emulatedGpu(&driver, &device));
  auto stream = device->computeStream();

  std::set<int64_t> widths;
  int checked = 0;
  double worst = 0; // the largest error, in units of its tolerance
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const dtf::plan::Kernel &kernel = plan.kernels(k);
    int64_t n = 0;
    const int o = columnOutput(kernel, &n);
    if (o < 0)
      continue;
    widths.insert(n);
    // Every column reduction is the split 32 x 8 tile, N = 1 and 3 too.
    EXPECT_EQ(kernel.block(), 32) << kernel.name();
    EXPECT_EQ(kernel.block_y(), 8) << kernel.name();
    EXPECT_EQ(kernel.outputs_per_block(), 32) << kernel.name();
    EXPECT_EQ(workspaceParam(kernel), lastBuffer(kernel))
        << kernel.name() << ": the workspace is the last buffer";
    for (int64_t rows : {1, 5, 127, 128, 1000, 9800, 39200, 100000}) {
      if (rows * n > 4000000)
        continue; // (at most 16 MB an input)
      std::mt19937 rng(uint32_t(rows * 1009 + n));
      std::uniform_real_distribution<float> u(-1, 1);
      std::vector<dtf::Tensor> host, views, host64, abs64;
      std::vector<dtf::gpu::cuda::CUdeviceptr> buffers;
      for (int i = 0; i < kernel.inputs_size(); ++i) {
        dtf::Tensor t = dtf::test::kernelInputZeros(kernel, i, rows);
        ASSERT_TRUE(t.defined() && t.dtype() == dtf::DType::F32);
        dtf::Tensor d = dtf::Tensor::allocate(dtf::DType::F64, t.shape());
        dtf::Tensor a = dtf::Tensor::allocate(dtf::DType::F64, t.shape());
        for (int64_t e = 0; e < t.numElements(); ++e) {
          t.data<float>()[e] = u(rng);
          d.data<double>()[e] = t.data<float>()[e];
          a.data<double>()[e] = std::abs(d.data<double>()[e]);
        }
        const size_t bytes = size_t(t.numElements()) * sizeof(float);
        dtf::gpu::cuda::CUdeviceptr p = 0;
        ASSERT_EQ(driver->cuMemAlloc(&p, bytes), 0);
        ASSERT_EQ(driver->cuMemcpyHtoDAsync(p, t.rawData(), bytes, stream), 0);
        buffers.push_back(p);
        views.push_back(dtf::Tensor::view(dtf::DType::F32, t.shape(),
                                          reinterpret_cast<void *>(p)));
        host.push_back(std::move(t));
        host64.push_back(std::move(d));
        abs64.push_back(std::move(a));
      }
      // Twice on the GPU, the same context (its workspace kept).
      dtf::gpu::GpuFusedContext gpuCtx(*device, kernels->loaded, k,
                                       kernels->gpu[size_t(k)]);
      std::vector<dtf::Tensor *> gpuInputs;
      for (dtf::Tensor &t : views)
        gpuInputs.push_back(&t);
      gpuCtx.setInputs(gpuInputs);
      std::vector<float> runs[2];
      const int64_t groups = (n + 31) / 32;
      const uint64_t wantBlocks =
          uint64_t(groups * dtf::gpuColumnChunkCount(rows, groups));
      for (std::vector<float> &got : runs) {
        const uint64_t before = blocksLaunched(*driver);
        gpuCtx.setNumOutputs(kernel.outputs_size());
        dtf::Status s = dtf::callKernel(
            dtf::gpu::gpuKernelRegistry().lookup("dtf.fused"), gpuCtx);
        ASSERT_TRUE(s.isOk()) << s.message();
        ASSERT_TRUE(device->synchronize().isOk());
        EXPECT_EQ(blocksLaunched(*driver) - before, wantBlocks)
            << kernel.name() << ": N " << n << ", R " << rows;
        got.resize(size_t(n));
        ASSERT_EQ(driver->cuMemcpyDtoHAsync(got.data(),
                                            dtf::gpu::cuda::CUdeviceptr(
                                                uintptr_t(gpuCtx.output(o)
                                                              .rawData())),
                                            size_t(n) * sizeof(float), stream),
                  0);
        ASSERT_TRUE(device->synchronize().isOk());
      }
      EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(),
                            size_t(n) * sizeof(float)),
                0)
          << kernel.name() << ": N " << n << ", R " << rows
          << ": two runs differ";
      // The float64 kernel on the same values, and on their magnitudes (the
      // sum of |terms| that bounds the rounding error).
      auto run64 = [&](std::vector<dtf::Tensor> &in, std::vector<double> *r) {
        std::vector<dtf::Tensor *> ins;
        for (dtf::Tensor &t : in)
          ins.push_back(&t);
        dtf::FusedKernelContext cpuCtx(kernels64->loaded, k);
        cpuCtx.setInputs(ins);
        cpuCtx.setNumOutputs(kernel.outputs_size());
        dtf::Status s = dtf::callKernel(dtf::fusedKernel, cpuCtx);
        ASSERT_TRUE(s.isOk()) << s.message();
        const double *v = cpuCtx.output(o).data<double>();
        r->assign(v, v + n);
      };
      std::vector<double> want, bound;
      ASSERT_NO_FATAL_FAILURE(run64(host64, &want));
      ASSERT_NO_FATAL_FAILURE(run64(abs64, &bound));
      // Any order of R f32 additions errs by at most R u sum |terms| (u =
      // 2^-24), plus the f32 rounding of the inputs' products (2 u each).
      for (int64_t j = 0; j < n; ++j) {
        const double tol =
            double(rows + 2) * std::ldexp(1.0, -24) * bound[size_t(j)] + 1e-30;
        const double err = std::abs(double(runs[0][size_t(j)]) - want[size_t(j)]);
        worst = std::max(worst, err / tol);
        EXPECT_LE(err, tol) << kernel.name() << ": N " << n << ", R " << rows
                            << ", output " << j;
      }
      ++checked;
      for (dtf::gpu::cuda::CUdeviceptr p : buffers)
        EXPECT_EQ(driver->cuMemFree(p), 0);
    }
  }
  EXPECT_EQ(widths, (std::set<int64_t>{1, 3, 32, 64, 100, 128, 500, 1000}));
  // The seed CNN's conv1 bias gradient's shape (N = 32, R = 39,200): more
  // blocks than an H200 has multiprocessors (132), where one block per
  // output element made 32.
  EXPECT_GE(dtf::gpuColumnChunkCount(39200, 1), 132);
  std::printf("[ gpu      ] %d column reductions (N 1..1000, R 1..100,000) "
              "within R u sum|terms| of float64 (worst %.3f of it), the same "
              "twice, each launched as ceil(N / 32) x gpuColumnChunkCount "
              "blocks\n",
              checked, worst);
}

} // namespace
