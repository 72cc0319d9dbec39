// GraphReplay: a GPU's stream work, eager, captured once, then replayed.
#include "runtime/gpu/GraphReplay.h"

#include <atomic>
#include <cstdio>
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
  if (Status captured = device_.capture(enqueue, &exec_); !captured.isOk()) {
    // A call the driver will not capture (a library that allocates or
    // synchronizes inside, an older driver): nothing of the capture ran,
    // so this step's work runs eagerly, and so does every later one here.
    exec_ = nullptr;
    enabled_ = false;
    static std::atomic<bool> said{false}; // once per process
    if (!said.exchange(true))
      std::fprintf(stderr,
                   "dtf-run: warning: %s: capturing a CUDA graph failed (%s); "
                   "that GPU work runs eagerly from now on, as any other "
                   "whose capture fails (said once)\n",
                   device_.name().c_str(), captured.message().c_str());
    return enqueue();
  }
  captured_ = sig;
  ++launches_;
  return device_.check("cuGraphLaunch", device_.driver().cuGraphLaunch(
                                            exec_, device_.computeStream()));
}

} // namespace dtf::gpu
