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
  // Every push: the values' names and sizes are the home's (no allocation).
  if (home.region) {
    if (views.size() != home.layout.size())
      return nullptr;
    for (size_t i = 0; i < views.size(); ++i)
      if (home.layout[i].second != views[i].byteSize() ||
          home.layout[i].first != req.values(int(i)).name())
        return nullptr;
    return &home;
  }
  if (home.misses >= 3)
    return nullptr;
  std::vector<std::pair<std::string, uint64_t>> layout;
  uint64_t end = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    layout.emplace_back(req.values(int(i)).name(), views[i].byteSize());
    end = alignRegion(end) + views[i].byteSize();
  }
  if (end == 0)
    return nullptr;
  home.region = makeHome(l, end);
  if (!home.region) {
    ++home.misses;
    return nullptr;
  }
  home.layout = std::move(layout);
  return &home;
}

void PsClient::placeInPushHome(PushHome &home, const rpc::PushRequest &req,
                               const std::vector<Tensor> &views,
                               const std::vector<std::string> &keys,
                               PushOutcome *out) const {
  for (size_t i = 0; i < views.size(); ++i) {
    char *slot = home.region->data() + req.values(int(i)).offset();
    const Tensor &v = views[i];
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
