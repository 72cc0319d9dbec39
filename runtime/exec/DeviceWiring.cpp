// The executor's GPU nodes on the device layer: each op placed on a GPU
// becomes a device::DeviceOp, consecutive ones of one device a
// device::Graph, wired to read device values in place and host values
// through their graph's uploads; and the device work between steps.
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExecutorNode.h"
#include "dtf/OpNames.h"

#include "runtime/device/Device.h"
#include "runtime/device/Platform.h"
#include "runtime/plan/PlanReader.h"

#include <algorithm>
#include <map>

namespace dtf::exec {

// A node that runs `op` on GPU `index`; its inputs are wired once every node
// exists (wireGpuNodes).
Status Executor::buildGpuNode(const plan::Op &op, int index, Node *node) {
  std::unique_ptr<device::Device> &gpu = gpus_[index];
  if (!gpu) {
    device::Platform *gpus = device::gpuPlatform(nullptr);
    device::DeviceOptions deviceOptions;
    deviceOptions.allowTf32 = options_.allowTf32;
    Status s = gpus ? gpus->openDevice(index, deviceOptions, &gpu)
                    : errorStatus("the CUDA driver went away");
    if (!s.isOk())
      return errorStatus(options_.programName, ": ", node->where, ": ",
                         s.message());
  }
  node->kind = NodeKind::kGpu;
  node->gpu = index;
  device::DeviceOpSpec spec;
  spec.opName = op.name();
  spec.numOutputs = static_cast<int>(node->outputs.size());
  if (op.name() == dtf::ops::kFused) {
    spec.kernel = int(op.attrs().at("kernel").i());
    spec.kernels = options_.planKernels->loaded;
    spec.code = &options_.planKernels->gpu[size_t(spec.kernel)];
  }
  Status s = kernelAttrs(op, *node, &spec.attrs);
  if (!s.isOk())
    return errorStatus(options_.programName, ": ", node->where, ": ",
                       s.message());
  DTF_RETURN_IF_ERROR(gpu->createOp(std::move(spec), &node->gpuOp));
  for (size_t k = 0; k < node->outputs.size(); ++k)
    slots_[node->outputs[k]] = node->gpuOp->hostOutput(int(k));
  hasGpu_ = true;
  return Status::ok();
}

// Consecutive GPU ops on one device form a segment (a device::Graph) that
// runs as one unit. A GPU op reads another GPU op's result on the same
// device in place, and everything else from the host through its segment
// (copied up once per step); its results that a CPU op, another device or
// a fetch reads are copied down.
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
      segments_.push_back(gpus_.at(node.gpu)->createGraph());
      segmentNodes_.emplace_back();
      node.segmentHead = true;
      if (options_.profile)
        segments_.back()->setProfile();
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
      deviceFetch_[i] = &made.gpuOp->deviceOutput(p->second.second);
      deviceFetchGpu_[i] = made.gpu;
      continue;
    }
    readOnHost.insert(f.value);
  }
  std::set<int> readByOps; // by host ops, another GPU or a later upload
  addGpuInputs(producer, readByOps);
  readOnHost.insert(readByOps.begin(), readByOps.end());
  late_ = takesLateFetches(producer, readByOps);
  if (late_) {
    // Alternate steps stage into alternate buffers, so that a step is
    // queued while the one before still copies its fetches down.
    for (auto &[index, gpu] : gpus_)
      gpu->setStagingSlots(2);
    for (auto &segment : segments_)
      segment->setLate();
  }
  for (Node &node : nodes_)
    if (node.kind == NodeKind::kGpu)
      for (size_t k = 0; k < node.outputs.size(); ++k)
        if (readOnHost.count(node.outputs[k]))
          node.gpuOp->setDownload(int(k));
  for (int k : feedOnDevice_)
    if (!readOnHost.count(feeds_[size_t(k)].value))
      feedDeviceOnly_.insert(k);
  if (options_.log && options_.logDevicePlacement) {
    logGpuSegments(readOnHost);
    if (late_)
      std::fprintf(options_.log,
                   "%s: its %zu fetches come down one step late: a step "
                   "ends without waiting for its GPU work "
                   "(DTF_GPU_SYNC_FETCH=1 waits)\n",
                   options_.programName.c_str(), fetches_.size());
  }
}

// Every GPU node's inputs, in order, and the values that host code reads
// (`readOnHost`: host ops' inputs and the values a GPU op uploads).
void Executor::addGpuInputs(
    const std::unordered_map<int, std::pair<int, int>> &producer,
    std::set<int> &readOnHost) {
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
              &nodes_[p->second.first].gpuOp->deviceOutput(p->second.second));
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
}

bool Executor::takesLateFetches(
    const std::unordered_map<int, std::pair<int, int>> &producer,
    const std::set<int> &readByOps) const {
  if (!options_.lateFetches || segments_.empty() || syncFetchForced())
    return false;
  for (size_t i = 0; i < fetches_.size(); ++i)
    if (deviceFetch_[i] || !producer.count(fetches_[i].value))
      return false; // kept on a GPU, or made on the host during the step
  for (int v : readByOps)
    if (producer.count(v))
      return false; // the step itself waits for it
  return true;
}

// Where the program crosses between host and GPU: each segment's copies.
void Executor::logGpuSegments(const std::set<int> &readOnHost) const {
  std::string line;
  for (size_t g = 0; g < segments_.size(); ++g) {
    const std::vector<int> &members = segmentNodes_[g];
    int down = 0, keys = 0;
    for (int n : members) {
      for (size_t k = 0; k < nodes_[size_t(n)].outputs.size(); ++k)
        down += readOnHost.count(nodes_[size_t(n)].outputs[k]) ? 1 : 0;
      // A dropout kernel copies its step's key up.
      keys += nodes_[size_t(n)].gpuOp->uploadsStepKey();
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

// The arena about to be planned on `gpu` loses the buffers' contents: its
// device fetches are copied (on the device) into allocations of their own.
Status Executor::keepDeviceFetches(int gpu) {
  device::Device &dev = *gpus_.at(gpu);
  bool copied = false;
  for (size_t i = 0; i < deviceFetch_.size(); ++i) {
    if (!deviceFetch_[i] || deviceFetchGpu_[i] != gpu)
      continue;
    const Tensor &t = *deviceFetch_[i];
    auto &[ptr, bytes] = deviceFetchKept_[i];
    if (bytes < t.byteSize()) {
      if (ptr)
        dev.allocator().free(ptr);
      ptr = 0;
      DTF_RETURN_IF_ERROR(dev.allocator().allocate(
          std::max<size_t>(t.byteSize(), 1), "a fetch kept on the GPU", &ptr));
      bytes = t.byteSize();
    }
    DTF_RETURN_IF_ERROR(
        dev.stream().copyOnDevice(ptr, uint64_t(uintptr_t(t.rawData())),
                                  t.byteSize(), "a fetch kept on the GPU"));
    deviceFetchNow_[i] = Tensor::view(t.dtype(), t.shape(),
                                      reinterpret_cast<void *>(uintptr_t(ptr)));
    copied = true;
  }
  if (copied)
    DTF_RETURN_IF_ERROR(dev.stream().synchronize());
  return Status::ok();
}

Status Executor::waitOnGpu(int gpu, const device::Event *event) {
  auto it = gpus_.find(gpu);
  if (!event || it == gpus_.end())
    return Status::ok();
  return it->second->stream().wait(*event);
}

Status Executor::synchronizeGpus() {
  for (auto &[index, gpu] : gpus_)
    DTF_RETURN_IF_ERROR(gpu->stream().synchronize());
  return Status::ok();
}

} // namespace dtf::exec
