// CudaDriver: dlopen of libcuda.so.1 (or the emulation), cuInit, and every
// other entry point through cuGetProcAddress; cuBLAS and cuDNN by dlsym.
#include "runtime/gpu/CudaDriver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace dtf::gpu {

using namespace cuda;

std::string emulationLibraryPath() {
  if (const char *env = std::getenv("DTF_CUDA_EMU_LIBRARY"))
    return env;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0)
    return "libdtf-cuda-emu.so";
  std::string path(exe, size_t(n));
  return path.substr(0, path.rfind('/') + 1) + "libdtf-cuda-emu.so";
}

namespace {

std::string dlerrorText() {
  const char *e = dlerror();
  return e ? e : "unknown dlopen error";
}

} // namespace

CudaDriver::~CudaDriver() {
  // The libraries stay loaded: cuBLAS and cuDNN keep state that their own
  // exit handlers tear down.
}

std::string CudaDriver::errorText(const char *call, CUresult r) const {
  std::string text = strCat(call, ": CUDA error ", r);
  const char *s = nullptr;
  if (cuGetErrorString && cuGetErrorString(r, &s) == CUDA_SUCCESS && s)
    text += strCat(" (", s, ")");
  return text + emulationReason();
}

std::string CudaDriver::emulationReason() const {
  const char *e = emuLastError_ ? emuLastError_() : nullptr;
  return e && *e ? strCat(": ", e) : std::string();
}

std::string CudaDriver::ncclErrorText(const char *call, ncclResult_t r) const {
  std::string text = strCat(call, ": NCCL error ", r);
  if (ncclGetErrorString)
    if (const char *s = ncclGetErrorString(r))
      text += strCat(" (", s, ")");
  return text + emulationReason();
}

std::string CudaDriver::emulationStats() const {
  if (!emuStats_)
    return "";
  // Sized by a first call (the by-type counts make the line grow).
  std::string line(4096, '\0');
  int n = emuStats_(line.data(), line.size());
  if (n >= int(line.size())) {
    line.assign(size_t(n) + 1, '\0');
    n = emuStats_(line.data(), line.size());
  }
  line.resize(size_t(std::max(n, 0)));
  return line;
}

Status CudaDriver::load(const CudaLibraries &libs,
                        std::unique_ptr<CudaDriver> *out) {
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  d->libs_ = libs;
  d->emulatedGpus_ = libs.emulatedGpus;
  d->driverLib_ = dlopen(libs.driver.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!d->driverLib_)
    return errorStatus("no CUDA driver: cannot load ", libs.driver, " (",
                       dlerrorText(), ")");
  if (libs.emulatedGpus > 0) {
    auto configure =
        reinterpret_cast<int (*)(int)>(dlsym(d->driverLib_, "dtfEmuConfigure"));
    if (!configure)
      return errorStatus(libs.driver,
                         " is not dtf's CUDA emulation (no dtfEmuConfigure)");
    d->emuLastError_ = reinterpret_cast<const char *(*)()>(
        dlsym(d->driverLib_, "dtfEmuLastError"));
    if (int r = configure(libs.emulatedGpus); r == 2)
      return errorStatus("the CUDA emulation cannot start",
                         d->emulationReason());
    else if (r != 0)
      return errorStatus("the CUDA emulation cannot emulate ",
                         libs.emulatedGpus, " GPUs");
    d->emuStats_ = reinterpret_cast<int (*)(char *, size_t)>(
        dlsym(d->driverLib_, "dtfEmuStats"));
    d->emuRegisterKernel = reinterpret_cast<decltype(d->emuRegisterKernel)>(
        dlsym(d->driverLib_, "dtfEmuRegisterKernel"));
  }
  auto init = reinterpret_cast<PFN_cuInit>(dlsym(d->driverLib_, "cuInit"));
  auto getProc = reinterpret_cast<PFN_cuGetProcAddress>(
      dlsym(d->driverLib_, "cuGetProcAddress_v2"));
  if (!init || !getProc)
    return errorStatus("no CUDA driver: ", libs.driver,
                       " lacks cuInit or cuGetProcAddress_v2 (a driver older "
                       "than CUDA 12)");
  CUresult r = init(0);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    return errorStatus("no CUDA driver: ", libs.driver,
                       " is CUDA's stub library (install the NVIDIA driver)");
  if (r == CUDA_ERROR_NO_DEVICE)
    return errorStatus("no GPU: the CUDA driver finds no device");
  if (r != CUDA_SUCCESS)
    return errorStatus("no CUDA driver: cuInit failed with CUDA error ", r);
#define DTF_RESOLVE(name, params)                                              \
  {                                                                            \
    int status = 0;                                                            \
    void *fn = nullptr;                                                        \
    CUresult q = getProc(#name, &fn, kCudaApiVersion, 0, &status);             \
    if (q != CUDA_SUCCESS || !fn)                                              \
      return errorStatus("the CUDA driver in ", libs.driver, " lacks " #name,  \
                         " (cuGetProcAddress: ", q, ")");                      \
    d->name = reinterpret_cast<decltype(d->name)>(fn);                         \
  }
  DTF_CUDA_DRIVER_FUNCTIONS(DTF_RESOLVE)
#undef DTF_RESOLVE
  int version = 0;
  d->cuDriverGetVersion(&version);
  r = d->cuDeviceGetCount(&d->deviceCount_);
  if (r != CUDA_SUCCESS)
    return errorStatus(d->errorText("cuDeviceGetCount", r));
  if (d->deviceCount_ == 0)
    return errorStatus("no GPU: the CUDA driver finds no device");
  std::string first;
  {
    CUdevice dev = 0;
    char name[256] = {0};
    int major = 0, minor = 0;
    d->cuDeviceGet(&dev, 0);
    d->cuDeviceGetName(name, sizeof(name) - 1, dev);
    d->cuDeviceGetAttribute(&major,
                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    d->cuDeviceGetAttribute(&minor,
                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    first = strCat(name, ", sm_", major, minor);
  }
  d->description_ =
      strCat(d->emulated() ? "emulated CUDA " : "CUDA ", version / 1000, ".",
             (version % 1000) / 10, " driver, ", d->deviceCount_,
             d->deviceCount_ == 1 ? " GPU (" : " GPUs (first: ", first, ")");
  *out = std::move(d);
  return Status::ok();
}

namespace {

// dlopen of `path` and dlsym of each entry point `name` of one library into
// `fns` (name, slot); the first failure in words, else "".
std::string loadLibrary(const char *what, const std::string &path,
                        const char *variable, void **lib,
                        const std::vector<std::pair<const char *, void **>> &fns) {
  *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!*lib)
    return strCat("cannot load ", what, " from ", path, " (", dlerrorText(),
                  "; ", variable, "=PATH names another)");
  for (const auto &[name, slot] : fns) {
    *slot = dlsym(*lib, name);
    if (!*slot)
      return strCat(path, " lacks ", name, " (", variable,
                    "=PATH names another ", what, ")");
  }
  return "";
}

} // namespace

void CudaDriver::loadLibraries() {
  if (librariesLoaded_)
    return;
  librariesLoaded_ = true;
  // $DTF_CUBLAS_LIBRARY and $DTF_CUDNN_LIBRARY name others (the GPU bundle's
  // check.sh passes what it found: a CUDA 12 cuBLAS, one in a Python
  // environment; the tests name a missing one under the emulation).
  std::string blas = emulated() ? libs_.driver : libs_.cublas;
  std::string dnn = emulated() ? libs_.driver : libs_.cudnn;
  if (const char *env = std::getenv("DTF_CUBLAS_LIBRARY"))
    blas = env;
  if (const char *env = std::getenv("DTF_CUDNN_LIBRARY"))
    dnn = env;
  std::vector<std::pair<const char *, void **>> blasFns, dnnFns;
#define DTF_BLAS(name, params)                                                 \
  blasFns.emplace_back(#name, reinterpret_cast<void **>(&name));
#define DTF_DNN(name, params)                                                  \
  dnnFns.emplace_back(#name, reinterpret_cast<void **>(&name));
  DTF_CUBLAS_FUNCTIONS(DTF_BLAS)
  DTF_CUDNN_FUNCTIONS(DTF_DNN)
#undef DTF_BLAS
#undef DTF_DNN
  dnnFns.emplace_back("cudnnGetErrorString",
                      reinterpret_cast<void **>(&cudnnGetErrorString));
  cublasError_ = loadLibrary("cuBLAS", blas, "DTF_CUBLAS_LIBRARY",
                             &cublasLib_, blasFns);
  cudnnError_ =
      loadLibrary("cuDNN", dnn, "DTF_CUDNN_LIBRARY", &cudnnLib_, dnnFns);
  // Half a library is none: its entry points are cleared, so that a use
  // of one fails loudly rather than calling into the wrong place.
  if (!cublasError_.empty())
    for (auto &[name, slot] : blasFns)
      *slot = nullptr;
  if (!cudnnError_.empty())
    for (auto &[name, slot] : dnnFns)
      *slot = nullptr;
}

Status CudaDriver::loadNccl() {
  if (ncclTried_)
    return ncclError_.empty() ? Status::ok() : errorStatus(ncclError_);
  ncclTried_ = true;
  // The emulation's own NCCL under --emulate-gpus; $DTF_NCCL_LIBRARY wins
  // either way (the tests name a missing one to see the fallback).
  std::string path = emulated() ? libs_.driver : libs_.nccl;
  if (const char *env = std::getenv("DTF_NCCL_LIBRARY"))
    path = env;
  ncclLib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!ncclLib_) {
    ncclError_ = strCat("cannot load NCCL from ", path, " (", dlerrorText(),
                        "; DTF_NCCL_LIBRARY=PATH names another)");
    return errorStatus(ncclError_);
  }
#define DTF_NCCL(name, params)                                                 \
  name = reinterpret_cast<decltype(name)>(dlsym(ncclLib_, #name));             \
  if (!name) {                                                                 \
    ncclError_ = strCat(path, " lacks " #name);                                \
    return errorStatus(ncclError_);                                            \
  }
  DTF_NCCL_FUNCTIONS(DTF_NCCL)
#undef DTF_NCCL
  ncclGetErrorString = reinterpret_cast<decltype(ncclGetErrorString)>(
      dlsym(ncclLib_, "ncclGetErrorString"));
  int version = 0;
  ncclGetVersion(&version);
  // NCCL 2.x encodes major * 10000 + minor * 100 + patch (2.9 and later).
  ncclDescription_ =
      strCat(emulated() ? "emulated NCCL " : "NCCL ", version / 10000, ".",
             (version % 10000) / 100, ".", version % 100, " (", path, ")");
  return Status::ok();
}

} // namespace dtf::gpu
