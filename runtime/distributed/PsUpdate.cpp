// PsUpdate: a ps task's update program, the checks on a push's values, and
// running the update.
#include "runtime/distributed/PsUpdate.h"
#include "runtime/core/Finite.h"
#include "dtf/OpNames.h"

#include "runtime/distributed/PushCompression.h"
#include "runtime/distributed/TensorMessage.h"
#include "runtime/distributed/Wire.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace dtf::dist::ps {

bool feedsGlobalStep(const plan::Plan &plan, const plan::Program &program,
                     int32_t value) {
  std::set<std::string> steps;
  for (const plan::Variable &v : plan.variables())
    if (v.role() == "global_step")
      steps.insert(v.name());
  std::set<int32_t> stepReads;
  for (const plan::Op &op : program.ops())
    if (op.name() == dtf::ops::kReadVariable && op.outputs_size() == 1) {
      auto name = op.attrs().find("name");
      if (name != op.attrs().end() && steps.count(name->second.s()))
        stepReads.insert(op.outputs(0));
    }
  for (const plan::Op &op : program.ops())
    if (op.name() == dtf::ops::kAssignAdd && op.inputs_size() == 2 &&
        stepReads.count(op.inputs(0)) && op.inputs(1) == value)
      return true;
  return false;
}

Status PsUpdate::setUp(const plan::Plan &plan, const plan::Placement &placement,
                       int index, PsStore &store) {
  plan::Program program;
  DTF_RETURN_IF_ERROR(plan::psProgramFor(plan, placement, index, &program));
  // The updates here run on shards: one reserved row each.
  for (plan::Op &op : *program.mutable_ops())
    if (auto it = op.mutable_attrs()->find("dynamic_shards");
        it != op.mutable_attrs()->end())
      it->second.set_i(1);
  if (program.ops_size() == 0)
    return Status::ok();
  exec::ExecutorOptions o;
  o.seed = uint64_t(plan.training().seed());
  o.programName = name_ + ": ps_update";
  exec::applySessionOptions(plan, &o);
  o.device =
      "/job:ps/replica:0/task:" + std::to_string(index) + "/device:CPU:0";
  DTF_RETURN_IF_ERROR(exec::Executor::create(
      program, store.variables(), train::cpuKernelRegistry(), o, &update_));
  addKeys(plan, program, store);
  return Status::ok();
}

// The keys a push carries: one per recv of the update (a sparse one's rows
// follow its ids), with what the update takes under each.
void PsUpdate::addKeys(const plan::Plan &plan, const plan::Program &program,
                       PsStore &store) {
  auto typeOf = [&](int32_t id) {
    plan::TensorType type;
    for (const plan::Value &v : program.values())
      if (v.id() == id)
        type = v.type();
    return type;
  };
  int32_t flag = -1; // the value dtf.skip_updates_unless reads
  for (const plan::Op &op : program.ops())
    if (op.name() == dtf::ops::kSkipUpdatesUnless && op.inputs_size() == 1)
      flag = op.inputs(0);
  for (const plan::Transfer &r : program.recvs()) {
    if (r.value() == flag)
      flagKey_ = int(keys_.size());
    keys_.push_back(r.key());
    skippable_.push_back(r.skippable());
    // What the update takes under the key: a push must fit it before
    // anything is allocated for it.
    expected_.push_back(typeOf(r.value()));
    stepKey_.push_back(!r.sparse() &&
                       feedsGlobalStep(plan, program, r.value()));
    concat_.push_back(r.sparse());
    idRows_.push_back(r.sparse() ? r.rows() : -1);
    {
      const std::string part = r.key().rfind("/part_") != std::string::npos
                                   ? r.key().substr(r.key().rfind("/part_"))
                                   : std::string();
      train::DynamicTable *d = store.dynamicTable(r.variable() + part);
      dynamicKey_.push_back(r.sparse() ? d : nullptr);
    }
    if (r.sparse()) { // its rows follow its ids
      dynamicKey_.push_back(nullptr);
      skippable_.push_back(r.skippable());
      keys_.push_back(r.key() + "#rows");
      expected_.push_back(typeOf(r.rows_value()));
      stepKey_.push_back(false);
      concat_.push_back(true);
      idRows_.push_back(-1);
    }
  }
}

Status PsUpdate::prepare(const rpc::PushRequest &req,
                         std::vector<Tensor> *values,
                         std::vector<PayloadTarget> *targets) const {
  values->assign(keys_.size(), Tensor());
  for (const rpc::WireTensor &w : req.values()) {
    int k = keyIndex(w.name());
    if (k < 0)
      return errorStatus(name_, " takes no value under key '",
                         plan::printable(w.name()), "'");
    if ((*values)[size_t(k)].defined())
      return errorStatus(name_, ": a push carries '", plan::printable(w.name()),
                         "' twice");
    if (w.encoding() != rpc::PUSH_DENSE) {
      DTF_RETURN_IF_ERROR(prepareEncoded(w, k, values, targets));
      continue;
    }
    DType dtype = DType::F32;
    std::vector<int64_t> dims;
    if (!declaredType(w, w.size(), &dtype, &dims))
      return errorStatus(name_, ": pushed value '", plan::printable(w.name()),
                         "' does not fit its size");
    const plan::TensorType &want = expected_[size_t(k)];
    DType wantType = DType::F32;
    if (want.dtype() != plan::DTYPE_UNSPECIFIED &&
        (!plan::toDType(want.dtype(), &wantType).isOk() ||
         (wantType != dtype &&
          !(wantType == DType::F32 && dtype == DType::BF16)) ||
         !plan::shapeFits(plan::dimsOf(want.shape()), dims)))
      return errorStatus(
          name_, ": pushed value '", plan::printable(w.name()), "' is ",
          plan::typeString(dtype, dims), ", but the update takes ",
          plan::typeString(wantType, plan::dimsOf(want.shape())));
    (*values)[size_t(k)] = allocate(dtype, dims);
    targets->push_back({(*values)[size_t(k)].rawData(), w.size()});
  }
  // A skippable value may stay out (checkValues asks the flag why).
  for (size_t k = 0; k < keys_.size(); ++k)
    if (!(*values)[k].defined() && !(flagKey_ >= 0 && skippable_[k]))
      return errorStatus("a push to ", name_, " lacks '", keys_[k], "'");
  return Status::ok();
}

// A compressed gradient (--compress-push): only a dense f32 gradient's key
// takes one, and its bytes must fit the encoding of the dims it declares;
// they land in a buffer of their own until decode.
Status PsUpdate::prepareEncoded(const rpc::WireTensor &w, int k,
                                std::vector<Tensor> *values,
                                std::vector<PayloadTarget> *targets) const {
  const std::string name = plan::printable(w.name());
  std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
  const int64_t n = plan::staticElements(dims, int64_t(1) << 40);
  const plan::TensorType &want = expected_[size_t(k)];
  // The plan fixes the dense size (a header cannot make the ps allocate
  // more than the gradient it takes).
  const std::vector<int64_t> wantDims = plan::dimsOf(want.shape());
  if (concat_[size_t(k)] || !isDenseGradientKey(w.name()) ||
      w.dtype() != plan::F32 || want.dtype() != plan::F32 ||
      std::count(wantDims.begin(), wantDims.end(), int64_t(-1)) > 0 ||
      dims != wantDims || n < 0)
    return errorStatus(name_, ": pushed value '", name,
                       "' is compressed, but only a dense f32 gradient may be "
                       "(the update takes ",
                       plan::typeString(want), " under it)");
  if (!encodedSizeFits(w.encoding(), w.size(), n))
    return errorStatus(name_, ": pushed value '", name, "' (",
                       plan::typeString(DType::F32, dims), ") announces ",
                       w.size(), " bytes, which fit no ",
                       w.encoding() == rpc::PUSH_TOP_K     ? "top-k"
                       : w.encoding() == rpc::PUSH_ONE_BIT ? "1-bit"
                                                           : "known",
                       " encoding of its ", n, " values");
  (*values)[size_t(k)] = Tensor::allocate(DType::I32, {int64_t(w.size() / 4)});
  targets->push_back({(*values)[size_t(k)].rawData(), w.size()});
  return Status::ok();
}

Status PsUpdate::decode(const rpc::PushRequest &req,
                        std::vector<Tensor> *values) const {
  for (const rpc::WireTensor &w : req.values()) {
    const int k = keyIndex(w.name());
    if (w.encoding() == rpc::PUSH_DENSE || k < 0 || size_t(k) >= values->size())
      continue;
    Tensor &t = (*values)[size_t(k)];
    Tensor dense = allocate(
        DType::F32, std::vector<int64_t>(w.dims().begin(), w.dims().end()));
    Status s = decodePush(w.encoding(), t.rawData(), t.byteSize(),
                          dense.data<float>(), dense.numElements());
    if (!s.isOk())
      return errorStatus(name_, ": pushed value '", plan::printable(w.name()),
                         "' is malformed: ", s.message(), " (nothing applied)");
    t = std::move(dense);
  }
  return Status::ok();
}

void PsUpdate::widen(std::vector<Tensor> *values) const {
  for (size_t k = 0; k < values->size() && k < keys_.size(); ++k) {
    Tensor &t = (*values)[k];
    if (!t.defined() || t.dtype() != DType::BF16 ||
        (expected_[k].dtype() != plan::F32 &&
         expected_[k].dtype() != plan::DTYPE_UNSPECIFIED))
      continue;
    Tensor wide = allocate(DType::F32, t.shape());
    widenFromBf16(static_cast<const uint16_t *>(t.rawData()), t.numElements(),
                  wide.data<float>());
    t = std::move(wide);
  }
}

Status PsUpdate::checkValues(const std::vector<Tensor> &values,
                             const std::string &who, std::string *refusal,
                             uint64_t *sparseRows) const {
  // mixed_float16: a push leaves the gradients out only for a step whose
  // flag says a gradient was not finite (the worker withheld them).
  const bool flagDown = flagKey_ >= 0 && size_t(flagKey_) < values.size() &&
                        values[size_t(flagKey_)].defined() &&
                        values[size_t(flagKey_)].dtype() == DType::Bool &&
                        values[size_t(flagKey_)].numElements() == 1 &&
                        !values[size_t(flagKey_)].data<bool>()[0];
  for (size_t k = 0; k < values.size() && k < keys_.size(); ++k) {
    const Tensor &t = values[k];
    if (!t.defined()) {
      if (flagDown)
        continue;
      *refusal = "a push from " + who + " lacks '" + keys_[k] +
                 "' with its loss-scale flag true";
      return errorStatus(name_, " refused the push of ", who, ": it lacks '",
                         keys_[k], "', which only a step whose '",
                         flagKey_ >= 0 ? keys_[size_t(flagKey_)] : "finite",
                         "' flag is false may leave out (nothing applied)");
    }
    if (idRows_[k] >= 0) {
      // A sparse gradient: ids inside this shard, one row each.
      const Tensor &rows = values[k + 1];
      if (t.dtype() != DType::I64 || t.rank() != 1 || rows.rank() < 1 ||
          rows.dim(0) != t.dim(0))
        return errorStatus(name_, ": the sparse gradient '", keys_[k],
                           "' from ", who, " has ", rows.describe(),
                           " for ids ", t.describe());
      const int64_t *id = t.data<int64_t>();
      if (train::DynamicTable *table = dynamicKey_[k]) {
        // A dynamic table's ids as they are: each must be of this shard.
        for (int64_t i = 0; i < t.numElements(); ++i)
          if (!table->holdsShardOf(id[i]))
            return errorStatus(name_, ": the sparse gradient '", keys_[k],
                               "' from ", who, " has id ", id[i],
                               ", which belongs to another shard");
        *sparseRows += uint64_t(t.numElements());
        continue;
      }
      for (int64_t i = 0; i < t.numElements(); ++i)
        if (id[i] < 0 || id[i] >= idRows_[k])
          return errorStatus(name_, ": the sparse gradient '", keys_[k],
                             "' from ", who, " has id ", id[i],
                             ", outside [0, ", idRows_[k], ")");
      *sparseRows += uint64_t(t.numElements());
      continue;
    }
    bool bad = false;
    if (t.dtype() == DType::F32) {
      bad = !allFinite(t.data<float>(), t.numElements());
    } else if (t.dtype() == DType::F64) {
      bad = !allFinite(t.data<double>(), t.numElements());
    } else if (stepKey_[k]) {
      for (int64_t i = 0; i < t.numElements() && !bad; ++i)
        bad = (t.dtype() == DType::I64 ? t.data<int64_t>()[i]
                                       : int64_t(t.data<int32_t>()[i])) != 1;
      if (bad) {
        *refusal = "a push from " + who +
                   " moves the global step by other than 1 under '" + keys_[k] +
                   "'";
        return errorStatus(name_, " refused the push of ", who,
                           ": the global step advances by 1 per update, not "
                           "by what '",
                           keys_[k], "' holds (nothing applied)");
      }
      continue;
    }
    if (bad) {
      *refusal = "a push from " + who + " holds non-finite values in '" +
                 keys_[k] + "'";
      return errorStatus(name_, " refused the push of ", who, ": '", keys_[k],
                         "' holds non-finite values (NaN or Inf; nothing "
                         "applied)");
    }
  }
  return Status::ok();
}

Status PsUpdate::run(std::vector<Tensor> &values, int64_t version) {
  if (!update_)
    return Status::ok();
  // A dynamic table's ids become its rows (the reserved one, which the
  // update skips, for ids without a row: not admitted, or evicted since
  // the worker looked them up).
  for (size_t k = 0; k < keys_.size() && k < dynamicKey_.size(); ++k)
    if (dynamicKey_[k] && values[k].defined() &&
        values[k].dtype() == DType::I64)
      DTF_RETURN_IF_ERROR(dynamicKey_[k]->rows(
          values[k].data<int64_t>(), values[k].numElements(), false, version,
          values[k].data<int64_t>()));
  for (size_t k = 0; k < keys_.size(); ++k) {
    if (!values[k].defined()) {
      // Withheld (a non-finite step): zeros of the type the update takes,
      // no rows where the rows are many; the guard skips its readers.
      DType dtype = DType::F32;
      (void)plan::toDType(expected_[k].dtype(), &dtype);
      std::vector<int64_t> dims = plan::dimsOf(expected_[k].shape());
      for (int64_t &d : dims)
        d = std::max<int64_t>(d, 0);
      values[k] = Tensor::allocate(dtype, dims);
      if (values[k].byteSize())
        std::memset(values[k].rawData(), 0, values[k].byteSize());
    }
    int feed = update_->findFeed(keys_[k]);
    DTF_RETURN_IF_ERROR(update_->setFeed(feed, values[k]));
  }
  return update_->run(uint64_t(version));
}

} // namespace dtf::dist::ps
