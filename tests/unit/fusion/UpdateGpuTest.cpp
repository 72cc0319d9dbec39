// A generated optimizer update launched on the (emulated) GPU: the kernel's
// GPU parameters (variable and slots "inout", then gradient, learning rate,
// step, elements) as the plan lays them out, and the variable and slots
// written in place in their device buffers, equal to the CPU kernel's
// result. The emulation checks the launch against the real cubin's
// parameter table and runs the kernel's CPU twin on the device buffers.
#include "runtime/exec/PlanKernels.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuFusedContext.h"
#include "runtime/gpu/GpuKernels.h"
#include "runtime/kernels/GeneratedKernels.h"
#include "runtime/plan/FusedKernels.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"
#include "tests/unit/fusion/EmulatedGpuPlan.h"
#include "tests/unit/fusion/KernelInputs.h"
#include "tests/unit/fusion/SkipReasons.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace {

// The Adam update of `model` (update_adam.dtf, or update_adamw.dtf with
// its decoupled weight decay) launched on the emulated GPU and on the CPU.
void checkAdamUpdateOnTheEmulatedGpu(const std::string &model,
                                     const std::string &work) {
  dtf::plan::Plan plan;
  std::string skip;
  ASSERT_NO_FATAL_FAILURE(dtf::test::compileWithGpuCode(
      "tests/unit/fusion/updates/" + model, work, &plan, &skip));
  // The emulation runs the GPU kernel's CPU twin: the generated CPU code.
  // Skips only where the build has no CUDA toolkit (noCudaToolkit) or this
  // CPU cannot run the CPU twin (cannotRunGeneratedKernels); the message
  // says which and what checks the rest (SkipReasons.h).
  if (!skip.empty())
    GTEST_SKIP() << skip;
  auto kernels = dtf::exec::planKernelsOf(plan);
  ASSERT_TRUE(kernels && kernels->loaded) << kernels->fallbackReason;

  // The update of the 33 x 600 kernel (19,800 elements: 78 blocks of 256,
  // the last one partial).
  int k = -1;
  for (int i = 0; i < plan.kernels_size(); ++i)
    if (dtf::plan::inPlaceInputs(plan.kernels(i)) == 3 &&
        plan.kernels(i).values(0).type().shape().dims_size() == 2 &&
        plan.kernels(i).values(0).type().shape().dims(1) == 600)
      k = i;
  ASSERT_GE(k, 0) << "no Adam update of the 33 x 600 variable";
  const dtf::plan::Kernel &kernel = plan.kernels(k);
  ASSERT_TRUE(kernels->gpu[size_t(k)].present());

  dtf::gpu::CudaDriver *driver = nullptr;
  std::unique_ptr<dtf::gpu::GpuDevice> device;
  ASSERT_NO_FATAL_FAILURE(dtf::test::emulatedGpu(&driver, &device));
  dtf::Status s;

  // Inputs: var, m, v (v >= 0), grad, lr, step; each on the host and in a
  // device buffer of its own.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<dtf::Tensor> host;
  std::vector<dtf::Tensor> views;
  std::vector<dtf::gpu::cuda::CUdeviceptr> buffers;
  for (int i = 0; i < kernel.inputs_size(); ++i) {
    dtf::Tensor t = dtf::test::kernelInputZeros(kernel, i);
    ASSERT_TRUE(t.defined()) << kernel.name() << " input " << i;
    const dtf::DType dtype = t.dtype();
    for (int64_t e = 0; e < t.numElements(); ++e) {
      if (dtype == dtf::DType::I64)
        t.data<int64_t>()[e] = 41; // the step
      else if (i == 4)
        t.data<float>()[e] = 0.01f; // the learning rate
      else
        t.data<float>()[e] = i == 2 ? std::abs(u(rng)) : u(rng);
    }
    const size_t bytes = size_t(t.numElements()) * dtf::dtypeSize(dtype);
    dtf::gpu::cuda::CUdeviceptr p = 0;
    ASSERT_EQ(driver->cuMemAlloc(&p, bytes), 0);
    ASSERT_EQ(driver->cuMemcpyHtoDAsync(p, t.rawData(), bytes,
                                        device->computeStream()),
              0);
    buffers.push_back(p);
    views.push_back(
        dtf::Tensor::view(dtype, t.shape(), reinterpret_cast<void *>(p)));
    host.push_back(std::move(t));
  }
  ASSERT_TRUE(device->synchronize().isOk());

  // On the GPU: dtf.fused's GPU kernel with the device buffers as inputs.
  dtf::gpu::GpuFusedContext gpuCtx(*device, kernels->loaded, k,
                                   kernels->gpu[size_t(k)]);
  std::vector<dtf::Tensor *> gpuInputs;
  for (dtf::Tensor &t : views)
    gpuInputs.push_back(&t);
  gpuCtx.setInputs(gpuInputs);
  gpuCtx.setNumOutputs(0);
  s = dtf::callKernel(dtf::gpu::gpuKernelRegistry().lookup("dtf.fused"),
                      gpuCtx);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_TRUE(device->synchronize().isOk());

  // On the CPU: the same kernel on host copies.
  std::vector<dtf::Tensor> cpu;
  std::vector<dtf::Tensor *> cpuInputs;
  for (const dtf::Tensor &t : host) {
    dtf::Tensor c = dtf::Tensor::allocate(t.dtype(), t.shape());
    std::memcpy(c.rawData(), t.rawData(),
                size_t(t.numElements()) * dtf::dtypeSize(t.dtype()));
    cpu.push_back(std::move(c));
  }
  for (dtf::Tensor &t : cpu)
    cpuInputs.push_back(&t);
  dtf::FusedKernelContext cpuCtx(kernels->loaded, k);
  cpuCtx.setInputs(cpuInputs);
  cpuCtx.setNumOutputs(0);
  s = dtf::callKernel(dtf::fusedKernel, cpuCtx);
  ASSERT_TRUE(s.isOk()) << s.message();

  for (int i = 0; i < 3; ++i) {
    dtf::Tensor got =
        dtf::Tensor::allocate(host[size_t(i)].dtype(), host[size_t(i)].shape());
    const size_t bytes = size_t(got.numElements()) * sizeof(float);
    ASSERT_EQ(driver->cuMemcpyDtoHAsync(got.rawData(), buffers[size_t(i)],
                                        bytes, device->computeStream()),
              0);
    ASSERT_TRUE(device->synchronize().isOk());
    EXPECT_NE(std::memcmp(got.rawData(), host[size_t(i)].rawData(), bytes), 0)
        << "input " << i << " was not updated in its device buffer";
    EXPECT_EQ(std::memcmp(got.rawData(), cpu[size_t(i)].rawData(), bytes), 0)
        << "input " << i << " differs from the CPU kernel's update";
  }
  for (dtf::gpu::cuda::CUdeviceptr p : buffers)
    EXPECT_EQ(driver->cuMemFree(p), 0);
  std::printf("[ gpu      ] %s: its Adam update launched on the emulated GPU "
              "wrote var, m and v in place, equal to the CPU kernel's\n",
              kernel.name().c_str());
}

TEST(UpdateKernelOnTheEmulatedGpu, WritesTheVariableAndSlotsInPlaceAsOnTheCpu) {
  checkAdamUpdateOnTheEmulatedGpu("update_adam.dtf", "update-gpu");
}

TEST(UpdateKernelOnTheEmulatedGpu, AdamWDecaysInPlaceAsOnTheCpu) {
  checkAdamUpdateOnTheEmulatedGpu("update_adamw.dtf", "update-gpu-adamw");
}

} // namespace
