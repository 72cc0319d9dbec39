// The plan seal's SHA-256 on the compiler's side: LLVM's, so that dtfc links
// no OpenSSL (schema/CMakeLists.txt says who gets which). Every plan dtfc
// seals is checked by dtf-run's OpenSSL digest, so any disagreement fails
// every end-to-end test.
#include "schema/PlanSeal.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/SHA256.h>

namespace dtf::plan {

std::string sha256(std::string_view bytes) {
  const std::array<uint8_t, 32> digest = llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
  return std::string(reinterpret_cast<const char *>(digest.data()), digest.size());
}

} // namespace dtf::plan
