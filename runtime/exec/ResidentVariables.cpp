// Variables (and the constants GPU ops read) that live in a GPU's memory
// between steps: their device copies, uploads at the first run (and when
// the host's values change), and the copies down before a checkpoint.
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExecutorNode.h"

#include "runtime/device/Device.h"

#include <algorithm>

namespace dtf::exec {

// After every node is loaded: a constant that a GPU op reads (a learning
// rate, a scale) is uploaded once, before the first run (with the resident
// variables, if any): it never changes. Every resident value gets its
// device copy: its own allocation, outside the arena (whose buffers move
// and lose their contents).
Status Executor::allocateResident() {
  const std::string &what = options_.programName;
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
    auto g = gpus_.find(r.gpu);
    if (g == gpus_.end())
      return errorStatus(what, ": variable resident on GPU ", r.gpu,
                         ", which runs none of its ops");
    if (!r.shared)
      DTF_RETURN_IF_ERROR(g->second->allocator().allocate(
          std::max<size_t>(r.bytes, 1), "a resident variable", &r.ptr));
    r.view = Tensor::view(host->dtype(), host->shape(),
                          reinterpret_cast<void *>(uintptr_t(r.ptr)));
  }
  if (options_.log && !resident_.empty()) {
    std::set<int> gpus;
    size_t variables = 0, shared = 0;
    for (const auto &[host, r] : resident_) {
      gpus.insert(r.gpu);
      variables += !r.constant;
      shared += !r.constant && r.shared;
    }
    std::string names;
    for (int g : gpus)
      names += (names.empty() ? "" : ", ") + device::gpuDeviceName(g);
    if (variables > 0 && shared == variables && options_.residentReads)
      std::fprintf(options_.log,
                   "%s: reads %zu variables in place on %s, where the "
                   "training keeps them (no upload per batch), with %zu "
                   "constants\n",
                   what.c_str(), variables, names.c_str(),
                   resident_.size() - variables);
    else
      std::fprintf(
          options_.log,
          "%s: %zu variables and slots stay on %s between steps (their "
          "readers and updates run there), with %zu constants\n",
          what.c_str(), variables, names.c_str(), resident_.size() - variables);
  }
  return Status::ok();
}

Executor::ResidentBuffer Executor::residentBuffer(std::string_view name) const {
  for (const auto &[host, r] : resident_)
    if (!r.constant && r.name == name)
      return {r.gpu, r.ptr, r.bytes};
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

std::map<std::string, std::pair<int, uint64_t>, std::less<>>
Executor::deviceCurrentVariables() const {
  std::map<std::string, std::pair<int, uint64_t>, std::less<>> out;
  for (const auto &[host, r] : resident_)
    if (!r.constant && !r.everyRun && !r.received)
      out[r.name] = {r.gpu, r.ptr};
  return out;
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
    DTF_RETURN_IF_ERROR(gpus_.at(r.gpu)->stream().copyToDevice(
        r.ptr, host->rawData(), r.bytes, "a resident variable"));
    used.insert(r.gpu);
  }
  for (int g : used)
    DTF_RETURN_IF_ERROR(gpus_.at(g)->stream().synchronize());
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
    DTF_RETURN_IF_ERROR(gpus_.at(r.gpu)->stream().copyToHost(
        r.host->rawData(), r.ptr, r.bytes, "a resident variable"));
    used.insert(r.gpu);
  }
  for (int g : used)
    DTF_RETURN_IF_ERROR(gpus_.at(g)->stream().synchronize());
  return Status::ok();
}

} // namespace dtf::exec
