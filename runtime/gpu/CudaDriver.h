// CudaDriver: the CUDA driver API, cuBLAS and cuDNN loaded at run time with
// dlopen (dtf links no CUDA library), or the host emulation of all three.
#pragma once

#include "schema/Status.h"
#include "runtime/gpu/CudaApi.h"

#include <memory>
#include <string>

namespace dtf::gpu {

/// Where the three libraries come from.
struct CudaLibraries {
  std::string driver = "libcuda.so.1";
  /// $DTF_CUBLAS_LIBRARY and $DTF_CUDNN_LIBRARY name others.
  std::string cublas = "libcublas.so.13";
  std::string cudnn = "libcudnn.so.9";
  /// NCCL, for the towers' all-reduce (loaded only by towers over 2 or more
  /// GPUs); $DTF_NCCL_LIBRARY names another.
  std::string nccl = "libnccl.so.2";
  /// > 0: every library is the emulation (libdtf-cuda-emu.so), configured
  /// with this many GPUs before cuInit.
  int emulatedGpus = 0;
};

/// The emulation library's path: beside the running executable
/// (build/bin/libdtf-cuda-emu.so), or $DTF_CUDA_EMU_LIBRARY.
std::string emulationLibraryPath();

/// The loaded entry points. Every driver function is found through
/// cuGetProcAddress (which hands out the right _v2 versions), cuInit and
/// cuGetProcAddress_v2 themselves through dlsym.
class CudaDriver {
public:
  /// Loads and initializes the driver. A missing library, CUDA's stub
  /// libcuda (CUDA_ERROR_STUB_LIBRARY) or a machine without a GPU is an error
  /// whose message says which, in words ("no CUDA driver: ...").
  static Status load(const CudaLibraries &libs,
                     std::unique_ptr<CudaDriver> *out);
  ~CudaDriver();

  /// Loads cuBLAS and cuDNN (once), each on its own: a library that is
  /// missing (or lacks an entry point) leaves the other usable, and the ops
  /// that need it are placed elsewhere (missing() says why). Under the
  /// emulation, $DTF_CUBLAS_LIBRARY or $DTF_CUDNN_LIBRARY naming a path that
  /// does not load plays a machine without that library.
  void loadLibraries();
  /// A GPU library a kernel needs.
  enum class Library { kCublas, kCudnn };
  /// Why `lib` cannot be used ("cannot load cuDNN from ... (...)"), or ""
  /// when it is loaded.
  const std::string &missing(Library lib) const {
    return lib == Library::kCublas ? cublasError_ : cudnnError_;
  }
  /// Loads NCCL (once; the emulation's own under --emulate-gpus). An error
  /// names the library and why; callers fall back to copies through the host.
  Status loadNccl();

  int deviceCount() const { return deviceCount_; }
  bool emulated() const { return emulatedGpus_ > 0; }
  /// "CUDA 13.0 driver, 1 GPU (NVIDIA H100 80GB HBM3, sm_90)".
  const std::string &description() const { return description_; }

  /// "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)", with what the
  /// emulation said about it when it refused.
  std::string errorText(const char *call, cuda::CUresult r) const;

  /// "ncclGroupEnd: NCCL error 5 (invalid usage)", likewise.
  std::string ncclErrorText(const char *call, cuda::ncclResult_t r) const;

  /// The emulation's counters as one line ("" on a real driver).
  std::string emulationStats() const;

#define DTF_DECLARE_FN(name, params) cuda::CUresult(*name) params = nullptr;
  DTF_CUDA_DRIVER_FUNCTIONS(DTF_DECLARE_FN)
  DTF_CUBLAS_FUNCTIONS(DTF_DECLARE_FN)
  DTF_CUDNN_FUNCTIONS(DTF_DECLARE_FN)
  DTF_NCCL_FUNCTIONS(DTF_DECLARE_FN)
#undef DTF_DECLARE_FN
  const char *(*cudnnGetErrorString)(cuda::cudnnStatus_t) = nullptr;
  const char *(*ncclGetErrorString)(cuda::ncclResult_t) = nullptr;
  /// "NCCL 2.28.5 (libnccl.so.2)" once loadNccl() succeeded.
  const std::string &ncclDescription() const { return ncclDescription_; }
  /// Emulation only (null on a real driver): the CPU twin a launch of
  /// `name` runs (runtime/gpu/emu/EmuModule.cpp).
  int (*emuRegisterKernel)(const char *name,
                           void (*twin)(void *const *, const int64_t *, int64_t,
                                        int64_t),
                           const char *kinds, int rangeParam) = nullptr;

private:
  CudaDriver() = default;
  // ": <why the emulation last refused>", or "" (a real driver).
  std::string emulationReason() const;
  CudaLibraries libs_;
  void *driverLib_ = nullptr;
  void *cublasLib_ = nullptr;
  void *cudnnLib_ = nullptr;
  void *ncclLib_ = nullptr;
  bool librariesLoaded_ = false;
  std::string cublasError_, cudnnError_;
  bool ncclTried_ = false;
  std::string ncclError_, ncclDescription_;
  int deviceCount_ = 0;
  int emulatedGpus_ = 0;
  std::string description_;
  const char *(*emuLastError_)() = nullptr;
  int (*emuStats_)(char *, size_t) = nullptr;
};

} // namespace dtf::gpu
