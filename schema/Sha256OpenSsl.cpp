// The plan seal's SHA-256 on the runtime's side: OpenSSL's, which the runtime
// links for TLS anyway (schema/CMakeLists.txt says who gets which).
#include "schema/PlanSeal.h"

#include <openssl/evp.h>

namespace dtf::plan {

std::string sha256(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(),
                 nullptr) != 1)
    return std::string(); // matches no digest: a seal check fails
  return std::string(reinterpret_cast<const char *>(digest), length);
}

} // namespace dtf::plan
