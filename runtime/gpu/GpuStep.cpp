// GpuSegment: consecutive GPU ops of a program as one CUDA graph.
#include "runtime/gpu/GpuStep.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace dtf::gpu {

using namespace cuda;

GpuSegment::GpuSegment(GpuDevice &device)
    : device_(device), graph_(device) {}

GpuSegment::~GpuSegment() {
  (void)device_.makeCurrent();
  (void)device_.synchronize();
  for (auto &u : uploads_)
    device_.releaseStaged(u->buffer, u->pinned);
}

const Tensor *GpuSegment::upload(const Tensor *host) {
  for (auto &u : uploads_)
    if (u->host == host)
      return &u->view;
  uploads_.push_back(std::make_unique<Upload>());
  uploads_.back()->host = host;
  return &uploads_.back()->view;
}

// Stages the host values into their pinned buffers; `sig` gets their
// shapes and buffers.
Status GpuSegment::stageUploads(GpuOp::Signature *sig) {
  for (auto &u : uploads_) {
    const Tensor &h = *u->host;
    if (!h.defined())
      return errorStatus("a host value the GPU ops read has no value");
    const size_t bytes = h.byteSize();
    DTF_RETURN_IF_ERROR(device_.reserve(u->buffer, std::max<size_t>(bytes, 1)));
    DTF_RETURN_IF_ERROR(
        device_.reservePinned(&u->pinned, &u->pinnedCapacity, bytes));
    // The previous step's copy out of the pinned buffer finished at that
    // step's end (the executor synchronizes every device).
    std::memcpy(u->pinned, h.rawData(), bytes);
    u->view = Tensor::view(h.dtype(), h.shape(),
                           reinterpret_cast<void *>(uintptr_t(u->buffer.ptr)));
    sig->shapes.push_back(h.shape());
    sig->pointers.push_back(u->pinned);
    sig->pointers.push_back(u->view.rawData());
  }
  return Status::ok();
}

// Binds every op's inputs as they are now; with the uploads' part, `sig` is
// what a graph captured now would bake in.
Status GpuSegment::bindOps(uint64_t step, uint64_t seed,
                           GpuOp::Signature *sig) {
  // An arena planned since: every buffer moved.
  sig->shapes.push_back({device_.arenasPlanned()});
  for (size_t k = 0; k < ops_.size(); ++k) {
    Status s = ops_[k]->stage(step, seed, sig);
    if (!s.isOk()) {
      failed_ = int(k);
      return s;
    }
  }
  return Status::ok();
}

// The segment's work on the stream: the uploads, then each op's work in
// program order, each op bound to its inputs just before (an op's output
// may be made by the op before it).
Status GpuSegment::enqueue(uint64_t step, uint64_t seed) {
  CudaDriver &d = device_.driver();
  for (auto &u : uploads_)
    if (u->host->byteSize() > 0)
      DTF_RETURN_IF_ERROR(device_.check(
          "cuMemcpyHtoDAsync",
          d.cuMemcpyHtoDAsync(u->buffer.ptr, u->pinned, u->host->byteSize(),
                              device_.stream())));
  for (size_t k = 0; k < ops_.size(); ++k) {
    GpuOp::Signature unused;
    Status s = ops_[k]->stage(step, seed, &unused);
    if (s.isOk())
      s = ops_[k]->enqueue();
    if (!s.isOk()) {
      failed_ = int(k);
      return s;
    }
  }
  return Status::ok();
}

Status GpuSegment::run(uint64_t step, uint64_t seed) {
  failed_ = -1;
  DTF_RETURN_IF_ERROR(device_.makeCurrent());
  GpuOp::Signature uploaded;
  DTF_RETURN_IF_ERROR(stageUploads(&uploaded));
  GpuOp::Signature sig = uploaded;
  DTF_RETURN_IF_ERROR(bindOps(step, seed, &sig));
  DTF_RETURN_IF_ERROR(graph_.run(sig, [&] { return enqueue(step, seed); }));
  // What the next step must see to replay: the buffers as this step left
  // them. A replay changed none; an eager or captured step may have made
  // new ones, so its ops are bound again.
  if (graph_.replayed()) {
    graph_.ran(std::move(sig));
  } else {
    GpuOp::Signature after = std::move(uploaded);
    DTF_RETURN_IF_ERROR(bindOps(step, seed, &after));
    graph_.ran(std::move(after));
  }

  bool anyDownload = false, anyReport = false;
  for (GpuOp *op : ops_) {
    anyDownload |= op->downloads();
    anyReport |= op->reports();
  }
  if (!anyDownload && !anyReport)
    return Status::ok();
  // One wait for the segment's downloads; a report of bad input (a row
  // kernel's label outside the classes) fails the step here, before any
  // host op reads what the segment made.
  DTF_RETURN_IF_ERROR(device_.synchronize());
  for (size_t k = 0; k < ops_.size(); ++k) {
    Status s = ops_[k]->finishReports();
    if (!s.isOk()) {
      failed_ = int(k);
      return s;
    }
  }
  for (size_t k = 0; k < ops_.size(); ++k) {
    Status s = ops_[k]->finishDownloads();
    if (!s.isOk()) {
      failed_ = int(k);
      return s;
    }
  }
  return Status::ok();
}

} // namespace dtf::gpu
