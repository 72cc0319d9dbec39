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

void GraphReplay::drop(int slot) {
  if (exec_[slot])
    device_.driver().cuGraphExecDestroy(exec_[slot]);
  exec_[slot] = nullptr;
}

Status GraphReplay::run(const GraphSignature &sig,
                        const std::function<Status()> &enqueue, int slot) {
  slot &= 1;
  replayed_ = exec_[slot] && sig == captured_[slot];
  if (replayed_) {
    ++launches_;
    return device_.check(
        "cuGraphLaunch",
        device_.driver().cuGraphLaunch(exec_[slot], device_.computeStream()));
  }
  drop(slot);
  // The other slot's graph holds this very work, on its own pinned buffers:
  // this slot's is captured at once.
  if (enabled_ && exec_[1 - slot] && sig == captured_[1 - slot])
    return captureAndLaunch(sig, enqueue, slot);
  drop(1 - slot);
  if (!enabled_ || !haveLast_ || !(sig == last_))
    return enqueue();
  // The step before ran eagerly with these shapes and buffers and made
  // every buffer: capture once, replay from now on.
  return captureAndLaunch(sig, enqueue, slot);
}

Status GraphReplay::captureAndLaunch(const GraphSignature &sig,
                                     const std::function<Status()> &enqueue,
                                     int slot) {
  if (Status captured = device_.capture(enqueue, &exec_[slot]);
      !captured.isOk()) {
    // A call the driver will not capture (a library that allocates or
    // synchronizes inside, an older driver): nothing of the capture ran,
    // so this step's work runs eagerly, and so does every later one here.
    exec_[slot] = nullptr;
    drop(1 - slot);
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
  captured_[slot] = sig;
  ++launches_;
  return device_.check(
      "cuGraphLaunch",
      device_.driver().cuGraphLaunch(exec_[slot], device_.computeStream()));
}

} // namespace dtf::gpu
