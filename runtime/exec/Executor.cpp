// Executor: making one (loading the program, op by op where its generated
// kernels cannot run as they are), its feeds and fetches, and the entry to
// a step. Loading, placement, devices, resident variables, scheduling and
// running a step live in the files the README lists.
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExecutorNode.h"
#include "dtf/OpNames.h"

#include "runtime/device/Device.h"
#include "runtime/plan/FusedKernels.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <cstdlib>

namespace dtf::exec {

bool residentVariablesOff() {
  const char *env = std::getenv("DTF_GPU_RESIDENT_VARIABLES");
  return env && std::string_view(env) == "0";
}

bool syncFetchForced() {
  const char *env = std::getenv("DTF_GPU_SYNC_FETCH");
  return env && std::string_view(env) == "1";
}

void applySessionOptions(const plan::Plan &plan, ExecutorOptions *options) {
  options->softPlacement = plan.session().soft_placement();
  options->logDevicePlacement = plan.session().log_device_placement();
  options->allowTf32 = plan.session().allow_tf32();
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
      if (it != gpus_.end())
        it->second->allocator().free(deviceFetchKept_[i].first);
    }
  for (auto &[host, r] : resident_)
    if (r.ptr && !r.shared) {
      auto it = gpus_.find(r.gpu);
      if (it != gpus_.end())
        it->second->allocator().free(r.ptr);
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
      any |= op.name() == dtf::ops::kFused && gpuRegionOnCpu(op);
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

int Executor::numGpuOps() const {
  int n = 0;
  for (const Node &node : nodes_)
    n += node.kind == NodeKind::kGpu;
  return n;
}

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

bool Executor::placeFetch(int i, Tensor buffer) {
  if (i < 0 || i >= numFetches())
    return false;
  const int v = fetches_[size_t(i)].value;
  Tensor *slot = slots_[size_t(v)];
  if (!slot->defined() || slot->dtype() != buffer.dtype() ||
      slot->shape() != buffer.shape() || !buffer.ownsBuffer())
    return false;
  for (const Node &node : nodes_) {
    if (node.kind != NodeKind::kKernel || !node.cpuOp || node.mayAlias ||
        node.aliasesInput)
      continue;
    // Its declared outputs, and those a fused kernel makes beyond them.
    const std::vector<Tensor> &outs = node.ctx->outputs();
    if (slot >= outs.data() && slot < outs.data() + outs.size()) {
      *slot = std::move(buffer);
      return true;
    }
  }
  return false;
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

Status Executor::setDeviceFeed(int i, Tensor view) {
  auto f = deviceFeedViews_.find(feeds_[size_t(i)].value);
  if (f == deviceFeedViews_.end())
    return errorStatus(options_.programName, ": feed '",
                       feeds_[size_t(i)].info.name,
                       "' is not fed in device memory");
  f->second = std::move(view);
  return Status::ok();
}

std::vector<OpProfile> Executor::profile() const {
  std::vector<OpProfile> out;
  if (!options_.profile)
    return out;
  for (const Node &node : nodes_) {
    OpProfile op;
    op.where = node.where;
    op.opName = node.opName;
    op.seconds = node.seconds;
    op.calls = node.calls;
    if (node.segment >= 0) {
      // Its device time; the segment's host time (enqueueing every op, and
      // waiting for them) is not the op's.
      const std::vector<int> &members = segmentNodes_[size_t(node.segment)];
      const std::vector<double> times =
          segments_[size_t(node.segment)]->opSeconds();
      const size_t k = size_t(
          std::find(members.begin(), members.end(), int(&node - nodes_.data())) -
          members.begin());
      if (k < times.size()) {
        if (node.segmentHead)
          op.segmentHostSeconds = node.seconds;
        op.seconds = times[k];
        op.onDevice = true;
        op.device = device::gpuDeviceName(node.gpu);
      }
    }
    out.push_back(std::move(op));
  }
  return out;
}

} // namespace dtf::exec
