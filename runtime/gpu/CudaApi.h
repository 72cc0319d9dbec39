// The subset of the CUDA driver API, cuBLAS and cuDNN that dtf calls, declared
// here (types, constants, signatures) so that dtf builds without the CUDA
// headers and links no CUDA library: the values are the ABI of CUDA 12/13,
// cuBLAS 13 and cuDNN 9 (checked against /usr/local/cuda/include).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtf::gpu {
inline namespace cuda {

// --- Driver API ------------------------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
inline constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_MERGE = 902;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_CAPTURED_EVENT = 907;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;

inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;
inline constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 1;
inline constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 2;
inline constexpr uintptr_t CU_LAUNCH_PARAM_END = 0;
inline constexpr uintptr_t CU_LAUNCH_PARAM_BUFFER_POINTER = 1;
inline constexpr uintptr_t CU_LAUNCH_PARAM_BUFFER_SIZE = 2;
/// cuGetProcAddress's cudaVersion: the API version whose entry points dtf
/// expects (the _v2 forms of cuMemAlloc and friends).
inline constexpr int kCudaApiVersion = 12000;

// Every driver entry point dtf resolves through cuGetProcAddress (besides
// cuInit and cuGetProcAddress_v2, found with dlsym): X(name, return, params).
#define DTF_CUDA_DRIVER_FUNCTIONS(X)                                           \
  X(cuDriverGetVersion, (int *version))                                        \
  X(cuDeviceGetCount, (int *count))                                            \
  X(cuDeviceGet, (CUdevice * device, int ordinal))                             \
  X(cuDeviceGetName, (char *name, int len, CUdevice dev))                      \
  X(cuDeviceGetAttribute, (int *value, int attribute, CUdevice dev))           \
  X(cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice dev))                 \
  X(cuDevicePrimaryCtxRelease, (CUdevice dev))                                 \
  X(cuCtxSetCurrent, (CUcontext ctx))                                          \
  X(cuMemAlloc, (CUdeviceptr * dptr, size_t bytes))                            \
  X(cuMemFree, (CUdeviceptr dptr))                                             \
  X(cuMemHostAlloc, (void **pp, size_t bytes, unsigned flags))                 \
  X(cuMemFreeHost, (void *p))                                                  \
  X(cuMemHostGetDevicePointer, (CUdeviceptr * dptr, void *p, unsigned flags))  \
  X(cuMemcpyHtoDAsync,                                                         \
    (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))         \
  X(cuMemcpyDtoHAsync,                                                         \
    (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))               \
  X(cuMemcpyDtoDAsync,                                                         \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))         \
  X(cuMemsetD8Async,                                                           \
    (CUdeviceptr dst, unsigned char value, size_t n, CUstream stream))         \
  X(cuStreamCreate, (CUstream * stream, unsigned flags))                       \
  X(cuStreamDestroy, (CUstream stream))                                        \
  X(cuStreamSynchronize, (CUstream stream))                                    \
  X(cuStreamWaitEvent, (CUstream stream, CUevent event, unsigned flags))       \
  X(cuEventCreate, (CUevent * event, unsigned flags))                          \
  X(cuEventRecord, (CUevent event, CUstream stream))                           \
  X(cuEventSynchronize, (CUevent event))                                       \
  X(cuEventElapsedTime, (float *ms, CUevent start, CUevent end))               \
  X(cuEventDestroy, (CUevent event))                                           \
  X(cuModuleLoadData, (CUmodule * module, const void *image))                  \
  X(cuModuleUnload, (CUmodule module))                                         \
  X(cuModuleGetFunction, (CUfunction * fn, CUmodule module, const char *name)) \
  X(cuLaunchKernel,                                                            \
    (CUfunction f, unsigned gridX, unsigned gridY, unsigned gridZ,             \
     unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes,  \
     CUstream stream, void **kernelParams, void **extra))                      \
  X(cuStreamBeginCapture, (CUstream stream, int mode))                         \
  X(cuStreamEndCapture, (CUstream stream, CUgraph * graph))                    \
  X(cuGraphInstantiateWithFlags,                                               \
    (CUgraphExec * exec, CUgraph graph, unsigned long long flags))             \
  X(cuGraphLaunch, (CUgraphExec exec, CUstream stream))                        \
  X(cuGraphExecDestroy, (CUgraphExec exec))                                    \
  X(cuGraphDestroy, (CUgraph graph))                                           \
  X(cuGetErrorString, (CUresult error, const char **text))

using PFN_cuInit = CUresult (*)(unsigned flags);
using PFN_cuGetProcAddress = CUresult (*)(const char *symbol, void **pfn,
                                          int cudaVersion, uint64_t flags,
                                          int *symbolStatus);

// --- cuBLAS (column-major, host-side alpha and beta) -------------------------
using cublasHandle_t = struct cublasContext *;
using cublasStatus_t = int;
inline constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
inline constexpr cublasStatus_t CUBLAS_STATUS_INVALID_VALUE = 7;
inline constexpr cublasStatus_t CUBLAS_STATUS_EXECUTION_FAILED = 13;
inline constexpr cublasStatus_t CUBLAS_STATUS_NOT_SUPPORTED = 15;
inline constexpr int CUBLAS_DEFAULT_MATH = 0;
inline constexpr int CUBLAS_TF32_TENSOR_OP_MATH = 3;
inline constexpr int CUBLAS_OP_N = 0;
inline constexpr int CUBLAS_OP_T = 1;
/// cudaDataType (library_types.h): the element types of cublasGemmEx's
/// matrices.
inline constexpr int CUDA_R_32F = 0;
inline constexpr int CUDA_R_16F = 2;
inline constexpr int CUDA_R_16BF = 14;
/// cublasComputeType_t: f32 arithmetic and accumulation (bf16 and f16
/// operands run on the tensor cores unless the math mode is pedantic).
inline constexpr int CUBLAS_COMPUTE_32F = 68;
/// cublasGemmAlgo_t: cuBLAS's heuristic choice (tensor ops included).
inline constexpr int CUBLAS_GEMM_DEFAULT = -1;

#define DTF_CUBLAS_FUNCTIONS(X)                                                \
  X(cublasCreate_v2, (cublasHandle_t * handle))                                \
  X(cublasDestroy_v2, (cublasHandle_t handle))                                 \
  X(cublasSetStream_v2, (cublasHandle_t handle, CUstream stream))              \
  X(cublasSetMathMode, (cublasHandle_t handle, int mode))                      \
  X(cublasSgemm_v2,                                                            \
    (cublasHandle_t handle, int transa, int transb, int m, int n, int k,       \
     const float *alpha, const float *a, int lda, const float *b, int ldb,     \
     const float *beta, float *c, int ldc))                                    \
  X(cublasSgemmStridedBatched,                                                 \
    (cublasHandle_t handle, int transa, int transb, int m, int n, int k,       \
     const float *alpha, const float *a, int lda, long long strideA,           \
     const float *b, int ldb, long long strideB, const float *beta, float *c,  \
     int ldc, long long strideC, int batchCount))                              \
  X(cublasSgeam,                                                               \
    (cublasHandle_t handle, int transa, int transb, int m, int n,              \
     const float *alpha, const float *a, int lda, const float *beta,           \
     const float *b, int ldb, float *c, int ldc))                              \
  X(cublasGemmEx,                                                              \
    (cublasHandle_t handle, int transa, int transb, int m, int n, int k,       \
     const void *alpha, const void *a, int aType, int lda, const void *b,      \
     int bType, int ldb, const void *beta, void *c, int cType, int ldc,        \
     int computeType, int algo))                                               \
  X(cublasGemmStridedBatchedEx,                                                \
    (cublasHandle_t handle, int transa, int transb, int m, int n, int k,       \
     const void *alpha, const void *a, int aType, int lda, long long strideA,  \
     const void *b, int bType, int ldb, long long strideB, const void *beta,   \
     void *c, int cType, int ldc, long long strideC, int batchCount,           \
     int computeType, int algo))

// --- cuDNN 9 (the legacy convolution and pooling API) ------------------------
using cudnnHandle_t = struct cudnnContext *;
using cudnnTensorDescriptor_t = struct cudnnTensorStruct *;
using cudnnFilterDescriptor_t = struct cudnnFilterStruct *;
using cudnnConvolutionDescriptor_t = struct cudnnConvolutionStruct *;
using cudnnPoolingDescriptor_t = struct cudnnPoolingStruct *;
using cudnnStatus_t = int;
inline constexpr cudnnStatus_t CUDNN_STATUS_SUCCESS = 0;
inline constexpr cudnnStatus_t CUDNN_STATUS_BAD_PARAM = 2000;
inline constexpr cudnnStatus_t CUDNN_STATUS_NOT_SUPPORTED = 3000;
inline constexpr cudnnStatus_t CUDNN_STATUS_EXECUTION_FAILED = 5000;
inline constexpr int CUDNN_TENSOR_NCHW = 0;
inline constexpr int CUDNN_TENSOR_NHWC = 1;
inline constexpr int CUDNN_DATA_FLOAT = 0;
inline constexpr int CUDNN_DATA_HALF = 2;
inline constexpr int CUDNN_DATA_BFLOAT16 = 9;
inline constexpr int CUDNN_CROSS_CORRELATION = 1;
/// cudnnMathType_t: DEFAULT lets f32 convolutions use TF32 tensor cores on
/// Ampere and later; FMA keeps f32 arithmetic.
inline constexpr int CUDNN_DEFAULT_MATH = 0;
inline constexpr int CUDNN_TENSOR_OP_MATH = 1;
inline constexpr int CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2;
inline constexpr int CUDNN_FMA_MATH = 3;
inline constexpr int CUDNN_POOLING_MAX = 0;
inline constexpr int CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING = 2;
inline constexpr int CUDNN_NOT_PROPAGATE_NAN = 0;
inline constexpr int CUDNN_PROPAGATE_NAN = 1;
inline constexpr int CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0;
inline constexpr int CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1;
inline constexpr int CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 = 1;
/// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t (one layout for all
/// three): what cudnnGetConvolution*Algorithm_v7 and
/// cudnnFindConvolution*AlgorithmEx rank.
struct cudnnConvolutionAlgoPerf_t {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  int determinism;
  int mathType;
  int reserved[3];
};

#define DTF_CUDNN_FUNCTIONS(X)                                                 \
  X(cudnnCreate, (cudnnHandle_t * handle))                                     \
  X(cudnnDestroy, (cudnnHandle_t handle))                                      \
  X(cudnnSetStream, (cudnnHandle_t handle, CUstream stream))                   \
  X(cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t * desc))             \
  X(cudnnSetTensor4dDescriptor, (cudnnTensorDescriptor_t desc, int format,     \
                                 int dataType, int n, int c, int h, int w))    \
  X(cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t desc))              \
  X(cudnnTransformTensor,                                                      \
    (cudnnHandle_t handle, const void *alpha, cudnnTensorDescriptor_t xDesc,   \
     const void *x, const void *beta, cudnnTensorDescriptor_t yDesc, void *y)) \
  X(cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t * desc))             \
  X(cudnnSetFilter4dDescriptor, (cudnnFilterDescriptor_t desc, int dataType,   \
                                 int format, int k, int c, int h, int w))      \
  X(cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t desc))              \
  X(cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t * desc))   \
  X(cudnnSetConvolution2dDescriptor,                                           \
    (cudnnConvolutionDescriptor_t desc, int padH, int padW, int strideH,       \
     int strideW, int dilationH, int dilationW, int mode, int computeType))    \
  X(cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t desc))    \
  X(cudnnSetConvolutionMathType,                                               \
    (cudnnConvolutionDescriptor_t desc, int mathType))                         \
  X(cudnnGetConvolutionForwardWorkspaceSize,                                   \
    (cudnnHandle_t handle, cudnnTensorDescriptor_t x,                          \
     cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,             \
     cudnnTensorDescriptor_t y, int algo, size_t *bytes))                      \
  X(cudnnConvolutionForward,                                                   \
    (cudnnHandle_t handle, const void *alpha, cudnnTensorDescriptor_t xDesc,   \
     const void *x, cudnnFilterDescriptor_t wDesc, const void *w,              \
     cudnnConvolutionDescriptor_t conv, int algo, void *workspace,             \
     size_t workspaceBytes, const void *beta, cudnnTensorDescriptor_t yDesc,   \
     void *y))                                                                 \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize,                              \
    (cudnnHandle_t handle, cudnnFilterDescriptor_t w,                          \
     cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t conv,            \
     cudnnTensorDescriptor_t dx, int algo, size_t *bytes))                     \
  X(cudnnConvolutionBackwardData,                                              \
    (cudnnHandle_t handle, const void *alpha, cudnnFilterDescriptor_t wDesc,   \
     const void *w, cudnnTensorDescriptor_t dyDesc, const void *dy,            \
     cudnnConvolutionDescriptor_t conv, int algo, void *workspace,             \
     size_t workspaceBytes, const void *beta, cudnnTensorDescriptor_t dxDesc,  \
     void *dx))                                                                \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize,                            \
    (cudnnHandle_t handle, cudnnTensorDescriptor_t x,                          \
     cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t conv,            \
     cudnnFilterDescriptor_t dw, int algo, size_t *bytes))                     \
  X(cudnnConvolutionBackwardFilter,                                            \
    (cudnnHandle_t handle, const void *alpha, cudnnTensorDescriptor_t xDesc,   \
     const void *x, cudnnTensorDescriptor_t dyDesc, const void *dy,            \
     cudnnConvolutionDescriptor_t conv, int algo, void *workspace,             \
     size_t workspaceBytes, const void *beta, cudnnFilterDescriptor_t dwDesc,  \
     void *dw))                                                                \
  X(cudnnGetConvolutionForwardAlgorithm_v7,                                    \
    (cudnnHandle_t handle, cudnnTensorDescriptor_t x,                          \
     cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,             \
     cudnnTensorDescriptor_t y, int requested, int *returned,                  \
     cudnnConvolutionAlgoPerf_t *perf))                                        \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7,                               \
    (cudnnHandle_t handle, cudnnFilterDescriptor_t w,                          \
     cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t conv,            \
     cudnnTensorDescriptor_t dx, int requested, int *returned,                 \
     cudnnConvolutionAlgoPerf_t *perf))                                        \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7,                             \
    (cudnnHandle_t handle, cudnnTensorDescriptor_t x,                          \
     cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t conv,            \
     cudnnFilterDescriptor_t dw, int requested, int *returned,                 \
     cudnnConvolutionAlgoPerf_t *perf))                                        \
  X(cudnnFindConvolutionForwardAlgorithmEx,                                    \
    (cudnnHandle_t handle, cudnnTensorDescriptor_t xDesc, const void *x,       \
     cudnnFilterDescriptor_t wDesc, const void *w,                             \
     cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t yDesc,         \
     void *y, int requested, int *returned, cudnnConvolutionAlgoPerf_t *perf,  \
     void *workspace, size_t workspaceBytes))                                  \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx,                               \
    (cudnnHandle_t handle, cudnnFilterDescriptor_t wDesc, const void *w,       \
     cudnnTensorDescriptor_t dyDesc, const void *dy,                           \
     cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t dxDesc,        \
     void *dx, int requested, int *returned, cudnnConvolutionAlgoPerf_t *perf, \
     void *workspace, size_t workspaceBytes))                                  \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx,                             \
    (cudnnHandle_t handle, cudnnTensorDescriptor_t xDesc, const void *x,       \
     cudnnTensorDescriptor_t dyDesc, const void *dy,                           \
     cudnnConvolutionDescriptor_t conv, cudnnFilterDescriptor_t dwDesc,        \
     void *dw, int requested, int *returned, cudnnConvolutionAlgoPerf_t *perf, \
     void *workspace, size_t workspaceBytes))                                  \
  X(cudnnCreatePoolingDescriptor, (cudnnPoolingDescriptor_t * desc))           \
  X(cudnnSetPooling2dDescriptor,                                               \
    (cudnnPoolingDescriptor_t desc, int mode, int nanOpt, int windowH,         \
     int windowW, int padH, int padW, int strideH, int strideW))               \
  X(cudnnDestroyPoolingDescriptor, (cudnnPoolingDescriptor_t desc))            \
  X(cudnnPoolingForward,                                                       \
    (cudnnHandle_t handle, cudnnPoolingDescriptor_t pool, const void *alpha,   \
     cudnnTensorDescriptor_t xDesc, const void *x, const void *beta,           \
     cudnnTensorDescriptor_t yDesc, void *y))                                  \
  X(cudnnPoolingBackward,                                                      \
    (cudnnHandle_t handle, cudnnPoolingDescriptor_t pool, const void *alpha,   \
     cudnnTensorDescriptor_t yDesc, const void *y,                             \
     cudnnTensorDescriptor_t dyDesc, const void *dy,                           \
     cudnnTensorDescriptor_t xDesc, const void *x, const void *beta,           \
     cudnnTensorDescriptor_t dxDesc, void *dx))

// --- NCCL 2 (single-process, one communicator per GPU) ----------------------
using ncclComm_t = struct ncclComm *;
using ncclResult_t = int;
inline constexpr ncclResult_t ncclSuccess = 0;
inline constexpr ncclResult_t ncclInvalidArgument = 4;
inline constexpr ncclResult_t ncclInvalidUsage = 5;
inline constexpr int ncclUint8 = 1;
inline constexpr int ncclFloat32 = 7;
inline constexpr int ncclSum = 0;

#define DTF_NCCL_FUNCTIONS(X)                                                  \
  X(ncclGetVersion, (int *version))                                            \
  X(ncclCommInitAll, (ncclComm_t * comms, int ndev, const int *devices))       \
  X(ncclCommDestroy, (ncclComm_t comm))                                        \
  X(ncclGroupStart, ())                                                        \
  X(ncclGroupEnd, ())                                                          \
  X(ncclAllReduce, (const void *send, void *recv, size_t count, int dataType,  \
                    int op, ncclComm_t comm, CUstream stream))                 \
  X(ncclBroadcast, (const void *send, void *recv, size_t count, int dataType,  \
                    int root, ncclComm_t comm, CUstream stream))

} // namespace cuda
} // namespace dtf::gpu
