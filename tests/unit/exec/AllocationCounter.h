// Counts heap allocations in the test binary: every operator new, and every
// aligned_alloc (the call behind each Tensor buffer).
#pragma once

#include <cstdint>

namespace dtf::testing {

/// Allocations since the process started; read before and after the code
/// under test.
uint64_t operatorNewCount();
uint64_t alignedAllocCount();

} // namespace dtf::testing
