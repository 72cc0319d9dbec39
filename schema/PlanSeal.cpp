// The integrity of plan.bin: SHA-256 digests written by dtfc, checked by
// every reader.
#include "schema/PlanSeal.h"

#include "schema/PlanSchema.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <map>

namespace dtf::plan {
namespace {

constexpr int kIntegrityField = 22;
constexpr size_t kDigestBytes = 32;

// The field Plan.integrity as the file ends with it: its tag, its length
// and its bytes.
std::string integrityRecord(const Integrity &integrity) {
  std::string body = integrity.SerializeAsString();
  std::string record;
  google::protobuf::io::StringOutputStream stream(&record);
  {
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteTag((kIntegrityField << 3) | 2); // length-delimited
    out.WriteVarint32(uint32_t(body.size()));
    out.WriteRaw(body.data(), int(body.size()));
  }
  return record;
}

std::string hex(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// The digests of the plan's code, as Integrity holds them.
void codeDigests(const Plan &plan, Integrity *integrity) {
  integrity->set_cpu_object_sha256(plan.cpu_object().empty()
                                       ? std::string()
                                       : sha256(plan.cpu_object()));
  integrity->set_gpu_ptx_sha256(plan.gpu_ptx().empty() ? std::string()
                                                       : sha256(plan.gpu_ptx()));
  // Sorted by chip: the map's order is not the file's.
  std::map<std::string, std::string> cubins(plan.gpu_cubins().begin(),
                                            plan.gpu_cubins().end());
  for (const auto &[chip, cubin] : cubins) {
    CubinDigest *d = integrity->add_gpu_cubins_sha256();
    d->set_chip(chip);
    d->set_sha256(sha256(cubin));
  }
}

// A digest of `what` that does not match: says which, both values and what
// to do.
Status digestMismatch(const std::string &name, const std::string &what,
                std::string_view want, std::string_view got) {
  return errorStatus(name, " is damaged: the SHA-256 of its ", what, " is ",
                     hex(got).substr(0, 16), "..., dtfc sealed ",
                     hex(want).substr(0, 16),
                     "... (a changed byte on disk, a partial copy or an "
                     "edit); compile the model again with dtfc");
}

} // namespace

std::vector<std::string> expectedCpuSymbols(const Plan &plan) {
  std::vector<std::string> symbols;
  if (plan.cpu_object().empty())
    return symbols;
  for (const Kernel &k : plan.kernels()) {
    if (!k.cpu_symbol().empty())
      symbols.push_back(k.cpu_symbol());
    if (!k.cpu_columns_symbol().empty())
      symbols.push_back(k.cpu_columns_symbol());
  }
  std::sort(symbols.begin(), symbols.end());
  return symbols;
}

std::string sealPlan(const Plan &plan) {
  Plan unsealed = plan;
  unsealed.clear_integrity();
  // Deterministic (maps in key order): the same plan gives the same bytes
  // and the same digest in every dtfc run.
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    unsealed.SerializeToCodedStream(&out);
  }
  Integrity integrity;
  integrity.set_plan_sha256(sha256(bytes));
  codeDigests(unsealed, &integrity);
  for (std::string &s : expectedCpuSymbols(unsealed))
    integrity.add_cpu_symbols(std::move(s));
  return bytes + integrityRecord(integrity);
}

Status checkSeal(std::string_view bytes, const Plan &plan,
                 const std::string &name) {
  if (!plan.has_integrity())
    return errorStatus(name,
                       " has no integrity digest (a plan of format ",
                       plan.format_version(),
                       ", written by an older dtfc, or not by dtfc); compile "
                       "the model again with this dtfc");
  const Integrity &integrity = plan.integrity();
  const std::string record = integrityRecord(integrity);
  if (bytes.size() < record.size() ||
      bytes.substr(bytes.size() - record.size()) != record)
    return errorStatus(name,
                       " is damaged: it does not end with its integrity "
                       "digest, as dtfc writes it (bytes appended, or the "
                       "digest changed); compile the model again with dtfc");
  if (integrity.plan_sha256().size() != kDigestBytes)
    return errorStatus(name, " is damaged: its plan digest has ",
                       integrity.plan_sha256().size(),
                       " bytes, not 32; compile the model again with dtfc");
  const std::string_view content = bytes.substr(0, bytes.size() - record.size());
  const std::string got = sha256(content);
  if (got != integrity.plan_sha256())
    return digestMismatch(name, strCat("content (", content.size(), " bytes)"),
                    integrity.plan_sha256(), got);
  // The bytes are what dtfc wrote, so the code is too, unless the seal was
  // computed over other code: check the code's own digests as well.
  Integrity code;
  codeDigests(plan, &code);
  if (code.cpu_object_sha256() != integrity.cpu_object_sha256())
    return digestMismatch(name, "cpu_object", integrity.cpu_object_sha256(),
                    code.cpu_object_sha256());
  if (code.gpu_ptx_sha256() != integrity.gpu_ptx_sha256())
    return digestMismatch(name, "gpu_ptx", integrity.gpu_ptx_sha256(),
                    code.gpu_ptx_sha256());
  if (code.gpu_cubins_sha256_size() != integrity.gpu_cubins_sha256_size())
    return errorStatus(name, " is damaged: it holds ",
                       code.gpu_cubins_sha256_size(), " cubins, dtfc sealed ",
                       integrity.gpu_cubins_sha256_size(),
                       "; compile the model again with dtfc");
  for (int i = 0; i < code.gpu_cubins_sha256_size(); ++i)
    if (code.gpu_cubins_sha256(i).SerializeAsString() !=
        integrity.gpu_cubins_sha256(i).SerializeAsString())
      return digestMismatch(name,
                      strCat("cubin for ",
                             printable(integrity.gpu_cubins_sha256(i).chip())),
                      integrity.gpu_cubins_sha256(i).sha256(),
                      code.gpu_cubins_sha256(i).sha256());
  const std::vector<std::string> symbols = expectedCpuSymbols(plan);
  if (!std::equal(symbols.begin(), symbols.end(),
                  integrity.cpu_symbols().begin(),
                  integrity.cpu_symbols().end()))
    return errorStatus(name,
                       " is damaged: its kernels name other CPU functions "
                       "than the ones dtfc sealed; compile the model again "
                       "with dtfc");
  return Status::ok();
}

} // namespace dtf::plan
