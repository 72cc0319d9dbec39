// TlsCipher: the TLS 1.3 cipher suites dtf's channels offer, fastest on
// this CPU first (gRPC has no setting for them: OpenSSL's configuration
// has).
#pragma once

#include "schema/Status.h"

#include <string>

namespace dtf::dist {

/// The TLS 1.3 suites in dtf's order of preference: AES-128-GCM first (the
/// fastest of the three on the development machine's AES-NI/VAES CPU,
/// docs/security.md "What TLS costs"), then OpenSSL's defaults. All three are
/// the suites TLS 1.3 defines for general use; a peer picks the first it
/// shares, so two dtf tasks agree on AES-128-GCM.
inline constexpr const char *kTlsCipherSuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

/// Makes every TLS context made afterwards in this process (gRPC's) offer
/// kTlsCipherSuites, keeping the rest of the system's OpenSSL
/// "system_default" settings. Once per process; later calls return the
/// first one's result. An error says why the order could not be set (the
/// channels then use OpenSSL's default order, which is as secure).
Status preferFastestTlsCiphers();

/// The TLS 1.3 suites a context made now would offer, in order
/// ("TLS_AES_128_GCM_SHA256:..."), for tests and logs.
std::string offeredTlsCipherSuites();

} // namespace dtf::dist
