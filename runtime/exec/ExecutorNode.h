// The executor's records, shared by its files (not part of its interface):
// one Node per op that runs, the state of a concurrent step, and what a
// program's load carries from op to op.
#pragma once

#include "runtime/device/DeviceOp.h"
#include "runtime/device/cpu/CpuDevice.h"
#include "runtime/device/cpu/CpuOp.h"
#include "runtime/exec/Executor.h"

#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtf::exec {

enum class NodeKind : uint8_t {
  kAssignAdd,
  kKernel,
  kSend,
  kRecv,
  kLookup,
  kDynamicRows,
  kGpu,
  kSkipUpdates // dtf.skip_updates_unless
};

// Room for outputs a kernel makes beyond those the plan declares (the norm of
// global_norm_clip, say) without moving the others.
using device::kSpareOutputs;

struct Executor::Node {
  NodeKind kind = NodeKind::kKernel;
  // The op's context (inputs, attributes, outputs). A CPU kernel's belongs
  // to its op on the host device (cpuOp), the other kinds' to the node.
  KernelContext *ctx = nullptr;
  std::unique_ptr<KernelContext> ownContext;
  // kKernel: the op as the host device made it (device/cpu): its kernel
  // called with ctx, one indirect call per op, as before the device layer.
  std::unique_ptr<device::CpuOp> cpuOp;
  // The plan's input and output values (dense indices) of this op.
  std::vector<int> inputs;
  std::vector<int> outputs;
  // How many leading inputs it updates in place (plan::updatedOperands).
  int updated = 0;
  // An optimizer update that the program's dtf.skip_updates_unless guards:
  // it waits for that node and does not run when the step is skipped.
  bool guarded = false;
  // Whether an output may share an input's buffer (reshape; an update's
  // output 0 is its variable): the schedule then treats readers of the
  // output as readers of the input's variable.
  bool mayAlias = false;
  // The inter-op schedule: the nodes that wait for this one, and how many
  // this one waits for.
  std::vector<int> successors;
  int numPredecessors = 0;
  // dtf.send and dtf.recv: the rendezvous key and the other stage.
  std::string key;
  int peer = -1;
  // kDynamicRows, kLookup: whether it makes rows of a dynamic table
  // (training) or only reads them.
  bool create = false;
  // kGpu: the op as it runs on its device (device views; host copies of the
  // outputs that host code reads).
  std::unique_ptr<device::DeviceOp> gpuOp;
  int gpu = -1;
  // Its device graph (consecutive GPU ops of one device, run together when
  // its first node runs).
  int segment = -1;
  bool segmentHead = false;
  // dtf.assign_add: the variable and the value added.
  Tensor *var = nullptr;
  const Tensor *addend = nullptr;
  // The outputs vector's buffer at load: if a kernel grows its outputs past
  // the reserve, the pointers in slots_ would dangle.
  const Tensor *outputsBase = nullptr;
  bool aliasesInput = false;
  // With options.profile: the time spent in this op over all runs.
  double seconds = 0;
  uint64_t calls = 0;
  // "model.dtf:12:9: dtf.matmul", for messages.
  std::string where;
  // "model.dtf:12:9" (or "train_step op #12"), and "dtf.matmul".
  std::string location;
  std::string opName;
};

// The run-time state of a concurrent step, under `mutex`. Sized at load so
// that a step allocates nothing.
struct Executor::Schedule {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<int> ready;   // nodes whose predecessors are done
  std::vector<int> pending; // per node: predecessors not yet done
  size_t remaining = 0;     // nodes not yet done this step
  int running = 0;
  int waiting = 0;
  bool failed = false;
  Status error; // the first error of the step
  uint64_t step = 0;
};

// What loading a program carries from op to op (ProgramLoader.cpp).
struct Executor::Loading {
  const plan::Program &program;
  VariableStore &variables;
  const KernelRegistry &kernels;
  // Plan value id -> dense value index.
  std::unordered_map<int32_t, int> index;
  // Per variable tensor: its number, in order of first read.
  std::unordered_map<const Tensor *, int> variableIndex;
  // Ops without a CPU kernel: each op name once, at its first use.
  std::vector<std::string> missing;
  std::set<std::string> missingOps;
  int slot(int32_t id) const { return index.at(id); }
};

// DTF_GPU_RESIDENT_VARIABLES=0: every variable stays on the host.
bool residentVariablesOff();
/// DTF_GPU_SYNC_FETCH=1: every step waits for its GPU fetches (no late
/// read).
bool syncFetchForced();

// The GPU index `device` names (0 for "GPU:*"), or -1 for no GPU.
int gpuIndexOf(const std::string &device);

} // namespace dtf::exec
