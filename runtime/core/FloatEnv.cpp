#include "runtime/core/FloatEnv.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace dtf {

#if defined(__x86_64__)
namespace {
constexpr unsigned kFlushToZero = 1u << 15;    // MXCSR.FTZ
constexpr unsigned kDenormalsAreZero = 1u << 6; // MXCSR.DAZ
} // namespace

void flushSubnormals() {
  _mm_setcsr(_mm_getcsr() | kFlushToZero | kDenormalsAreZero);
}

bool subnormalsFlushed() {
  const unsigned both = kFlushToZero | kDenormalsAreZero;
  return (_mm_getcsr() & both) == both;
}
#else
void flushSubnormals() {}
bool subnormalsFlushed() { return false; }
#endif

} // namespace dtf
