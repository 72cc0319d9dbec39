// A run of consecutive ops on one device executed as one unit: the host
// values they read uploaded once per step, their work recorded once (a CUDA
// graph) and replayed while shapes and buffers stay the same.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"
#include "runtime/device/DeviceOp.h"

#include <cstdint>
#include <vector>

namespace dtf::device {

class Graph {
public:
  virtual ~Graph() = default;
  /// The device view through which the graph's ops read the host value
  /// `host`: copied up once per step, however many ops read it. Lives as
  /// long as the graph.
  virtual const Tensor *upload(const Tensor *host) = 0;
  /// Appends an op of the same device (program order).
  virtual void add(DeviceOp *op) = 0;
  /// Runs every op once. On failure, failedOp() is the index of the op
  /// that failed (-1: the graph's own work).
  virtual Status run(uint64_t step, uint64_t seed) = 0;
  virtual int failedOp() const = 0;
  virtual int numUploads() const = 0;
  /// Its copies down are read late: run() returns without waiting for them
  /// (nor for its ops' reports of bad input); after the device's
  /// waitStepEnd(slot), finishLate(slot) fails on a report of that step
  /// (failedOp() names the op) and fills the host outputs with its values.
  /// Only where no host op of the step reads what the graph made.
  virtual void setLate() {}
  virtual Status finishLate(int /*slot*/) { return Status::ok(); }
  /// Times each op on the device (dtf-run --profile): the graph runs its
  /// ops one by one, each between two of the device's timing events, and
  /// waits for them at the end of run(). Returns false where the device
  /// cannot time its ops (their host time is all there is).
  virtual bool setProfile() { return false; }
  /// With setProfile(): the device seconds each op (in add() order) took
  /// over all runs so far.
  virtual std::vector<double> opSeconds() const { return {}; }
};

} // namespace dtf::device
