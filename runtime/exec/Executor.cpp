// Executor: loading a program into kernel contexts and running it each step.
#include "runtime/exec/Executor.h"

#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <unordered_map>

namespace dtf::exec {

enum class NodeKind : uint8_t { kAssignAdd, kKernel };

struct Executor::Node {
  NodeKind kind = NodeKind::kKernel;
  KernelFn fn = nullptr;
  std::unique_ptr<KernelContext> ctx;
  // The plan's output values (dense indices) of this op.
  std::vector<int> outputs;
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
  case DType::I32:
    addInPlace<int32_t>(var, value);
    return Status::ok();
  case DType::I64:
    addInPlace<int64_t>(var, value);
    return Status::ok();
  default:
    return errorStatus("dtf.assign_add supports f32, i32 and i64 variables, "
                       "got ",
                       var.describe());
  }
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

Executor::~Executor() = default;

Status Executor::create(const plan::Program &program, VariableStore &variables,
                        const KernelRegistry &kernels,
                        const ExecutorOptions &options,
                        std::unique_ptr<Executor> *out) {
  std::unique_ptr<Executor> e(new Executor());
  e->options_ = options;
  DTF_RETURN_IF_ERROR(e->build(program, variables, kernels));
  *out = std::move(e);
  return Status::ok();
}

Status Executor::build(const plan::Program &program, VariableStore &variables,
                       const KernelRegistry &kernels) {
  const std::string &what = options_.programName;
  DTF_RETURN_IF_ERROR(plan::validateProgram(program, what));

  const int numValues = program.values_size();
  std::unordered_map<int32_t, int> index;
  index.reserve(numValues);
  slots_.assign(numValues, nullptr);
  valueDTypes_.resize(numValues);
  valueDims_.resize(numValues);
  valueIds_.resize(numValues);
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
  for (size_t k = 0; k < feeds_.size(); ++k)
    slots_[feeds_[k].value] = &feedTensors_[k];

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
      continue;
    }

    Node node;
    node.where = where;
    node.location = op.location().empty() ? strCat(what, " op #", i)
                                          : plan::printable(op.location());
    node.opName = plan::printable(op.name());
    for (int32_t id : op.outputs())
      node.outputs.push_back(index.at(id));
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

    node.kind = NodeKind::kKernel;
    node.fn = kernels.lookup(op.name());
    if (!node.fn) {
      // Each op once, at its first use.
      if (missingOps.insert(op.name()).second)
        missing.push_back(plan::describeOp(program, i));
      continue;
    }
    auto ctx = std::make_unique<KernelContext>();
    ctx->setOpName(op.name());
    std::vector<Tensor *> inputs;
    inputs.reserve(op.inputs_size());
    for (int32_t id : op.inputs())
      inputs.push_back(slots_[index.at(id)]);
    ctx->setInputs(std::move(inputs));
    AttrMap attrs;
    for (const auto &[name, value] : op.attrs()) {
      AttrValue converted;
      Status s = toKernelAttr(value, &converted);
      if (!s.isOk())
        return fail("attribute '", plan::printable(name), "' ", s.message());
      attrs.emplace(name, std::move(converted));
    }
    if (!node.outputs.empty()) {
      const int v = node.outputs[0];
      if (const char *attr = derivedShapeAttr(op.name(), op.inputs_size()))
        if (!attrs.count(attr))
          attrs.emplace(attr, valueDims_[v]);
      if (takesOutDType(op.name()) && !attrs.count("out_dtype"))
        attrs.emplace("out_dtype", std::string(dtypeName(valueDTypes_[v])));
    }
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
  return Status::ok();
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
    if (!feedTensors_[k].defined())
      return errorStatus(options_.programName, ": feed '", feeds_[k].info.name,
                         "' was not given a value");
  // Outputs that share an input's buffer (reshape, an updated variable) would
  // make that buffer's producer allocate anew: let them go first.
  for (int n : releaseBeforeRun_)
    for (Tensor &t : nodes_[n].ctx->outputs())
      t = Tensor();

  // The ops run in plan order on this thread. An inter-op pool would go
  // here: the plan order is a valid schedule, and ready sets could be formed
  // from each op's input values (slots_) at load time.
  using Clock = std::chrono::steady_clock;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    Node &node = nodes_[n];
    Clock::time_point start;
    if (options_.profile)
      start = Clock::now();
    Status s = runNode(node, step);
    if (options_.profile) {
      node.seconds +=
          std::chrono::duration<double>(Clock::now() - start).count();
      ++node.calls;
    }
    if (!s.isOk())
      return s;
    if (!node.aliasesInput && node.kind == NodeKind::kKernel) {
      KernelContext &ctx = *node.ctx;
      for (const Tensor &o : ctx.outputs()) {
        if (!o.defined())
          continue;
        for (int i = 0; i < ctx.numInputs() && !node.aliasesInput; ++i)
          node.aliasesInput = o.rawData() == ctx.input(i).rawData();
      }
      if (node.aliasesInput)
        releaseBeforeRun_.push_back(static_cast<int>(n));
    }
  }
  return Status::ok();
}

Status Executor::runNode(Node &node, uint64_t step) {
  if (node.kind == NodeKind::kAssignAdd) {
    Status s = assignAdd(*node.var, *node.addend);
    if (!s.isOk())
      return errorStatus(node.where, ": ", s.message());
    return Status::ok();
  }
  KernelContext &ctx = *node.ctx;
  ctx.setStep(step, options_.seed);
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
