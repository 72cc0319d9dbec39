// Transport: TLS credentials, channels, listening ports and the admission
// of callers, from the object a task was given.
#include "runtime/distributed/Transport.h"

#include <grpcpp/security/auth_context.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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
} // namespace

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
  if (!auth || !auth->IsPeerAuthenticated())
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

void Transport::addListeningPort(grpc::ServerBuilder *builder,
                                 const std::string &address, int *port) const {
  builder->AddListeningPort(listenAddress(address), serverCredentials(), port);
  builder->SetMaxReceiveMessageSize(-1);
  builder->SetMaxSendMessageSize(-1);
  // gRPC lets two servers share a port by default (SO_REUSEPORT): a second
  // job on the same cluster file would silently split the connections.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
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
