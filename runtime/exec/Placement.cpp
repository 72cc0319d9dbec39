// Placement: which ops of a program run on which GPU of this process, which
// variables stay resident on a GPU between steps, and what soft placement
// moves to the CPU (with the notes and the log_device_placement listing).
#include "dtf/OpNames.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExecutorNode.h"

#include "runtime/device/Device.h"
#include "runtime/device/Platform.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"
#include "schema/DeviceName.h"

#include <algorithm>

namespace dtf::exec {

int gpuIndexOf(const std::string &device) {
  DeviceNameParse parsed = parseDeviceName(device);
  if (!parsed.name || parsed.name->type != DeviceType::GPU)
    return -1;
  return parsed.name->index.value_or(0);
}

namespace {

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

// Whether the dtf.fused `op` has GPU code in the plan.
bool hasGpuCode(const PlanKernels *pk, const plan::Op &op) {
  auto k = op.attrs().find("kernel");
  return pk && pk->loaded && k != op.attrs().end() && k->second.i() >= 0 &&
         k->second.i() < int64_t(pk->gpu.size()) &&
         pk->gpu[size_t(k->second.i())].present();
}

constexpr const char *kGpuKernelList =
    "its GPU kernels are dtf.matmul, dtf.conv2d and its gradients (in f32, "
    "or bf16 or f16 under mixed precision), dtf.max_pool, dtf.avg_pool and "
    "their gradients, in f32, dtf.reshape, and dtf.fused with the plan's "
    "GPU code";

} // namespace

// What place() says once it has seen every op.
struct Executor::PlacementLog {
  std::string lines; // log_device_placement's, one per op
  int moved = 0;
  std::string firstMoved;
  std::vector<std::string> reasons; // each distinct reason once
  // Ops that have no GPU kernel, said in one line.
  std::set<std::string> noGpuKernel;
};

Status Executor::place(const plan::Program &program) {
  PlacementLog log;
  opGpu_.assign(size_t(program.ops_size()), -1);
  for (int i = 0; i < program.ops_size(); ++i)
    DTF_RETURN_IF_ERROR(placeOp(program, i, log));
  if (options_.residentReads)
    for (const plan::Op &o : program.ops())
      if (o.name() == dtf::ops::kReadVariable) {
        const std::string &name = o.attrs().at("name").s();
        const int g = readOnlyResidentGpu(program, name);
        auto sh = options_.sharedResident.find(name);
        if (g >= 0 &&
            (options_.sharedResident.empty() ||
             (sh != options_.sharedResident.end() && sh->second.first == g)))
          residentNames_.emplace(name, g);
      }
  logPlacement(program, log);
  return Status::ok();
}

// An update with no device of its own, whose variable and slots only one
// GPU reads: it runs there, and they stay there between steps. Its GPU
// (before the tower's offset is known to matter), or -1.
int Executor::residentUpdateGpu(const plan::Program &program, int i) {
  const plan::Op &op = program.ops(i);
  const int gpuIndex = options_.sharedResident.empty()
                           ? residentGpuOf(program, i)
                           : sharedUpdateGpu(program, i);
  if (gpuIndex >= 0) {
    residentUpdates_.insert(&op);
    for (int k = 0; k < plan::updatedOperands(op); ++k)
      for (const plan::Op &o : program.ops())
        if (o.name() == dtf::ops::kReadVariable && o.outputs(0) == op.inputs(k))
          residentNames_[o.attrs().at("name").s()] = gpuIndex;
  }
  return gpuIndex;
}

// Places op `i`: on its GPU when this process has it and a GPU kernel for
// the op, else on the CPU by soft placement or an error saying why.
Status Executor::placeOp(const plan::Program &program, int i,
                         PlacementLog &log) {
  const plan::Op &op = program.ops(i);
  // The device this op asks for that this process lacks, and why.
  std::string lacking, because, why;
  // Ops that make no kernel call: their values live in host memory
  // wherever the plan places them.
  const bool valueOnly = op.name() == dtf::ops::kInput ||
                         op.name() == dtf::ops::kConstant ||
                         op.name() == dtf::ops::kReadVariable;
  const std::string device = placedDevice(op);
  int gpuIndex = device.empty() ? -1 : gpuIndexOf(device);
  if (gpuIndex >= 0)
    gpuIndex += options_.gpuOffset; // this tower's copy of the GPU
  if (gpuIndex < 0 && device.empty() && op.name() == dtf::ops::kFused &&
      plan::updatedOperands(op) > 0)
    gpuIndex = residentUpdateGpu(program, i);
  const std::string kNoGpuKernel = "no GPU kernel";
  if (gpuIndex >= 0) {
    if (!gpuAvailable(gpuIndex, &why)) {
      lacking = device;
    } else if (!valueOnly) {
      // Reshape moves no element: any dtype.
      bool f32 = true;
      for (int32_t id : op.outputs())
        for (const plan::Value &v : program.values())
          if (v.id() == id && v.type().dtype() != plan::DType::F32 &&
              op.name() != dtf::ops::kReshape)
            f32 = false;
      const std::string noFusedCode = fusedGpuCodeMissing(op);
      device::Platform *gpus = device::gpuPlatform(nullptr);
      if (op.name() == dtf::ops::kFused) {
        if (noFusedCode.empty())
          opGpu_[size_t(i)] = gpuIndex;
        else
          lacking = device, why = noFusedCode;
      } else if (gpus && gpus->hasKernel(op.name()) && f32 &&
                 (op.name() != dtf::ops::kReshape || op.inputs_size() == 1)) {
        // A kernel whose library did not load: this op alone moves, said
        // once per library.
        if (std::string unusable = gpus->kernelUnusable(op.name());
            unusable.empty())
          opGpu_[size_t(i)] = gpuIndex;
        else
          lacking = device, why = std::move(unusable);
      } else {
        lacking = device;
        why = kNoGpuKernel;
        log.noGpuKernel.insert(
            strCat(plan::printable(op.name()), f32 ? "" : " (not f32)"));
      }
    }
  } else if (!device.empty() && lacksDevice(device)) {
    lacking = device;
  } else if (op.name() == dtf::ops::kReadVariable) {
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
                 " (", kGpuKernelList, ")");
  if (!lacking.empty()) {
    if (!options_.softPlacement)
      return errorStatus(
          options_.programName, ": ", plan::describeOp(program, i),
          " is placed on ", plan::printable(lacking), because,
          ", a device this process does not have (",
          why.empty() ? "" : strCat(why, "; "),
          "this dtf-run runs every op on ", options_.device,
          "); to run such ops on the CPU instead, add `session = "
          "session(soft_placement = true)` to the model's train block",
          gpuIndex >= 0 || !why.empty()
              ? "; to check a GPU plan without a GPU, run it on emulated "
                "GPUs: dtf-run PLAN --emulate-gpus 1"
              : "");
    if (log.moved++ == 0)
      log.firstMoved = strCat(plan::describeOp(program, i), " on ",
                              plan::printable(lacking));
    // Missing GPU kernels are said in one line, after the loop.
    if (!why.empty() && why.rfind("dtf-run has no GPU kernel", 0) != 0 &&
        std::find(log.reasons.begin(), log.reasons.end(), why) ==
            log.reasons.end())
      log.reasons.push_back(why);
  }
  if (options_.logDevicePlacement) {
    const std::string name =
        op.name().empty() ? "(unnamed op)" : plan::printable(op.name());
    const std::string where = op.location().empty()
                                  ? strCat("op #", i)
                                  : plan::printable(op.location());
    const int g = opGpu_[size_t(i)];
    log.lines += strCat(
        name, " (", where,
        "): ", g >= 0 ? device::gpuDeviceName(g) : options_.device,
        lacking.empty() ? ""
                        : strCat(" (placed on ", plan::printable(lacking),
                                 ": soft placement)"),
        "\n");
  }
  return Status::ok();
}

// Soft placement's notes, and log_device_placement's listing.
void Executor::logPlacement(const plan::Program &program,
                            const PlacementLog &log) {
  const std::string &what = options_.programName;
  if (options_.log && log.moved > 0) {
    std::fprintf(options_.log,
                 "%s: soft placement: %d op%s placed on a device this process "
                 "lacks run on %s (first: %s)\n",
                 what.c_str(), log.moved, log.moved == 1 ? "" : "s",
                 options_.device.c_str(), log.firstMoved.c_str());
    for (const std::string &r : log.reasons)
      std::fprintf(options_.log, "%s: soft placement: %s\n", what.c_str(),
                   r.c_str());
    if (!log.noGpuKernel.empty()) {
      std::string ops;
      for (const std::string &o : log.noGpuKernel)
        ops += (ops.empty() ? "" : ", ") + o;
      std::fprintf(
          options_.log,
          "%s: soft placement: dtf-run has no GPU kernel for %s (%s)\n",
          what.c_str(), ops.c_str(), kGpuKernelList);
    }
  }
  if (options_.log && options_.logDevicePlacement) {
    std::fprintf(options_.log, "%s: device placement (%d ops):\n%s",
                 what.c_str(), program.ops_size(), log.lines.c_str());
    std::fflush(options_.log);
  }
}

// The device the plan gives `op`. A dtf.fused op that names none runs where
// its region's ops were placed (when they agree).
std::string Executor::placedDevice(const plan::Op &op) const {
  if (!op.device().empty() || op.name() != dtf::ops::kFused ||
      !options_.planKernels)
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
  if (op.name() != dtf::ops::kFused)
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
  device::Platform *gpus = device::gpuPlatform(&whyNot);
  if (!gpus) {
    *why = whyNot;
    return false;
  }
  if (index >= gpus->deviceCount()) {
    *why = strCat("this machine has ", gpus->deviceCount(),
                  gpus->deviceCount() == 1 ? " GPU" : " GPUs", " (",
                  gpus->description(), ")");
    return false;
  }
  return true;
}

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
    if (o.name() == dtf::ops::kReadVariable && o.outputs_size() == 1)
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
        o.name() == dtf::ops::kSumToShape || o.name() == dtf::ops::kReduceGrad;
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
    if (o.name() == dtf::ops::kReadVariable && o.outputs_size() == 1)
      readOf[o.outputs(0)] = o.attrs().at("name").s();
    if (o.name() == dtf::ops::kInput && o.outputs_size() == 1)
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
    if (o.name() == dtf::ops::kReadVariable && o.outputs_size() == 1 &&
        o.attrs().at("name").s() == name)
      values.insert(o.outputs(0));
  for (const plan::Fetch &f : program.fetches())
    if (values.count(f.value()))
      return -1;
  int gpu = -1;
  for (int j = 0; j < program.ops_size(); ++j) {
    const plan::Op &o = program.ops(j);
    const bool shapeOnly =
        o.name() == dtf::ops::kSumToShape || o.name() == dtf::ops::kReduceGrad;
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

} // namespace dtf::exec
