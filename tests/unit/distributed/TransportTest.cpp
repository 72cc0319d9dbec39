// Transport's choice of a Unix socket for the tasks on this host: which
// addresses are on this host, where their sockets are, and the socket
// directory that must be this user's alone (made 0700; refused when others
// may enter it, when it is no directory, or when it is another user's); the
// TLS 1.3 suite order a TLS task sets.
#include "runtime/distributed/TlsCipher.h"
#include "runtime/distributed/Transport.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace dtf::dist {
namespace {

Transport tlsTransport(const std::string &dir) {
  Transport t;
  t.tls = true;
  t.socketDir = dir;
  t.caPem = "-----BEGIN CERTIFICATE-----\nthe job's CA\n";
  t.taskAt["127.0.0.1:2222"] = "ps.0";
  t.taskAt["127.0.0.1:2223"] = "worker.0";
  return t;
}

std::string freshDir(const char *name) {
  std::string dir = ::testing::TempDir() + "dtf-transport-" + name + "-" +
                    std::to_string(getpid());
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

TEST(Transport, OnlyLoopbackAddressesUnderTlsGoOverUnixSockets) {
  Transport t = tlsTransport("/tmp/x");
  EXPECT_TRUE(t.overUnix("127.0.0.1:2222"));
  EXPECT_TRUE(t.overUnix("127.0.0.3:2222"));
  EXPECT_TRUE(t.overUnix("localhost:2222"));
  EXPECT_TRUE(t.overUnix("[::1]:2222"));
  EXPECT_FALSE(t.overUnix("10.0.0.2:2222"));
  EXPECT_FALSE(t.overUnix("node-127.example:2222"));
  EXPECT_TRUE(t.anyOverUnix());
  t.sameHost = SameHost::kTcp;
  EXPECT_FALSE(t.overUnix("127.0.0.1:2222"));
  EXPECT_FALSE(t.anyOverUnix());
  Transport plain;
  EXPECT_FALSE(plain.overUnix("127.0.0.1:2222")) << "plaintext stays on TCP";
}

TEST(Transport, SocketsAreNamedByTheirTaskAddressInTheSocketDirectory) {
  Transport t = tlsTransport("/run/dtf");
  EXPECT_EQ(t.socketPath("127.0.0.1:2222"), "/run/dtf/127.0.0.1_2222.sock");
  EXPECT_EQ(t.socketPath("[::1]:7"), "/run/dtf/::1_7.sock");
  t.socketDir.clear();
  setenv("DTF_SOCKET_DIR", "/run/other", 1);
  EXPECT_EQ(t.socketDirectory(), "/run/other");
  unsetenv("DTF_SOCKET_DIR");
  EXPECT_EQ(t.socketDirectory(), "/tmp/dtf-" + std::to_string(geteuid()));
}

TEST(Transport, TheJobTokenIsTheCasFingerprint) {
  Transport a = tlsTransport("/d"), b = tlsTransport("/d");
  EXPECT_EQ(a.jobToken(), b.jobToken());
  EXPECT_EQ(a.jobToken().size(), 16u);
  b.caPem += "another job's CA\n";
  EXPECT_NE(a.jobToken(), b.jobToken());
}

TEST(Transport, TheSocketDirectoryIsMadeForThisUserAlone) {
  const std::string dir = freshDir("made");
  Transport t = tlsTransport(dir);
  ASSERT_TRUE(t.checkSocketDirectory().isOk());
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_TRUE(t.checkSocketDirectory().isOk()) << "an existing one is kept";
  rmdir(dir.c_str());
}

TEST(Transport, ASocketDirectoryOthersMayEnterIsRefused) {
  const std::string dir = freshDir("open");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  Status s = tlsTransport(dir).checkSocketDirectory();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("the socket directory " + dir +
                             " is not this user's alone (a directory of uid " +
                             std::to_string(geteuid()) + ", mode 0755"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("--same-host tcp"), std::string::npos);
  rmdir(dir.c_str());
}

TEST(Transport, ASocketDirectoryThatIsAFileOrALinkIsRefused) {
  const std::string file = freshDir("file");
  FILE *f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  Status s = tlsTransport(file).checkSocketDirectory();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("not a directory"), std::string::npos)
      << s.message();
  unlink(file.c_str());
  // A link to a good directory is not taken either (lstat: not a directory).
  const std::string target = freshDir("target"), link = freshDir("link");
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  s = tlsTransport(link).checkSocketDirectory();
  EXPECT_FALSE(s.isOk());
  unlink(link.c_str());
  rmdir(target.c_str());
}

TEST(Transport, ASocketPathTooLongForAUnixSocketIsRefused) {
  const std::string dir = freshDir("long") + "/" + std::string(100, 'd');
  Transport t = tlsTransport(dir);
  std::string cmd = "mkdir -p -m 0700 '" + dir + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Status s = t.checkSocketDirectory();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("is too long for a Unix socket"),
            std::string::npos)
      << s.message();
  cmd = "rm -rf '" + dir.substr(0, dir.rfind('/')) + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(TlsCipher, AesGcm128IsOfferedFirst) {
  // What a TLS task sets before any channel: dtf's order, the system's
  // OpenSSL configuration (Debian's names no TLS 1.3 suites) kept otherwise.
  ASSERT_TRUE(preferFastestTlsCiphers().isOk());
  EXPECT_EQ(offeredTlsCipherSuites(), kTlsCipherSuites);
  // Once per process.
  EXPECT_TRUE(preferFastestTlsCiphers().isOk());
  EXPECT_EQ(offeredTlsCipherSuites(), kTlsCipherSuites);
}

} // namespace
} // namespace dtf::dist
