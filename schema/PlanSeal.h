// The integrity of plan.bin (Plan.integrity, format 4): dtfc seals a plan
// with the SHA-256 digests of its bytes and of its code; every reader checks
// the seal before it loads or runs anything (docs/plan-format.md,
// "Integrity").
#pragma once

#include "plan.pb.h"
#include "schema/Status.h"

#include <string>
#include <string_view>
#include <vector>

namespace dtf::plan {

/// The SHA-256 digest of `bytes` (32 bytes).
std::string sha256(std::string_view bytes);

/// `plan` serialized as plan.bin: its fields, then Plan.integrity (the
/// digests of those bytes and of the plan's code, and the functions its
/// cpu_object exports, expectedCpuSymbols) as the file's last field. Any
/// integrity the plan held is replaced.
std::string sealPlan(const Plan &plan);

/// Checks that `bytes`, which parsed as `plan`, are what dtfc sealed: the
/// file ends with Plan.integrity and the digests match the bytes before it
/// and the plan's code. `name` (the file) leads every message.
Status checkSeal(std::string_view bytes, const Plan &plan,
                 const std::string &name);

/// The functions a plan's cpu_object must export: every kernel's cpu_symbol
/// and cpu_columns_symbol, sorted.
std::vector<std::string> expectedCpuSymbols(const Plan &plan);

} // namespace dtf::plan
