// The CUDA loader against missing and stub drivers, and the host emulation
// (libdtf-cuda-emu.so) through the loader: what it runs, and what it refuses
// as the real driver does. With DTF_GPU=real (tests/unit/gpu/TestGpu.h) the
// copies, launches, modules and graphs run on the real driver, and the tests
// of the emulation's own refusals and faults say that they are skipped.
#include "runtime/gpu/CudaDriver.h"
#include "tests/unit/gpu/FakeCubin.h"
#include "tests/unit/gpu/TestGpu.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <elf.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace dtf::gpu {
namespace {

using namespace cuda;

// The tests' driver (the emulation with `gpus` GPUs, or the real one), with
// cuBLAS and cuDNN loaded.
std::unique_ptr<CudaDriver> emulated(int gpus = 1) {
  std::unique_ptr<CudaDriver> d;
  Status s = CudaDriver::load(testLibraries(gpus), &d);
  EXPECT_TRUE(s.isOk()) << s.message();
  if (d) {
    d->loadLibraries();
    EXPECT_EQ(d->missing(CudaDriver::Library::kCublas), "");
    EXPECT_EQ(d->missing(CudaDriver::Library::kCudnn), "");
  }
  return d;
}

// A context made current on device 0.
void makeCurrent(CudaDriver &d, int device = 0) {
  CUcontext ctx = nullptr;
  ASSERT_EQ(d.cuDevicePrimaryCtxRetain(&ctx, device), CUDA_SUCCESS);
  ASSERT_EQ(d.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

// cuBLAS and cuDNN load each on its own: without cuDNN, cuBLAS still
// works, and cuDNN's entry points are null rather than half loaded.
TEST(CudaLoader, AMissingCudnnLeavesCublasUsable) {
  std::unique_ptr<CudaDriver> d;
  Status s = CudaDriver::load(testLibraries(), &d);
  ASSERT_TRUE(s.isOk()) << s.message();
  {
    ScopedEnv missing("DTF_CUDNN_LIBRARY", "/nonexistent/libcudnn.so.9");
    d->loadLibraries();
  }
  EXPECT_EQ(d->missing(CudaDriver::Library::kCublas), "");
  const std::string &why = d->missing(CudaDriver::Library::kCudnn);
  EXPECT_NE(why.find("cannot load cuDNN from /nonexistent/libcudnn.so.9"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("DTF_CUDNN_LIBRARY=PATH"), std::string::npos) << why;
  EXPECT_EQ(d->cudnnCreate, nullptr);
  EXPECT_NE(d->cublasCreate_v2, nullptr);
  EXPECT_NE(d->cublasSgemm_v2, nullptr);
}

// A fault's variable with a value it does not take stops the emulation at
// start with the reason, rather than playing no fault.
TEST(CudaLoader, AFaultVariableWithABadValueStopsTheEmulationWithTheReason) {
  DTF_EMULATION_ONLY("the emulation's fault variables");
  CudaLibraries libs;
  libs.driver = DTF_CUDA_EMU_PATH;
  libs.emulatedGpus = 1;
  const std::pair<const char *, const char *> bad[] = {
      {"DTF_EMU_SLOW_MS", "DTF_EMU_SLOW_MS=12ms is not a number of "
                          "milliseconds (a whole number from 0 to 999999)"},
      {"DTF_EMU_CONV_ALGO_FAILS",
       "DTF_EMU_CONV_ALGO_FAILS=12ms names no convolution algorithm of the "
       "emulation: 0 or 1"}};
  for (const auto &[name, reason] : bad) {
    ASSERT_EQ(setenv(name, "12ms", 1), 0);
    std::unique_ptr<CudaDriver> d;
    Status s = CudaDriver::load(libs, &d);
    unsetenv(name);
    ASSERT_FALSE(s.isOk()) << name;
    EXPECT_NE(s.message().find("the CUDA emulation cannot start"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(reason), std::string::npos) << s.message();
  }
  // Good values, and empty ones (unset), start it.
  ASSERT_EQ(setenv("DTF_EMU_SLOW_MS", "0", 1), 0);
  ASSERT_EQ(setenv("DTF_EMU_CONV_ALGO_FAILS", "", 1), 0);
  std::unique_ptr<CudaDriver> d;
  Status s = CudaDriver::load(libs, &d);
  unsetenv("DTF_EMU_SLOW_MS");
  unsetenv("DTF_EMU_CONV_ALGO_FAILS");
  EXPECT_TRUE(s.isOk()) << s.message();
}

TEST(CudaLoader, AMissingDriverLibraryIsNoDriverInWords) {
  CudaLibraries libs;
  libs.driver = "/nonexistent/libcuda.so.1";
  std::unique_ptr<CudaDriver> d;
  Status s = CudaDriver::load(libs, &d);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind("no CUDA driver: cannot load "
                              "/nonexistent/libcuda.so.1 (",
                              0),
            0u)
      << s.message();
}

TEST(CudaLoader, CudasStubLibraryIsNoDriver) {
  if (onRealGpu())
    GTEST_SKIP() << "DTF_GPU=real: CUDA's stub libcuda, loaded beside the "
                    "real driver, would stand for libcuda.so.1 (its soname) "
                    "in the tests after this one";
  const std::string stub =
      std::string(DTF_CUDA_TOOLKIT) + "/lib64/stubs/libcuda.so";
  if (!DTF_HAVE_CUDA_TOOLKIT)
    GTEST_SKIP() << "this build was configured without a CUDA toolkit (cmake "
                    "found none at "
                 << DTF_CUDA_TOOLKIT
                 << "), so there is no stub libcuda to load";
  ASSERT_TRUE(std::filesystem::exists(stub))
      << "the CUDA toolkit at " << DTF_CUDA_TOOLKIT << " has no " << stub;
  CudaLibraries libs;
  libs.driver = stub;
  std::unique_ptr<CudaDriver> d;
  Status s = CudaDriver::load(libs, &d);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("CUDA's stub library"), std::string::npos)
      << s.message();
}

TEST(CudaEmu, EmulatesTheConfiguredGpusThroughCuGetProcAddress) {
  auto d = emulated(2);
  ASSERT_TRUE(d);
  if (onRealGpu()) {
    // Every entry point resolved (load() fails otherwise), and the driver
    // says what it runs: the bundle's summary shows this line.
    std::printf("[   NOTE   ] %s\n", d->description().c_str());
    EXPECT_FALSE(d->emulated());
    EXPECT_EQ(d->description().rfind("CUDA ", 0), 0u) << d->description();
    EXPECT_GE(d->deviceCount(), 1);
    return;
  }
  EXPECT_EQ(d->deviceCount(), 2);
  EXPECT_TRUE(d->emulated());
  EXPECT_NE(d->description().find("emulated CUDA 13.0 driver, 2 GPUs"),
            std::string::npos)
      << d->description();
}

TEST(CudaEmu, CopiesRoundTripAndOutOfBoundsCopiesAreRefused) {
  auto d = emulated();
  ASSERT_TRUE(d);
  makeCurrent(*d);
  CUdeviceptr p = 0;
  ASSERT_EQ(d->cuMemAlloc(&p, 64), CUDA_SUCCESS);
  std::vector<float> in(16), out(16, 0);
  for (int i = 0; i < 16; ++i)
    in[size_t(i)] = float(i) * 0.5f;
  ASSERT_EQ(d->cuMemcpyHtoDAsync(p, in.data(), 64, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyDtoHAsync(out.data(), p, 64, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  if (!emulationCounts("the refusal of copies past an allocation or from "
                       "host memory"))
    return;
  EXPECT_EQ(d->cuMemcpyHtoDAsync(p + 8, in.data(), 64, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(d->errorText("cuMemcpyHtoDAsync", CUDA_ERROR_INVALID_VALUE)
                .find("run past the end of an allocation of 64 bytes"),
            std::string::npos);
  float host[4];
  EXPECT_EQ(
      d->cuMemcpyDtoHAsync(host, CUdeviceptr(uintptr_t(host)), 16, nullptr),
      CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(d->errorText("x", 1).find("not a device pointer"),
            std::string::npos);
}

// Two timing events on a stream measure the work queued between them
// (dtf-run --profile's per-op GPU times): on the emulation, the host time
// its queued work took to run; an event made with CU_EVENT_DISABLE_TIMING
// cannot be timed.
TEST(CudaEmu, TimingEventsMeasureTheStreamsWorkBetweenThem) {
  auto d = emulated();
  ASSERT_TRUE(d);
  makeCurrent(*d);
  CUstream stream = nullptr;
  ASSERT_EQ(d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  const size_t bytes = size_t(64) << 20;
  CUdeviceptr p = 0;
  ASSERT_EQ(d->cuMemAlloc(&p, bytes), CUDA_SUCCESS);
  std::vector<char> host(bytes, 1);
  CUevent a = nullptr, b = nullptr, c = nullptr, untimed = nullptr;
  for (CUevent *e : {&a, &b, &c})
    ASSERT_EQ(d->cuEventCreate(e, 0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(d->cuEventRecord(a, stream), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(p, host.data(), bytes, stream), CUDA_SUCCESS);
  ASSERT_EQ(d->cuEventRecord(b, stream), CUDA_SUCCESS);
  ASSERT_EQ(d->cuEventRecord(c, stream), CUDA_SUCCESS); // nothing between
  ASSERT_EQ(d->cuEventRecord(untimed, stream), CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamSynchronize(stream), CUDA_SUCCESS);
  const double wallMs = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  float copyMs = -1, emptyMs = -1, none = -1;
  ASSERT_EQ(d->cuEventElapsedTime(&copyMs, a, b), CUDA_SUCCESS);
  ASSERT_EQ(d->cuEventElapsedTime(&emptyMs, b, c), CUDA_SUCCESS);
  // 64 MiB copied: more than nothing (on any machine, a copy of 64 MiB
  // takes microseconds at least), and no longer than the host waited.
  EXPECT_GT(copyMs, 0.0f);
  EXPECT_LE(copyMs, wallMs + 1.0);
  EXPECT_GE(emptyMs, 0.0f);
  EXPECT_LT(emptyMs, copyMs);
  EXPECT_NE(d->cuEventElapsedTime(&none, a, untimed), CUDA_SUCCESS);
  for (CUevent e : {a, b, c, untimed})
    d->cuEventDestroy(e);
  d->cuMemFree(p);
  d->cuStreamDestroy(stream);
}

TEST(CudaEmu, UseAfterFreeIsRefused) {
  DTF_EMULATION_ONLY("a real driver need not refuse a use after free");
  auto d = emulated();
  ASSERT_TRUE(d);
  makeCurrent(*d);
  CUdeviceptr p = 0;
  ASSERT_EQ(d->cuMemAlloc(&p, 256), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemFree(p), CUDA_SUCCESS);
  float x[4] = {1, 2, 3, 4};
  EXPECT_EQ(d->cuMemcpyHtoDAsync(p, x, 16, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(d->errorText("cuMemcpyHtoDAsync", 1).find("use after free"),
            std::string::npos);
  EXPECT_EQ(d->cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
}

TEST(CudaEmu, AllocationNeedsACurrentContext) {
  auto d = emulated();
  ASSERT_TRUE(d);
  // No context current on this thread (an earlier test may have left one).
  ASSERT_EQ(d->cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(d->cuMemAlloc(&p, 64), CUDA_ERROR_INVALID_CONTEXT);
}

// The CPU twin of `scale`: out[i] = 2 * in[i] over [begin, end).
extern "C" void scaleTwin(void *const *buffers, const int64_t *, int64_t begin,
                          int64_t end) {
  const auto *in = static_cast<const float *>(buffers[0]);
  auto *out = static_cast<float *>(buffers[1]);
  for (int64_t i = begin; i < end; ++i)
    out[i] = 2 * in[i];
}

using RegisterFn = int (*)(const char *,
                           void (*)(void *const *, const int64_t *, int64_t,
                                    int64_t),
                           const char *, int);

// The emulation runs `scale` as scaleTwin (a real driver runs its PTX).
// With DTF_GPU=real the emulation is loaded only where it plays the real
// driver ($DTF_CUDA_DRIVER naming it: ctest gpu.real_driver_path_...).
void registerScale() {
  void *lib = dlopen(DTF_CUDA_EMU_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (!lib && onRealGpu())
    return;
  ASSERT_TRUE(lib);
  auto reg = reinterpret_cast<RegisterFn>(dlsym(lib, "dtfEmuRegisterKernel"));
  ASSERT_TRUE(reg);
  reg("scale", scaleTwin, "bbi", 2);
}

// Launches `fn` with a packed parameter buffer of `bytes` bytes.
CUresult launch(CudaDriver &d, CUfunction fn, std::vector<uint64_t> params,
                size_t bytes) {
  void *extra[] = {reinterpret_cast<void *>(CU_LAUNCH_PARAM_BUFFER_POINTER),
                   params.data(),
                   reinterpret_cast<void *>(CU_LAUNCH_PARAM_BUFFER_SIZE),
                   &bytes, reinterpret_cast<void *>(CU_LAUNCH_PARAM_END)};
  return d.cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra);
}

// `scale` loaded from its PTX (three 8-byte parameters; real code, which
// a real driver compiles), and two device buffers of 10 floats for it.
struct Scale {
  CUfunction fn = nullptr;
  CUdeviceptr in = 0, out = 0;
};
void loadScale(CudaDriver &d, Scale *s) {
  makeCurrent(d);
  registerScale();
  CUmodule mod = nullptr;
  ASSERT_EQ(d.cuModuleLoadData(&mod, scalePtx()), CUDA_SUCCESS)
      << d.errorText("cuModuleLoadData", 1);
  ASSERT_EQ(d.cuModuleGetFunction(&s->fn, mod, "scale"), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemAlloc(&s->in, 40), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemAlloc(&s->out, 40), CUDA_SUCCESS);
}

TEST(CudaEmu, ALaunchRunsTheKernelsCpuTwinWithTheCubinsParameters) {
  auto d = emulated();
  ASSERT_TRUE(d);
  Scale sc;
  ASSERT_NO_FATAL_FAILURE(loadScale(*d, &sc));
  const CUfunction fn = sc.fn;
  const CUdeviceptr in = sc.in, out = sc.out;
  std::vector<float> x(10), y(10);
  for (int i = 0; i < 10; ++i)
    x[size_t(i)] = float(i);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(in, x.data(), 40, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(launch(*d, fn, {in, out, 10}, 24), CUDA_SUCCESS)
      << d->errorText("cuLaunchKernel", 1);
  ASSERT_EQ(d->cuMemcpyDtoHAsync(y.data(), out, 40, nullptr), CUDA_SUCCESS);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(y[size_t(i)], 2.0f * float(i));
  // The launch through kernelParams too (dtf's fused kernels use extra).
  uint64_t n = 10;
  void *params[] = {&sc.in, &sc.out, &n};
  std::vector<float> z(10, -1);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(out, z.data(), 40, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(d->cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, 0, nullptr, params,
                              nullptr),
            CUDA_SUCCESS)
      << d->errorText("cuLaunchKernel", 1);
  ASSERT_EQ(d->cuMemcpyDtoHAsync(z.data(), out, 40, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(z, y);
  if (!emulationCounts("the count of kernel launches"))
    return;
  EXPECT_NE(d->emulationStats().find("2 kernel launches"), std::string::npos)
      << d->emulationStats();
}

// Pinned host memory mapped into the device (CU_MEMHOSTALLOC_DEVICEMAP: a row
// kernel's label report) is a kernel's to write; other pinned memory has no
// device pointer and is not a device buffer.
TEST(CudaEmu, MappedPinnedMemoryIsAKernelsBufferAndOtherPinnedMemoryIsNot) {
  auto d = emulated();
  ASSERT_TRUE(d);
  Scale sc;
  ASSERT_NO_FATAL_FAILURE(loadScale(*d, &sc));
  void *mapped = nullptr, *plain = nullptr;
  ASSERT_EQ(
      d->cuMemHostAlloc(&mapped, 40,
                        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
      CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemHostAlloc(&plain, 40, CU_MEMHOSTALLOC_PORTABLE),
            CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(d->cuMemHostGetDevicePointer(&p, mapped, 0), CUDA_SUCCESS);
  std::vector<float> x(10, 1.5f);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(sc.in, x.data(), 40, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(launch(*d, sc.fn, {sc.in, p, 10}, 24), CUDA_SUCCESS)
      << d->errorText("cuLaunchKernel", 1);
  ASSERT_EQ(d->cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(static_cast<float *>(mapped)[i], 3.0f) << i;
  if (!emulationCounts("the refusal of pinned memory mapped without "
                       "CU_MEMHOSTALLOC_DEVICEMAP (with unified addressing a "
                       "real driver maps it all)")) {
    EXPECT_EQ(d->cuMemFreeHost(mapped), CUDA_SUCCESS);
    EXPECT_EQ(d->cuMemFreeHost(plain), CUDA_SUCCESS);
    return;
  }
  CUdeviceptr q = 0;
  EXPECT_EQ(d->cuMemHostGetDevicePointer(&q, plain, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(d->errorText("x", 1).find("CU_MEMHOSTALLOC_DEVICEMAP"),
            std::string::npos);
  EXPECT_EQ(launch(*d, sc.fn, {sc.in, CUdeviceptr(uintptr_t(plain)), 10}, 24),
            CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(d->cuMemFreeHost(mapped), CUDA_SUCCESS);
  EXPECT_EQ(d->cuMemFreeHost(plain), CUDA_SUCCESS);
  // Freed: no longer a device buffer.
  EXPECT_EQ(launch(*d, sc.fn, {sc.in, p, 10}, 24), CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST(CudaEmu, ALaunchWithTheWrongParameterCountOrSizesIsRefused) {
  DTF_EMULATION_ONLY("a real driver does not check a parameter buffer's size "
                     "against the kernel's");
  auto d = emulated();
  ASSERT_TRUE(d);
  Scale sc;
  ASSERT_NO_FATAL_FAILURE(loadScale(*d, &sc));
  const CUfunction fn = sc.fn;
  const CUdeviceptr in = sc.in, out = sc.out;
  // Two parameters where the cubin declares three.
  EXPECT_EQ(launch(*d, fn, {in, out}, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(d->errorText("cuLaunchKernel", 1)
                .find("the parameter buffer is 16 bytes, the kernel takes 24 "
                      "(3 parameters)"),
            std::string::npos)
      << d->errorText("cuLaunchKernel", 1);
  // A cubin whose last parameter is 4 bytes: dtf's layout passes 8.
  std::vector<uint8_t> narrow = cubin("scale", {8, 8, 4});
  CUmodule mod2 = nullptr;
  ASSERT_EQ(d->cuModuleLoadData(&mod2, narrow.data()), CUDA_SUCCESS);
  CUfunction fn2 = nullptr;
  ASSERT_EQ(d->cuModuleGetFunction(&fn2, mod2, "scale"), CUDA_SUCCESS);
  EXPECT_EQ(launch(*d, fn2, {in, out, 10}, 20), CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(d->errorText("cuLaunchKernel", 1)
                .find("parameter 2 is 4 bytes in the module"),
            std::string::npos)
      << d->errorText("cuLaunchKernel", 1);
  // A buffer parameter that is no device pointer.
  float host[10];
  EXPECT_EQ(launch(*d, fn, {in, uint64_t(uintptr_t(host)), 10}, 24),
            CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST(CudaEmu, AKernelNameNotInTheModuleIsRefused) {
  auto d = emulated();
  ASSERT_TRUE(d);
  makeCurrent(*d);
  CUmodule mod = nullptr;
  ASSERT_EQ(d->cuModuleLoadData(&mod, scalePtx()), CUDA_SUCCESS);
  CUfunction fn = nullptr;
  EXPECT_EQ(d->cuModuleGetFunction(&fn, mod, "dtf_fused_7"),
            CUDA_ERROR_NOT_FOUND);
  if (!emulationCounts("the emulation's words for a missing kernel"))
    return;
  EXPECT_NE(d->errorText("cuModuleGetFunction", CUDA_ERROR_NOT_FOUND)
                .find("no kernel 'dtf_fused_7' in the module"),
            std::string::npos);
}

TEST(CudaEmu, AnImageThatIsNeitherACubinNorPtxIsRefused) {
  DTF_EMULATION_ONLY("the emulation's reading of images (a real driver's "
                     "error code for one varies: invalid image, invalid PTX)");
  auto d = emulated();
  ASSERT_TRUE(d);
  makeCurrent(*d);
  std::vector<uint8_t> x86 = cubin("scale", {8}, 62); // EM_X86_64
  CUmodule mod = nullptr;
  EXPECT_EQ(d->cuModuleLoadData(&mod, x86.data()), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_NE(d->errorText("cuModuleLoadData", 1)
                .find("an ELF for machine 62, not a cubin"),
            std::string::npos);
  const char *text = "hello";
  EXPECT_EQ(d->cuModuleLoadData(&mod, text), CUDA_ERROR_INVALID_IMAGE);
}

TEST(CudaEmu, PtxEntryParametersAreRead) {
  DTF_EMULATION_ONLY("the emulation's PTX parameter tables");
  auto d = emulated();
  ASSERT_TRUE(d);
  makeCurrent(*d);
  registerScale();
  const char *ptx = ".version 8.0\n.target sm_80\n.address_size 64\n"
                    ".visible .entry scale(\n .param .u64 scale_param_0,\n"
                    " .param .u64 scale_param_1,\n .param .u64 "
                    "scale_param_2\n)\n{\n ret;\n}\n";
  CUmodule mod = nullptr;
  ASSERT_EQ(d->cuModuleLoadData(&mod, ptx), CUDA_SUCCESS)
      << d->errorText("cuModuleLoadData", 1);
  CUfunction fn = nullptr;
  ASSERT_EQ(d->cuModuleGetFunction(&fn, mod, "scale"), CUDA_SUCCESS);
  CUdeviceptr in = 0, out = 0;
  ASSERT_EQ(d->cuMemAlloc(&in, 40), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemAlloc(&out, 40), CUDA_SUCCESS);
  EXPECT_EQ(launch(*d, fn, {in, out, 10}, 24), CUDA_SUCCESS);
  EXPECT_EQ(launch(*d, fn, {in, out}, 16), CUDA_ERROR_INVALID_VALUE);
}

TEST(CudaEmu, AGraphReplaysItsWorkAndIsRefusedAfterABufferMoved) {
  auto d = emulated();
  ASSERT_TRUE(d);
  makeCurrent(*d);
  CUstream stream = nullptr;
  ASSERT_EQ(d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  cublasHandle_t blas = nullptr;
  ASSERT_EQ(d->cublasCreate_v2(&blas), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(d->cublasSetStream_v2(blas, stream), CUBLAS_STATUS_SUCCESS);
  // C[2,2] = A[2,3] B[3,2], column-major.
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(d->cuMemAlloc(&a, 24), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemAlloc(&b, 24), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemAlloc(&c, 16), CUDA_SUCCESS);
  // Pinned host buffers, as dtf's: a real driver captures no copy from or
  // to pageable memory.
  void *pinned = nullptr;
  ASSERT_EQ(d->cuMemHostAlloc(&pinned, 64, CU_MEMHOSTALLOC_PORTABLE),
            CUDA_SUCCESS);
  float *ha = static_cast<float *>(pinned), *hb = ha + 6, *hc = ha + 12;
  const float values[12] = {1, 2, 3, 4, 5, 6, 1, 0, 0, 1, 1, 1};
  std::copy(values, values + 12, ha);
  std::fill(hc, hc + 4, 0.0f);
  const float one = 1, zero = 0;
  ASSERT_EQ(
      d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(a, ha, 24, stream), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(b, hb, 24, stream), CUDA_SUCCESS);
  ASSERT_EQ(d->cublasSgemm_v2(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one,
                              reinterpret_cast<float *>(a), 2,
                              reinterpret_cast<float *>(b), 3, &zero,
                              reinterpret_cast<float *>(c), 2),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(d->cuMemcpyDtoHAsync(hc, c, 16, stream), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(d->cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  // Nothing ran during the capture.
  EXPECT_EQ(hc[0], 0.0f);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(d->cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamSynchronize(stream), CUDA_SUCCESS);
  // A = [1 3 5; 2 4 6], B = [1 1; 0 1; 0 1] (column-major).
  EXPECT_EQ(std::vector<float>(hc, hc + 4), (std::vector<float>{1, 2, 9, 12}));
  ha[0] = 2; // a replay reads the host buffer anew
  ASSERT_EQ(d->cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(std::vector<float>(hc, hc + 4), (std::vector<float>{2, 2, 10, 12}));
  if (!emulationCounts("the refusal of a graph whose buffer moved, and the "
                       "count of graphs and nodes")) {
    EXPECT_EQ(d->cuGraphExecDestroy(exec), CUDA_SUCCESS);
    EXPECT_EQ(d->cuGraphDestroy(graph), CUDA_SUCCESS);
    EXPECT_EQ(d->cuMemFreeHost(pinned), CUDA_SUCCESS);
    return;
  }
  ASSERT_EQ(d->cuMemFree(c), CUDA_SUCCESS);
  CUdeviceptr c2 = 0;
  ASSERT_EQ(d->cuMemAlloc(&c2, 16), CUDA_SUCCESS);
  EXPECT_EQ(d->cuGraphLaunch(exec, stream), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_NE(d->errorText("cuGraphLaunch", 1)
                .find("node 2 (cublasSgemm) uses a device buffer that was "
                      "freed or moved after the capture"),
            std::string::npos)
      << d->errorText("cuGraphLaunch", 1);
  const std::string stats = d->emulationStats();
  EXPECT_NE(stats.find("1 graphs captured, 2 graph launches (8 nodes "
                       "replayed)"),
            std::string::npos)
      << stats;
}

// In thread-local capture mode (dtf's) the real driver refuses, on the
// capturing thread, calls that may synchronize with the device: allocations,
// frees, synchronization, work on the legacy stream. The call fails and the
// capture is invalidated, so its end fails too.
TEST(CudaEmu, ACaptureRefusesWhatMaySynchronizeAndIsInvalidated) {
  DTF_EMULATION_ONLY("the emulation's refusals in a capture, in its words "
                     "(a real driver's codes for them vary by version)");
  auto d = emulated();
  ASSERT_TRUE(d);
  makeCurrent(*d);
  CUstream stream = nullptr;
  ASSERT_EQ(d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr a = 0;
  ASSERT_EQ(d->cuMemAlloc(&a, 16), CUDA_SUCCESS);
  float host[4] = {1, 2, 3, 4};
  struct Case {
    const char *what;
    std::function<CUresult()> call;
    CUresult code;
  };
  CUdeviceptr b = 0;
  void *pinned = nullptr;
  const std::vector<Case> cases = {
      {"cuMemAlloc", [&] { return d->cuMemAlloc(&b, 16); },
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
      {"cuMemFree", [&] { return d->cuMemFree(a); },
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
      {"cuMemHostAlloc", [&] { return d->cuMemHostAlloc(&pinned, 16, 0); },
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
      {"cuStreamSynchronize", [&] { return d->cuStreamSynchronize(stream); },
       CUDA_ERROR_STREAM_CAPTURE_INVALIDATED},
      {"cuMemcpyHtoDAsync on the legacy default stream",
       [&] { return d->cuMemcpyHtoDAsync(a, host, 16, nullptr); },
       CUDA_ERROR_STREAM_CAPTURE_IMPLICIT},
  };
  for (const Case &c : cases) {
    ASSERT_EQ(
        d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        CUDA_SUCCESS);
    ASSERT_EQ(d->cuMemcpyHtoDAsync(a, host, 16, stream), CUDA_SUCCESS);
    EXPECT_EQ(c.call(), c.code) << c.what;
    EXPECT_NE(d->errorText("x", c.code).find(c.what), std::string::npos)
        << d->errorText("x", c.code);
    CUgraph graph = nullptr;
    EXPECT_EQ(d->cuStreamEndCapture(stream, &graph),
              CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        << c.what;
    EXPECT_EQ(graph, nullptr) << c.what;
  }
  // Outside a capture the same calls work, and a clean capture ends well.
  ASSERT_EQ(d->cuMemAlloc(&b, 16), CUDA_SUCCESS);
  ASSERT_EQ(
      d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyHtoDAsync(b, host, 16, stream), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(d->cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  EXPECT_NE(graph, nullptr);
  EXPECT_EQ(d->cuGraphDestroy(graph), CUDA_SUCCESS);
  EXPECT_EQ(d->cuMemFree(b), CUDA_SUCCESS);
  EXPECT_EQ(d->cuMemFree(a), CUDA_SUCCESS);
}

TEST(CudaEmu, AConvolutionWithoutTheWorkspaceItsAlgorithmNeedsIsRefused) {
  DTF_EMULATION_ONLY("the emulation's two convolution algorithms and their "
                     "workspaces");
  auto d = emulated();
  ASSERT_TRUE(d);
  makeCurrent(*d);
  cudnnHandle_t dnn = nullptr;
  ASSERT_EQ(d->cudnnCreate(&dnn), CUDNN_STATUS_SUCCESS);
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t f = nullptr;
  cudnnConvolutionDescriptor_t c = nullptr;
  ASSERT_EQ(d->cudnnCreateTensorDescriptor(&x), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(d->cudnnCreateTensorDescriptor(&y), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(d->cudnnCreateFilterDescriptor(&f), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(d->cudnnCreateConvolutionDescriptor(&c), CUDNN_STATUS_SUCCESS);
  // 1x4x4x1 input, a 1x1 filter, 1x4x4x1 output.
  ASSERT_EQ(d->cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC,
                                          CUDNN_DATA_FLOAT, 1, 1, 4, 4),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(d->cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC,
                                          CUDNN_DATA_FLOAT, 1, 1, 4, 4),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(d->cudnnSetFilter4dDescriptor(f, CUDNN_DATA_FLOAT,
                                          CUDNN_TENSOR_NHWC, 1, 1, 1, 1),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(d->cudnnSetConvolution2dDescriptor(
                c, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            CUDNN_STATUS_SUCCESS);
  // The heuristic ranks algorithm 1 (an im2col workspace: 16 floats) first.
  cudnnConvolutionAlgoPerf_t perf[4] = {};
  int returned = 0;
  ASSERT_EQ(d->cudnnGetConvolutionForwardAlgorithm_v7(dnn, x, f, c, y, 4,
                                                      &returned, perf),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(returned, 2);
  EXPECT_EQ(perf[0].algo, 1);
  EXPECT_EQ(perf[0].memory, 64u);
  EXPECT_EQ(perf[1].algo, 0);
  EXPECT_EQ(perf[1].memory, 0u);
  CUdeviceptr bx = 0, bf = 0, by = 0, ws = 0;
  ASSERT_EQ(d->cuMemAlloc(&bx, 64), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemAlloc(&bf, 4), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemAlloc(&by, 64), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemAlloc(&ws, 32), CUDA_SUCCESS);
  const float one = 1, zero = 0;
  auto forward = [&](int algo, CUdeviceptr w, size_t bytes) {
    return d->cudnnConvolutionForward(
        dnn, &one, x, reinterpret_cast<void *>(bx), f,
        reinterpret_cast<void *>(bf), c, algo, reinterpret_cast<void *>(w),
        bytes, &zero, y, reinterpret_cast<void *>(by));
  };
  EXPECT_EQ(forward(1, 0, 0), CUDNN_STATUS_BAD_PARAM);
  EXPECT_NE(d->errorText("cudnnConvolutionForward", 0)
                .find("algorithm 1 needs a workspace of 64 bytes, got 0"),
            std::string::npos)
      << d->errorText("cudnnConvolutionForward", 0);
  // A size that claims more than the allocation holds.
  EXPECT_EQ(forward(1, ws, 64), CUDNN_STATUS_EXECUTION_FAILED);
  EXPECT_EQ(forward(7, 0, 0), CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(forward(0, 0, 0), CUDNN_STATUS_SUCCESS);
}

} // namespace
} // namespace dtf::gpu
