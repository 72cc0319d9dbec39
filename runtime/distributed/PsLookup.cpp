// The parameter-server call Lookup: rows of an embedding table (or of its
// shard) at the caller's ids, read or, for a dynamic table's training step,
// made (PsStore::lookup).
#include "runtime/distributed/PsService.h"

#include <cstring>

namespace dtf::dist::ps {

grpc::Status PsService::Lookup(grpc::ServerContext *ctx,
                               const rpc::LookupRequest *req,
                               rpc::LookupReply *reply) {
  std::string who;
  if (auto bad = admit(*ctx, Role::kMember, "look up rows", &who); !bad.ok())
    return bad;
  if (auto bad = checkCaller(req->caller()); !bad.ok())
    return bad;
  if (req->ids().size() % sizeof(int64_t) != 0)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        name_ + ": a lookup's ids are " +
                            std::to_string(req->ids().size()) +
                            " bytes, not a whole number of int64s");
  const size_t n = req->ids().size() / sizeof(int64_t);
  std::vector<int64_t> ids(n);
  if (n)
    std::memcpy(ids.data(), req->ids().data(), req->ids().size());
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialized_)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        name_ + " is not initialized yet (the chief does it)");
  std::string *out = reply->mutable_rows();
  bool unknown = false, narrowed = false;
  Status s =
      store_.lookup(req->name(), ids, req->create(), version_,
                    req->wire_dtype() == plan::BF16, out, &unknown, &narrowed);
  if (unknown)
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        name_ + " holds no table '" +
                            plan::printable(req->name()) + "'");
  if (!s.isOk())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        name_ + ": " + s.message());
  reply->set_version(version_);
  if (narrowed)
    reply->set_rows_dtype(plan::BF16);
  payloadOut_ += out->size();
  rowsLookedUp_ += n;
  ++lookups_;
  return grpc::Status::OK;
}

} // namespace dtf::dist::ps
