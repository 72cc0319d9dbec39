// The cluster's certificates: every task's certificate verifies against the
// CA that was made with it, and not against another; it names its task in
// the CN and in its subjectAltNames; keys are private to the owner.
#include "runtime/cluster/Certificates.h"

#include <gtest/gtest.h>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace dtf::cluster {
namespace {

X509 *readCert(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "r");
  if (!f)
    return nullptr;
  X509 *c = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  return c;
}

// Whether `leaf` verifies against the CA certificate `ca` alone.
bool verifies(X509 *leaf, X509 *ca) {
  X509_STORE *store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX *ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return ok;
}

std::string commonName(X509 *c) {
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(c), NID_commonName, buf,
                            sizeof buf);
  return buf;
}

std::string subjectAltNames(X509 *c) {
  std::string out;
  auto *names = static_cast<GENERAL_NAMES *>(
      X509_get_ext_d2i(c, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME *n = sk_GENERAL_NAME_value(names, i);
    if (n->type == GEN_DNS || n->type == GEN_URI) {
      const ASN1_IA5STRING *s =
          n->type == GEN_DNS ? n->d.dNSName : n->d.uniformResourceIdentifier;
      out += std::string(n->type == GEN_DNS ? "DNS:" : "URI:") +
             std::string(reinterpret_cast<const char *>(s->data),
                         size_t(s->length)) +
             " ";
    } else if (n->type == GEN_IPADD && n->d.iPAddress->length == 4) {
      const unsigned char *a = n->d.iPAddress->data;
      out += "IP:" + std::to_string(a[0]) + "." + std::to_string(a[1]) + "." +
             std::to_string(a[2]) + "." + std::to_string(a[3]) + " ";
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

class Certificates : public ::testing::Test {
protected:
  void SetUp() override {
    char dir[] = "/tmp/dtf-certs-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
    ASSERT_TRUE(ClusterSpec::parseJson(
                    R"({"ps": ["127.0.0.1:2222"],
                        "worker": ["127.0.0.1:2223", "node7.example:2224"]})",
                    "cluster.json", &spec_)
                    .isOk());
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + root_ + "'";
    (void)std::system(cmd.c_str());
  }
  std::string root_;
  ClusterSpec spec_;
};

TEST_F(Certificates, EveryTaskVerifiesAgainstItsOwnCaOnly) {
  const std::string a = root_ + "/a", b = root_ + "/b";
  ASSERT_TRUE(writeClusterCertificates(spec_, a, true, 30).isOk());
  ASSERT_TRUE(writeClusterCertificates(spec_, b, false, 30).isOk());
  X509 *caA = readCert(a + "/ca.pem"), *caB = readCert(b + "/ca.pem");
  ASSERT_TRUE(caA && caB);
  for (const char *task : {"ps.0", "worker.0", "worker.1"}) {
    X509 *leaf = readCert(a + "/" + task + ".pem");
    ASSERT_NE(leaf, nullptr) << task;
    EXPECT_TRUE(verifies(leaf, caA)) << task;
    EXPECT_FALSE(verifies(leaf, caB)) << task << " verifies against another CA";
    EXPECT_EQ(commonName(leaf), task);
    X509_free(leaf);
  }
  X509_free(caA);
  X509_free(caB);
  // The launcher's CA key is never written; dtf-run certs keeps it, 0600.
  EXPECT_NE(access((b + "/ca.key").c_str(), F_OK), 0);
  struct stat st {};
  ASSERT_EQ(stat((a + "/ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((a + "/worker.1.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(Certificates, NamesCarryTheTaskAndItsHost) {
  ASSERT_TRUE(writeClusterCertificates(spec_, root_ + "/c", false, 1).isOk());
  X509 *ps = readCert(root_ + "/c/ps.0.pem");
  X509 *w1 = readCert(root_ + "/c/worker.1.pem");
  ASSERT_TRUE(ps && w1);
  EXPECT_EQ(subjectAltNames(ps),
            "URI:dtf://job/ps/task/0 DNS:ps.0 IP:127.0.0.1 ");
  EXPECT_EQ(subjectAltNames(w1),
            "URI:dtf://job/worker/task/1 DNS:worker.1 DNS:node7.example ");
  X509_free(ps);
  X509_free(w1);
}

TEST_F(Certificates, UnwritableDirectoryIsAnError) {
  Status s = writeClusterCertificates(spec_, root_ + "/no/such/dir", true, 1);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("cannot create " + root_ + "/no/such/dir"),
            std::string::npos)
      << s.message();
}

} // namespace
} // namespace dtf::cluster
