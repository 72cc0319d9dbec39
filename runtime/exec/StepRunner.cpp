// Running a step: the feeds checked, resident variables uploaded, every
// node run in program order (or by the scheduler), each node's kernel,
// device graph or executor op called and its results checked, and the
// devices' step finished.
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExecutorNode.h"
#include "runtime/exec/Rendezvous.h"

#include "runtime/device/Device.h"
#include "runtime/plan/PlanTypes.h"

#include <chrono>

namespace dtf::exec {

namespace {

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

} // namespace

Status Executor::run(uint64_t step) {
  // Late fetches: this step stages into the slot of the step before last,
  // which must have ended (and its fetches been read) first.
  const int slot = late_ ? int(runs_ % 2) : 0;
  if (late_) {
    if (inFlight_.size() >= 2)
      DTF_RETURN_IF_ERROR(awaitFetches());
    for (auto &[index, gpu] : gpus_)
      gpu->setStagingSlot(slot);
  }
  for (size_t k = 0; k < feeds_.size(); ++k)
    if (!feedTensors_[k].defined() && feedReadOnHost(int(k)))
      return errorStatus(options_.programName, ": feed '", feeds_[k].info.name,
                         "' was not given a value");
  skipUpdates_.store(false);
  renewAllVersions();
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
  ++runs_;
  return late_ ? endLateStep(step, slot) : finishGpuStep();
}

// The end of a step whose fetches are read late: no wait, unless the step
// made buffers (the arena is planned over the finished work, as
// finishGpuStep does); an event marks where its work ends on each GPU.
Status Executor::endLateStep(uint64_t step, int slot) {
  for (auto &[index, gpu] : gpus_) {
    if (gpu->allocator().arenaPending()) {
      DTF_RETURN_IF_ERROR(gpu->stream().synchronize());
      DTF_RETURN_IF_ERROR(gpu->allocator().planArena());
    }
    DTF_RETURN_IF_ERROR(gpu->recordStepEnd(slot));
  }
  inFlight_.push_back({step, slot});
  return Status::ok();
}

Status Executor::awaitFetches(uint64_t *step) {
  if (inFlight_.empty())
    return Status::ok();
  const InFlight f = inFlight_.front();
  inFlight_.pop_front();
  if (step)
    *step = f.step;
  for (auto &[index, gpu] : gpus_)
    DTF_RETURN_IF_ERROR(gpu->waitStepEnd(f.slot));
  for (size_t g = 0; g < segments_.size(); ++g)
    if (Status s = segments_[g]->finishLate(f.slot); !s.isOk())
      return segmentError(g, s);
  return Status::ok();
}

// The end of a step on every GPU: its work done, and the buffers the step
// allocated packed into one arena (keeping the device fetches, which the
// move would lose).
Status Executor::finishGpuStep() {
  for (auto &[index, gpu] : gpus_) {
    DTF_RETURN_IF_ERROR(gpu->stream().synchronize());
    if (gpu->allocator().arenaPending())
      DTF_RETURN_IF_ERROR(keepDeviceFetches(index));
    DTF_RETURN_IF_ERROR(gpu->allocator().planArena());
  }
  return Status::ok();
}

// Runs `node`, timed with options.profile; an op that updates variables in
// place gives them new versions (KernelContext::inputVersion) before any op
// that waits for it runs.
Status Executor::timedRunNode(Node &node, uint64_t step) {
  if (!options_.profile) {
    Status s = runNode(node, step);
    if (node.updated > 0)
      bumpVersions(node);
    return s;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Status s = runNode(node, step);
  node.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  ++node.calls;
  if (node.updated > 0)
    bumpVersions(node);
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

Status Executor::runNode(Node &node, uint64_t step) {
  if (node.kind == NodeKind::kSkipUpdates) {
    skipUpdates_.store(!slots_[node.inputs[0]]->data<bool>()[0]);
    return Status::ok();
  }
  if (node.guarded && skipUpdates_.load())
    return Status::ok(); // a skipped step: the variables stay as they were
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
  if (node.kind == NodeKind::kGpu)
    return runGpuSegment(node, step);
  // The host device's op: the kernel called in place, as directly as
  // before the device layer (CpuOp::run is inline and not virtual).
  node.ctx->setBatchOffset(batchOffset_, batchRows_);
  Status s = node.cpuOp->run(step, options_.seed);
  if (!s.isOk()) {
    // Kernel messages mostly start with the op's name already.
    if (s.message().rfind(node.opName, 0) == 0)
      return errorStatus(node.location, ": ", s.message());
    return errorStatus(node.where, ": ", s.message());
  }
  return checkOutputs(node);
}

// A GPU node runs with its segment: the segment's first node runs the whole
// device graph; the others have nothing left to do.
Status Executor::runGpuSegment(Node &node, uint64_t step) {
  if (!node.segmentHead)
    return Status::ok(); // ran with its segment's first op
  device::Graph &segment = *segments_[size_t(node.segment)];
  // A tower's dropout kernels draw its examples' share of the mask.
  for (int m : segmentNodes_[size_t(node.segment)])
    nodes_[size_t(m)].gpuOp->setBatchOffset(batchOffset_, batchRows_);
  Status s = segment.run(step, options_.seed);
  return s.isOk() ? s : segmentError(size_t(node.segment), s);
}

// A segment's failure, at its failed op's location (else its first op's).
Status Executor::segmentError(size_t g, const Status &s) const {
  const device::Graph &segment = *segments_[g];
  if (segment.failedOp() >= 0) {
    const Node &failed =
        nodes_[size_t(segmentNodes_[g][size_t(segment.failedOp())])];
    if (s.message().rfind(failed.opName, 0) == 0)
      return errorStatus(failed.location, ": ", s.message());
    return errorStatus(failed.where, " on ", device::gpuDeviceName(failed.gpu),
                       ": ", s.message());
  }
  const Node &head = nodes_[size_t(segmentNodes_[g].front())];
  if (s.message().rfind(head.opName, 0) == 0)
    return errorStatus(head.location, ": ", s.message());
  return errorStatus(head.where, " on ", device::gpuDeviceName(head.gpu), ": ",
                     s.message());
}

} // namespace dtf::exec
