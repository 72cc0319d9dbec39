// The ps's side of shared memory (docs/protocol.md, "Shared memory"): a
// pull's values written straight into the caller's region, a push's read
// where it lies (async) or copied out of it; MappedRegions (SharedRegion.h)
// checks each region and slot.
#include "runtime/distributed/PsService.h"

#include "runtime/core/Bf16.h"
#include "runtime/distributed/TensorMessage.h"

#include <cstring>

namespace dtf::dist::ps {

grpc::Status PsService::pullIntoRegion(const rpc::PullRequest &req,
                                       const std::string &peer,
                                       rpc::PullReply *reply, bool *done) {
  *done = false;
  char *slot = nullptr;
  std::shared_ptr<SharedRegion> keep;
  if (auto bad = regions_.slot(peer, req.reply_into(), &slot, &keep); !bad.ok())
    return bad;
  const bool narrow = req.wire_dtype() == plan::BF16;
  // Where each value goes; all of them must fit, else none goes there.
  std::vector<std::pair<const Tensor *, uint64_t>> at;
  uint64_t end = 0;
  for (const std::string &n : req.names()) {
    const Tensor *t = store_.variables().find(n);
    if (!t)
      return grpc::Status::OK; // the bytes path says which
    const uint64_t offset = alignRegion(end);
    const uint64_t bytes = narrow && t->dtype() == DType::F32
                               ? uint64_t(t->numElements()) * 2
                               : t->byteSize();
    if (!insideSlot(offset, bytes, req.reply_into().capacity()))
      return grpc::Status::OK;
    at.emplace_back(t, offset);
    end = offset + bytes;
  }
  for (size_t i = 0; i < at.size(); ++i) {
    const Tensor &t = *at[i].first;
    char *dst = slot + at[i].second;
    Tensor view;
    if (narrow && t.dtype() == DType::F32) {
      dtf::narrowToBf16(t.data<float>(), t.numElements(),
                        reinterpret_cast<uint16_t *>(dst));
      view = Tensor::view(DType::BF16, t.shape(), dst);
    } else {
      std::memcpy(dst, t.rawData(), t.byteSize());
      view = Tensor::view(t.dtype(), t.shape(), dst);
    }
    rpc::WireTensor *w = reply->add_values();
    describeTensor(req.names(int(i)), view, w);
    w->set_offset(at[i].second);
    payloadOut_ += view.byteSize();
  }
  reply->set_in_region(true);
  ++regionPulls_;
  *done = true;
  return grpc::Status::OK;
}

grpc::Status PsService::pushFromRegion(const rpc::PushRequest &req,
                                       const std::string &caller,
                                       std::vector<Tensor> *values,
                                       std::vector<PayloadTarget> *targets) {
  char *slot = nullptr;
  std::shared_ptr<SharedRegion> keep;
  if (auto bad = regions_.slot(caller, req.values_in(), &slot, &keep);
      !bad.ok())
    return bad;
  if (targets->size() != size_t(req.values_size()))
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        name_ + ": a push's values and their places disagree");
  const uint64_t capacity = req.values_in().capacity();
  for (int i = 0; i < req.values_size(); ++i) {
    const rpc::WireTensor &w = req.values(i);
    const PayloadTarget &t = (*targets)[size_t(i)];
    if (!insideSlot(w.offset(), t.size, capacity))
      return regionRefusal(grpc::StatusCode::INVALID_ARGUMENT,
                           name_ + ": refused a push: value '" +
                               plan::printable(w.name()) + "' (" +
                               std::to_string(t.size) + " bytes at offset " +
                               std::to_string(w.offset()) +
                               ") lies outside its shared-memory slot of " +
                               std::to_string(capacity) + " bytes");
  }
  // An async push without a mirror is applied within this call, while the
  // worker waits for its answer and leaves the slot alone: its floating
  // point values are read where they lie (the check, then the update),
  // which saves a pass over the gradient's bytes. What a process racing
  // the ps could change between the two is a finite or non-finite float,
  // no more than it could push itself (docs/security.md); anything the ps
  // indexes by (ids, integers) and every value of a sync or mirrored push
  // is copied out first, as before.
  const bool inPlace = !sync_ && mirror_ < 0;
  for (int i = 0; i < req.values_size(); ++i) {
    const PayloadTarget &t = (*targets)[size_t(i)];
    char *at = slot + req.values(i).offset();
    Tensor *v = nullptr; // the value whose buffer the target is
    for (Tensor &u : *values)
      if (u.defined() && u.rawData() == t.data && u.byteSize() == t.size)
        v = &u;
    if (inPlace && v && t.size && isFloatingPoint(v->dtype()) &&
        reinterpret_cast<uintptr_t>(at) % Tensor::kAlignment == 0) {
      *v = Tensor::adopt(v->dtype(), v->shape(),
                         std::shared_ptr<void>(keep, at), t.size);
      ++inPlacePushValues_;
    } else if (t.size) {
      std::memcpy(t.data, at, t.size);
    }
  }
  targets->clear();
  ++regionPushes_;
  return grpc::Status::OK;
}

} // namespace dtf::dist::ps
