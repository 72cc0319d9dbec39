// PsStore: a ps task's held tensors, from the plan, a checkpoint, or back to
// the initializers.
#include "runtime/distributed/PsStore.h"

#include "runtime/core/Bf16.h"

#include "runtime/plan/PlanTypes.h"
#include "runtime/train/Initializers.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace dtf::dist::ps {

Status PsStore::setUp() {
  // Each shard holds the rows the whole variable would have on one machine
  // (so that any placement starts from the same values), made without the
  // whole in memory. The chief may replace them with a checkpoint's.
  held_ = plan::heldBy(plan_, placement_, index_);
  for (const plan::HeldTensor &h : held_) {
    Tensor part;
    DTF_RETURN_IF_ERROR(initialShard(h, &part));
    DTF_RETURN_IF_ERROR(variables_.add(h.name, std::move(part)));
    names_.push_back(h.name);
    if (h.variable == "global_step")
      holdsStep_ = true;
  }
  return addDynamicTables();
}

// Dynamic tables: each held shard with the shards of its slots.
Status PsStore::addDynamicTables() {
  for (const plan::HeldTensor &h : held_) {
    const plan::Variable *var = nullptr;
    for (const plan::Variable &v : plan_.variables())
      if (v.name() == h.variable && v.dynamic().enabled() &&
          v.slot_of().empty())
        var = &v;
    if (!var)
      continue;
    const std::string suffix = h.name.substr(h.variable.size());
    const int part = suffix.empty() ? 0 : std::atoi(suffix.c_str() + 6);
    std::vector<std::pair<const plan::Variable *, Tensor *>> slots;
    for (const plan::Variable &v : plan_.variables())
      if (v.slot_of() == var->name()) {
        Tensor *t = variables_.find(v.name() + suffix);
        if (!t)
          return errorStatus("the slot '", plan::printable(v.name()),
                             "' of the dynamic table '",
                             plan::printable(var->name()),
                             "' is not on the ps that holds its shard ", part);
        slots.push_back({&v, t});
      }
    auto table = std::make_unique<train::DynamicTable>(
        *var, uint64_t(plan_.training().seed()), variables_.find(h.name),
        std::move(slots), std::vector<int>{part}, std::vector<int64_t>{0},
        std::vector<int64_t>{h.rows});
    dynamicByName_[h.name] = table.get();
    dynamic_.add(std::move(table), h.name);
  }
  return Status::ok();
}

int64_t PsStore::globalStep() const {
  if (holdsStep_)
    if (const Tensor *t = variables_.find("global_step"))
      return t->data<int64_t>()[0];
  return -1;
}

Status PsStore::initialShard(const plan::HeldTensor &h, Tensor *out) const {
  // A moving average starts at its variable's first value.
  const plan::Variable *var = nullptr;
  for (const plan::Variable &v : plan_.variables())
    if (v.name() == h.variable)
      var = &v;
  if (var && var->role() == "moving_average" && !var->slot_of().empty())
    for (const plan::Variable &v : plan_.variables())
      if (v.name() == var->slot_of())
        var = &v;
  if (!var)
    return errorStatus("the plan does not declare '",
                       plan::printable(h.variable), "'");
  return train::initializeRows(*var, uint64_t(plan_.training().seed()),
                               h.rowOffset, h.partitioned ? h.rows : -1, out);
}

Status PsStore::resetToInitializers() {
  dynamic_.clear(); // rows are made again as ids come
  for (const plan::HeldTensor &h : held_) {
    if (dynamic_.holdsVariable(h.variable))
      continue;
    Tensor t;
    Status made = initialShard(h, &t);
    Tensor *v = variables_.find(h.name);
    if (!made.isOk() || !v || v->byteSize() != t.byteSize())
      return errorStatus("cannot reset '", h.name, "': ", made.message());
    std::memcpy(v->rawData(), t.rawData(), t.byteSize());
  }
  return Status::ok();
}

Status
PsStore::checkRestorable(const checkpoint::CheckpointReader &reader) const {
  for (const plan::HeldTensor &h : held_) {
    if (dynamic_.holdsVariable(h.variable))
      continue; // its live rows, by DynamicTable::restore
    const checkpoint::TensorInfo *info = reader.find(h.variable);
    const Tensor *t = variables_.find(h.name);
    if (!info || !t || info->shape != h.fullDims || info->dtype != t->dtype())
      return errorStatus(
          "checkpoint ", checkpoint::checkpointName(reader.step()),
          " has no variable '", h.variable, "' of ",
          t ? dtypeName(t->dtype()) : "its", " ", shapeString(h.fullDims));
  }
  return Status::ok();
}

Status PsStore::restore(const checkpoint::CheckpointReader &reader,
                        int64_t version) {
  for (const plan::HeldTensor &h : held_) {
    Status s = dynamic_.holdsVariable(h.variable)
                   ? Status::ok()
                   : reader.readRowsInto(h.variable, h.rowOffset,
                                         variables_.find(h.name));
    if (s.isOk() && &h == &held_.back())
      s = dynamic_.restore(reader, version);
    DTF_RETURN_IF_ERROR(s);
  }
  return Status::ok();
}

Status PsStore::lookup(const std::string &name, std::vector<int64_t> &ids,
                       bool create, int64_t version, bool bf16,
                       std::string *out, bool *unknown, bool *narrowed) {
  const Tensor *t = variables_.find(name);
  *unknown = !t || t->rank() < 1;
  *narrowed = false;
  if (*unknown)
    return errorStatus("no table '", plan::printable(name), "'");
  const size_t n = ids.size();
  const int64_t rows = t->dim(0);
  const size_t rowBytes = rows ? t->byteSize() / size_t(rows) : 0;
  if (train::DynamicTable *d = dynamicTable(name)) {
    // A dynamic table's ids: their rows (made for the ids admitted when a
    // training step asks; an id without a row reads the reserved zeros).
    if (n > size_t(std::max<int64_t>(rows, 1)))
      return errorStatus("a lookup of ", n, " ids in '", plan::printable(name),
                         "', which holds at most ", rows, " rows");
    DTF_RETURN_IF_ERROR(
        d->rows(ids.data(), int64_t(n), create, version, ids.data()));
  }
  // The reply is at most the table: a lookup cannot ask for more bytes
  // than the ps holds (repeated ids are each answered, up to that bound).
  if (n > size_t(std::max<int64_t>(rows, 1)))
    return errorStatus("a lookup of ", n, " ids in '", plan::printable(name),
                       "', which has ", rows, " rows");
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= rows)
      return errorStatus("id ", ids[i], " at position ", i, " is outside [0, ",
                         rows, ") of '", plan::printable(name), "'");
  const char *src = static_cast<const char *>(t->rawData());
  if (bf16 && t->dtype() == DType::F32) {
    // Half the bytes: each f32 value of the rows as bfloat16.
    const size_t perRow = rowBytes / sizeof(float);
    out->resize(n * perRow * sizeof(uint16_t));
    auto *dst = reinterpret_cast<uint16_t *>(out->data());
    for (size_t i = 0; i < n; ++i)
      dtf::narrowToBf16(
          reinterpret_cast<const float *>(src + size_t(ids[i]) * rowBytes),
          int64_t(perRow), dst + i * perRow);
    *narrowed = true;
    return Status::ok();
  }
  out->resize(n * rowBytes);
  for (size_t i = 0; i < n; ++i)
    std::memcpy(out->data() + i * rowBytes, src + size_t(ids[i]) * rowBytes,
                rowBytes);
  return Status::ok();
}

void PsStore::listForSave(std::vector<checkpoint::SavedTensor> *tensors) const {
  for (const plan::HeldTensor &h : held_)
    if (!dynamic_.holdsVariable(h.variable))
      tensors->push_back(
          {h.variable, h.fullDims, h.rowOffset, variables_.find(h.name)});
}

} // namespace dtf::dist::ps
