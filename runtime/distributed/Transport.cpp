// Transport: TLS credentials, channels, listening ports and the admission
// of callers, from the object a task was given.
#include "runtime/distributed/Transport.h"

#include "runtime/distributed/TlsCipher.h"
#include "runtime/distributed/Wire.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>
#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace dtf::dist {

namespace {
Status readWhole(const std::string &path, std::string *out) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return errorStatus("cannot read ", path, ": ", std::strerror(errno));
  char buf[4096];
  size_t n;
  out->clear();
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out->append(buf, n);
  std::fclose(f);
  return Status::ok();
}
constexpr const char *kTaskKey = "dtf-task";
constexpr const char *kJobKey = "dtf-job";

// Every call over a Unix socket carries its task's name and the job's token.
class UnixCallIdentity : public grpc::MetadataCredentialsPlugin {
public:
  UnixCallIdentity(std::string task, std::string job)
      : task_(std::move(task)), job_(std::move(job)) {}
  bool IsBlocking() const override { return false; }
  const char *GetType() const override { return "dtf-unix"; }
  grpc::Status
  GetMetadata(grpc::string_ref, grpc::string_ref, const grpc::AuthContext &,
              std::multimap<std::string, std::string> *metadata) override {
    metadata->insert({kTaskKey, task_});
    metadata->insert({kJobKey, job_});
    return grpc::Status::OK;
  }

private:
  std::string task_, job_;
};

// The value of `key` in a call's metadata, when it occurs exactly once.
bool metadataValue(const std::multimap<grpc::string_ref, grpc::string_ref> &md,
                   const char *key, std::string *out) {
  auto [first, last] = md.equal_range(key);
  if (first == last || std::next(first) != last)
    return false;
  *out = std::string(first->second.data(), first->second.size());
  return true;
}

// Whether a call over a Unix socket names a task of this job and its CA.
bool unixCallerOk(const std::multimap<grpc::string_ref, grpc::string_ref> &md,
                  const std::set<std::string> &tasks, const std::string &job,
                  std::string *task) {
  std::string token;
  return metadataValue(md, kJobKey, &token) && token == job &&
         metadataValue(md, kTaskKey, task) && tasks.count(*task) != 0;
}

// The server's check of every call over its Unix socket, before any
// handler runs: the connect itself was already allowed by the kernel (the
// socket directory is this user's alone).
class UnixCallAdmission : public grpc::AuthMetadataProcessor {
public:
  UnixCallAdmission(std::set<std::string> tasks, std::string job)
      : tasks_(std::move(tasks)), job_(std::move(job)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata &metadata, grpc::AuthContext *,
                       OutputMetadata *, OutputMetadata *) override {
    std::string task;
    if (!unixCallerOk(metadata, tasks_, job_, &task))
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "refused: not a task of this job");
    return grpc::Status::OK;
  }

private:
  std::set<std::string> tasks_;
  std::string job_;
};

// "HOST:PORT" split; HOST without an IPv6 literal's brackets.
void splitAddress(const std::string &address, std::string *host,
                  std::string *port) {
  const size_t colon = address.rfind(':');
  *host = colon == std::string::npos ? address : address.substr(0, colon);
  *port = colon == std::string::npos ? "" : address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
}

std::set<std::string> jobTasks(const std::map<std::string, std::string> &at) {
  std::set<std::string> tasks;
  for (const auto &entry : at)
    tasks.insert(entry.second);
  return tasks;
}

// An error when something listens on the Unix socket at `path` (a live task
// of another job on the same addresses); a stale file of a killed task is
// left for the server to replace.
Status socketFree(const std::string &path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0)
    return Status::ok();
  if (!S_ISSOCK(st.st_mode))
    return errorStatus(path, " exists and is not a socket; remove it");
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errorStatus("cannot make a socket: ", std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const bool live =
      connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
  close(fd);
  if (live)
    return errorStatus("another task already listens on ", path,
                       " (a second job on the same cluster addresses?)");
  return Status::ok();
}

} // namespace

bool Transport::overUnix(const std::string &address) const {
  if (!tls || sameHost != SameHost::kUnix)
    return false;
  std::string host, port;
  splitAddress(address, &host, &port);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string Transport::socketDirectory() const {
  if (!socketDir.empty())
    return socketDir;
  if (const char *env = std::getenv("DTF_SOCKET_DIR"); env && *env)
    return env;
  return "/tmp/dtf-" + std::to_string(geteuid());
}

std::string Transport::socketPath(const std::string &address) const {
  std::string host, port;
  splitAddress(address, &host, &port);
  return socketDirectory() + "/" + host + "_" + port + ".sock";
}

std::string Transport::jobToken() const {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, fingerprint(caPem));
  return hex;
}

namespace {
// Makes `dir` (mode 0700) or checks that it is a directory of this user
// that no one else may enter; `what` names it in the error, `fix` says
// what else to do.
Status checkPrivateDirectory(const std::string &dir, const char *what,
                             const char *fix) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return errorStatus("cannot make the ", what, " ", dir, ": ",
                       std::strerror(errno));
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0)
    return errorStatus("cannot read ", dir, ": ", std::strerror(errno));
  const uid_t uid = geteuid();
  if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    return errorStatus(
        "the ", what, " ", dir, " is not this user's alone (",
        S_ISDIR(st.st_mode) ? "a directory" : "not a directory", " of uid ",
        st.st_uid, ", mode ", mode, "; this is uid ", uid,
        "): the tasks on this host talk through it, so it must be a "
        "directory of this user with mode 0700. ",
        fix);
  }
  return Status::ok();
}
} // namespace

std::string Transport::regionDirectory() const {
  if (!shmDir.empty())
    return shmDir;
  if (const char *env = std::getenv("DTF_SHM_DIR"); env && *env)
    return env;
  return "/dev/shm/dtf-" + std::to_string(geteuid());
}

Status Transport::checkRegionDirectory() const {
  return checkPrivateDirectory(regionDirectory(), "shared-memory directory",
                               "Remove it, set DTF_SHM_DIR, or pass "
                               "--same-host unix");
}

Status Transport::checkSocketDirectory() const {
  const std::string dir = socketDirectory();
  DTF_RETURN_IF_ERROR(checkPrivateDirectory(
      dir, "socket directory",
      "Remove it, set DTF_SOCKET_DIR, or pass --same-host tcp"));
  for (const auto &entry : taskAt)
    if (socketPath(entry.first).size() >= sizeof(sockaddr_un::sun_path))
      return errorStatus("the socket path ", socketPath(entry.first),
                         " is too long for a Unix socket; set DTF_SOCKET_DIR "
                         "to a shorter directory");
  return Status::ok();
}

bool Transport::anyOverUnix() const {
  for (const auto &entry : taskAt)
    if (overUnix(entry.first))
      return true;
  return false;
}

Status loadTlsMaterial(const std::string &dir, const std::string &task,
                       Transport *out) {
  const std::string files[3] = {dir + "/ca.pem", dir + "/" + task + ".pem",
                                dir + "/" + task + ".key"};
  std::string *into[3] = {&out->caPem, &out->certPem, &out->keyPem};
  for (int i = 0; i < 3; ++i)
    if (Status s = readWhole(files[i], into[i]); !s.isOk())
      return errorStatus(s.message(),
                         " (dtf-run certs --cluster FILE --out DIR makes a "
                         "cluster's certificates)");
  out->tls = true;
  out->self = task;
  // Before any channel or server makes a TLS context.
  if (Status s = preferFastestTlsCiphers(); !s.isOk())
    std::fprintf(stderr, "%s: %s; OpenSSL's default order stays\n",
                 task.c_str(), s.message().c_str());
  return Status::ok();
}

std::shared_ptr<grpc::ServerCredentials> Transport::serverCredentials() const {
  if (!tls)
    return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = caPem;
  options.pem_key_cert_pairs.push_back({keyPem, certPem});
  return grpc::SslServerCredentials(options);
}

std::string Transport::peerTask(const grpc::ServerContextBase &ctx) const {
  if (!tls)
    return "";
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (!auth)
    return "";
  std::vector<grpc::string_ref> type =
      auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  if (type.size() == 1 && type[0] == "local") {
    // Over the Unix socket: the name its calls carry, which the socket's
    // UnixCallAdmission checked (job token, a task of the job) before the
    // call reached any handler.
    std::string task;
    return metadataValue(ctx.client_metadata(), kTaskKey, &task)
               ? task
               : std::string();
  }
  if (!auth->IsPeerAuthenticated())
    return "";
  std::vector<grpc::string_ref> cn =
      auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  return cn.size() == 1 ? std::string(cn[0].data(), cn[0].size())
                        : std::string();
}

grpc::Status Transport::admitTask(const grpc::ServerContextBase &ctx,
                                  std::string *who) const {
  who->clear();
  if (!tls)
    return grpc::Status::OK;
  *who = peerTask(ctx);
  for (const auto &entry : taskAt)
    if (!who->empty() && entry.second == *who)
      return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "refused: not a task of this job");
}

grpc::Status Transport::admitOnly(const grpc::ServerContextBase &ctx,
                                  const std::string &allowed,
                                  const std::string &self,
                                  const std::string &what) const {
  std::string who;
  grpc::Status st = admitTask(ctx, &who);
  if (!st.ok() || who.empty() || who == allowed)
    return st;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      self + ": " + who + " may not " + what + " (only " +
                          allowed + " may)");
}

Status Transport::addListeningPort(grpc::ServerBuilder *builder,
                                   const std::string &address,
                                   Listening *ports) const {
  builder->AddListeningPort(listenAddress(address), serverCredentials(),
                            &ports->port);
  builder->SetMaxReceiveMessageSize(-1);
  builder->SetMaxSendMessageSize(-1);
  // gRPC lets two servers share a port by default (SO_REUSEPORT): a second
  // job on the same cluster file would silently split the connections.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (!overUnix(address))
    return Status::ok();
  if (Status s = checkSocketDirectory(); !s.isOk())
    return s;
  const std::string path = socketPath(address);
  if (Status s = socketFree(path); !s.isOk())
    return s;
  std::shared_ptr<grpc::ServerCredentials> local =
      grpc::experimental::LocalServerCredentials(UDS);
  local->SetAuthMetadataProcessor(
      std::make_shared<UnixCallAdmission>(jobTasks(taskAt), jobToken()));
  ports->unixPath = path;
  ports->unixPort = 0;
  builder->AddListeningPort("unix:" + path, local, &ports->unixPort);
  return Status::ok();
}

std::shared_ptr<grpc::Channel>
Transport::channel(const std::string &address) const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Reconnect quickly while a peer starts (the default backoff grows to
  // minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (!tls)
    return grpc::CreateCustomChannel(address,
                                     grpc::InsecureChannelCredentials(), args);
  if (overUnix(address))
    return grpc::CreateCustomChannel(
        "unix:" + socketPath(address),
        grpc::CompositeChannelCredentials(
            grpc::experimental::LocalCredentials(UDS),
            grpc::MetadataCredentialsFromPlugin(
                std::make_unique<UnixCallIdentity>(self, jobToken()))),
        args);
  // The server must present the certificate of the task the cluster file
  // puts at this address (its DNS name "ps.0"), whatever host it is on.
  auto named = taskAt.find(address);
  args.SetSslTargetNameOverride(named != taskAt.end() ? named->second
                                                      : std::string("?"));
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = caPem;
  options.pem_private_key = keyPem;
  options.pem_cert_chain = certPem;
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(options),
                                   args);
}

std::string Transport::listenAddress(const std::string &address) const {
  return bind.empty() ? address : bind;
}

} // namespace dtf::dist
