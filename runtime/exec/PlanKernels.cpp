// Loading a plan's generated kernels once per process.
#include "runtime/exec/PlanKernels.h"

#include "runtime/plan/PlanTypes.h"
#include "schema/PlanSeal.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace dtf::exec {

namespace {

Status infoOf(const plan::Kernel &kernel, GeneratedKernelInfo *out) {
  out->name = kernel.name();
  out->cpuSymbol = kernel.cpu_symbol();
  out->cpuColumnsSymbol = kernel.cpu_columns_symbol();
  if (kernel.body_size() == 1) {
    out->opName = plan::printable(kernel.body(0).name());
    // A dropout's stream: its seed (0 when it has none, as the op-by-op
    // kernel reads it).
    auto seed = kernel.body(0).attrs().find("seed");
    if (seed != kernel.body(0).attrs().end() &&
        seed->second.value_case() == plan::AttrValue::kI)
      out->dropoutSeed = uint64_t(seed->second.i());
  }
  for (const plan::KernelParam &p : kernel.params()) {
    GeneratedParam param;
    if (!parseGeneratedParam(p.kind(), p.meaning(), p.operand(), &param))
      return errorStatus("kernel ", plan::printable(kernel.name()),
                         " has a parameter of unknown kind or meaning");
    out->params.push_back(param);
  }
  auto dtypeOf = [&](int32_t id, DType *dtype) -> Status {
    for (const plan::Value &v : kernel.values())
      if (v.id() == id)
        return plan::toDType(v.type().dtype(), dtype);
    return errorStatus("kernel ", plan::printable(kernel.name()),
                       " does not declare value ", id);
  };
  for (int32_t id : kernel.inputs())
    DTF_RETURN_IF_ERROR(dtypeOf(id, &out->inputDTypes.emplace_back()));
  for (int32_t id : kernel.outputs())
    DTF_RETURN_IF_ERROR(dtypeOf(id, &out->outputDTypes.emplace_back()));
  return Status::ok();
}

std::shared_ptr<const PlanKernels> load(const plan::Plan &plan) {
  auto result = std::make_shared<PlanKernels>();
  auto module = std::make_shared<device::ModuleCode>();
  module->ptx = plan.gpu_ptx();
  module->cubins.insert(plan.gpu_cubins().begin(), plan.gpu_cubins().end());
  for (const plan::Kernel &k : plan.kernels()) {
    device::KernelCode &code = result->gpu.emplace_back();
    code.name = k.name();
    code.block = k.block();
    code.blockY = std::max(1, k.block_y());
    code.outputsPerBlock = k.outputs_per_block();
    code.module = module;
    plan::Kernel *copy = result->kernels.Add();
    *copy = k;
    copy->clear_ptx();
    copy->clear_cubins();
  }
  std::string why;
  const char *env = std::getenv("DTF_GENERATED_KERNELS");
  if (env && std::string(env) == "off") {
    why = "DTF_GENERATED_KERNELS=off";
  } else if (plan.cpu_object().empty()) {
    why = "the plan holds no CPU code for them";
  } else if (plan.has_integrity() &&
             plan::sha256(plan.cpu_object()) !=
                 plan.integrity().cpu_object_sha256()) {
    // (The reader checked the seal; this holds a plan changed in memory.)
    why = "the cpu_object's SHA-256 is not the one dtfc sealed";
  } else if (cpuSupportsTarget(plan.cpu_target(), &why)) {
    std::vector<GeneratedKernelInfo> infos;
    Status s;
    for (const plan::Kernel &k : plan.kernels()) {
      s = infoOf(k, &infos.emplace_back());
      if (!s.isOk())
        break;
    }
    std::unique_ptr<GeneratedKernels> loaded;
    if (s.isOk())
      s = GeneratedKernels::load(plan.cpu_object(), std::move(infos), &loaded);
    if (s.isOk())
      result->loaded = std::move(loaded);
    else
      why = s.message();
  }
  if (!result->loaded) {
    result->fallbackReason = why;
    std::fprintf(stderr,
                 "dtf-run: note: running the plan's %d fused regions op by op "
                 "(%s)\n",
                 plan.kernels_size(), why.c_str());
  }
  return result;
}

} // namespace

std::shared_ptr<const PlanKernels> planKernelsOf(const plan::Plan &plan) {
  if (plan.kernels_size() == 0)
    return nullptr;
  // Keyed by the object and the kernels (bodies and parameters, not the GPU
  // code). Kept for the process's life (a process runs few plans).
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const PlanKernels>> cache;
  std::string key = plan.cpu_target();
  key += '\0';
  key += plan.cpu_object();
  for (const plan::Kernel &k : plan.kernels()) {
    plan::Kernel copy = k;
    copy.clear_ptx();
    copy.clear_cubins();
    key += '\0';
    key += copy.SerializeAsString();
  }
  // The GPU module too, which PlanKernels::gpu carries.
  key += '\0';
  key += plan.gpu_ptx();
  for (const auto &[chip, cubin] : plan.gpu_cubins())
    key += chip + cubin;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  auto loaded = load(plan);
  cache.emplace(std::move(key), loaded);
  return loaded;
}

} // namespace dtf::exec
