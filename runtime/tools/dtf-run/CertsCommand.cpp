// dtf-run certs: parses its flags and writes a cluster's certificates.
#include "runtime/tools/dtf-run/CertsCommand.h"

#include "runtime/cluster/Certificates.h"
#include "schema/ClusterSpec.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dtfrun {

using dtf::cluster::ClusterSpec;

int runCertsCommand(int argc, char **argv) {
  std::string clusterFile, out;
  long days = 365;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: dtf-run certs --cluster FILE --out DIR [--days N]\n\n"
          "Makes a new certificate authority for the cluster in FILE and, "
          "signed by it,\na certificate and key for every task: DIR/ca.pem, "
          "DIR/ca.key and, per task,\nDIR/TASK.pem and DIR/TASK.key "
          "(\"worker.1.pem\"). Give each machine ca.pem and\nits own "
          "tasks' files (never ca.key), and start each task with --tls-dir "
          "DIR\n(or DTF_TLS_DIR=DIR). See docs/security.md.\n\n"
          "  --cluster FILE  the cluster spec (or a whole TF_CONFIG)\n"
          "  --out DIR       where to write (created 0700; keys are 0600)\n"
          "  --days N        how long the certificates are valid (365)\n");
      return 0;
    }
    if (arg != "--cluster" && arg != "--out" && arg != "--days") {
      std::fprintf(stderr,
                   "dtf-run: error: certs: unknown option '%s' (see dtf-run "
                   "certs --help)\n",
                   arg.c_str());
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "dtf-run: error: certs: %s needs a value\n",
                   arg.c_str());
      return 2;
    }
    const char *value = argv[++i];
    if (arg == "--cluster")
      clusterFile = value;
    else if (arg == "--out")
      out = value;
    else {
      char *end = nullptr;
      days = std::strtol(value, &end, 10);
      if (!*value || *end || days < 1 || days > 36500) {
        std::fprintf(stderr,
                     "dtf-run: error: certs: --days expects 1 to 36500, got "
                     "'%s'\n",
                     value);
        return 2;
      }
    }
  }
  if (clusterFile.empty() || out.empty()) {
    std::fprintf(stderr, "dtf-run: error: certs needs --cluster FILE and "
                         "--out DIR (see dtf-run certs --help)\n");
    return 2;
  }
  ClusterSpec spec;
  dtf::Status s = ClusterSpec::parseFile(clusterFile, &spec);
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-run: error: %s\n", s.message().c_str());
    return 2;
  }
  s = dtf::cluster::writeClusterCertificates(spec, out, /*keepCaKey=*/true,
                                             int(days));
  if (!s.isOk()) {
    std::fprintf(stderr, "dtf-run: error: certs: %s\n", s.message().c_str());
    return 4;
  }
  std::printf("wrote a new CA and certificates for %zu tasks into %s "
              "(valid %ld days)\n",
              spec.allTasks().size(), out.c_str(), days);
  return 0;
}

} // namespace dtfrun
