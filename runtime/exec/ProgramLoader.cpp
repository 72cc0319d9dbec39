// Loading a program into the executor: a fixed place (slot) for every
// value (a feed, a constant, a variable, a kernel context's output), one
// node per op that runs, with its kernel and converted attributes, and the
// fetches.
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExecutorNode.h"
#include "runtime/exec/Rendezvous.h"
#include "dtf/OpNames.h"

#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"

namespace dtf::exec {

namespace {

// The attributes a kernel needs that its inputs do not determine, derived
// from the op's declared result type when the plan leaves them out (see
// runtime/kernels/README.md, "Attributes").
const char *derivedShapeAttr(std::string_view op, int numInputs) {
  if ((op == dtf::ops::kReshape || op == dtf::ops::kBroadcastTo) && numInputs < 2)
    return "out_shape";
  if (op == dtf::ops::kConv2dBackpropInput)
    return "input_shape";
  if (op == dtf::ops::kConv2dBackpropFilter)
    return "filter_shape";
  if (op == dtf::ops::kGatherGrad)
    return "params_shape";
  return nullptr;
}

bool takesOutDType(std::string_view op) {
  return op == dtf::ops::kCast || op == dtf::ops::kArgmax || op == dtf::ops::kOneHot;
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

Status Executor::build(const plan::Program &program, VariableStore &variables,
                       const KernelRegistry &kernels) {
  const std::string &what = options_.programName;
  DTF_RETURN_IF_ERROR(plan::validateProgram(program, what));
  DTF_RETURN_IF_ERROR(place(program));

  Loading l{program, variables, kernels, {}, {}, {}, {}};
  cpu_ = std::make_unique<device::CpuDevice>(kernels, options_.intraOpPool);
  loadValues(l);
  DTF_RETURN_IF_ERROR(loadFeeds(l));
  for (int i = 0; i < program.ops_size(); ++i)
    DTF_RETURN_IF_ERROR(loadOp(l, i));
  DTF_RETURN_IF_ERROR(guardUpdates());
  if (!l.missing.empty()) {
    std::string list;
    for (const std::string &m : l.missing)
      list += "\n  " + m;
    return errorStatus(
        what, ": this dtf-run has no CPU kernel for ",
        l.missingOps.size() == 1 ? "this op:" : "these ops:", list);
  }

  for (const plan::Fetch &fetch : program.fetches()) {
    int v = l.slot(fetch.value());
    fetches_.push_back(
        {TensorSlotInfo{fetch.name(), valueDTypes_[v], valueDims_[v]}, v});
  }
  deviceFetch_.assign(fetches_.size(), nullptr);
  deviceFetchGpu_.assign(fetches_.size(), -1);
  deviceFetchNow_.assign(fetches_.size(), Tensor());
  deviceFetchKept_.assign(fetches_.size(), {0, 0});
  DTF_RETURN_IF_ERROR(allocateResident());
  if (hasGpu_)
    wireGpuNodes();
  numVariables_ = static_cast<int>(l.variableIndex.size());
  planSchedule();
  return Status::ok();
}

// Every value's dense index, declared dtype and dims.
void Executor::loadValues(Loading &l) {
  const int numValues = l.program.values_size();
  l.index.reserve(numValues);
  slots_.assign(numValues, nullptr);
  valueDTypes_.resize(numValues);
  valueDims_.resize(numValues);
  valueIds_.resize(numValues);
  valueVariable_.assign(numValues, -1);
  for (int v = 0; v < numValues; ++v) {
    const plan::Value &value = l.program.values(v);
    l.index.emplace(value.id(), v);
    valueIds_[v] = value.id();
    (void)plan::toDType(value.type().dtype(), &valueDTypes_[v]);
    valueDims_[v] = plan::dimsOf(value.type().shape());
  }
}

// Feeds: the plan's, then every dtf.input it does not list.
Status Executor::loadFeeds(Loading &l) {
  const plan::Program &program = l.program;
  auto infoOf = [&](const std::string &name, int v) {
    return TensorSlotInfo{name, valueDTypes_[v], valueDims_[v]};
  };
  std::set<int> fedValues;
  for (const plan::Feed &feed : program.feeds()) {
    int v = l.slot(feed.value());
    feeds_.push_back({infoOf(feed.name(), v), v});
    fedValues.insert(v);
  }
  for (int i = 0; i < program.ops_size(); ++i) {
    const plan::Op &op = program.ops(i);
    if (op.name() != dtf::ops::kInput)
      continue;
    int v = l.slot(op.outputs(0));
    if (fedValues.count(v))
      continue;
    const std::string &name = op.attrs().at("name").s();
    if (findFeed(name) >= 0)
      return errorStatus(options_.programName, ": ",
                         plan::describeOp(program, i), " is input '",
                         plan::printable(name),
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
  return Status::ok();
}

Status Executor::opError(const Loading &l, int i,
                         const std::string &message) const {
  return errorStatus(options_.programName, ": ", plan::describeOp(l.program, i),
                     ": ", message);
}

// Op `i`: a feed (nothing to do), a constant or a variable (a slot of
// their own), or a node that runs.
Status Executor::loadOp(Loading &l, int i) {
  const plan::Op &op = l.program.ops(i);
  const std::string &what = options_.programName;
  if (op.name() == dtf::ops::kInput)
    return Status::ok(); // its value is a feed
  if (op.name() == dtf::ops::kConstant) {
    Tensor t;
    Status s = plan::tensorFromValue(op.attrs().at("value").tensor(), &t);
    if (!s.isOk())
      return opError(l, i, s.message());
    constants_.push_back(std::move(t));
    slots_[l.slot(op.outputs(0))] = &constants_.back();
    return Status::ok();
  }
  if (op.name() == dtf::ops::kReadVariable)
    return loadReadVariable(l, i);

  Node node;
  // Run-time messages lead with the source location; without one, the
  // program and the op's index say where.
  node.where = op.location().empty()
                   ? what + " " + plan::describeOp(l.program, i)
                   : plan::describeOp(l.program, i);
  node.location = op.location().empty() ? strCat(what, " op #", i)
                                        : plan::printable(op.location());
  node.opName = plan::printable(op.name());
  for (int32_t id : op.inputs())
    node.inputs.push_back(l.slot(id));
  for (int32_t id : op.outputs())
    node.outputs.push_back(l.slot(id));
  node.updated = plan::updatedOperands(op);
  node.mayAlias = op.name() == dtf::ops::kReshape || node.updated > 0;
  if (op.name() == dtf::ops::kAssignAdd)
    return loadAssignAdd(l, i, node);
  if (op.name() == dtf::ops::kSend || op.name() == dtf::ops::kRecv)
    return loadSendRecv(l, i, node);
  if (op.name() == dtf::ops::kSkipUpdatesUnless) {
    if (node.inputs.size() != 1 || !node.outputs.empty() ||
        valueDTypes_[node.inputs[0]] != DType::Bool ||
        !valueDims_[node.inputs[0]].empty())
      return opError(l, i, "takes one bool scalar and has no result");
    node.kind = NodeKind::kSkipUpdates;
    nodes_.push_back(std::move(node));
    return Status::ok();
  }
  if (op.name() == dtf::ops::kPsGather || op.name() == dtf::ops::kDynamicRows)
    return loadRowsOp(l, i, node);
  if (opGpu_[size_t(i)] >= 0) {
    DTF_RETURN_IF_ERROR(buildGpuNode(op, opGpu_[size_t(i)], &node));
    nodes_.push_back(std::move(node));
    return Status::ok();
  }
  return loadKernelOp(l, i, node);
}

// mixed_float16's dynamic loss scale: the optimizer updates after the
// program's dtf.skip_updates_unless wait for it and run only when it found
// the gradients finite; the global step's assign_add and the scale's own
// dtf.adjust_loss_scale run every step.
Status Executor::guardUpdates() {
  guardNode_ = -1;
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (nodes_[n].kind == NodeKind::kSkipUpdates) {
      if (guardNode_ >= 0)
        return errorStatus(nodes_[n].where,
                           ": a second dtf.skip_updates_unless (a program "
                           "has at most one)");
      guardNode_ = int(n);
    }
  if (guardNode_ < 0)
    return Status::ok();
  for (size_t n = 0; n < nodes_.size(); ++n) {
    Node &node = nodes_[n];
    if (node.updated == 0 || node.kind == NodeKind::kAssignAdd ||
        node.opName == dtf::ops::kAdjustLossScale)
      continue;
    if (int(n) < guardNode_)
      return errorStatus(node.where,
                         ": an update before the program's "
                         "dtf.skip_updates_unless, which must come first");
    if (node.kind != NodeKind::kKernel)
      return errorStatus(node.where,
                         ": an update that dtf.skip_updates_unless guards "
                         "runs on the CPU only (loss scaling on a GPU is not "
                         "built)");
    node.guarded = true;
  }
  return Status::ok();
}

// dtf.read_variable: its value is the variable's tensor (an alias: updates
// in place are seen by every reader); a resident one gets its device copy's
// record.
Status Executor::loadReadVariable(Loading &l, int i) {
  const plan::Op &op = l.program.ops(i);
  int v = l.slot(op.outputs(0));
  const std::string &name = op.attrs().at("name").s();
  Tensor *var = l.variables.find(name);
  if (!var)
    return opError(l, i,
                   strCat("variable '", plan::printable(name),
                          "' does not exist (were the variables "
                          "initialized?)"));
  if (var->dtype() != valueDTypes_[v] || var->shape() != valueDims_[v])
    return opError(l, i,
                   strCat("variable '", plan::printable(name), "' is ",
                          var->describe(), ", but the plan reads it as ",
                          plan::typeString(valueDTypes_[v], valueDims_[v])));
  slots_[v] = var;
  if (auto r = residentNames_.find(name);
      r != residentNames_.end() && !resident_.count(var)) {
    Resident &res = resident_[var];
    res.host = var;
    res.gpu = r->second;
    res.bytes = size_t(var->numElements()) * dtypeSize(var->dtype());
    res.name = name;
    if (auto sh = options_.sharedResident.find(name);
        sh != options_.sharedResident.end() && sh->second.first == res.gpu) {
      res.shared = true; // tower 0's copy: it uploads and downloads it
      res.ptr = sh->second.second;
    }
  }
  valueVariable_[v] =
      l.variableIndex.emplace(var, int(l.variableIndex.size())).first->second;
  return Status::ok();
}

Status Executor::loadAssignAdd(Loading &l, int i, Node &node) {
  const plan::Op &op = l.program.ops(i);
  node.kind = NodeKind::kAssignAdd;
  const int a = l.slot(op.inputs(0)), b = l.slot(op.inputs(1));
  node.var = slots_[a];
  node.addend = slots_[b];
  if (valueDTypes_[a] != valueDTypes_[b])
    return opError(l, i,
                   strCat("adds a value of type ",
                          plan::typeString(valueDTypes_[b], valueDims_[b]),
                          " to a variable of type ",
                          plan::typeString(valueDTypes_[a], valueDims_[a])));
  if (!node.outputs.empty())
    slots_[node.outputs[0]] = node.var;
  nodes_.push_back(std::move(node));
  return Status::ok();
}

// dtf.send and dtf.recv: a stage of a model-parallel replica meets the
// others through options_.rendezvous.
Status Executor::loadSendRecv(Loading &l, int i, Node &node) {
  const plan::Op &op = l.program.ops(i);
  const bool send = op.name() == dtf::ops::kSend;
  auto key = op.attrs().find("key");
  auto peer = op.attrs().find("peer");
  if (key == op.attrs().end() || peer == op.attrs().end() ||
      op.inputs_size() != (send ? 1 : 0) || op.outputs_size() != (send ? 0 : 1))
    return opError(
        l, i,
        strCat("a ", op.name(), " takes a key and a peer, and ",
               send ? "one input and no result" : "no input and one result"));
  if (!options_.rendezvous)
    return opError(l, i,
                   "this program is one stage of a model-parallel replica; it "
                   "runs only in a cluster, with its other stages");
  node.kind = send ? NodeKind::kSend : NodeKind::kRecv;
  node.key = key->second.s();
  node.peer = int(peer->second.i());
  node.ownContext = std::make_unique<KernelContext>();
  node.ctx = node.ownContext.get();
  node.ctx->setOpName(op.name());
  if (send) {
    node.ctx->setInputs({slots_[l.slot(op.inputs(0))]});
  } else {
    node.ctx->outputs().reserve(1 + kSpareOutputs);
    node.ctx->setNumOutputs(1);
    slots_[node.outputs[0]] = &node.ctx->outputs()[0];
    node.outputsBase = node.ctx->outputs().data();
  }
  hasRecv_ |= !send;
  nodes_.push_back(std::move(node));
  return Status::ok();
}

// dtf.ps_gather (rows of a table on the ps) and dtf.dynamic_rows (rows of a
// dynamic table): ids in, one result, served by an interface.
Status Executor::loadRowsOp(Loading &l, int i, Node &node) {
  const plan::Op &op = l.program.ops(i);
  const bool lookup = op.name() == dtf::ops::kPsGather;
  auto name = op.attrs().find(lookup ? "variable" : "table");
  if (name == op.attrs().end() || op.inputs_size() != 1 ||
      op.outputs_size() != 1)
    return opError(l, i,
                   strCat("a ", op.name(), " takes a ",
                          lookup ? "variable" : "table",
                          ", one input (the ids) and one result"));
  if (lookup && !options_.rowLookup)
    return opError(l, i,
                   strCat("this program looks up rows of '",
                          plan::printable(name->second.s()),
                          "' on its ps; it runs only in a between-graph "
                          "cluster"));
  if (!lookup && !options_.dynamicRows)
    return opError(l, i,
                   strCat("this program looks up rows of the dynamic table '",
                          plan::printable(name->second.s()),
                          "', which this process does not hold"));
  node.kind = lookup ? NodeKind::kLookup : NodeKind::kDynamicRows;
  node.key = name->second.s();
  auto create = op.attrs().find("create");
  node.create = create != op.attrs().end() && create->second.b();
  node.ownContext = std::make_unique<KernelContext>();
  node.ctx = node.ownContext.get();
  node.ctx->setOpName(op.name());
  node.ctx->setInputs({slots_[l.slot(op.inputs(0))]});
  node.ctx->outputs().reserve(1 + kSpareOutputs);
  node.ctx->setNumOutputs(1);
  slots_[node.outputs[0]] = &node.ctx->outputs()[0];
  node.outputsBase = node.ctx->outputs().data();
  nodes_.push_back(std::move(node));
  return Status::ok();
}

// An op run by a CPU kernel of the registry, with its own context; an op
// without one is named in the load's error, with every other such op.
Status Executor::loadKernelOp(Loading &l, int i, Node &node) {
  const plan::Op &op = l.program.ops(i);
  node.kind = NodeKind::kKernel;
  if (!l.kernels.lookup(op.name())) {
    // Each op once, at its first use.
    if (l.missingOps.insert(op.name()).second)
      l.missing.push_back(plan::describeOp(l.program, i));
    return Status::ok();
  }
  // Made by the host device: its context holds the attributes, the
  // kernels' thread pool and the outputs (with room for spare ones).
  device::DeviceOpSpec spec;
  spec.opName = op.name();
  Status s = kernelAttrs(op, node, &spec.attrs);
  if (!s.isOk())
    return opError(l, i, s.message());
  spec.numOutputs = static_cast<int>(node.outputs.size());
  if (op.name() == dtf::ops::kFused) {
    spec.kernels = options_.planKernels->loaded;
    spec.kernel = int(op.attrs().at("kernel").i());
  }
  std::unique_ptr<device::DeviceOp> made;
  s = cpu_->createOp(std::move(spec), &made);
  if (!s.isOk())
    return opError(l, i, s.message());
  node.cpuOp.reset(static_cast<device::CpuOp *>(made.release()));
  for (int32_t id : op.inputs())
    node.cpuOp->addDeviceInput(slots_[l.slot(id)]);
  node.ctx = &node.cpuOp->context();
  for (size_t k = 0; k < node.outputs.size(); ++k)
    slots_[node.outputs[k]] = node.cpuOp->hostOutput(int(k));
  node.outputsBase = node.ctx->outputs().data();
  nodes_.push_back(std::move(node));
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

} // namespace dtf::exec
