#include "runtime/cluster/Certificates.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

namespace dtf::cluster {
namespace {

template <typename T, void (*Free)(T *)> struct Deleter {
  void operator()(T *p) const { Free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

std::string opensslError(const std::string &what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e)
    ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return what + ": " + buf;
}

Key newKey() { return Key(EVP_EC_gen("P-256")); }

bool addExtension(X509 *cert, X509 *issuer, int nid, const std::string &value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext)
    return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key` named `cn`, signed by `issuerKey` (itself when
// issuer is null: the CA), with the given extensions.
Status makeCert(EVP_PKEY *key, const std::string &cn, X509 *issuer,
                EVP_PKEY *issuerKey, int days,
                const std::vector<std::pair<int, std::string>> &extensions,
                Cert *out) {
  Cert cert(X509_new());
  unsigned char serial[16];
  if (!cert || RAND_bytes(serial, sizeof serial) != 1)
    return errorStatus(opensslError("cannot make a certificate"));
  serial[0] &= 0x7f; // positive
  BIGNUM *bn = BN_bin2bn(serial, sizeof serial, nullptr);
  ASN1_INTEGER *sn = X509_get_serialNumber(cert.get());
  BN_to_ASN1_INTEGER(bn, sn);
  BN_free(bn);
  X509_set_version(cert.get(), 2);
  // Valid from an hour ago: clocks of the machines of a cluster differ.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), long(days) * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME *name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char *>("dtf"), -1,
                             -1, 0);
  X509_NAME_add_entry_by_txt(
      name, "CN", MBSTRING_ASC,
      reinterpret_cast<const unsigned char *>(cn.c_str()), -1, -1, 0);
  X509 *signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  for (const auto &[nid, value] : extensions)
    if (!addExtension(cert.get(), signer, nid, value))
      return errorStatus(
          opensslError("cannot add extension '" + value + "' to " + cn));
  if (X509_sign(cert.get(), issuerKey, EVP_sha256()) <= 0)
    return errorStatus(opensslError("cannot sign the certificate of " + cn));
  *out = std::move(cert);
  return Status::ok();
}

template <typename Write> std::string pem(Write write) {
  Bio bio(BIO_new(BIO_s_mem()));
  write(bio.get());
  char *data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, size_t(n > 0 ? n : 0));
}

std::string certPem(X509 *c) {
  return pem([c](BIO *b) { PEM_write_bio_X509(b, c); });
}
std::string keyPem(EVP_PKEY *k) {
  return pem([k](BIO *b) {
    PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

// Writes a file whole under a temporary name, then renames it over the old
// one, so that a task never reads half a certificate.
Status writeFile(const std::string &path, const std::string &bytes,
                 mode_t mode) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0)
    return errorStatus("cannot write ", tmp, ": ", std::strerror(errno));
  ::fchmod(fd, mode);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return errorStatus("cannot write ", tmp, ": ", std::strerror(e));
    }
    done += size_t(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0)
    return errorStatus("cannot write ", path, ": ", std::strerror(errno));
  return Status::ok();
}

bool isIpAddress(const std::string &host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

} // namespace

std::string certFileOf(const TaskId &task) { return task.str() + ".pem"; }
std::string keyFileOf(const TaskId &task) { return task.str() + ".key"; }

Status writeClusterCertificates(const ClusterSpec &cluster,
                                const std::string &dir, bool keepCaKey,
                                int days) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return errorStatus("cannot create ", dir, ": ", std::strerror(errno));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return errorStatus(dir, " is not a directory");
  Key caKey = newKey();
  if (!caKey)
    return errorStatus(opensslError("cannot make the CA's key"));
  Cert ca;
  DTF_RETURN_IF_ERROR(
      makeCert(caKey.get(), "dtf cluster CA (" + cluster.source() + ")",
               nullptr, caKey.get(), days,
               {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                {NID_key_usage, "critical,keyCertSign,cRLSign"},
                {NID_subject_key_identifier, "hash"}},
               &ca));
  for (const TaskId &task : cluster.allTasks()) {
    HostPort hp;
    DTF_RETURN_IF_ERROR(
        parseHostPort(cluster.address(task), cluster.source(), &hp));
    Key key = newKey();
    if (!key)
      return errorStatus(opensslError("cannot make a key"));
    std::string san = "URI:dtf://job/" + task.job + "/task/" +
                      std::to_string(task.index) + ",DNS:" + task.str() +
                      (isIpAddress(hp.host) ? ",IP:" : ",DNS:") + hp.host;
    Cert cert;
    DTF_RETURN_IF_ERROR(
        makeCert(key.get(), task.str(), ca.get(), caKey.get(), days,
                 {{NID_basic_constraints, "critical,CA:FALSE"},
                  {NID_key_usage, "critical,digitalSignature,keyAgreement"},
                  {NID_ext_key_usage, "serverAuth,clientAuth"},
                  {NID_authority_key_identifier, "keyid"},
                  {NID_subject_alt_name, san}},
                 &cert));
    DTF_RETURN_IF_ERROR(
        writeFile(dir + "/" + keyFileOf(task), keyPem(key.get()), 0600));
    DTF_RETURN_IF_ERROR(
        writeFile(dir + "/" + certFileOf(task), certPem(cert.get()), 0644));
  }
  if (keepCaKey)
    DTF_RETURN_IF_ERROR(
        writeFile(dir + "/" + kCaKeyFile, keyPem(caKey.get()), 0600));
  return writeFile(dir + "/" + kCaCertFile, certPem(ca.get()), 0644);
}

} // namespace dtf::cluster
