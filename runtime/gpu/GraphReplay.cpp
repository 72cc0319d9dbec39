// GraphReplay: a GPU's stream work, eager, captured once, then replayed.
#include "runtime/gpu/GraphReplay.h"

#include <cstdlib>
#include <string>

namespace dtf::gpu {

bool cudaGraphsEnabled() {
  const char *graphs = std::getenv("DTF_CUDA_GRAPHS");
  return !(graphs && std::string(graphs) == "0");
}

void GraphReplay::drop() {
  if (exec_)
    device_.driver().cuGraphExecDestroy(exec_);
  exec_ = nullptr;
}

Status GraphReplay::run(const GraphSignature &sig,
                        const std::function<Status()> &enqueue) {
  replayed_ = exec_ && sig == captured_;
  if (replayed_) {
    ++launches_;
    return device_.check("cuGraphLaunch", device_.driver().cuGraphLaunch(
                                              exec_, device_.computeStream()));
  }
  drop();
  if (!enabled_ || !haveLast_ || !(sig == last_))
    return enqueue();
  // The step before ran eagerly with these shapes and buffers and made
  // every buffer: capture once, replay from now on.
  DTF_RETURN_IF_ERROR(device_.capture(enqueue, &exec_));
  captured_ = sig;
  ++launches_;
  return device_.check("cuGraphLaunch", device_.driver().cuGraphLaunch(
                                            exec_, device_.computeStream()));
}

} // namespace dtf::gpu
