// The CUDA device layer of the executor: the process's driver, one device's
// context, stream and library handles, device and pinned buffers, the kernel
// context whose tensors live in device memory, and GpuOp, which runs one op
// of a program on a GPU (copies in, kernel, copies out; a CUDA graph after
// the first steps).
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"
#include "runtime/gpu/CudaDriver.h"
#include "runtime/kernels/GeneratedKernels.h"
#include "runtime/kernels/Kernel.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace dtf::gpu {

/// Sets where the process's CUDA libraries come from (dtf-run's
/// --emulate-gpus; $DTF_CUDA_DRIVER names another driver library). Before the
/// first processDriver().
void configureProcessGpus(const CudaLibraries &libs);

/// The process's driver, loaded at the first call; null when there is none,
/// with the reason ("no CUDA driver: cannot load libcuda.so.1 (...)").
CudaDriver *processDriver(std::string *whyNot);

/// The emulation's counters when the process loaded it, else "".
std::string processEmulationStats();

/// The GPU kernels: op name -> kernel taking a GpuKernelContext.
const KernelRegistry &gpuKernelRegistry();

/// The largest workspace a convolution algorithm may ask for (1 GiB).
inline constexpr size_t kMaxConvWorkspace = size_t(1) << 30;

/// How many times this process asked cuDNN for a convolution algorithm (once
/// per GPU, direction and shape; GpuKernels.cpp).
uint64_t convAlgorithmQueries();

/// False when DTF_CUDA_GRAPHS=0: GPU work then always runs eagerly.
bool cudaGraphsEnabled();

/// "/job:localhost/replica:0/task:0/device:GPU:N".
std::string gpuDeviceName(int index);

/// Device memory that one op's tensor (or scratch) lives in: a slice of its
/// device's arena, or an allocation of its own until the arena is planned.
struct DeviceBuffer {
  cuda::CUdeviceptr ptr = 0;
  size_t capacity = 0;
  bool inArena = false;
};

/// The plan's GPU module (Plan.gpu_ptx, Plan.gpu_cubins): every generated
/// kernel's entry point.
struct GpuModuleCode {
  std::string ptx;                           // sm_80 PTX
  std::map<std::string, std::string> cubins; // "sm_90" -> cubin
};

/// One GPU as one executor uses it: the primary context, a compute stream
/// for its steps' kernels (cuBLAS and cuDNN handles are bound to it), and a
/// copy stream on which segments (GpuStep.h) move values between host and
/// device beside the kernels, ordered by events.
class GpuDevice {
public:
  static Status create(CudaDriver &driver, int index,
                       std::unique_ptr<GpuDevice> *out);
  ~GpuDevice();

  CudaDriver &driver() { return driver_; }
  int index() const { return index_; }
  cuda::CUstream stream() const { return stream_; }
  /// The stream for copies that overlap the compute stream's kernels.
  cuda::CUstream copyStream() const { return copyStream_; }
  cuda::cublasHandle_t blas() const { return blas_; }
  cuda::cudnnHandle_t dnn() const { return dnn_; }
  /// The device's compute capability, e.g. 90.
  int computeCapability() const { return cc_; }

  /// An error naming the call when r is not CUDA_SUCCESS.
  Status check(const char *call, cuda::CUresult r) const;
  Status makeCurrent();
  /// Waits for both streams' work.
  Status synchronize();
  /// An event for ordering the streams (no timing), or an error.
  Status createEvent(cuda::CUevent *event);
  /// The compute stream's later work waits for `event` (another stream's).
  Status waitFor(cuda::CUevent event);
  /// `event` recorded on `from`, and `to` made to wait for it.
  Status order(cuda::CUevent event, cuda::CUstream from, cuda::CUstream to);
  /// Makes `b` hold at least `bytes` (a new allocation only when it grows).
  /// Its contents do not survive growth or planArena(): every buffer is
  /// written before it is read within a step.
  Status reserve(DeviceBuffer &b, size_t bytes);
  void release(DeviceBuffer &b);
  /// A host value's device copy and its pinned staging buffer, released.
  void releaseStaged(DeviceBuffer &b, void *pinned);
  /// After a step that allocated: moves every buffer into one arena sized
  /// for the step (one cuMemAlloc), so that steps of that shape allocate
  /// nothing. Buffers move, so captured graphs are captured anew.
  Status planArena();
  /// How many arenas were planned (the first step's, and one per new shape).
  int arenasPlanned() const { return arenasPlanned_; }
  /// Whether the next planArena() moves the buffers (a step allocated).
  bool arenaPending() const { return allocatedOutsideArena_; }
  /// Pinned host memory, likewise.
  Status reservePinned(void **p, size_t *capacity, size_t bytes);
  /// A scratch buffer for library workspaces, shared by the device's ops.
  Status workspace(size_t bytes, void **p);
  /// Captures the work `enqueue` puts on the stream (thread-local mode:
  /// nothing in it may allocate or synchronize) and instantiates it as
  /// `*exec`, ready to launch.
  Status capture(const std::function<Status()> &enqueue,
                 cuda::CUgraphExec *exec);
  /// `code` loaded on this device (once): the cubin for its compute
  /// capability, else the PTX for the driver to compile.
  Status loadModule(const GpuModuleCode &code, cuda::CUmodule *out);

private:
  GpuDevice(CudaDriver &driver, int index) : driver_(driver), index_(index) {}
  CudaDriver &driver_;
  int index_;
  int cc_ = 0;
  cuda::CUcontext ctx_ = nullptr;
  cuda::CUstream stream_ = nullptr;
  cuda::CUstream copyStream_ = nullptr;
  cuda::cublasHandle_t blas_ = nullptr;
  cuda::cudnnHandle_t dnn_ = nullptr;
  DeviceBuffer workspace_;
  std::map<const GpuModuleCode *, cuda::CUmodule> modules_;
  std::set<DeviceBuffer *> buffers_; // every buffer holding memory
  cuda::CUdeviceptr arena_ = 0;
  bool allocatedOutsideArena_ = false;
  int arenasPlanned_ = 0;
};

/// A kernel context whose inputs and outputs are tensors in device memory
/// (Tensor views over device pointers: their data must not be touched on the
/// host). Outputs keep their device buffers from step to step.
class GpuKernelContext : public KernelContext {
public:
  explicit GpuKernelContext(GpuDevice &device) : device_(device) {}
  ~GpuKernelContext() override;
  GpuDevice &device() { return device_; }
  Status allocateOutput(int i, DType dtype, std::vector<int64_t> shape,
                        Tensor **out) override;
  /// A per-op scratch buffer `k` of at least `bytes`.
  Status scratch(int k, size_t bytes, void **p);

private:
  GpuDevice &device_;
  std::vector<DeviceBuffer> outputBuffers_;
  std::vector<DeviceBuffer> scratch_;
};

/// A generated kernel's GPU side (plan.proto's Kernel): what a dtf.fused op
/// on a GPU loads and launches.
struct GpuKernelCode {
  std::string name; // the kernel's entry point in the module
  int block = 0;    // threads per block; 0: the plan has no GPU code
  int blockY = 1;   // threads per block along y (a column reduction's tree)
  // Output elements per block (a reduction's tree); 0: one per thread.
  int outputsPerBlock = 0;
  std::shared_ptr<const GpuModuleCode> module;
  bool present() const {
    return block > 0 && module &&
           (!module->ptx.empty() || !module->cubins.empty());
  }
};

struct GraphSignature;

/// The context of a dtf.fused op on a GPU: the plan's loaded kernels (for
/// the parameters, and the CPU twin that the emulation runs), which one it
/// runs, its GPU code, and the module loaded from that code.
class GpuFusedContext : public GpuKernelContext {
public:
  GpuFusedContext(GpuDevice &device,
                  std::shared_ptr<const GeneratedKernels> kernels, int kernel,
                  const GpuKernelCode &code)
      : GpuKernelContext(device), kernels_(std::move(kernels)), kernel_(kernel),
        code_(code) {}
  ~GpuFusedContext() override;
  const GeneratedKernels &kernels() const { return *kernels_; }
  int kernel() const { return kernel_; }
  const GpuKernelCode &code() const { return code_; }
  /// The kernel in the plan's module on this device (loaded once per
  /// device, GpuDevice::loadModule).
  Status function(cuda::CUfunction *fn);

  /// A row kernel's "row-index-error" word (GeneratedKernels.h): pinned
  /// host memory mapped into the device's address space (`*device`, its
  /// device pointer), which the kernel writes only for a bad label: nothing
  /// is copied or cleared on the stream, so the op's CUDA graph holds the
  /// launch alone. Made by the first (eager) call; a capture finds it.
  Status rowIndexErrorWord(cuda::CUdeviceptr *device);
  /// Whether the work last enqueued (and so every replay of its graph)
  /// reports in the word, and the class count C it checks against.
  void setRowIndexCheck(bool on, int64_t classes) {
    checksRowIndices_ = on;
    classes_ = classes;
  }
  bool checksRowIndices() const { return checksRowIndices_; }
  /// After the stream is synchronized: the bad label the launches since
  /// the last call reported (checkRowIndices' message), or ok; clears the
  /// word for the next step (the device is idle).
  Status rowIndexError();

  /// A dropout kernel's "dropout-key" word (GeneratedKernels.h): GpuOp's
  /// stage() calls this every step, replays too: it writes this step's key
  /// and first element (dropoutKeyWord, from the step, seed and batch
  /// offset set on this context, and input 0's shape) into a pinned buffer
  /// and appends that buffer and its device copy to `sig`. No-op for other
  /// kernels. The buffers are made at the first (eager) call.
  Status stageDropoutKey(GraphSignature *sig);
  /// Puts the copy of the staged word into its device buffer on the stream
  /// (inside a captured graph, so every replay copies that step's word) and
  /// gives the device buffer, which the launch passes.
  Status enqueueDropoutKey(cuda::CUdeviceptr *device);

private:
  std::shared_ptr<const GeneratedKernels> kernels_;
  int kernel_;
  GpuKernelCode code_;
  cuda::CUfunction function_ = nullptr;
  int64_t *errorWord_ = nullptr; // mapped pinned memory: row + 1, label
  cuda::CUdeviceptr errorWordDevice_ = 0;
  bool checksRowIndices_ = false;
  int64_t classes_ = 0;
  int64_t *dropoutKeyPinned_ = nullptr; // key, first element
  size_t dropoutKeyCapacity_ = 0;
  DeviceBuffer dropoutKeyDevice_;
};

/// What a captured graph depends on: its inputs' shapes and buffers.
struct GraphSignature {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<const void *> pointers;
  bool operator==(const GraphSignature &o) const {
    return shapes == o.shapes && pointers == o.pointers;
  }
};

/// Stream work replayed as a CUDA graph (GpuOp's, GpuSegment's): eager while
/// its signature changes from step to step, captured when a step's
/// signature equals the one the step before left, replayed while it stays.
class GraphReplay {
public:
  explicit GraphReplay(GpuDevice &device)
      : device_(device), enabled_(cudaGraphsEnabled()) {}
  ~GraphReplay() { drop(); }
  GraphReplay(const GraphReplay &) = delete;
  GraphReplay &operator=(const GraphReplay &) = delete;
  /// Runs a step whose inputs are `sig`: one cuGraphLaunch, or `enqueue`
  /// captured and launched, or `enqueue` eagerly.
  Status run(const GraphSignature &sig, const std::function<Status()> &enqueue);
  /// The signature this step left for the next (an eager step may have made
  /// buffers).
  void ran(GraphSignature after) {
    last_ = std::move(after);
    haveLast_ = true;
  }
  uint64_t launches() const { return launches_; }
  /// Whether the last run() replayed the graph already captured (its
  /// buffers and shapes were those of the capture, and still are).
  bool replayed() const { return replayed_; }

private:
  void drop();
  GpuDevice &device_;
  bool enabled_;
  GraphSignature last_, captured_;
  bool haveLast_ = false;
  cuda::CUgraphExec exec_ = nullptr;
  uint64_t launches_ = 0;
  bool replayed_ = false;
};

/// One op of a program placed on a GPU. Its inputs come from the host (fed
/// batches, variables, CPU ops' results: copied up through pinned buffers
/// each step) or from another GpuOp on the same device (read in place); the
/// outputs that host code reads are copied down through pinned buffers.
/// The first step runs eagerly, the second is captured as a CUDA graph, and
/// later steps replay it while the inputs' shapes and buffers stay the same.
class GpuOp {
public:
  GpuOp(GpuDevice &device, KernelFn fn, std::unique_ptr<GpuKernelContext> ctx);
  ~GpuOp();
  GpuKernelContext &context() { return *ctx_; }
  /// Inputs in order: a host tensor, or another GpuOp's output (a device
  /// view that outlives this op).
  void addHostInput(const Tensor *host);
  void addDeviceInput(const Tensor *device);
  /// Output k is read on the host: copied down into hostOutput(k).
  void setDownload(int k);
  Tensor *hostOutput(int k) { return &hostOutputs_[k]; }
  void setNumOutputs(int n);
  /// Launches (and graph launches) so far, for the step's count.
  uint64_t graphLaunches() const { return graph_.launches(); }

  Status run(uint64_t step, uint64_t seed);

  using Signature = GraphSignature;
  /// The pieces of run() that a GpuSegment (GpuStep.h) runs for its ops:
  /// binds the inputs as they are now (host ones staged into their pinned
  /// buffers) and appends them to `sig`; puts the op's work on the stream
  /// (copies up, kernel, copies down into pinned buffers); after the stream
  /// is synchronized, copies the downloads into the host outputs.
  Status stage(uint64_t step, uint64_t seed, Signature *sig);
  Status enqueue();
  /// enqueue() in two parts: the copies up and the kernel on the compute
  /// stream; the copies down on `stream` (a segment's copy stream).
  Status enqueueKernel();
  Status enqueueDownloads(cuda::CUstream stream);
  /// Whether the op reads the device view `view` (a segment's upload).
  bool reads(const Tensor *view) const;
  /// The op writes some input in place (an optimizer update): a copy down
  /// still reading device memory must finish first.
  void setWritesInputs() { writesInputs_ = true; }
  bool writesInputs() const { return writesInputs_; }
  bool downloads() const;
  Status finishDownloads();
  /// Whether the op's work reports a bad input through device memory (a row
  /// kernel's row-index-error word), and, after the stream is synchronized,
  /// that report as an error.
  bool reports() const;
  Status finishReports();

private:
  struct Input {
    const Tensor *host = nullptr;
    const Tensor *device = nullptr;
    DeviceBuffer buffer; // host inputs: the device copy
    void *pinned = nullptr;
    size_t pinnedCapacity = 0;
  };

  GpuDevice &device_;
  KernelFn fn_;
  std::unique_ptr<GpuKernelContext> ctx_;
  std::vector<Input> inputs_;
  std::vector<Tensor> views_; // what the kernel sees as its inputs
  std::vector<Tensor> hostOutputs_;
  std::vector<bool> download_;
  std::vector<void *> pinnedOut_;
  std::vector<size_t> pinnedOutCapacity_;
  bool writesInputs_ = false;
  GraphReplay graph_;
};

} // namespace dtf::gpu
