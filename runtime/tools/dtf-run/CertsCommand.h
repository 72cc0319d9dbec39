// dtf-run certs: the TLS certificates of a cluster's tasks.
#pragma once

namespace dtfrun {

/// dtf-run certs --cluster FILE --out DIR [--days N]: a new CA and a
/// certificate per task of the cluster (docs/security.md). Returns the exit
/// code.
int runCertsCommand(int argc, char **argv);

} // namespace dtfrun
