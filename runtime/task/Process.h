// What a dtf-run process sets up about itself before it runs a task: Ctrl-C
// handling, OpenMP's wait policy, emulated GPUs.
#pragma once

#include <atomic>

namespace dtf::task {

/// Makes SIGINT and SIGTERM set the returned flag, taken by one thread that
/// waits for them; a second Ctrl-C ends the process at once. Call once,
/// before starting other threads.
/// `leaveFlag` (a worker of a cluster): SIGUSR1 sets it and the stop flag:
/// the worker leaves the job after its step (docs/elastic.md, how the
/// launcher scales down); elsewhere SIGUSR1 keeps its default.
const std::atomic<bool> *watchInterrupts(std::atomic<bool> *leaveFlag = nullptr);

/// Sets OpenMP's wait policy for this process (a short spin when training
/// `alone`, passive waits as a task of a cluster) by starting the process
/// again with `argv`, unless the user set one. Returns only when it did not.
void chooseOpenMpWaits(char **argv, bool alone);

/// Runs the plan's GPU ops on `gpus` emulated CUDA GPUs (libdtf-cuda-emu.so
/// beside the program), and prints what the emulation ran at exit.
void useEmulatedGpus(int gpus);

} // namespace dtf::task
