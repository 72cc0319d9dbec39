// The process's CUDA driver and its platform (device::gpuPlatform).
#include "runtime/gpu/CudaPlatform.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuKernels.h"

#include <cstdlib>
#include <mutex>

namespace dtf::gpu {

namespace {

struct ProcessGpus {
  std::mutex mutex;
  CudaLibraries libs;
  bool loaded = false;
  std::unique_ptr<CudaDriver> driver;
  std::unique_ptr<CudaPlatform> platform; // over `driver`
  std::string whyNot;
};

ProcessGpus &processGpus() {
  static ProcessGpus *p = [] {
    auto *gpus = new ProcessGpus();
    if (const char *lib = std::getenv("DTF_CUDA_DRIVER"))
      gpus->libs.driver = lib;
    return gpus;
  }();
  return *p;
}

// The driver, loaded at the first call; p.mutex held.
CudaDriver *loadedDriver(ProcessGpus &p, std::string *whyNot) {
  if (!p.loaded) {
    p.loaded = true;
    Status s = CudaDriver::load(p.libs, &p.driver);
    if (s.isOk())
      p.driver->loadLibraries(); // each on its own: kernelUnusable()
    if (!s.isOk()) {
      p.driver.reset();
      p.whyNot = s.message();
    }
    if (p.driver)
      p.platform = std::make_unique<CudaPlatform>(*p.driver);
  }
  if (!p.driver && whyNot)
    *whyNot = p.whyNot;
  return p.driver.get();
}

} // namespace

void configureProcessGpus(const CudaLibraries &libs) {
  ProcessGpus &p = processGpus();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.libs = libs;
  if (const char *lib = std::getenv("DTF_CUDA_DRIVER");
      lib && !libs.emulatedGpus)
    p.libs.driver = lib;
  p.loaded = false;
  p.platform.reset();
  p.driver.reset();
}

CudaDriver *processDriver(std::string *whyNot) {
  ProcessGpus &p = processGpus();
  std::lock_guard<std::mutex> lock(p.mutex);
  return loadedDriver(p, whyNot);
}

std::string processEmulationStats() {
  ProcessGpus &p = processGpus();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.driver ? p.driver->emulationStats() : std::string();
}

bool CudaPlatform::hasKernel(std::string_view opName) const {
  return gpuKernelRegistry().lookup(opName) != nullptr;
}

std::string CudaPlatform::kernelUnusable(std::string_view opName) const {
  for (CudaDriver::Library lib : librariesOfKernel(opName))
    if (!driver_.missing(lib).empty())
      return strCat(lib == CudaDriver::Library::kCublas ? "cuBLAS" : "cuDNN",
                    " is not usable: ", driver_.missing(lib));
  return "";
}

Status CudaPlatform::openDevice(int index,
                                const device::DeviceOptions &options,
                                std::unique_ptr<device::Device> *out) {
  std::unique_ptr<GpuDevice> device;
  DTF_RETURN_IF_ERROR(GpuDevice::create(driver_, index, &device, options));
  *out = std::move(device);
  return Status::ok();
}

} // namespace dtf::gpu

namespace dtf::device {

Platform *gpuPlatform(std::string *whyNot) {
  gpu::ProcessGpus &p = gpu::processGpus();
  std::lock_guard<std::mutex> lock(p.mutex);
  return gpu::loadedDriver(p, whyNot) ? p.platform.get() : nullptr;
}

} // namespace dtf::device
