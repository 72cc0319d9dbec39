// Kernels dtfc generated (plan.proto's Kernel and Plan.cpu_object): the
// shared object loaded from memory, the CPU baseline check, and the kernel of
// the dtf.fused op that calls them over the intra-op pool. No MLIR here.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"
#include "runtime/kernels/Kernel.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dtf {

/// The C ABI of every generated CPU kernel (docs/plan-format.md):
/// `buffers` holds one pointer per "buffer" parameter, `scalars` one int64
/// per "i64" parameter, both in the plan's parameter order; the kernel
/// computes the elements [begin, end) of its iteration space, so calls on
/// disjoint ranges may run concurrently.
extern "C" {
typedef void (*GeneratedCpuFn)(void *const *buffers, const int64_t *scalars,
                               int64_t begin, int64_t end);
}

/// One parameter of a generated kernel (plan.proto's KernelParam).
struct GeneratedParam {
  enum class Kind : uint8_t { kBuffer, kI64 };
  /// How a buffer is indexed over [0, elements), or what an i64 holds.
  enum class Meaning : uint8_t {
    kSame,     // buffer: element i (the input has the iteration shape)
    kScalar,   // buffer: element 0 (one element, broadcast)
    kSuffix,   // buffer: element i mod its size (trailing dims of the shape)
    kPrefix,   // buffer: element i / divisor (the shape, trailing dims 1)
    kOutput,   // buffer: an output, element i
    kInOut,    // buffer: an input read and written at element i in place
               // (an update's variable or slot: "inout")
    kReduce,   // buffer: an output reduced over `spec`'s axes ("reduce:")
    kElements, // i64: the loop's element count: the iteration space's, or
               // the reduced outputs' in a kernel with reductions
    kReduced,  // i64: R, the elements each reduced output element sums
    kInner,    // i64: N, the elements of the dims after the reduced ones
    kRow,      // buffer: one element per row of a row kernel (the shape
               // without its last axis), input or output ("row")
    kRowIndex, // buffer: a row kernel's class index per row, i32 or i64,
               // checked against [0, C) before the call ("row-index")
    kRowSize,  // i64: C, a row kernel's row size (its last axis); a kernel
               // with it loops over rows ("row-size")
    kRowIndexError, // buffer: two i64, (row + 1, label) of a row whose
                    // row-index (input `operand`) is outside [0, C), zero
                    // when none; written by the kernel ("row-index-error")
    kDropoutKey,    // buffer: two i64 the caller fills before each run, the
                    // stream key of the step and the index of element 0 in
                    // the batch's mask (input `operand`'s shape gives it):
                    // a dropout kernel's ("dropout-key")
    kWorkspace,     // buffer, GPU only: a split column tree's counters and
                    // partial sums, which dtf-run sizes and zeroes; the last
                    // buffer, which the CPU code does not take ("workspace")
  };
  Kind kind = Kind::kBuffer;
  /// buffer: index into the op's inputs followed by its outputs.
  int operand = 0;
  Meaning meaning = Meaning::kSame;
  /// kReduce: one char per axis of the iteration shape, 'k' kept, 'r'
  /// reduced and dropped, '1' reduced and kept as size 1.
  std::string spec;
  /// kPrefix: the iteration space's elements per element of the input.
  int64_t divisor = 0;
};

/// What dtf-run needs to call one generated kernel.
struct GeneratedKernelInfo {
  std::string name;      // "dtf_fused_3", for messages
  /// The op of a kernel of one op (a row kernel's), for messages; else "".
  std::string opName;
  /// A dropout kernel's op seed (its op's `seed` attribute), for the key.
  uint64_t dropoutSeed = 0;
  std::string cpuSymbol; // in the shared object
  /// A kernel with a column reduction: its chunked entry point (empty when
  /// the plan has none; docs/plan-format.md, "Column reductions cut into
  /// chunks").
  std::string cpuColumnsSymbol;
  std::vector<GeneratedParam> params;
  std::vector<DType> inputDTypes;
  std::vector<DType> outputDTypes;
};

/// Parses a KernelParam's kind and meaning ("buffer", "suffix"); false when
/// either is unknown.
bool parseGeneratedParam(std::string_view kind, std::string_view meaning,
                         int operand, GeneratedParam *out);

/// The shapes and counts of one launch of a generated kernel, the same for
/// the CPU and the GPU (docs/plan-format.md).
struct FusedLaunch {
  std::vector<int64_t> shape;                     // the iteration shape
  std::vector<std::vector<int64_t>> outputShapes; // in output order
  std::vector<int64_t> scalars; // each i64 parameter's value, in order
  int64_t elements = 0;         // the loop's element count (grid source)
  int64_t reduced = 1;          // R: 1 in a kernel without reductions
                                // (a row kernel: C, a row's elements)
  int64_t inner = 1;            // N: the elements after the reduced run
};

/// Whether `info` is a row kernel (an i64 "row-size" parameter).
bool isRowKernel(const GeneratedKernelInfo &info);

/// The launch of `info` on inputs of `inputShapes`: the iteration shape is
/// the inputs broadcast together (NumPy's rule); an output is in that shape,
/// or reduced over its spec's axes (a contiguous run: the shape viewed as
/// [O, R, N], elements = O * N). A row kernel's iteration shape is that of
/// its inputs in the shape (its "row"/"row-index" inputs must be that shape
/// without its last axis); elements is its row count. Fails with a message
/// naming the kernel when the inputs do not broadcast or a spec does not fit
/// the shape.
Status fusedLaunchOf(const GeneratedKernelInfo &info,
                     const std::vector<std::vector<int64_t>> &inputShapes,
                     FusedLaunch *out);

/// The generated CPU kernels of one plan: its shared object, written to an
/// anonymous memory file (memfd_create) and dlopened from /proc/self/fd/N,
/// so nothing touches the disk. Unloaded when destroyed.
class GeneratedKernels {
public:
  /// Loads `object` and looks up each kernel's cpuSymbol. Fails with a
  /// precise message when the object is not a loadable shared object for
  /// this machine or lacks a symbol.
  static Status load(std::string_view object,
                     std::vector<GeneratedKernelInfo> kernels,
                     std::unique_ptr<GeneratedKernels> *out);
  ~GeneratedKernels();
  GeneratedKernels(const GeneratedKernels &) = delete;
  GeneratedKernels &operator=(const GeneratedKernels &) = delete;

  int size() const { return static_cast<int>(kernels_.size()); }
  const GeneratedKernelInfo &info(int k) const { return kernels_[k]; }
  GeneratedCpuFn function(int k) const { return functions_[k]; }
  /// Kernel k's chunked column entry point; null when it has none.
  GeneratedCpuFn columnsFunction(int k) const { return columnsFunctions_[k]; }

private:
  GeneratedKernels() = default;
  void *handle_ = nullptr;
  int fd_ = -1; // the memory file, open while loaded
  std::vector<GeneratedKernelInfo> kernels_;
  std::vector<GeneratedCpuFn> functions_;
  std::vector<GeneratedCpuFn> columnsFunctions_;
};

/// Whether this CPU runs code compiled for the baseline `target` (a clang
/// -march name: "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"); when not,
/// `why` says which feature is missing or that the target is unknown.
bool cpuSupportsTarget(std::string_view target, std::string *why);

/// The context of a dtf.fused node: the loaded kernels and which one it runs.
class FusedKernelContext : public KernelContext {
public:
  FusedKernelContext(std::shared_ptr<const GeneratedKernels> kernels,
                     int kernel)
      : kernels_(std::move(kernels)), kernel_(kernel) {}
  const GeneratedKernels *kernels() const { return kernels_.get(); }
  int kernel() const { return kernel_; }
  /// The partial rows of a column reduction cut into chunks: kept between
  /// steps, so a step allocates nothing once it has the size it needs.
  std::vector<double> &partials() { return partials_; }

private:
  std::shared_ptr<const GeneratedKernels> kernels_;
  int kernel_;
  std::vector<double> partials_;
};

/// Checks a row kernel's "row-index" input (class indices) against
/// [0, classes): the first one outside is the error, worded as the op-by-op
/// sparse cross-entropy kernels word it.
Status checkRowIndices(const GeneratedKernelInfo &info, const Tensor &labels,
                       int64_t classes);

/// The error of a row kernel's "row-index-error" word as the kernel left it
/// ({row + 1, label}; {0, ...}: no bad label), worded as checkRowIndices
/// words it.
Status rowIndexErrorOf(const GeneratedKernelInfo &info, const int64_t word[2],
                       int64_t classes);

/// Whether `info` has a "row-index-error" parameter.
bool reportsRowIndexErrors(const GeneratedKernelInfo &info);

/// Whether `info` is a dropout kernel (a "dropout-key" parameter).
bool isDropoutKernel(const GeneratedKernelInfo &info);

/// A dropout kernel's "dropout-key" word for one run: the stream key of
/// (run seed, the op's seed, step) and the index of element 0 of an input
/// of `shape` in the whole batch's mask (a tower's share: `rows` examples
/// from `first` on), as the op-by-op kernel computes them (DropoutMask.h).
void dropoutKeyWord(const GeneratedKernelInfo &info, uint64_t step,
                    uint64_t seed, const std::vector<int64_t> &shape,
                    int64_t first, int64_t rows, int64_t word[2]);

/// The dtf.fused op: checks its inputs against the kernel's parameters,
/// allocates the outputs in the iteration shape (the inputs broadcast
/// together) and calls the kernel over [0, elements), split over the
/// context's intra-op pool. Needs a FusedKernelContext.
Status fusedKernel(KernelContext &ctx);

} // namespace dtf
