// The kernel interface: KernelContext (inputs, outputs, attributes) and the
// registry that maps op names ("dtf.matmul") to kernel functions.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace dtf {

class ThreadPool;

/// What names the contents of a variable that a kernel reads in place: `id`
/// is unique to the variable in its executor (process-wide), and `version`
/// changes whenever the contents may have: at the start of each step (a ps
/// pull, a restore or another executor may have written it between steps)
/// and after each op that updates it in place. The executor's schedule keeps
/// every read of a variable between two of its updates, so a kernel may keep
/// something derived from the contents (the bf16 copy of a weight, say) and
/// reuse it while `version` is the same.
struct VariableVersion {
  uint64_t id = 0;
  std::atomic<uint64_t> version{0};
};

/// An attribute of an op in a plan: the value of an MLIR attribute once the
/// plan is loaded. UnitAttrs (transpose_a, keep_dims) are bools; enums
/// (padding, predicate) are strings; dense arrays are int or float lists.
using AttrValue = std::variant<int64_t, double, bool, std::string,
                               std::vector<int64_t>, std::vector<double>>;
using AttrMap = std::map<std::string, AttrValue, std::less<>>;

/// Everything a kernel sees while it runs: its inputs, its outputs, the op's
/// attributes, an intra-op thread pool, and the step and seed of random ops.
///
/// The executor keeps one context per node: it points the inputs at its value
/// table, sets the attributes once, and calls the kernel every step. Outputs
/// stay in the context between steps, so the default allocateOutput() reuses
/// a buffer whose capacity suffices and that no other tensor shares; steady
/// state then allocates no tensor memory. Override allocateOutput() to place
/// outputs in a planned arena instead.
class KernelContext {
public:
  KernelContext() = default;
  virtual ~KernelContext() = default;

  // --- Set up by the executor -----------------------------------------------

  /// The inputs; the tensors must outlive the kernel call. Optimizer kernels
  /// update some of them in place (see mutableInput).
  void setInputs(std::vector<Tensor *> inputs) { inputs_ = std::move(inputs); }
  void setNumOutputs(int n) { outputs_.resize(n); }
  /// Per input, its variable's VariableVersion when the input is a variable
  /// read in place, else null (the default: no input is known to be one).
  void setInputVersions(std::vector<const VariableVersion *> versions) {
    versions_ = std::move(versions);
  }
  void setAttrs(AttrMap attrs) { attrs_ = std::move(attrs); }
  void setAttr(std::string name, AttrValue value) {
    attrs_[std::move(name)] = std::move(value);
  }
  void setThreadPool(ThreadPool *pool) { pool_ = pool; }
  /// The op's name, used to prefix attribute errors ("dtf.conv2d: ...").
  void setOpName(std::string name) { opName_ = std::move(name); }
  /// The global step (0 for the first) and the run's seed, for random ops.
  void setStep(uint64_t step, uint64_t seed) {
    step_ = step;
    seed_ = seed;
  }
  /// Towers: the examples of the global batch before this tower's share
  /// (`first`) and in it (`rows`, 0: not known), so that a random op draws
  /// the masks those examples get in one step of the whole batch.
  void setBatchOffset(int64_t first, int64_t rows = 0) {
    batchOffset_ = first;
    batchRows_ = rows;
  }
  std::vector<Tensor> &outputs() { return outputs_; }

  // --- Used by kernels
  // --------------------------------------------------------

  int numInputs() const { return static_cast<int>(inputs_.size()); }
  const Tensor &input(int i) const { return *inputs_[i]; }
  /// An input that the kernel updates in place (optimizer slots).
  Tensor &mutableInput(int i) { return *inputs_[i]; }
  /// Input i's variable version (setInputVersions), or null.
  const VariableVersion *inputVersion(int i) const {
    return size_t(i) < versions_.size() ? versions_[size_t(i)] : nullptr;
  }

  int numOutputs() const { return static_cast<int>(outputs_.size()); }
  Tensor &output(int i) { return outputs_[i]; }
  const Tensor &output(int i) const { return outputs_[i]; }

  /// Makes output `i` a tensor of `dtype` and `shape` and points `out` at it.
  /// Grows the outputs when `i` is past the end. The contents are
  /// uninitialized. Fails only when memory runs out.
  virtual Status allocateOutput(int i, DType dtype, std::vector<int64_t> shape,
                                Tensor **out);
  /// Makes output `i` share `value`'s buffer (reshape, in-place updates).
  void setOutput(int i, Tensor value);

  bool hasAttr(std::string_view name) const {
    return findAttr(name) != nullptr;
  }
  /// Attribute getters: the default when the attribute is absent. Numeric
  /// kinds convert (an int attribute reads as a float and a bool as an int); a
  /// value of another kind (a string for getInt) gives the default and is
  /// reported by attrError(), which callKernel() turns into the kernel's
  /// result.
  int64_t getInt(std::string_view name, int64_t dflt = 0) const;
  double getFloat(std::string_view name, double dflt = 0.0) const;
  bool getBool(std::string_view name, bool dflt = false) const;
  std::string getString(std::string_view name, std::string dflt = {}) const;
  std::vector<int64_t> getInts(std::string_view name,
                               std::vector<int64_t> dflt = {}) const;
  std::vector<double> getFloats(std::string_view name,
                                std::vector<double> dflt = {}) const;
  /// The first attribute read with the wrong kind, as an error (ok if none).
  const Status &attrError() const { return attrError_; }
  void clearAttrError() { attrError_ = Status::ok(); }

  /// The intra-op pool; may be null (run serially).
  ThreadPool *threadPool() const { return pool_; }
  uint64_t step() const { return step_; }
  uint64_t seed() const { return seed_; }
  int64_t batchOffset() const { return batchOffset_; }
  int64_t batchRows() const { return batchRows_; }
  const std::string &opName() const { return opName_; }

private:
  const AttrValue *findAttr(std::string_view name) const;
  void noteBadAttr(std::string_view name, const char *wanted) const;

  std::vector<Tensor *> inputs_;
  std::vector<const VariableVersion *> versions_;
  std::vector<Tensor> outputs_;
  AttrMap attrs_;
  std::string opName_;
  ThreadPool *pool_ = nullptr;
  uint64_t step_ = 0;
  uint64_t seed_ = 0;
  int64_t batchOffset_ = 0;
  int64_t batchRows_ = 0;
  mutable Status attrError_;
};

/// A kernel: reads ctx's inputs and attributes, writes its outputs, and
/// returns an error status (never throws) for inputs it cannot handle.
using KernelFn = Status (*)(KernelContext &);

/// Runs `fn` and reports an attribute of the wrong kind as its error.
Status callKernel(KernelFn fn, KernelContext &ctx);

/// Op name -> kernel for one device type.
class KernelRegistry {
public:
  /// Adds or replaces the kernel of `op`.
  void add(std::string op, KernelFn fn) { kernels_[std::move(op)] = fn; }
  /// The kernel of `op`, or null when there is none.
  KernelFn lookup(std::string_view op) const;
  /// Sorted op names.
  std::vector<std::string> registeredOps() const;

private:
  std::map<std::string, KernelFn, std::less<>> kernels_;
};

} // namespace dtf
