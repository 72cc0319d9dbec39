// Tensors on the wire (rpc::WireTensor), the plan's fingerprint, and how a
// failed call and a deadline are written.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"

#include "service.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace dtf::dist {

/// The plan's DType number of a runtime dtype.
int planDTypeOf(DType d);

/// Writes `t` into `out` under `name` (one copy of its bytes, into the
/// message that gRPC then serializes).
void toWire(const std::string &name, const Tensor &t, rpc::WireTensor *out);

/// A new tensor holding a wire tensor's bytes; an error naming it when the
/// dtype is unknown or the byte count does not match its dims.
Status fromWire(const rpc::WireTensor &w, Tensor *out);

/// The dtype and dims `w` declares, when they are valid and hold exactly
/// `bytes` bytes (its payload, inline or raw); false otherwise.
bool declaredType(const rpc::WireTensor &w, size_t bytes, DType *dtype,
                  std::vector<int64_t> *dims);

/// Copies a wire tensor into `dst` in place (a variable the executor
/// aliases); its dtype and dims must be dst's.
Status copyFromWire(const rpc::WireTensor &w, Tensor *dst);

/// Copies a wire tensor holding rows [rowOffset, rowOffset + rows) of `dst`
/// (a shard of a partitioned variable) into those rows.
Status copyRowsFromWire(const rpc::WireTensor &w, Tensor *dst,
                        int64_t rowOffset);

/// `t` (F32) as bfloat16, each value rounded to the nearest (ties to even);
/// NaN stays NaN, infinities and values beyond bf16's range become inf.
Tensor narrowToBf16(const Tensor &t);
/// Writes `n` bfloat16 values at `bf16` into `dst` (F32) as floats (exact).
void widenFromBf16(const uint16_t *bf16, int64_t n, float *dst);

/// A view of rows [rowOffset, rowOffset + rows) of `t` (no copy).
Tensor rowsOf(const Tensor &t, int64_t rowOffset, int64_t rows);

/// FNV-1a of the plan's bytes: every task of a job must run the same plan.
uint64_t fingerprint(const std::string &bytes);

/// The gRPC status as "UNAVAILABLE: failed to connect to all addresses".
std::string describe(const grpc::Status &status);

/// A context whose deadline is `timeout` from now.
void setDeadline(grpc::ClientContext *ctx, std::chrono::milliseconds timeout);

} // namespace dtf::dist
