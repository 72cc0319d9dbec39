// StreamLimits: the open streams of a ps task, bounded per caller, and the
// cut of stalled ones.
#include "runtime/distributed/PsStreams.h"

namespace dtf::dist::ps {

grpc::Status StreamLimits::open(grpc::CallbackServerContext *ctx,
                                const std::string &peer, bool named) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (streams_.size() >= kMaxStreams || streamsBy_[peer] >= kMaxStreamsPerPeer)
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        self_ + ": too many open streams" +
                            (named ? " from " + peer : std::string()));
  ++streamsBy_[peer];
  streams_[ctx] = {peer, Clock::now()};
  return grpc::Status::OK;
}

void StreamLimits::close(grpc::CallbackServerContext *ctx) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto it = streams_.find(ctx);
  if (it == streams_.end())
    return;
  if (--streamsBy_[it->second.peer] <= 0)
    streamsBy_.erase(it->second.peer);
  streams_.erase(it);
}

void StreamLimits::cutStalled() {
  const auto limit = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(stallSeconds_));
  std::lock_guard<std::recursive_mutex> lock(mu_);
  std::vector<grpc::CallbackServerContext *> stalled;
  for (auto &[ctx, stream] : streams_)
    if (Clock::now() - stream.moved > limit && !stream.cut)
      stalled.push_back(ctx);
  for (grpc::CallbackServerContext *ctx : stalled) {
    auto it = streams_.find(ctx);
    if (it == streams_.end())
      continue;
    it->second.cut = true;
    // Under the launcher every line already carries the task's name.
    std::fprintf(out_,
                 "cut a stream of %s that moved nothing for %d s "
                 "(--stall-timeout)\n",
                 it->second.peer.c_str(), int(stallSeconds_));
    std::fflush(out_);
    ctx->TryCancel();
  }
}

} // namespace dtf::dist::ps
