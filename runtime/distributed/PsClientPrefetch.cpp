// PsClient's prefetched pull (dtf-run --prefetch-pull): the next step's pull
// on a thread of its own, into a second copy of the pulled variables, what
// it learns of each ps kept aside (PullOutcome) until the next step takes
// it, so that it may run beside the step's push.
#include "runtime/distributed/PsClient.h"

#include "runtime/distributed/Wire.h"

#include <cstring>

namespace dtf::dist {

void PsClient::startPrefetch() {
  dropPrefetch();
  if (prefetchStore_.size() == 0)
    for (const PsLink &l : ps_)
      for (const plan::HeldTensor &h : l.pull)
        if (const Tensor *t = store_->find(h.variable);
            t && !prefetchStore_.find(h.variable))
          (void)prefetchStore_.add(h.variable,
                                   Tensor::allocate(t->dtype(), t->shape()));
  prefetchStatus_ = Status::ok();
  prefetchOutcomes_.clear();
  // The links' state as it is now, taken here: the push that runs
  // meanwhile writes the links (an async pull reads no pushedAt).
  prefetchOutcomes_ = linkStates();
  prefetch_ = std::thread([this] {
    prefetchStatus_ = pullAll(prefetchStore_, /*forEval=*/false,
                              /*sync=*/false, &prefetchOutcomes_);
  });
}

void PsClient::dropPrefetch() {
  if (prefetch_.joinable())
    prefetch_.join();
  prefetchOutcomes_.clear();
}

Status PsClient::takePrefetch(int64_t *globalStep, bool *taken) {
  *taken = prefetch_.joinable();
  if (!*taken)
    return Status::ok();
  prefetch_.join();
  std::vector<PullOutcome> outcomes = std::move(prefetchOutcomes_);
  prefetchOutcomes_.clear();
  if (!prefetchStatus_.isOk()) {
    // Nothing of it is kept: the caller pulls again (and recovers).
    for (const PullOutcome &o : outcomes)
      lastRecoverable_ |= o.recoverable;
    return prefetchStatus_;
  }
  // Into the variables the executor reads (which never move): the pulled
  // tensors, or a shard's rows of them.
  for (const PsLink &l : ps_)
    for (const plan::HeldTensor &h : l.pull) {
      Tensor *dst = store_->find(h.variable);
      Tensor *src = prefetchStore_.find(h.variable);
      if (!dst || !src)
        continue;
      Tensor to = h.partitioned ? rowsOf(*dst, h.rowOffset, h.rows) : *dst;
      const Tensor from =
          h.partitioned ? rowsOf(*src, h.rowOffset, h.rows) : *src;
      std::memcpy(to.rawData(), from.rawData(), from.byteSize());
    }
  applyPulls(outcomes);
  if (const Tensor *t = store_->find("global_step"))
    *globalStep = t->data<int64_t>()[0];
  return Status::ok();
}

} // namespace dtf::dist
