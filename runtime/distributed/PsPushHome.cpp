// A worker's push home (docs/protocol.md, "The gradients' own region"): per
// ps on this host, one shared-memory region that every step's push names,
// each value at the offset the ps reads it from (the request's order,
// kRegionAlignment steps: what a push through a region of its own does,
// so no protocol change). After the first push the step's outputs that are
// pushed whole are made there (exec::Executor::placeFetch): the kernels
// write the gradients where the ps reads them, and a push copies nothing.
#include "runtime/distributed/PsClient.h"

#include <cstring>

namespace dtf::dist {

PsClient::PushHome *PsClient::pushHomeFor(const PsLink &l,
                                          const rpc::PushRequest &req,
                                          const std::vector<Tensor> &views) {
  const size_t k = size_t(&l - ps_.data());
  if (k >= pushHomes_.size() || !l.regions || l.regions->off() || compressor_ ||
      links_.config().wireBf16 || views.empty())
    return nullptr;
  PushHome &home = pushHomes_[k];
  std::vector<std::pair<std::string, uint64_t>> layout;
  layout.reserve(views.size());
  uint64_t end = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    layout.emplace_back(req.values(int(i)).name(), views[i].byteSize());
    end = alignRegion(end) + views[i].byteSize();
  }
  if (home.region)
    return layout == home.layout ? &home : nullptr;
  if (home.misses >= 3 || end == 0)
    return nullptr;
  std::string failure;
  home.region = l.regions->makeHome(end, &failure);
  if (!failure.empty())
    links_.say(links_.self() + ": no shared memory for " + l.task.name + " (" +
               failure + "): its tensors go through the socket");
  if (!home.region) {
    ++home.misses;
    return nullptr;
  }
  home.layout = std::move(layout);
  home.placed.clear();
  return &home;
}

size_t PsClient::fillPushHome(PushHome &home, const std::vector<Tensor> &views,
                              rpc::PushRequest *req) const {
  // Each value has its own slot: one made in the region lies in its own
  // (placeInPushHome), so no copy below overwrites another's value.
  size_t inPlace = 0;
  uint64_t at = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    at = alignRegion(at);
    char *slot = home.region->data() + at;
    const size_t n = views[i].byteSize();
    if (views[i].rawData() == slot)
      ++inPlace;
    else if (n)
      std::memcpy(slot, views[i].rawData(), n);
    req->mutable_values(int(i))->set_offset(at);
    at += n;
  }
  *req->mutable_values_in() = home.region->slice();
  return inPlace;
}

void PsClient::placeInPushHome(PushHome &home, const std::vector<Tensor> &views,
                               const std::vector<std::string> &keys,
                               PushOutcome *out) const {
  uint64_t at = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    at = alignRegion(at);
    char *slot = home.region->data() + at;
    const Tensor &v = views[i];
    at += v.byteSize();
    if (keys[i].empty() || v.rawData() == slot || home.gaveUp.count(keys[i]))
      continue;
    // Made there before, and the kernel put it elsewhere since (a new
    // shape, a buffer someone kept): it stays where its kernel puts it.
    if (home.placed.count(keys[i]) || v.byteSize() == 0) {
      home.gaveUp.insert(keys[i]);
      continue;
    }
    // A buffer of its own (use count 1 in the kernel's output, which
    // allocateOutput requires) that keeps the region mapped.
    std::shared_ptr<void> buffer(slot, [keep = home.region](void *) {});
    out->placements.push_back(
        {keys[i],
         Tensor::adopt(v.dtype(), v.shape(), std::move(buffer), v.byteSize()),
         /*into=*/true});
  }
}

void PsClient::leavePushHome(PushHome &home, const std::vector<Tensor> &views,
                             const std::vector<std::string> &keys,
                             PushOutcome *out) const {
  for (size_t i = 0; i < views.size(); ++i) {
    if (keys[i].empty() || !home.placed.count(keys[i]))
      continue;
    Tensor own = Tensor::allocate(views[i].dtype(), views[i].shape());
    // Out of memory: it stays, and the next push copies it into a region
    // of its own (this home is left).
    if (!own.defined())
      continue;
    std::memcpy(own.rawData(), views[i].rawData(), own.byteSize());
    out->placements.push_back({keys[i], std::move(own), /*into=*/false});
  }
  home.region.reset();
  home.layout.clear();
  home.placed.clear();
  ++home.misses;
}

void PsClient::settlePlacements(const PsLink &l, const PushOptions &options,
                                PushOutcome *out) {
  const size_t k = size_t(&l - ps_.data());
  for (PushOutcome::Placement &p : out->placements) {
    const bool placed =
        options.place && options.place(p.key, std::move(p.buffer));
    if (!p.into || k >= pushHomes_.size())
      continue;
    (placed ? pushHomes_[k].placed : pushHomes_[k].gaveUp).insert(p.key);
  }
  out->placements.clear();
}

} // namespace dtf::dist
