#include "runtime/distributed/Wire.h"

#include "runtime/plan/PlanTypes.h"

#include <cstring>

namespace dtf::dist {
int planDTypeOf(DType d) {
  switch (d) {
  case DType::F32:
    return plan::F32;
  case DType::F64:
    return plan::F64;
  case DType::F16:
    return plan::F16;
  case DType::BF16:
    return plan::BF16;
  case DType::I32:
    return plan::I32;
  case DType::I64:
    return plan::I64;
  case DType::Bool:
    return plan::BOOL;
  }
  return plan::DTYPE_UNSPECIFIED;
}

void toWire(const std::string &name, const Tensor &t, rpc::WireTensor *out) {
  out->set_name(name);
  out->set_dtype(plan::DType(planDTypeOf(t.dtype())));
  out->clear_dims();
  for (int64_t d : t.shape())
    out->add_dims(d);
  out->set_data(static_cast<const char *>(t.rawData()), t.byteSize());
}

bool declaredType(const rpc::WireTensor &w, size_t bytes, DType *dtype,
                  std::vector<int64_t> *dims) {
  dims->assign(w.dims().begin(), w.dims().end());
  if (!plan::toDType(w.dtype(), dtype).isOk())
    return false;
  const int64_t n = plan::staticElements(*dims, int64_t(1) << 40);
  return n >= 0 && size_t(n) * dtypeSize(*dtype) == bytes;
}

Status fromWire(const rpc::WireTensor &w, Tensor *out) {
  DType dtype = DType::F32;
  Status s = plan::toDType(w.dtype(), &dtype);
  if (!s.isOk())
    return errorStatus("tensor '", plan::printable(w.name()), "': ", s.message());
  std::vector<int64_t> dims;
  if (!declaredType(w, w.data().size(), &dtype, &dims))
    return errorStatus("tensor '", plan::printable(w.name()), "' of type ",
                       plan::typeString(dtype, dims), " carries ",
                       w.data().size(), " bytes");
  *out = Tensor::allocate(dtype, std::move(dims));
  if (!w.data().empty())
    std::memcpy(out->rawData(), w.data().data(), w.data().size());
  return Status::ok();
}

Status copyFromWire(const rpc::WireTensor &w, Tensor *dst) {
  DType dtype = DType::F32;
  Status s = plan::toDType(w.dtype(), &dtype);
  std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
  if (!s.isOk() || dtype != dst->dtype() || dims != dst->shape() ||
      w.data().size() != dst->byteSize())
    return errorStatus("variable '", plan::printable(w.name()), "' arrived as ",
                       s.isOk() ? plan::typeString(dtype, dims)
                                : std::string("an unknown dtype"),
                       " (", w.data().size(), " bytes), but it is ",
                       dst->describe());
  if (!w.data().empty())
    std::memcpy(dst->rawData(), w.data().data(), w.data().size());
  return Status::ok();
}

Status copyRowsFromWire(const rpc::WireTensor &w, Tensor *dst,
                        int64_t rowOffset) {
  if (dst->rank() == 0)
    return copyFromWire(w, dst);
  std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
  std::vector<int64_t> rest(dst->shape().begin() + 1, dst->shape().end());
  const size_t rowBytes = dst->shape()[0] == 0
                              ? 0
                              : dst->byteSize() / size_t(dst->shape()[0]);
  if (dims.empty() || std::vector<int64_t>(dims.begin() + 1, dims.end()) != rest ||
      rowOffset < 0 || rowOffset + dims[0] > dst->shape()[0] ||
      w.data().size() != size_t(dims[0]) * rowBytes)
    return errorStatus("shard '", plan::printable(w.name()), "' arrived as ",
                       plan::typeString(dst->dtype(), dims), " (",
                       w.data().size(), " bytes) for rows from ", rowOffset,
                       " of ", dst->describe());
  std::memcpy(static_cast<char *>(dst->rawData()) + size_t(rowOffset) * rowBytes,
              w.data().data(), w.data().size());
  return Status::ok();
}

Tensor rowsOf(const Tensor &t, int64_t rowOffset, int64_t rows) {
  std::vector<int64_t> dims = t.shape();
  if (dims.empty())
    return Tensor::view(t.dtype(), dims, const_cast<void *>(t.rawData()));
  const size_t rowBytes = dims[0] == 0 ? 0 : t.byteSize() / size_t(dims[0]);
  dims[0] = rows;
  return Tensor::view(t.dtype(), dims,
                      static_cast<char *>(const_cast<void *>(t.rawData())) +
                          size_t(rowOffset) * rowBytes);
}

uint64_t fingerprint(const std::string &bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

namespace {
Transport &transportSlot() {
  static Transport t;
  return t;
}

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

void setTransport(Transport transport) {
  transportSlot() = std::move(transport);
}
const Transport &transport() { return transportSlot(); }

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

std::shared_ptr<grpc::ServerCredentials> serverCredentials() {
  const Transport &t = transport();
  if (!t.tls)
    return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = t.caPem;
  options.pem_key_cert_pairs.push_back({t.keyPem, t.certPem});
  return grpc::SslServerCredentials(options);
}

std::string peerTask(const grpc::ServerContextBase &ctx) {
  if (!transport().tls)
    return "";
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (!auth || !auth->IsPeerAuthenticated())
    return "";
  std::vector<grpc::string_ref> cn =
      auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  return cn.size() == 1 ? std::string(cn[0].data(), cn[0].size())
                        : std::string();
}

grpc::Status admitTask(const grpc::ServerContextBase &ctx, std::string *who) {
  who->clear();
  if (!transport().tls)
    return grpc::Status::OK;
  *who = peerTask(ctx);
  for (const auto &entry : transport().taskAt)
    if (!who->empty() && entry.second == *who)
      return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "refused: not a task of this job");
}

grpc::Status admitOnly(const grpc::ServerContextBase &ctx,
                       const std::string &allowed, const std::string &self,
                       const std::string &what) {
  std::string who;
  grpc::Status st = admitTask(ctx, &who);
  if (!st.ok() || who.empty() || who == allowed)
    return st;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      self + ": " + who + " may not " + what + " (only " +
                          allowed + " may)");
}

void addListeningPort(grpc::ServerBuilder *builder, const std::string &address,
                      int *port) {
  builder->AddListeningPort(listenAddress(address), serverCredentials(), port);
  builder->SetMaxReceiveMessageSize(-1);
  builder->SetMaxSendMessageSize(-1);
  // gRPC lets two servers share a port by default (SO_REUSEPORT): a second
  // job on the same cluster file would silently split the connections.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

std::shared_ptr<grpc::Channel> makeChannel(const std::string &address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Reconnect quickly while a peer starts (the default backoff grows to
  // minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  const Transport &t = transport();
  if (!t.tls)
    return grpc::CreateCustomChannel(address,
                                     grpc::InsecureChannelCredentials(), args);
  // The server must present the certificate of the task the cluster file
  // puts at this address (its DNS name "ps.0"), whatever host it is on.
  auto named = t.taskAt.find(address);
  args.SetSslTargetNameOverride(named != t.taskAt.end() ? named->second
                                                        : std::string("?"));
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = t.caPem;
  options.pem_private_key = t.keyPem;
  options.pem_cert_chain = t.certPem;
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(options),
                                   args);
}

std::string describe(const grpc::Status &status) {
  static const char *names[] = {
      "OK",          "CANCELLED",         "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",   "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",  "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",        "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  int code = int(status.error_code());
  std::string s = code >= 0 && code <= 16 ? names[code] : "ERROR";
  if (!status.error_message().empty())
    s += ": " + status.error_message();
  return s;
}

void setDeadline(grpc::ClientContext *ctx, std::chrono::milliseconds timeout) {
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
}

std::string listenAddress(const std::string &address) {
  return transport().bind.empty() ? address : transport().bind;
}

} // namespace dtf::dist
