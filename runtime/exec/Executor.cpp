// Executor: loading a program into kernel contexts and running it each step.
#include "runtime/exec/Executor.h"
#include "runtime/exec/Rendezvous.h"

#include "schema/DeviceName.h"
#include "runtime/core/ThreadPool.h"
#include "runtime/gpu/GpuDevice.h"
#include "runtime/gpu/GpuStep.h"
#include "runtime/plan/FusedKernels.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <unordered_map>

namespace dtf::exec {

enum class NodeKind : uint8_t {
  kAssignAdd,
  kKernel,
  kSend,
  kRecv,
  kLookup,
  kDynamicRows,
  kGpu
};

struct Executor::Node {
  NodeKind kind = NodeKind::kKernel;
  KernelFn fn = nullptr;
  std::unique_ptr<KernelContext> ctx;
  // The plan's input and output values (dense indices) of this op.
  std::vector<int> inputs;
  std::vector<int> outputs;
  // How many leading inputs it updates in place (plan::updatedOperands).
  int updated = 0;
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
  // kGpu: the op as it runs on its GPU (device views; host copies of the
  // outputs that host code reads).
  std::unique_ptr<gpu::GpuOp> gpuOp;
  int gpu = -1;
  // Its GPU segment (consecutive GPU ops of one device, run together when
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

namespace {
// DTF_GPU_RESIDENT_VARIABLES=0: every variable stays on the host.
bool residentVariablesOff() {
  const char *env = std::getenv("DTF_GPU_RESIDENT_VARIABLES");
  return env && std::string_view(env) == "0";
}
} // namespace

namespace {

// Room for outputs a kernel makes beyond those the plan declares (the norm of
// global_norm_clip, say) without moving the others.
constexpr int kSpareOutputs = 8;

// The attributes a kernel needs that its inputs do not determine, derived
// from the op's declared result type when the plan leaves them out (see
// runtime/kernels/README.md, "Attributes").
const char *derivedShapeAttr(std::string_view op, int numInputs) {
  if ((op == "dtf.reshape" || op == "dtf.broadcast_to") && numInputs < 2)
    return "out_shape";
  if (op == "dtf.conv2d_backprop_input")
    return "input_shape";
  if (op == "dtf.conv2d_backprop_filter")
    return "filter_shape";
  if (op == "dtf.gather_grad")
    return "params_shape";
  return nullptr;
}

bool takesOutDType(std::string_view op) {
  return op == "dtf.cast" || op == "dtf.argmax" || op == "dtf.one_hot";
}

template <typename T> void addInPlace(Tensor &var, const Tensor &value) {
  T *v = var.data<T>();
  const T *a = value.data<T>();
  const int64_t n = var.numElements();
  if (value.numElements() == 1) {
    const T x = a[0];
    for (int64_t i = 0; i < n; ++i)
      v[i] += x;
  } else {
    for (int64_t i = 0; i < n; ++i)
      v[i] += a[i];
  }
}

Status assignAdd(Tensor &var, const Tensor &value) {
  if (value.dtype() != var.dtype() ||
      (value.numElements() != 1 && value.shape() != var.shape()))
    return errorStatus("dtf.assign_add cannot add ", value.describe(),
                       " to a variable of type ", var.describe());
  switch (var.dtype()) {
  case DType::F32:
    addInPlace<float>(var, value);
    return Status::ok();
  case DType::F64:
    addInPlace<double>(var, value);
    return Status::ok();
  case DType::I32:
    addInPlace<int32_t>(var, value);
    return Status::ok();
  case DType::I64:
    addInPlace<int64_t>(var, value);
    return Status::ok();
  default:
    return errorStatus(
        "dtf.assign_add supports f32, f64, i32 and i64 variables, "
        "got ",
        var.describe());
  }
}

// The GPU index `device` names (0 for "GPU:*"), or -1 for no GPU.
int gpuIndexOf(const std::string &device) {
  DeviceNameParse parsed = parseDeviceName(device);
  if (!parsed.name || parsed.name->type != DeviceType::GPU)
    return -1;
  return parsed.name->index.value_or(0);
}

// True when `device` names a device a dtf-run process does not have: a GPU
// (see gpuIndexOf for those), or a CPU other than CPU:0. Job,
// replica and task parts say which task runs the op, which the cluster
// placement settles before the executor sees the program.
bool lacksDevice(const std::string &device) {
  DeviceNameParse parsed = parseDeviceName(device);
  if (!parsed.name)
    return true; // dtfc checks the spelling; an unreadable name is no device
  const DeviceName &d = *parsed.name;
  if (d.type == DeviceType::GPU)
    return true;
  return d.type == DeviceType::CPU && d.index && *d.index != 0;
}

} // namespace

Status toKernelAttr(const plan::AttrValue &value, AttrValue *out) {
  switch (value.value_case()) {
  case plan::AttrValue::kI:
    *out = int64_t(value.i());
    return Status::ok();
  case plan::AttrValue::kF:
    *out = value.f();
    return Status::ok();
  case plan::AttrValue::kB:
    *out = value.b();
    return Status::ok();
  case plan::AttrValue::kS:
    *out = value.s();
    return Status::ok();
  case plan::AttrValue::kInts:
    *out = std::vector<int64_t>(value.ints().values().begin(),
                                value.ints().values().end());
    return Status::ok();
  case plan::AttrValue::kFloats:
    *out = std::vector<double>(value.floats().values().begin(),
                               value.floats().values().end());
    return Status::ok();
  case plan::AttrValue::kTensor:
    return errorStatus("is a tensor, which only dtf.constant takes");
  case plan::AttrValue::VALUE_NOT_SET:
    break;
  }
  return errorStatus("has no value");
}

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

void applySessionOptions(const plan::Plan &plan, ExecutorOptions *options) {
  options->softPlacement = plan.session().soft_placement();
  options->logDevicePlacement = plan.session().log_device_placement();
  options->variableDevices.clear();
  for (const plan::Variable &v : plan.variables())
    if (!v.device().empty())
      options->variableDevices.emplace(v.name(), v.device());
  options->planKernels = planKernelsOf(plan);
}

Executor::Executor() : schedule_(std::make_unique<Schedule>()) {}
Executor::~Executor() {
  for (size_t i = 0; i < deviceFetchKept_.size(); ++i)
    if (deviceFetchKept_[i].first) {
      auto it = gpus_.find(deviceFetchGpu_[i]);
      if (it != gpus_.end() && it->second->makeCurrent().isOk())
        (void)it->second->driver().cuMemFree(
            gpu::cuda::CUdeviceptr(deviceFetchKept_[i].first));
    }
  for (auto &[host, r] : resident_)
    if (r.ptr && !r.shared) {
      auto it = gpus_.find(r.gpu);
      if (it != gpus_.end() && it->second->makeCurrent().isOk())
        (void)it->second->driver().cuMemFree(r.ptr);
    }
}

Status Executor::create(const plan::Program &program, VariableStore &variables,
                        const KernelRegistry &kernels,
                        const ExecutorOptions &options,
                        std::unique_ptr<Executor> *out) {
  std::unique_ptr<Executor> e(new Executor());
  e->options_ = options;
  if (plan::hasFusedOps(program) &&
      (!options.planKernels || !options.planKernels->loaded)) {
    if (!options.planKernels)
      return errorStatus(options.programName,
                         ": the program runs generated kernels (dtf.fused), "
                         "but the executor was given none");
    // The op-by-op path: each fused region's ops, one kernel each.
    plan::Program expanded = program;
    DTF_RETURN_IF_ERROR(
        plan::expandFusedOps(options.planKernels->kernels, &expanded));
    DTF_RETURN_IF_ERROR(e->build(expanded, variables, kernels));
    *out = std::move(e);
    return Status::ok();
  }
  // dtf-fuse makes, for ops placed on a GPU only (they have no other GPU
  // kernel), regions of one op and regions with a column reduction even by
  // default. Where such a region runs on the CPU (no GPU here, or no GPU
  // code), its ops' library kernels are as fast or faster (a column
  // reduction's generated CPU loop is not vectorized yet): run it op by op.
  auto gpuRegionOnCpu = [&](const plan::Op &op) {
    auto k = op.attrs().find("kernel");
    const auto &pk = *options.planKernels;
    if (k == op.attrs().end() || k->second.i() < 0 ||
        k->second.i() >= pk.kernels.size() || plan::updatedOperands(op) > 0)
      return false; // an update region is made for the CPU too
    const int gpu = gpuIndexOf(e->placedDevice(op));
    std::string why;
    if (gpu < 0 || (e->gpuAvailable(gpu + options.gpuOffset, &why) &&
                    e->fusedGpuCodeMissing(op).empty()))
      return false;
    const plan::Kernel &kernel = pk.kernels[int(k->second.i())];
    bool column = false;
    for (const plan::KernelParam &p : kernel.params())
      column |=
          p.meaning().rfind("reduce:", 0) == 0 && p.meaning().back() == 'k';
    return kernel.body_size() == 1 || column;
  };
  if (plan::hasFusedOps(program)) {
    bool any = false;
    for (const plan::Op &op : program.ops())
      any |= op.name() == "dtf.fused" && gpuRegionOnCpu(op);
    if (any) {
      plan::Program expanded = program;
      DTF_RETURN_IF_ERROR(plan::expandFusedOps(options.planKernels->kernels,
                                               &expanded, gpuRegionOnCpu));
      DTF_RETURN_IF_ERROR(e->build(expanded, variables, kernels));
      *out = std::move(e);
      return Status::ok();
    }
  }
  DTF_RETURN_IF_ERROR(e->build(program, variables, kernels));
  *out = std::move(e);
  return Status::ok();
}

Status Executor::build(const plan::Program &program, VariableStore &variables,
                       const KernelRegistry &kernels) {
  const std::string &what = options_.programName;
  DTF_RETURN_IF_ERROR(plan::validateProgram(program, what));
  DTF_RETURN_IF_ERROR(place(program));

  const int numValues = program.values_size();
  std::unordered_map<int32_t, int> index;
  index.reserve(numValues);
  slots_.assign(numValues, nullptr);
  valueDTypes_.resize(numValues);
  valueDims_.resize(numValues);
  valueIds_.resize(numValues);
  valueVariable_.assign(numValues, -1);
  std::unordered_map<const Tensor *, int> variableIndex;
  for (int v = 0; v < numValues; ++v) {
    const plan::Value &value = program.values(v);
    index.emplace(value.id(), v);
    valueIds_[v] = value.id();
    (void)plan::toDType(value.type().dtype(), &valueDTypes_[v]);
    valueDims_[v] = plan::dimsOf(value.type().shape());
  }
  auto infoOf = [&](const std::string &name, int v) {
    return TensorSlotInfo{name, valueDTypes_[v], valueDims_[v]};
  };

  // Feeds: the plan's, then every dtf.input it does not list.
  std::set<int> fedValues;
  for (const plan::Feed &feed : program.feeds()) {
    int v = index.at(feed.value());
    feeds_.push_back({infoOf(feed.name(), v), v});
    fedValues.insert(v);
  }
  for (int i = 0; i < program.ops_size(); ++i) {
    const plan::Op &op = program.ops(i);
    if (op.name() != "dtf.input")
      continue;
    int v = index.at(op.outputs(0));
    if (fedValues.count(v))
      continue;
    const std::string &name = op.attrs().at("name").s();
    if (findFeed(name) >= 0)
      return errorStatus(what, ": ", plan::describeOp(program, i),
                         " is input '", plan::printable(name),
                         "', but another value is fed under that name");
    feeds_.push_back({infoOf(name, v), v});
    fedValues.insert(v);
  }
  feedTensors_.resize(feeds_.size());
  for (size_t k = 0; k < feeds_.size(); ++k) {
    slots_[feeds_[k].value] = &feedTensors_[k];
    if (options_.deviceFeeds.count(feeds_[k].info.name) &&
        !options_.sharedResident.empty())
      deviceFeedViews_[feeds_[k].value] = Tensor();
  }

  std::vector<std::string> missing;
  std::set<std::string> missingOps;
  for (int i = 0; i < program.ops_size(); ++i) {
    const plan::Op &op = program.ops(i);
    // Run-time messages lead with the source location; without one, the
    // program and the op's index say where.
    const std::string where = op.location().empty()
                                  ? what + " " + plan::describeOp(program, i)
                                  : plan::describeOp(program, i);
    auto fail = [&](const auto &...args) {
      return errorStatus(what, ": ", plan::describeOp(program, i), ": ",
                         args...);
    };
    if (op.name() == "dtf.input")
      continue; // its value is a feed
    if (op.name() == "dtf.constant") {
      int v = index.at(op.outputs(0));
      Tensor t;
      Status s = plan::tensorFromValue(op.attrs().at("value").tensor(), &t);
      if (!s.isOk())
        return fail(s.message());
      constants_.push_back(std::move(t));
      slots_[v] = &constants_.back();
      continue;
    }
    if (op.name() == "dtf.read_variable") {
      int v = index.at(op.outputs(0));
      const std::string &name = op.attrs().at("name").s();
      Tensor *var = variables.find(name);
      if (!var)
        return fail("variable '", plan::printable(name),
                    "' does not exist (were the variables initialized?)");
      if (var->dtype() != valueDTypes_[v] || var->shape() != valueDims_[v])
        return fail("variable '", plan::printable(name), "' is ",
                    var->describe(), ", but the plan reads it as ",
                    plan::typeString(valueDTypes_[v], valueDims_[v]));
      slots_[v] = var; // an alias: updates in place are seen by every reader
      if (auto r = residentNames_.find(name);
          r != residentNames_.end() && !resident_.count(var)) {
        Resident &res = resident_[var];
        res.host = var;
        res.gpu = r->second;
        res.bytes = size_t(var->numElements()) * dtypeSize(var->dtype());
        res.name = name;
        if (auto sh = options_.sharedResident.find(name);
            sh != options_.sharedResident.end() &&
            sh->second.first == res.gpu) {
          res.shared = true; // tower 0's copy: it uploads and downloads it
          res.ptr = gpu::cuda::CUdeviceptr(sh->second.second);
        }
      }
      valueVariable_[v] =
          variableIndex.emplace(var, int(variableIndex.size())).first->second;
      continue;
    }

    Node node;
    node.where = where;
    node.location = op.location().empty() ? strCat(what, " op #", i)
                                          : plan::printable(op.location());
    node.opName = plan::printable(op.name());
    for (int32_t id : op.inputs())
      node.inputs.push_back(index.at(id));
    for (int32_t id : op.outputs())
      node.outputs.push_back(index.at(id));
    node.updated = plan::updatedOperands(op);
    node.mayAlias = op.name() == "dtf.reshape" || node.updated > 0;
    if (op.name() == "dtf.assign_add") {
      node.kind = NodeKind::kAssignAdd;
      node.var = slots_[index.at(op.inputs(0))];
      node.addend = slots_[index.at(op.inputs(1))];
      const int a = index.at(op.inputs(0)), b = index.at(op.inputs(1));
      if (valueDTypes_[a] != valueDTypes_[b])
        return fail("adds a value of type ",
                    plan::typeString(valueDTypes_[b], valueDims_[b]),
                    " to a variable of type ",
                    plan::typeString(valueDTypes_[a], valueDims_[a]));
      if (!node.outputs.empty())
        slots_[node.outputs[0]] = node.var;
      nodes_.push_back(std::move(node));
      continue;
    }

    if (op.name() == "dtf.send" || op.name() == "dtf.recv") {
      const bool send = op.name() == "dtf.send";
      auto key = op.attrs().find("key");
      auto peer = op.attrs().find("peer");
      if (key == op.attrs().end() || peer == op.attrs().end() ||
          op.inputs_size() != (send ? 1 : 0) ||
          op.outputs_size() != (send ? 0 : 1))
        return fail("a ", op.name(), " takes a key and a peer, and ",
                    send ? "one input and no result"
                         : "no input and one result");
      if (!options_.rendezvous)
        return fail("this program is one stage of a model-parallel replica; it "
                    "runs only in a cluster, with its other stages");
      node.kind = send ? NodeKind::kSend : NodeKind::kRecv;
      node.key = key->second.s();
      node.peer = int(peer->second.i());
      node.ctx = std::make_unique<KernelContext>();
      node.ctx->setOpName(op.name());
      if (send) {
        node.ctx->setInputs({slots_[index.at(op.inputs(0))]});
      } else {
        node.ctx->outputs().reserve(1 + kSpareOutputs);
        node.ctx->setNumOutputs(1);
        slots_[node.outputs[0]] = &node.ctx->outputs()[0];
        node.outputsBase = node.ctx->outputs().data();
      }
      hasRecv_ |= !send;
      nodes_.push_back(std::move(node));
      continue;
    }

    // dtf.ps_gather (rows of a table on the ps) and dtf.dynamic_rows (rows
    // of a dynamic table): ids in, one result, served by an interface.
    if (op.name() == "dtf.ps_gather" || op.name() == "dtf.dynamic_rows") {
      const bool lookup = op.name() == "dtf.ps_gather";
      auto name = op.attrs().find(lookup ? "variable" : "table");
      if (name == op.attrs().end() || op.inputs_size() != 1 ||
          op.outputs_size() != 1)
        return fail("a ", op.name(), " takes a ", lookup ? "variable" : "table",
                    ", one input (the ids) and one result");
      if (lookup && !options_.rowLookup)
        return fail("this program looks up rows of '",
                    plan::printable(name->second.s()),
                    "' on its ps; it runs only in a between-graph cluster");
      if (!lookup && !options_.dynamicRows)
        return fail("this program looks up rows of the dynamic table '",
                    plan::printable(name->second.s()),
                    "', which this process does not hold");
      node.kind = lookup ? NodeKind::kLookup : NodeKind::kDynamicRows;
      node.key = name->second.s();
      auto create = op.attrs().find("create");
      node.create = create != op.attrs().end() && create->second.b();
      node.ctx = std::make_unique<KernelContext>();
      node.ctx->setOpName(op.name());
      node.ctx->setInputs({slots_[index.at(op.inputs(0))]});
      node.ctx->outputs().reserve(1 + kSpareOutputs);
      node.ctx->setNumOutputs(1);
      slots_[node.outputs[0]] = &node.ctx->outputs()[0];
      node.outputsBase = node.ctx->outputs().data();
      nodes_.push_back(std::move(node));
      continue;
    }

    if (opGpu_[size_t(i)] >= 0) {
      DTF_RETURN_IF_ERROR(buildGpuNode(op, opGpu_[size_t(i)], &node));
      nodes_.push_back(std::move(node));
      continue;
    }
    node.kind = NodeKind::kKernel;
    node.fn = kernels.lookup(op.name());
    if (!node.fn) {
      // Each op once, at its first use.
      if (missingOps.insert(op.name()).second)
        missing.push_back(plan::describeOp(program, i));
      continue;
    }
    std::unique_ptr<KernelContext> ctx;
    if (op.name() == "dtf.fused")
      ctx = std::make_unique<FusedKernelContext>(
          options_.planKernels->loaded, int(op.attrs().at("kernel").i()));
    else
      ctx = std::make_unique<KernelContext>();
    ctx->setOpName(op.name());
    std::vector<Tensor *> inputs;
    inputs.reserve(op.inputs_size());
    for (int32_t id : op.inputs())
      inputs.push_back(slots_[index.at(id)]);
    ctx->setInputs(std::move(inputs));
    AttrMap attrs;
    Status s = kernelAttrs(op, node, &attrs);
    if (!s.isOk())
      return fail(s.message());
    ctx->setAttrs(std::move(attrs));
    ctx->setThreadPool(options_.intraOpPool);
    ctx->outputs().reserve(node.outputs.size() + kSpareOutputs);
    ctx->setNumOutputs(static_cast<int>(node.outputs.size()));
    for (size_t k = 0; k < node.outputs.size(); ++k)
      slots_[node.outputs[k]] = &ctx->outputs()[k];
    node.outputsBase = ctx->outputs().data();
    node.ctx = std::move(ctx);
    nodes_.push_back(std::move(node));
  }
  if (!missing.empty()) {
    std::string list;
    for (const std::string &m : missing)
      list += "\n  " + m;
    return errorStatus(
        what, ": this dtf-run has no CPU kernel for ",
        missingOps.size() == 1 ? "this op:" : "these ops:", list);
  }

  for (const plan::Fetch &fetch : program.fetches()) {
    int v = index.at(fetch.value());
    fetches_.push_back({infoOf(fetch.name(), v), v});
  }
  deviceFetch_.assign(fetches_.size(), nullptr);
  deviceFetchGpu_.assign(fetches_.size(), -1);
  deviceFetchNow_.assign(fetches_.size(), Tensor());
  deviceFetchKept_.assign(fetches_.size(), {0, 0});
  // A constant that a GPU op reads (a learning rate, a scale) is uploaded
  // once, before the first run (with the resident variables, if any): it
  // never changes.
  std::set<const Tensor *> constants;
  for (const Tensor &t : constants_)
    constants.insert(&t);
  for (const Node &node : nodes_)
    if (node.kind == NodeKind::kGpu && !residentVariablesOff())
      for (int v : node.inputs)
        if (constants.count(slots_[v]) && !resident_.count(slots_[v])) {
          Resident &res = resident_[slots_[v]];
          res.host = slots_[v];
          res.gpu = node.gpu;
          res.bytes =
              size_t(res.host->numElements()) * dtypeSize(res.host->dtype());
          res.constant = true;
        }
  for (auto &[host, r] : resident_) {
    // The device copy of a resident variable: its own allocation, outside
    // the arena (whose buffers move and lose their contents).
    auto g = gpus_.find(r.gpu);
    if (g == gpus_.end())
      return errorStatus(what, ": variable resident on GPU ", r.gpu,
                         ", which runs none of its ops");
    DTF_RETURN_IF_ERROR(g->second->makeCurrent());
    if (!r.shared)
      DTF_RETURN_IF_ERROR(
          g->second->check("cuMemAlloc (a resident variable)",
                           g->second->driver().cuMemAlloc(
                               &r.ptr, std::max<size_t>(r.bytes, 1))));
    r.view = Tensor::view(host->dtype(), host->shape(),
                          reinterpret_cast<void *>(uintptr_t(r.ptr)));
  }
  if (options_.log && !resident_.empty()) {
    std::set<int> gpus;
    size_t variables = 0;
    for (const auto &[host, r] : resident_) {
      gpus.insert(r.gpu);
      variables += !r.constant;
    }
    std::string names;
    for (int g : gpus)
      names += (names.empty() ? "" : ", ") + gpu::gpuDeviceName(g);
    std::fprintf(options_.log,
                 "%s: %zu variables and slots stay on %s between steps (their "
                 "readers and updates run there), with %zu constants\n",
                 what.c_str(), variables, names.c_str(),
                 resident_.size() - variables);
  }
  if (hasGpu_)
    wireGpuNodes();
  numVariables_ = static_cast<int>(variableIndex.size());
  planSchedule();
  return Status::ok();
}

Status Executor::kernelAttrs(const plan::Op &op, const Node &node,
                             AttrMap *attrs) const {
  for (const auto &[name, value] : op.attrs()) {
    AttrValue converted;
    Status s = toKernelAttr(value, &converted);
    if (!s.isOk())
      return errorStatus("attribute '", plan::printable(name), "' ",
                         s.message());
    attrs->emplace(name, std::move(converted));
  }
  if (!node.outputs.empty()) {
    const int v = node.outputs[0];
    if (const char *attr = derivedShapeAttr(op.name(), op.inputs_size()))
      if (!attrs->count(attr))
        attrs->emplace(attr, valueDims_[v]);
    if (takesOutDType(op.name()) && !attrs->count("out_dtype"))
      attrs->emplace("out_dtype", std::string(dtypeName(valueDTypes_[v])));
  }
  return Status::ok();
}

// A node that runs `op` on GPU `index`; its inputs are wired once every node
// exists (wireGpuNodes).
Status Executor::buildGpuNode(const plan::Op &op, int index, Node *node) {
  std::unique_ptr<gpu::GpuDevice> &device = gpus_[index];
  if (!device) {
    gpu::CudaDriver *driver = gpu::processDriver(nullptr);
    Status s = driver ? gpu::GpuDevice::create(*driver, index, &device)
                      : errorStatus("the CUDA driver went away");
    if (!s.isOk())
      return errorStatus(options_.programName, ": ", node->where, ": ",
                         s.message());
  }
  node->kind = NodeKind::kGpu;
  node->gpu = index;
  node->fn = gpu::gpuKernelRegistry().lookup(op.name());
  std::unique_ptr<gpu::GpuKernelContext> ctx;
  if (op.name() == "dtf.fused") {
    const int k = int(op.attrs().at("kernel").i());
    ctx = std::make_unique<gpu::GpuFusedContext>(
        *device, options_.planKernels->loaded, k,
        options_.planKernels->gpu[size_t(k)]);
  } else {
    ctx = std::make_unique<gpu::GpuKernelContext>(*device);
  }
  ctx->setOpName(op.name());
  AttrMap attrs;
  Status s = kernelAttrs(op, *node, &attrs);
  if (!s.isOk())
    return errorStatus(options_.programName, ": ", node->where, ": ",
                       s.message());
  ctx->setAttrs(std::move(attrs));
  node->gpuOp = std::make_unique<gpu::GpuOp>(*device, node->fn, std::move(ctx));
  node->gpuOp->setNumOutputs(static_cast<int>(node->outputs.size()));
  for (size_t k = 0; k < node->outputs.size(); ++k)
    slots_[node->outputs[k]] = node->gpuOp->hostOutput(int(k));
  hasGpu_ = true;
  return Status::ok();
}

// Consecutive GPU ops on one device form a segment that runs as one unit.
// A GPU op reads another GPU op's result on the same device in place, and
// everything else from the host through its segment (copied up once per
// step); its results that a CPU op, another device or a fetch reads are
// copied down.
void Executor::wireGpuNodes() {
  std::unordered_map<int, std::pair<int, int>> producer; // value -> node, k
  for (size_t n = 0; n < nodes_.size(); ++n) {
    Node &node = nodes_[n];
    if (node.kind != NodeKind::kGpu)
      continue;
    for (size_t k = 0; k < node.outputs.size(); ++k)
      producer[node.outputs[k]] = {int(n), int(k)};
    const bool continues = n > 0 && nodes_[n - 1].kind == NodeKind::kGpu &&
                           nodes_[n - 1].gpu == node.gpu;
    if (!continues) {
      segments_.push_back(
          std::make_unique<gpu::GpuSegment>(*gpus_.at(node.gpu)));
      segmentNodes_.emplace_back();
      node.segmentHead = true;
    }
    node.segment = int(segments_.size()) - 1;
    if (node.updated > 0) // copies down on the copy stream finish first
      node.gpuOp->setWritesInputs();
    segments_.back()->add(node.gpuOp.get());
    segmentNodes_.back().push_back(int(n));
  }
  std::set<int> readOnHost;
  for (size_t i = 0; i < fetches_.size(); ++i) {
    const Slot &f = fetches_[i];
    auto p = producer.find(f.value);
    if (p != producer.end() && options_.deviceFetches.count(f.info.name)) {
      // Kept on its GPU (unless a CPU op reads it too, below).
      const Node &made = nodes_[size_t(p->second.first)];
      deviceFetch_[i] = &made.gpuOp->context().output(p->second.second);
      deviceFetchGpu_[i] = made.gpu;
      continue;
    }
    readOnHost.insert(f.value);
  }
  // Host values already on a GPU this step (GPU, value -> device copy): a
  // later segment on that GPU reads the copy until an op updates a
  // variable in place (every other value is written once per step).
  std::map<std::pair<int, int>, const Tensor *> uploaded;
  for (Node &node : nodes_) {
    if (node.updated > 0 || node.kind == NodeKind::kAssignAdd)
      uploaded.clear();
    for (int v : node.inputs) {
      auto p = producer.find(v);
      const bool onDevice = p != producer.end() &&
                            node.kind == NodeKind::kGpu &&
                            nodes_[p->second.first].gpu == node.gpu;
      auto resident = resident_.find(slots_[v]);
      if (node.kind == NodeKind::kGpu && resident != resident_.end() &&
          resident->second.gpu == node.gpu) {
        node.gpuOp->addDeviceInput(&resident->second.view);
        continue; // read in device memory, never on the host
      }
      if (auto f = deviceFeedViews_.find(v);
          f != deviceFeedViews_.end() && node.kind == NodeKind::kGpu &&
          node.gpu == options_.sharedResident.begin()->second.first) {
        node.gpuOp->addDeviceInput(&f->second);
        for (size_t k = 0; k < feeds_.size(); ++k)
          if (feeds_[k].value == v)
            feedOnDevice_.insert(int(k));
        continue; // fed in device memory (setDeviceFeed)
      }
      if (node.kind == NodeKind::kGpu) {
        if (onDevice)
          node.gpuOp->addDeviceInput(
              &nodes_[p->second.first].gpuOp->context().output(
                  p->second.second));
        else if (auto u = uploaded.find({node.gpu, v}); u != uploaded.end())
          node.gpuOp->addDeviceInput(u->second);
        else
          node.gpuOp->addDeviceInput(
              uploaded[{node.gpu, v}] =
                  segments_[size_t(node.segment)]->upload(slots_[v]));
      }
      if (!onDevice)
        readOnHost.insert(v);
    }
  }
  for (Node &node : nodes_)
    if (node.kind == NodeKind::kGpu)
      for (size_t k = 0; k < node.outputs.size(); ++k)
        if (readOnHost.count(node.outputs[k]))
          node.gpuOp->setDownload(int(k));
  for (int k : feedOnDevice_)
    if (!readOnHost.count(feeds_[size_t(k)].value))
      feedDeviceOnly_.insert(k);
  if (!options_.log || !options_.logDevicePlacement)
    return;
  // Where the program crosses between host and GPU: each segment's copies.
  std::string line;
  for (size_t g = 0; g < segments_.size(); ++g) {
    const std::vector<int> &members = segmentNodes_[g];
    int down = 0, keys = 0;
    for (int n : members) {
      for (size_t k = 0; k < nodes_[size_t(n)].outputs.size(); ++k)
        down += readOnHost.count(nodes_[size_t(n)].outputs[k]) ? 1 : 0;
      // A dropout kernel copies its step's key up (GpuFusedContext).
      if (auto *fused = dynamic_cast<gpu::GpuFusedContext *>(
              &nodes_[size_t(n)].gpuOp->context()))
        keys += isDropoutKernel(fused->kernels().info(fused->kernel()));
    }
    line += strCat(g == 0 ? "" : "; ", "GPU:", nodes_[size_t(members[0])].gpu,
                   " ", members.size(), members.size() == 1 ? " op" : " ops",
                   " from ", nodes_[size_t(members.front())].where, " to ",
                   nodes_[size_t(members.back())].where, ", ",
                   segments_[g]->numUploads(), " values up, ", down, " down",
                   keys > 0 ? strCat(", ", keys, " dropout keys up") : "");
  }
  std::fprintf(options_.log,
               "%s: %zu GPU segment%s (one CUDA graph each): %s\n",
               options_.programName.c_str(), segments_.size(),
               segments_.size() == 1 ? "" : "s", line.c_str());
}

int Executor::numGpuOps() const {
  int n = 0;
  for (const Node &node : nodes_)
    n += node.kind == NodeKind::kGpu;
  return n;
}

// The device the plan gives `op`. A dtf.fused op that names none runs where
// its region's ops were placed (when they agree).
std::string Executor::placedDevice(const plan::Op &op) const {
  if (!op.device().empty() || op.name() != "dtf.fused" || !options_.planKernels)
    return op.device();
  auto k = op.attrs().find("kernel");
  const auto &kernels = options_.planKernels->kernels;
  if (k == op.attrs().end() || k->second.i() < 0 ||
      k->second.i() >= kernels.size())
    return "";
  std::string device;
  for (const plan::Op &inner : kernels[int(k->second.i())].body()) {
    if (inner.device().empty() || (!device.empty() && inner.device() != device))
      return "";
    device = inner.device();
  }
  return device;
}

// Why the dtf.fused `op` cannot run on a GPU ("" when it can): the plan's
// generated kernels run op by op here, or the plan has no GPU code for it.
std::string Executor::fusedGpuCodeMissing(const plan::Op &op) const {
  if (op.name() != "dtf.fused")
    return "";
  const PlanKernels *pk = options_.planKernels.get();
  auto k = op.attrs().find("kernel");
  if (!pk || !pk->loaded || k == op.attrs().end())
    return "the plan's generated kernels run op by op here";
  if (plan::updatedOperands(op) > 0 && !residentUpdates_.count(&op))
    return "a generated optimizer update writes its variable in place, and "
           "its variable lives on the host";
  const int index = int(k->second.i());
  if (index < 0 || index >= int(pk->gpu.size()) ||
      !pk->gpu[size_t(index)].present())
    return "the plan has no GPU code for its generated kernels (dtf.fused; "
           "dtfc compiles it where the CUDA toolkit is, see --gpu-kernels)";
  return "";
}

// Whether GPU `index` can run ops here; when not, why (once per executor).
bool Executor::gpuAvailable(int index, std::string *why) {
  std::string whyNot;
  gpu::CudaDriver *driver = gpu::processDriver(&whyNot);
  if (!driver) {
    *why = whyNot;
    return false;
  }
  if (index >= driver->deviceCount()) {
    *why = strCat("this machine has ", driver->deviceCount(),
                  driver->deviceCount() == 1 ? " GPU" : " GPUs", " (",
                  driver->description(), ")");
    return false;
  }
  return true;
}

namespace {
// Whether the dtf.fused `op` has GPU code in the plan.
bool hasGpuCode(const PlanKernels *pk, const plan::Op &op) {
  auto k = op.attrs().find("kernel");
  return pk && pk->loaded && k != op.attrs().end() && k->second.i() >= 0 &&
         k->second.i() < int64_t(pk->gpu.size()) &&
         pk->gpu[size_t(k->second.i())].present();
}
} // namespace

// The GPU on which the in-place update `i` may run with its variable and
// slots resident: every other op that reads them runs on that one GPU and
// comes before the update (in a step the forward and backward passes read a
// variable before its update), no fetch reads them, and the op that makes
// its gradient runs there too; -1 otherwise.
int Executor::residentGpuOf(const plan::Program &program, int i) const {
  if (residentVariablesOff())
    return -1;
  const plan::Op &op = program.ops(i);
  if (!hasGpuCode(options_.planKernels.get(), op))
    return -1;
  std::map<int32_t, std::string> readOf; // value -> the variable it reads
  for (const plan::Op &o : program.ops())
    if (o.name() == "dtf.read_variable" && o.outputs_size() == 1)
      readOf[o.outputs(0)] = o.attrs().at("name").s();
  std::set<std::string> names;
  for (int n = 0; n < plan::updatedOperands(op); ++n) {
    auto it = readOf.find(op.inputs(n));
    if (it == readOf.end())
      return -1;
    names.insert(it->second);
  }
  auto readsThem = [&](int32_t value) {
    auto it = readOf.find(value);
    return it != readOf.end() && names.count(it->second) > 0;
  };
  for (const plan::Fetch &f : program.fetches())
    if (readsThem(f.value()))
      return -1;
  int gpu = -1;
  for (int j = 0; j < program.ops_size(); ++j) {
    if (j == i)
      continue;
    const plan::Op &o = program.ops(j);
    // sum_to_shape's `like` and reduce_grad's `x` give only a shape, which
    // the host tensor keeps: those uses read no element.
    const bool shapeOnly =
        o.name() == "dtf.sum_to_shape" || o.name() == "dtf.reduce_grad";
    bool reads = false;
    for (int k = 0; k < o.inputs_size(); ++k)
      reads = reads || ((!shapeOnly || k == 0) && readsThem(o.inputs(k)));
    if (!reads)
      continue;
    if (j > i || opGpu_[size_t(j)] < 0 ||
        (gpu >= 0 && opGpu_[size_t(j)] != gpu))
      return -1;
    gpu = opGpu_[size_t(j)];
  }
  // Its gradient made on that GPU too: a gradient from the host would cross
  // every step instead of the variable, for nothing.
  const int updated = plan::updatedOperands(op);
  if (gpu < 0 || op.inputs_size() <= updated)
    return -1;
  for (int j = 0; j < i; ++j)
    for (int32_t out : program.ops(j).outputs())
      if (out == op.inputs(updated) && opGpu_[size_t(j)] != gpu)
        return -1;
  return gpu;
}

// Towers' ps_update (options_.sharedResident): the GPU on which the
// in-place update `i` runs, in place in tower 0's copy of its variable: its
// gradient comes in device memory (a device feed), its variable and slots
// are read by no other op (a moving average on the CPU would read the
// host's stale copy) and no fetch; -1 otherwise.
int Executor::sharedUpdateGpu(const plan::Program &program, int i) const {
  if (residentVariablesOff())
    return -1;
  const plan::Op &op = program.ops(i);
  const int updated = plan::updatedOperands(op);
  if (!hasGpuCode(options_.planKernels.get(), op) ||
      op.inputs_size() <= updated)
    return -1;
  std::map<int32_t, std::string> readOf, fedAs;
  for (const plan::Op &o : program.ops()) {
    if (o.name() == "dtf.read_variable" && o.outputs_size() == 1)
      readOf[o.outputs(0)] = o.attrs().at("name").s();
    if (o.name() == "dtf.input" && o.outputs_size() == 1)
      fedAs[o.outputs(0)] = o.attrs().at("name").s();
  }
  for (const plan::Feed &f : program.feeds())
    fedAs[f.value()] = f.name();
  auto var = readOf.find(op.inputs(0));
  if (var == readOf.end())
    return -1;
  auto shared = options_.sharedResident.find(var->second);
  auto grad = fedAs.find(op.inputs(updated));
  if (shared == options_.sharedResident.end() || grad == fedAs.end() ||
      !options_.deviceFeeds.count(grad->second))
    return -1;
  std::set<int32_t> slots; // the values that read the variable and slots
  for (int n = 0; n < updated; ++n) {
    if (!readOf.count(op.inputs(n)))
      return -1;
    for (const auto &[value, name] : readOf)
      if (name == readOf.at(op.inputs(n)))
        slots.insert(value);
  }
  for (int j = 0; j < program.ops_size(); ++j)
    if (j != i)
      for (int32_t in : program.ops(j).inputs())
        if (slots.count(in))
          return -1;
  for (const plan::Fetch &f : program.fetches())
    if (slots.count(f.value()))
      return -1;
  return shared->second.first;
}

// Towers (options_.residentReads): the GPU that every op reading variable
// `name` runs on, when none is a host op, a fetch or an update; -1
// otherwise.
int Executor::readOnlyResidentGpu(const plan::Program &program,
                                  const std::string &name) const {
  if (residentVariablesOff())
    return -1;
  std::set<int32_t> values;
  for (const plan::Op &o : program.ops())
    if (o.name() == "dtf.read_variable" && o.outputs_size() == 1 &&
        o.attrs().at("name").s() == name)
      values.insert(o.outputs(0));
  for (const plan::Fetch &f : program.fetches())
    if (values.count(f.value()))
      return -1;
  int gpu = -1;
  for (int j = 0; j < program.ops_size(); ++j) {
    const plan::Op &o = program.ops(j);
    const bool shapeOnly =
        o.name() == "dtf.sum_to_shape" || o.name() == "dtf.reduce_grad";
    bool reads = false;
    for (int k = 0; k < o.inputs_size(); ++k)
      reads = reads || ((!shapeOnly || k == 0) && values.count(o.inputs(k)));
    if (!reads)
      continue;
    if (plan::updatedOperands(o) > 0 || opGpu_[size_t(j)] < 0 ||
        (gpu >= 0 && opGpu_[size_t(j)] != gpu))
      return -1;
    gpu = opGpu_[size_t(j)];
  }
  return gpu;
}

Status Executor::setDeviceFeed(int i, Tensor view) {
  auto f = deviceFeedViews_.find(feeds_[size_t(i)].value);
  if (f == deviceFeedViews_.end())
    return errorStatus(options_.programName, ": feed '",
                       feeds_[size_t(i)].info.name,
                       "' is not fed in device memory");
  f->second = std::move(view);
  return Status::ok();
}

Executor::ResidentBuffer Executor::residentBuffer(std::string_view name) const {
  for (const auto &[host, r] : resident_)
    if (!r.constant && r.name == name)
      return {r.gpu, uint64_t(r.ptr), r.bytes};
  return {};
}

void Executor::uploadEveryRun(std::string_view name) {
  for (auto &[host, r] : resident_)
    if (!r.constant && r.name == name)
      r.everyRun = true;
}

void Executor::receiveEveryRun(std::string_view name) {
  for (auto &[host, r] : resident_)
    if (!r.constant && r.name == name)
      r.received = true;
}

Status Executor::uploadResidentBeforeRun() {
  DTF_RETURN_IF_ERROR(uploadResident(!residentUploaded_));
  uploadedBeforeRun_ = true;
  return Status::ok();
}

int Executor::numResidentVariables() const {
  int n = 0;
  for (const auto &[host, r] : resident_)
    n += !r.constant;
  return n;
}

// Every resident variable this executor uploads (`everyOne`: the first run,
// after reloadVariablesFromHost), or those written on the host each step
// (uploadEveryRun): every copy goes on its GPU's stream, then one wait per
// GPU (not one per variable).
Status Executor::uploadResident(bool everyOne) {
  std::set<int> used;
  for (auto &[host, r] : resident_) {
    if (everyOne ? r.shared || r.received : !r.everyRun)
      continue; // its owner uploads it, or it does not change
    gpu::GpuDevice &device = *gpus_.at(r.gpu);
    DTF_RETURN_IF_ERROR(device.makeCurrent());
    DTF_RETURN_IF_ERROR(
        device.check("cuMemcpyHtoDAsync (a resident variable)",
                     device.driver().cuMemcpyHtoDAsync(
                         r.ptr, host->rawData(), r.bytes, device.stream())));
    used.insert(r.gpu);
  }
  for (int g : used) {
    DTF_RETURN_IF_ERROR(gpus_.at(g)->makeCurrent());
    DTF_RETURN_IF_ERROR(gpus_.at(g)->synchronize());
  }
  if (everyOne)
    residentUploaded_ = true;
  return Status::ok();
}

Status Executor::syncVariablesToHost() {
  if (!residentUploaded_)
    return Status::ok(); // the host holds the values
  std::set<int> used;
  for (auto &[host, r] : resident_) {
    if (r.constant || r.shared || r.everyRun || r.received)
      continue; // never changed here, or held by another executor
    gpu::GpuDevice &device = *gpus_.at(r.gpu);
    DTF_RETURN_IF_ERROR(device.makeCurrent());
    DTF_RETURN_IF_ERROR(
        device.check("cuMemcpyDtoHAsync (a resident variable)",
                     device.driver().cuMemcpyDtoHAsync(
                         r.host->rawData(), r.ptr, r.bytes, device.stream())));
    used.insert(r.gpu);
  }
  for (int g : used)
    DTF_RETURN_IF_ERROR(gpus_.at(g)->synchronize());
  return Status::ok();
}

Status Executor::place(const plan::Program &program) {
  const std::string &what = options_.programName;
  std::string log;
  int moved = 0;
  std::string firstMoved;
  std::vector<std::string> reasons; // each distinct reason once
  // Ops that have no GPU kernel, said in one line.
  const std::string kNoGpuKernel = "no GPU kernel";
  std::set<std::string> noGpuKernel;

  opGpu_.assign(size_t(program.ops_size()), -1);
  for (int i = 0; i < program.ops_size(); ++i) {
    const plan::Op &op = program.ops(i);
    // The device this op asks for that this process lacks, and why.
    std::string lacking, because, why;
    // Ops that make no kernel call: their values live in host memory
    // wherever the plan places them.
    const bool valueOnly = op.name() == "dtf.input" ||
                           op.name() == "dtf.constant" ||
                           op.name() == "dtf.read_variable";
    const std::string device = placedDevice(op);
    int gpuIndex = device.empty() ? -1 : gpuIndexOf(device);
    if (gpuIndex >= 0)
      gpuIndex += options_.gpuOffset; // this tower's copy of the GPU
    if (gpuIndex < 0 && device.empty() && op.name() == "dtf.fused" &&
        plan::updatedOperands(op) > 0) {
      // An update with no device of its own, whose variable and slots only
      // one GPU reads: it runs there, and they stay there between steps.
      gpuIndex = options_.sharedResident.empty() ? residentGpuOf(program, i)
                                                 : sharedUpdateGpu(program, i);
      if (gpuIndex >= 0) {
        residentUpdates_.insert(&op);
        for (int k = 0; k < plan::updatedOperands(op); ++k)
          for (const plan::Op &o : program.ops())
            if (o.name() == "dtf.read_variable" && o.outputs(0) == op.inputs(k))
              residentNames_[o.attrs().at("name").s()] = gpuIndex;
      }
    }
    if (gpuIndex >= 0) {
      if (!gpuAvailable(gpuIndex, &why)) {
        lacking = device;
      } else if (!valueOnly) {
        // Reshape moves no element: any dtype.
        bool f32 = true;
        for (int32_t id : op.outputs())
          for (const plan::Value &v : program.values())
            if (v.id() == id && v.type().dtype() != plan::DType::F32 &&
                op.name() != "dtf.reshape")
              f32 = false;
        const std::string noFusedCode = fusedGpuCodeMissing(op);
        if (op.name() == "dtf.fused") {
          if (noFusedCode.empty())
            opGpu_[size_t(i)] = gpuIndex;
          else
            lacking = device, why = noFusedCode;
        } else if (gpu::gpuKernelRegistry().lookup(op.name()) && f32 &&
                   (op.name() != "dtf.reshape" || op.inputs_size() == 1)) {
          opGpu_[size_t(i)] = gpuIndex;
        } else {
          lacking = device;
          why = kNoGpuKernel;
          noGpuKernel.insert(
              strCat(plan::printable(op.name()), f32 ? "" : " (not f32)"));
        }
      }
    } else if (!device.empty() && lacksDevice(device)) {
      lacking = device;
    } else if (op.name() == "dtf.read_variable") {
      auto name = op.attrs().find("name");
      if (name != op.attrs().end()) {
        auto it = options_.variableDevices.find(name->second.s());
        // Variables live in host memory; one placed on a GPU counts only
        // when this machine has no GPU at all.
        if (it != options_.variableDevices.end() &&
            ((gpuIndexOf(it->second) >= 0 &&
              !gpuAvailable(gpuIndexOf(it->second), &why)) ||
             (gpuIndexOf(it->second) < 0 && lacksDevice(it->second)))) {
          lacking = it->second;
          because =
              strCat(" (its variable '", plan::printable(it->first), "' is)");
        }
      }
    }
    if (why == kNoGpuKernel)
      why = strCat("dtf-run has no GPU kernel for ", plan::printable(op.name()),
                   " (",
                   "its GPU kernels are dtf.matmul, dtf.conv2d and its "
                   "gradients, dtf.max_pool, dtf.avg_pool and their gradients, "
                   "in f32, dtf.reshape, and dtf.fused with the plan's GPU "
                   "code)");
    if (!lacking.empty()) {
      if (!options_.softPlacement)
        return errorStatus(
            what, ": ", plan::describeOp(program, i), " is placed on ",
            plan::printable(lacking), because,
            ", a device this process does not have (",
            why.empty() ? "" : strCat(why, "; "),
            "this dtf-run runs every op on ", options_.device,
            "); to run such ops on the CPU instead, add `session = "
            "session(soft_placement = true)` to the model's train block",
            gpuIndex >= 0 || !why.empty()
                ? "; to check a GPU plan without a GPU, run it on emulated "
                  "GPUs: dtf-run PLAN --emulate-gpus 1"
                : "");
      if (moved++ == 0)
        firstMoved = strCat(plan::describeOp(program, i), " on ",
                            plan::printable(lacking));
      // Missing GPU kernels are said in one line, after the loop.
      if (!why.empty() && why.rfind("dtf-run has no GPU kernel", 0) != 0 &&
          std::find(reasons.begin(), reasons.end(), why) == reasons.end())
        reasons.push_back(why);
    }
    if (options_.logDevicePlacement) {
      const std::string name =
          op.name().empty() ? "(unnamed op)" : plan::printable(op.name());
      const std::string where = op.location().empty()
                                    ? strCat("op #", i)
                                    : plan::printable(op.location());
      const int g = opGpu_[size_t(i)];
      log += strCat(name, " (", where,
                    "): ", g >= 0 ? gpu::gpuDeviceName(g) : options_.device,
                    lacking.empty()
                        ? ""
                        : strCat(" (placed on ", plan::printable(lacking),
                                 ": soft placement)"),
                    "\n");
    }
  }
  if (options_.residentReads)
    for (const plan::Op &o : program.ops())
      if (o.name() == "dtf.read_variable") {
        const std::string &name = o.attrs().at("name").s();
        if (int g = readOnlyResidentGpu(program, name); g >= 0)
          residentNames_.emplace(name, g);
      }
  if (options_.log && moved > 0) {
    std::fprintf(options_.log,
                 "%s: soft placement: %d op%s placed on a device this process "
                 "lacks run on %s (first: %s)\n",
                 what.c_str(), moved, moved == 1 ? "" : "s",
                 options_.device.c_str(), firstMoved.c_str());
    for (const std::string &r : reasons)
      std::fprintf(options_.log, "%s: soft placement: %s\n", what.c_str(),
                   r.c_str());
    if (!noGpuKernel.empty()) {
      std::string ops;
      for (const std::string &o : noGpuKernel)
        ops += (ops.empty() ? "" : ", ") + o;
      std::fprintf(options_.log,
                   "%s: soft placement: dtf-run has no GPU kernel for %s (its "
                   "GPU kernels are dtf.matmul, dtf.conv2d and its gradients, "
                   "dtf.max_pool, dtf.avg_pool and their gradients, in f32, "
                   "dtf.reshape, and dtf.fused with the plan's GPU code)\n",
                   what.c_str(), ops.c_str());
    }
  }
  if (options_.log && options_.logDevicePlacement) {
    std::fprintf(options_.log, "%s: device placement (%d ops):\n%s",
                 what.c_str(), program.ops_size(), log.c_str());
    std::fflush(options_.log);
  }
  return Status::ok();
}

// Resources are variables (0..numVariables_-1) and the values the nodes
// produce (numVariables_ + dense index). Walking the nodes in program order,
// each node waits for the last writer of every resource it reads or writes,
// and a writer also for every reader since the previous write: program order
// per resource, which is all that any result depends on.
void Executor::planSchedule() {
  const int numNodes = static_cast<int>(nodes_.size());
  const int numValues = static_cast<int>(slots_.size());
  const int numResources = numVariables_ + numValues;
  // The resources whose buffers a value may share.
  std::vector<std::vector<int>> roots(numValues);
  for (int v = 0; v < numValues; ++v)
    if (valueVariable_[v] >= 0)
      roots[v].push_back(valueVariable_[v]);
  std::vector<int> lastWriter(numResources, -1);
  std::vector<std::vector<int>> readers(numResources);
  std::vector<std::vector<int>> preds(numNodes);
  std::vector<int> reads, writes;
  for (int n = 0; n < numNodes; ++n) {
    Node &node = nodes_[n];
    reads.clear();
    writes.clear();
    for (int v : node.inputs)
      reads.insert(reads.end(), roots[v].begin(), roots[v].end());
    for (int k = 0; k < node.updated && k < int(node.inputs.size()); ++k)
      for (int r : roots[node.inputs[k]])
        writes.push_back(r);
    for (int v : node.outputs) {
      writes.push_back(numVariables_ + v);
      roots[v].assign(1, numVariables_ + v);
      if (node.mayAlias)
        roots[v].insert(roots[v].end(), reads.begin(), reads.end());
      std::sort(roots[v].begin(), roots[v].end());
      roots[v].erase(std::unique(roots[v].begin(), roots[v].end()),
                     roots[v].end());
    }
    std::vector<int> &p = preds[n];
    for (int r : reads) {
      if (lastWriter[r] >= 0)
        p.push_back(lastWriter[r]);
      readers[r].push_back(n);
    }
    for (int r : writes) {
      if (lastWriter[r] >= 0)
        p.push_back(lastWriter[r]);
      for (int m : readers[r])
        if (m != n)
          p.push_back(m);
      readers[r].clear();
      lastWriter[r] = n;
    }
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }

  // A program where every node waits for the one before it is a chain:
  // nothing could overlap, so it runs on the sequential path.
  bool chain = true;
  for (int n = 0; n < numNodes; ++n) {
    nodes_[n].successors.clear();
    nodes_[n].numPredecessors = static_cast<int>(preds[n].size());
    if (n > 0 && !std::binary_search(preds[n].begin(), preds[n].end(), n - 1))
      chain = false;
  }
  for (int n = 0; n < numNodes; ++n)
    for (int m : preds[n])
      nodes_[m].successors.push_back(n);
  // A stage with recvs runs in program order: that order is what makes the
  // stages of a replica deadlock-free.
  // GPU ops share one stream per device: the step runs in program order.
  concurrent_ = options_.interOpPool &&
                options_.interOpPool->numThreads() > 1 && !chain && !hasRecv_ &&
                !hasGpu_;
  Schedule &s = *schedule_;
  s.ready.clear();
  s.ready.reserve(numNodes);
  s.pending.assign(numNodes, 0);
}

std::vector<int> Executor::dependencies(int i) const {
  std::vector<int> out;
  for (int m = 0; m < i; ++m) {
    const std::vector<int> &succ = nodes_[m].successors;
    if (std::find(succ.begin(), succ.end(), i) != succ.end())
      out.push_back(m);
  }
  return out;
}

int Executor::numRunOps() const { return static_cast<int>(nodes_.size()); }

int Executor::findFeed(std::string_view name) const {
  for (size_t k = 0; k < feeds_.size(); ++k)
    if (feeds_[k].info.name == name)
      return static_cast<int>(k);
  return -1;
}

int Executor::findFetch(std::string_view name) const {
  for (size_t k = 0; k < fetches_.size(); ++k)
    if (fetches_[k].info.name == name)
      return static_cast<int>(k);
  return -1;
}

Status Executor::prepareFeed(int i, int64_t batch, Tensor **out) {
  const TensorSlotInfo &info = feeds_[i].info;
  if (batch < 0)
    return errorStatus(options_.programName, ": feed '", info.name,
                       "' cannot take a batch of ", batch);
  Tensor &t = feedTensors_[i];
  const std::vector<int64_t> &dims = info.dims;
  // The shape as it stands, compared before any vector is built, so that a
  // feed of an unchanged batch size costs nothing.
  bool same = t.defined() && t.dtype() == info.dtype &&
              t.rank() == static_cast<int>(dims.size());
  for (size_t d = 0; same && d < dims.size(); ++d)
    same = t.shape()[d] == (dims[d] == -1 ? batch : dims[d]);
  if (!same) {
    std::vector<int64_t> shape = dims;
    for (int64_t &d : shape)
      if (d == -1)
        d = batch;
    if (t.canHold(info.dtype, shape) && t.bufferUseCount() == 1) {
      t.retype(info.dtype, std::move(shape));
    } else {
      t = Tensor::allocate(info.dtype, shape);
      if (!t.defined())
        return errorStatus("out of memory for feed '", info.name, "' of ",
                           plan::typeString(info.dtype, shape));
    }
  }
  *out = &t;
  return Status::ok();
}

Status Executor::setFeed(int i, Tensor value) {
  const TensorSlotInfo &info = feeds_[i].info;
  if (!value.defined() || value.dtype() != info.dtype ||
      !plan::shapeFits(info.dims, value.shape()))
    return errorStatus(
        options_.programName, ": feed '", info.name, "' expects ",
        plan::typeString(info.dtype, info.dims),
        info.dims.empty() || info.dims[0] != -1 ? "" : " (B: any batch size)",
        ", got ", value.defined() ? value.describe() : "no tensor");
  feedTensors_[i] = std::move(value);
  return Status::ok();
}

Status Executor::checkOutputs(const Node &node) const {
  const std::vector<Tensor> &outs = node.ctx->outputs();
  if (outs.data() != node.outputsBase)
    return errorStatus(node.where, ": the kernel made ", outs.size(),
                       " outputs, more than the ", node.outputs.size(),
                       " the plan declares");
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    const Tensor &t = outs[k];
    const int v = node.outputs[k];
    if (!t.defined())
      return errorStatus(node.where, ": the kernel left result ", k, " (value ",
                         valueIds_[v], ") undefined");
    if (t.dtype() != valueDTypes_[v] ||
        !plan::shapeFits(valueDims_[v], t.shape()))
      return errorStatus(node.where, ": the kernel made ", t.describe(),
                         " for result ", k, " (value ", valueIds_[v],
                         "), which the plan declares as ",
                         plan::typeString(valueDTypes_[v], valueDims_[v]));
  }
  return Status::ok();
}

Status Executor::run(uint64_t step) {
  for (size_t k = 0; k < feeds_.size(); ++k)
    if (!feedTensors_[k].defined() && feedReadOnHost(int(k)))
      return errorStatus(options_.programName, ": feed '", feeds_[k].info.name,
                         "' was not given a value");
  if (uploadedBeforeRun_)
    uploadedBeforeRun_ = false; // uploadResidentBeforeRun did it
  else if (!resident_.empty())
    DTF_RETURN_IF_ERROR(uploadResident(!residentUploaded_));
  // Outputs that share an input's buffer (reshape, an updated variable) would
  // make that buffer's producer allocate anew: let them go first.
  for (int n : releaseBeforeRun_)
    for (Tensor &t : nodes_[n].ctx->outputs())
      t = Tensor();

  // The first step runs in program order even with an inter-op pool: it is
  // where the outputs that alias an input show themselves (and where the
  // buffers are made).
  if (concurrent_ && ranOnce_) {
    DTF_RETURN_IF_ERROR(runConcurrently(step));
    for (size_t i = 0; i < deviceFetch_.size(); ++i)
      if (deviceFetch_[i])
        deviceFetchNow_[i] = *deviceFetch_[i];
    return Status::ok();
  }
  ranOnce_ = true;
  bool replan = false;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    DTF_RETURN_IF_ERROR(timedRunNode(nodes_[n], step));
    replan |= noteAliasing(static_cast<int>(n));
  }
  if (replan)
    planSchedule();
  // The copies of this step must be done before the host refills the
  // pinned buffers next step.
  for (size_t i = 0; i < deviceFetch_.size(); ++i)
    if (deviceFetch_[i])
      deviceFetchNow_[i] = *deviceFetch_[i];
  for (auto &[index, device] : gpus_) {
    DTF_RETURN_IF_ERROR(device->synchronize());
    if (device->arenaPending())
      DTF_RETURN_IF_ERROR(keepDeviceFetches(index));
    DTF_RETURN_IF_ERROR(device->planArena());
  }
  return Status::ok();
}

// The arena about to be planned on `gpu` loses the buffers' contents: its
// device fetches are copied (on the device) into allocations of their own.
Status Executor::keepDeviceFetches(int gpu) {
  gpu::GpuDevice &device = *gpus_.at(gpu);
  bool copied = false;
  for (size_t i = 0; i < deviceFetch_.size(); ++i) {
    if (!deviceFetch_[i] || deviceFetchGpu_[i] != gpu)
      continue;
    const Tensor &t = *deviceFetch_[i];
    auto &[ptr, bytes] = deviceFetchKept_[i];
    DTF_RETURN_IF_ERROR(device.makeCurrent());
    if (bytes < t.byteSize()) {
      if (ptr)
        (void)device.driver().cuMemFree(gpu::cuda::CUdeviceptr(ptr));
      gpu::cuda::CUdeviceptr p = 0;
      DTF_RETURN_IF_ERROR(device.check(
          "cuMemAlloc (a fetch kept on the GPU)",
          device.driver().cuMemAlloc(&p, std::max<size_t>(t.byteSize(), 1))));
      ptr = uint64_t(p);
      bytes = t.byteSize();
    }
    DTF_RETURN_IF_ERROR(
        device.check("cuMemcpyDtoDAsync (a fetch kept on the GPU)",
                     device.driver().cuMemcpyDtoDAsync(
                         gpu::cuda::CUdeviceptr(ptr),
                         gpu::cuda::CUdeviceptr(uintptr_t(t.rawData())),
                         t.byteSize(), device.stream())));
    deviceFetchNow_[i] = Tensor::view(t.dtype(), t.shape(),
                                      reinterpret_cast<void *>(uintptr_t(ptr)));
    copied = true;
  }
  if (copied)
    DTF_RETURN_IF_ERROR(device.synchronize());
  return Status::ok();
}

Status Executor::waitOnGpu(int gpu, gpu::cuda::CUevent event) {
  auto it = gpus_.find(gpu);
  if (!event || it == gpus_.end())
    return Status::ok();
  DTF_RETURN_IF_ERROR(it->second->makeCurrent());
  return it->second->waitFor(event);
}

Status Executor::synchronizeGpus() {
  for (auto &[index, device] : gpus_) {
    DTF_RETURN_IF_ERROR(device->makeCurrent());
    DTF_RETURN_IF_ERROR(device->synchronize());
  }
  return Status::ok();
}

Status Executor::timedRunNode(Node &node, uint64_t step) {
  if (!options_.profile)
    return runNode(node, step);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Status s = runNode(node, step);
  node.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  ++node.calls;
  return s;
}

bool Executor::noteAliasing(int n) {
  Node &node = nodes_[n];
  if (node.aliasesInput || node.kind != NodeKind::kKernel)
    return false;
  KernelContext &ctx = *node.ctx;
  for (const Tensor &o : ctx.outputs()) {
    if (!o.defined())
      continue;
    for (int i = 0; i < ctx.numInputs() && !node.aliasesInput; ++i)
      node.aliasesInput = o.rawData() == ctx.input(i).rawData();
  }
  if (!node.aliasesInput)
    return false;
  releaseBeforeRun_.push_back(n);
  // A kernel that aliases though the schedule did not expect it: its
  // readers must follow the updates of its input's variable from now on.
  if (node.mayAlias)
    return false;
  node.mayAlias = true;
  return true;
}

Status Executor::runConcurrently(uint64_t step) {
  Schedule &s = *schedule_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.step = step;
    s.failed = false;
    s.error = Status::ok();
    s.running = 0;
    s.remaining = nodes_.size();
    s.ready.clear();
    // Pushed in reverse so that the stack hands out the roots in program
    // order.
    for (size_t n = nodes_.size(); n-- > 0;) {
      s.pending[n] = nodes_[n].numPredecessors;
      if (s.pending[n] == 0)
        s.ready.push_back(static_cast<int>(n));
    }
  }
  ThreadPool &pool = *options_.interOpPool;
  // One chunk per thread, each taking ready nodes until the step is done.
  // A chunk that finds the pool busy runs on this thread, where it finds the
  // work already done: one participant alone always finishes a step.
  pool.parallelFor(pool.numThreads(), 1, [this](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      participate(*schedule_);
  });
  if (s.failed)
    return s.error;
  bool replan = false;
  for (size_t n = 0; n < nodes_.size(); ++n)
    replan |= noteAliasing(static_cast<int>(n));
  if (replan)
    planSchedule();
  return Status::ok();
}

void Executor::participate(Schedule &s) {
  std::unique_lock<std::mutex> lock(s.mutex);
  for (;;) {
    // Done: every node ran, or one failed and those in flight have finished.
    auto done = [&] {
      return s.remaining == 0 || (s.failed && s.running == 0);
    };
    while (!done() && (s.ready.empty() || s.failed)) {
      ++s.waiting;
      s.cv.wait(lock);
      --s.waiting;
    }
    if (done())
      break;
    const int n = s.ready.back();
    s.ready.pop_back();
    ++s.running;
    lock.unlock();
    Status st = timedRunNode(nodes_[n], s.step);
    lock.lock();
    --s.running;
    --s.remaining;
    if (!st.isOk() && !s.failed) {
      s.failed = true; // the first error wins; no new node starts
      s.error = std::move(st);
    }
    if (!s.failed)
      for (int m : nodes_[n].successors)
        if (--s.pending[m] == 0)
          s.ready.push_back(m);
    // This thread takes one ready node next; the others are for waiting
    // threads. At the end every waiter must leave.
    if (s.waiting > 0) {
      if (done())
        s.cv.notify_all();
      else if (!s.failed)
        for (size_t k = 1; k < s.ready.size() && int(k) <= s.waiting; ++k)
          s.cv.notify_one();
    }
  }
}

Status Executor::runNode(Node &node, uint64_t step) {
  if (node.kind == NodeKind::kAssignAdd) {
    Status s = assignAdd(*node.var, *node.addend);
    if (!s.isOk())
      return errorStatus(node.where, ": ", s.message());
    return Status::ok();
  }
  if (node.kind == NodeKind::kSend) {
    Status s = options_.rendezvous->send(node.key, node.peer, step,
                                         node.ctx->input(0));
    if (!s.isOk())
      return errorStatus(node.where, ": ", s.message());
    return Status::ok();
  }
  if (node.kind == NodeKind::kRecv) {
    Tensor &t = node.ctx->outputs()[0];
    Status s = options_.rendezvous->recv(node.key, node.peer, step, &t);
    if (!s.isOk())
      return errorStatus(node.where, ": ", s.message());
    const int v = node.outputs[0];
    if (!t.defined() || t.dtype() != valueDTypes_[v] ||
        !plan::shapeFits(valueDims_[v], t.shape()))
      return errorStatus(node.where, ": stage ", node.peer, " sent ",
                         t.defined() ? t.describe() : std::string("nothing"),
                         " under '", node.key, "', but the plan declares ",
                         plan::typeString(valueDTypes_[v], valueDims_[v]),
                         " (do both tasks run the same plan.bin?)");
    return Status::ok();
  }
  if (node.kind == NodeKind::kLookup) {
    Status s = options_.rowLookup->lookup(node.key, node.ctx->input(0),
                                          node.create, &node.ctx->outputs()[0]);
    if (!s.isOk())
      return errorStatus(node.where, ": ", s.message());
    return checkOutputs(node);
  }
  if (node.kind == NodeKind::kDynamicRows) {
    Status s =
        options_.dynamicRows->rows(node.key, node.ctx->input(0), node.create,
                                   int64_t(step), &node.ctx->outputs()[0]);
    if (!s.isOk())
      return errorStatus(node.where, ": ", s.message());
    return checkOutputs(node);
  }
  if (node.kind == NodeKind::kGpu) {
    if (!node.segmentHead)
      return Status::ok(); // ran with its segment's first op
    gpu::GpuSegment &segment = *segments_[size_t(node.segment)];
    // A tower's dropout kernels draw its examples' share of the mask.
    for (int m : segmentNodes_[size_t(node.segment)])
      nodes_[size_t(m)].gpuOp->context().setBatchOffset(batchOffset_,
                                                        batchRows_);
    Status s = segment.run(step, options_.seed);
    if (!s.isOk() && segment.failedOp() >= 0) {
      const Node &failed = nodes_[size_t(
          segmentNodes_[size_t(node.segment)][size_t(segment.failedOp())])];
      if (s.message().rfind(failed.opName, 0) == 0)
        return errorStatus(failed.location, ": ", s.message());
      return errorStatus(failed.where, " on ", gpu::gpuDeviceName(failed.gpu),
                         ": ", s.message());
    }
    if (!s.isOk()) {
      if (s.message().rfind(node.opName, 0) == 0)
        return errorStatus(node.location, ": ", s.message());
      return errorStatus(node.where, " on ", gpu::gpuDeviceName(node.gpu), ": ",
                         s.message());
    }
    return Status::ok();
  }
  KernelContext &ctx = *node.ctx;
  ctx.setStep(step, options_.seed);
  ctx.setBatchOffset(batchOffset_, batchRows_);
  Status s = callKernel(node.fn, ctx);
  if (!s.isOk()) {
    // Kernel messages mostly start with the op's name already.
    if (s.message().rfind(node.opName, 0) == 0)
      return errorStatus(node.location, ": ", s.message());
    return errorStatus(node.where, ": ", s.message());
  }
  return checkOutputs(node);
}

std::vector<OpProfile> Executor::profile() const {
  std::vector<OpProfile> out;
  if (!options_.profile)
    return out;
  for (const Node &node : nodes_)
    out.push_back({node.where, node.opName, node.seconds, node.calls});
  return out;
}

} // namespace dtf::exec
