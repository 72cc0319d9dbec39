// What a dtf-run process sets up about itself before it runs a task: Ctrl-C
// handling, OpenMP's wait policy, gRPC's lifetime, emulated GPUs.
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

/// Keeps gRPC (and OpenSSL) initialized until the process exits, so that a
/// task of a cluster exits as soon as its work is done. Without it the last
/// gRPC object a task destroys (a worker's channels to the ps, a ps's
/// server) runs grpc_shutdown, which joins gRPC's executor threads; when a
/// large push or pull had found a socket's buffer full, one of them runs
/// gRPC 1.51's TCP backup poller, which polls in slices of 10 s, and the
/// task lingered up to 10 s after its last line (docs/protocol.md, "How a
/// job ends"). The exit ends those threads instead. Nothing is cut short:
/// every call a task makes has completed when it returns (a worker's last
/// push and its done notice, the chief's final save and the ps's Shutdown).
/// OpenSSL keeps its state to the end too (no cleanup at exit), since a
/// gRPC thread may still be reading a TLS record then. Call once, after
/// watchInterrupts (gRPC's threads inherit its signal mask) and before any
/// channel or server.
void keepGrpcUntilExit();

/// Runs the plan's GPU ops on `gpus` emulated CUDA GPUs (libdtf-cuda-emu.so
/// beside the program), and prints what the emulation ran at exit.
void useEmulatedGpus(int gpus);

} // namespace dtf::task
