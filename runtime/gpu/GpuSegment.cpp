// GpuSegment: consecutive GPU ops of a program as one CUDA graph.
#include "runtime/gpu/GpuSegment.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace dtf::gpu {

using namespace cuda;

GpuSegment::GpuSegment(GpuDevice &device) : device_(device), graph_(device) {}

GpuSegment::~GpuSegment() {
  (void)device_.makeCurrent();
  (void)device_.synchronize();
  CudaDriver &d = device_.driver();
  for (auto &u : uploads_) {
    device_.release(u->buffer);
    device_.memory().freePinned(u->pinned);
    if (u->copied)
      d.cuEventDestroy(u->copied);
  }
  for (CUevent e : {fork_, ran_, copied_, joined_})
    if (e)
      d.cuEventDestroy(e);
  for (CUevent e : timing_)
    if (e)
      d.cuEventDestroy(e);
}

bool GpuSegment::setProfile() {
  profile_ = true;
  graph_.disable();
  return true;
}

// The events are made once, before any capture.
Status GpuSegment::createEvents() {
  for (CUevent *e : {&fork_, &ran_, &copied_, &joined_})
    if (!*e)
      DTF_RETURN_IF_ERROR(device_.createEvent(e));
  for (auto &u : uploads_)
    if (!u->copied)
      DTF_RETURN_IF_ERROR(device_.createEvent(&u->copied));
  if (profile_ && timing_.empty()) {
    timing_.assign(ops_.size() + 1, nullptr);
    opSeconds_.assign(ops_.size(), 0.0);
    for (CUevent &e : timing_)
      DTF_RETURN_IF_ERROR(device_.createTimingEvent(&e));
  }
  return Status::ok();
}

// The step's op times (profile_): the compute stream's work is done.
Status GpuSegment::addOpTimes() {
  CudaDriver &d = device_.driver();
  DTF_RETURN_IF_ERROR(device_.check(
      "cuEventSynchronize", d.cuEventSynchronize(timing_.back())));
  for (size_t k = 0; k < ops_.size(); ++k) {
    float ms = 0;
    DTF_RETURN_IF_ERROR(device_.check(
        "cuEventElapsedTime",
        d.cuEventElapsedTime(&ms, timing_[k], timing_[k + 1])));
    opSeconds_[k] += double(ms) * 1e-3;
  }
  return Status::ok();
}

const Tensor *GpuSegment::upload(const Tensor *host) {
  for (auto &u : uploads_)
    if (u->host == host)
      return &u->view;
  uploads_.push_back(std::make_unique<Upload>());
  uploads_.back()->host = host;
  return &uploads_.back()->view;
}

// Stages the host values into their pinned buffers of this step's slot;
// `sig` gets their shapes and buffers (slot 0's pinned buffer standing for
// every slot's, GraphReplay.h).
Status GpuSegment::stageUploads(GpuOp::Signature *sig) {
  const int slot = device_.stagingSlot();
  for (auto &u : uploads_) {
    const Tensor &h = *u->host;
    if (!h.defined())
      return errorStatus("a host value the GPU ops read has no value");
    const size_t bytes = h.byteSize();
    DTF_RETURN_IF_ERROR(device_.reserve(u->buffer, std::max<size_t>(bytes, 1)));
    DTF_RETURN_IF_ERROR(device_.memory().reservePinned(u->pinned, slot, bytes));
    // The last copy out of this slot's buffer was the step before last's,
    // which has ended: the executor waits for a step's end before it
    // stages into that step's slot again (with one slot, every step ends
    // synchronized).
    std::memcpy(u->pinned.slot[slot], h.rawData(), bytes);
    u->view = Tensor::view(h.dtype(), h.shape(),
                           reinterpret_cast<void *>(uintptr_t(u->buffer.ptr)));
    sig->shapes.push_back(h.shape());
    sig->pointers.push_back(u->pinned.slot[0] ? u->pinned.slot[0]
                                              : u->pinned.slot[slot]);
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

// The segment's work on its two streams. The copy stream forks off the
// compute stream (in a capture it joins the capture) and uploads every host
// value, each followed by its event; each op's kernel goes on the compute
// stream, after the events of the uploads it is the first to read, so that
// an upload that only a later op needs overlaps the earlier kernels; an
// op's copies down go on the copy stream after an event recorded behind its
// kernel, so that later kernels run while they come down. An op that
// writes an input in place waits for the copies down issued so far (one
// may still read that memory). The copy stream joins back into the compute
// stream at the end, so a capture makes one graph and the host waits for
// one stream. Each op is bound to its inputs just before (an op's input may
// be made by the op before it).
Status GpuSegment::enqueue(uint64_t step, uint64_t seed) {
  CudaDriver &d = device_.driver();
  const CUstream compute = device_.computeStream(), copy = device_.copyStream();
  DTF_RETURN_IF_ERROR(device_.order(fork_, compute, copy));
  const int slot = device_.stagingSlot();
  for (auto &u : uploads_) {
    if (u->host->byteSize() > 0)
      DTF_RETURN_IF_ERROR(
          device_.check("cuMemcpyHtoDAsync",
                        d.cuMemcpyHtoDAsync(u->buffer.ptr, u->pinned.slot[slot],
                                            u->host->byteSize(), copy)));
    DTF_RETURN_IF_ERROR(
        device_.check("cuEventRecord", d.cuEventRecord(u->copied, copy)));
  }
  std::vector<bool> awaited(uploads_.size(), false);
  bool copyingDown = false;
  if (profile_)
    DTF_RETURN_IF_ERROR(device_.check("cuEventRecord",
                                      d.cuEventRecord(timing_[0], compute)));
  for (size_t k = 0; k < ops_.size(); ++k) {
    GpuOp &op = *ops_[k];
    GpuOp::Signature unused;
    Status s = op.stage(step, seed, &unused);
    for (size_t i = 0; s.isOk() && i < uploads_.size(); ++i)
      if (!awaited[i] && op.reads(&uploads_[i]->view)) {
        awaited[i] = true;
        s = device_.check("cuStreamWaitEvent",
                          d.cuStreamWaitEvent(compute, uploads_[i]->copied, 0));
      }
    if (s.isOk() && op.writesInputs() && copyingDown) {
      s = device_.order(copied_, copy, compute);
      copyingDown = false;
    }
    if (s.isOk())
      s = op.enqueueKernel();
    if (s.isOk() && profile_)
      s = device_.check("cuEventRecord",
                        d.cuEventRecord(timing_[k + 1], compute));
    if (s.isOk() && op.downloads()) {
      s = device_.order(ran_, compute, copy);
      if (s.isOk())
        s = op.enqueueDownloads(copy);
      copyingDown = true;
    }
    if (!s.isOk()) {
      failed_ = int(k);
      return s;
    }
  }
  return device_.order(joined_, copy, compute);
}

Status GpuSegment::run(uint64_t step, uint64_t seed) {
  failed_ = -1;
  DTF_RETURN_IF_ERROR(device_.makeCurrent());
  DTF_RETURN_IF_ERROR(createEvents());
  GpuOp::Signature uploaded;
  DTF_RETURN_IF_ERROR(stageUploads(&uploaded));
  GpuOp::Signature sig = uploaded;
  DTF_RETURN_IF_ERROR(bindOps(step, seed, &sig));
  DTF_RETURN_IF_ERROR(graph_.run(
      sig, [&] { return enqueue(step, seed); }, device_.stagingSlot()));
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
  if (profile_)
    DTF_RETURN_IF_ERROR(addOpTimes());
  if (late_)
    return Status::ok(); // finishLate, after the step's end

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
  return finishOps(device_.stagingSlot());
}

Status GpuSegment::finishLate(int slot) {
  failed_ = -1;
  return finishOps(slot);
}

Status GpuSegment::finishOps(int slot) {
  for (size_t k = 0; k < ops_.size(); ++k) {
    Status s = ops_[k]->finishReports(slot);
    if (!s.isOk()) {
      failed_ = int(k);
      return s;
    }
  }
  for (size_t k = 0; k < ops_.size(); ++k) {
    Status s = ops_[k]->finishDownloads(slot);
    if (!s.isOk()) {
      failed_ = int(k);
      return s;
    }
  }
  return Status::ok();
}

} // namespace dtf::gpu
