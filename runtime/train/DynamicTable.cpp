// Dynamic tables (see DynamicTable.h).
#include "runtime/train/DynamicTable.h"

#include "runtime/data/Random.h"
#include "runtime/plan/PlanTypes.h"
#include "runtime/train/Initializers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace dtf::train {

int dynamicShardOf(int64_t id, int64_t parts) {
  if (parts <= 1)
    return 0;
  data::SplitMix64 mix{uint64_t(id)};
  return int(mix.next() % uint64_t(parts));
}

namespace {

int64_t rowsOf(const plan::Variable &var) {
  return var.type().shape().dims_size() ? var.type().shape().dims(0) : 1;
}

} // namespace

DynamicTable::Init DynamicTable::initOf(const plan::Initializer &init) {
  const std::string &kind = init.kind();
  Init out;
  if (kind == "ones")
    out.a = 1;
  else if (kind == "constant")
    out.a = initializerParam(init, "value", 0);
  else if (kind == "uniform")
    out = {Init::kUniform, initializerParam(init, "minval", 0),
           initializerParam(init, "maxval", 1)};
  else if (kind == "normal" || kind == "truncated_normal")
    out = {kind == "normal" ? Init::kNormal : Init::kTruncated,
           initializerParam(init, "mean", 0), initializerParam(init, "stddev", 1)};
  return out; // zeros (and "") are the constant 0; dtfc refuses the rest
}

DynamicTable::DynamicTable(
    const plan::Variable &var, uint64_t runSeed, Tensor *value,
    std::vector<std::pair<const plan::Variable *, Tensor *>> slots,
    std::vector<int> parts, std::vector<int64_t> rowOffsets,
    std::vector<int64_t> rowCounts)
    : var_(var), seed_(variableSeed(runSeed, var)), value_(value),
      slots_(std::move(slots)) {
  valueInit_ = initOf(var.initializer());
  for (auto &[slotVar, t] : slots_)
    slotInit_.push_back(float(initOf(slotVar->initializer()).a));
  numParts_ = std::max<int64_t>(var.partitions(), 1);
  admitAfter_ = std::max<int64_t>(var.dynamic().admit_after(), 1);
  evictAfter_ = std::max<int64_t>(var.dynamic().evict_after(), 0);
  width_ = value->rank()
               ? value->numElements() / std::max<int64_t>(value->dim(0), 1)
               : 1;
  partAt_.assign(size_t(numParts_), -1);
  for (size_t i = 0; i < parts.size(); ++i) {
    auto p = std::make_unique<Part>();
    p->index = parts[i];
    p->offset = rowOffsets[i];
    p->rows = rowCounts[i];
    p->idOf.assign(size_t(p->rows), -1);
    p->lastUsed.assign(size_t(p->rows), 0);
    if (parts[i] >= 0 && parts[i] < numParts_)
      partAt_[size_t(parts[i])] = int(parts_.size());
    parts_.push_back(std::move(p));
  }
}

DynamicTable::Part *DynamicTable::partFor(int64_t id, Status *error) {
  const int k = dynamicShardOf(id, numParts_);
  const int at = partAt_[size_t(k)];
  if (at < 0) {
    *error = errorStatus("id ", id, " belongs to shard ", k,
                         " of the dynamic "
                         "table '",
                         plan::printable(name()),
                         "', which this task does not hold");
    return nullptr;
  }
  return parts_[size_t(at)].get();
}

void DynamicTable::initializeRow(int64_t row, int64_t id) {
  // Drawn from (the variable's seed, the id): the same row wherever made.
  data::SplitMix64 rng(data::deriveSeed(seed_, uint64_t(id)));
  auto uniform = [&] { return double(rng.next() >> 11) * 0x1.0p-53; };
  float *v = value_->data<float>() + row * width_;
  const Init &init = valueInit_;
  switch (init.kind) {
  case Init::kConstant:
    std::fill(v, v + width_, float(init.a));
    break;
  case Init::kUniform:
    for (int64_t j = 0; j < width_; ++j)
      v[j] = float(init.a + (init.b - init.a) * uniform());
    break;
  case Init::kNormal:
  case Init::kTruncated:
    // Box-Muller in float (the rows are f32), both results used; beyond 2
    // stddev drawn again when truncated.
    for (int64_t j = 0; j < width_;) {
      const uint64_t bits = rng.next();
      const float u1 = float((bits >> 40) + 1) * 0x1.0p-24f;
      const float u2 = float((bits >> 16) & 0xffffff) * 0x1.0p-24f;
      const float r = std::sqrt(-2.0f * std::log(u1));
      float sn, cs;
      ::sincosf(6.2831853f * u2, &sn, &cs);
      for (float z : {r * cs, r * sn}) {
        if (j == width_ ||
            (init.kind == Init::kTruncated && std::fabs(z) > 2.0f))
          continue;
        v[j++] = float(init.a + init.b * double(z));
      }
    }
    break;
  }
  for (size_t k = 0; k < slots_.size(); ++k) {
    float *s = slots_[k].second->data<float>() + row * width_;
    std::fill(s, s + width_, slotInit_[k]);
  }
}

int64_t DynamicTable::makeRow(Part &part, int64_t id, int64_t step) {
  int64_t row;
  if (!part.freeRows.empty()) {
    row = part.freeRows.back();
    part.freeRows.pop_back();
  } else if (part.next < part.rows) {
    row = part.next++;
  } else {
    ++part.refused;
    if (!part.warnedFull) {
      part.warnedFull = true;
      std::fprintf(stderr,
                   "dtf-run: warning: the dynamic table '%s' is full (shard "
                   "%d holds %lld rows): new ids read zeros and are not "
                   "trained; raise its capacity or set evict_after\n",
                   name().c_str(), part.index, (long long)(part.rows - 1));
    }
    return 0;
  }
  part.rowOf.at(id, 0) = row;
  part.idOf[size_t(row)] = id;
  part.lastUsed[size_t(row)] = step;
  ++part.created;
  part.fresh.push_back(row);
  return row;
}

Status DynamicTable::rows(const int64_t *ids, int64_t n, bool create,
                          int64_t step, int64_t *out) {
  // Each id's shard first, then one pass (under its lock) per shard held.
  const bool oneShard = numParts_ == 1 && parts_.size() == 1;
  std::vector<int> at(oneShard ? 0 : size_t(n));
  if (!oneShard)
    for (int64_t i = 0; i < n; ++i) {
      Status error = Status::ok();
      Part *part = partFor(ids[i], &error);
      if (!part)
        return error;
      at[size_t(i)] = partAt_[size_t(part->index)];
    }
  for (size_t p = 0; p < parts_.size(); ++p) {
    Part &part = *parts_[p];
    std::lock_guard<std::mutex> lock(part.mu);
    for (int64_t i = 0; i < n; ++i) {
      if (!oneShard && at[size_t(i)] != int(p))
        continue;
      const int64_t id = ids[i];
      int64_t row = 0;
      if (int64_t *found = part.rowOf.find(id)) {
        row = *found;
        if (create)
          part.lastUsed[size_t(row)] = step;
      } else if (create) {
        if (admitAfter_ <= 1) {
          row = makeRow(part, id, step);
        } else {
          auto &[seen, last] = part.pending.at(id, {0, -1});
          // Sightings count once per step, as TFRA's and Monolith's do.
          if (last != step)
            ++seen;
          last = step;
          if (seen >= admitAfter_) {
            part.pending.erase(id);
            row = makeRow(part, id, step);
          }
        }
      }
      out[i] = part.offset + row;
    }
    // The new rows' values, before any other call can find them (they
    // wait for this shard's lock).
    if (!part.fresh.empty()) {
      parallelFor(pool_, int64_t(part.fresh.size()), 64,
                  [&](int64_t lo, int64_t hi) {
                    for (int64_t k = lo; k < hi; ++k) {
                      const int64_t r = part.fresh[size_t(k)];
                      initializeRow(part.offset + r, part.idOf[size_t(r)]);
                    }
                  });
      part.fresh.clear();
    }
  }
  return Status::ok();
}

void DynamicTable::sweep(int64_t step) {
  const int64_t horizon = evictAfter_ > 0 ? evictAfter_ : 1000;
  const int64_t every = std::max<int64_t>(1, horizon / 8);
  int64_t last = lastSweep_.load();
  if (step - last < every || !lastSweep_.compare_exchange_strong(last, step))
    return;
  for (auto &p : parts_) {
    std::lock_guard<std::mutex> lock(p->mu);
    std::vector<int64_t> forget;
    p->pending.forEach([&](int64_t id, const std::pair<int64_t, int64_t> &e) {
      if (step - e.second > horizon)
        forget.push_back(id);
    });
    for (int64_t id : forget)
      p->pending.erase(id);
    if (evictAfter_ <= 0)
      continue;
    for (int64_t r = 1; r < p->next; ++r) {
      const int64_t id = p->idOf[size_t(r)];
      if (id == -1 || step - p->lastUsed[size_t(r)] <= evictAfter_)
        continue;
      p->rowOf.erase(id);
      p->idOf[size_t(r)] = -1;
      p->freeRows.push_back(r);
      ++p->evicted;
    }
  }
}

void DynamicTable::clear() {
  for (auto &p : parts_) {
    std::lock_guard<std::mutex> lock(p->mu);
    p->rowOf.clear();
    p->pending.clear();
    std::fill(p->idOf.begin(), p->idOf.end(), -1);
    p->freeRows.clear();
    p->next = 1;
  }
}

std::string DynamicTable::savedName(const std::string &variable,
                                    int part) const {
  return numParts_ > 1 ? variable + "/part_" + std::to_string(part) : variable;
}

bool DynamicTable::savesTensor(const std::string &name) const {
  for (const auto &p : parts_) {
    const std::string base = savedName(var_.name(), p->index);
    if (name == base || name == base + "-keys")
      return true;
    for (const auto &[slotVar, t] : slots_)
      if (name == savedName(slotVar->name(), p->index))
        return true;
  }
  return false;
}

void DynamicTable::moveRow(Part &part, int64_t from, int64_t to) {
  const size_t bytes = size_t(width_) * sizeof(float);
  std::memcpy(value_->data<float>() + (part.offset + to) * width_,
              value_->data<float>() + (part.offset + from) * width_, bytes);
  for (auto &[slotVar, t] : slots_)
    std::memcpy(t->data<float>() + (part.offset + to) * width_,
                t->data<float>() + (part.offset + from) * width_, bytes);
  const int64_t id = part.idOf[size_t(from)];
  part.idOf[size_t(to)] = id;
  part.lastUsed[size_t(to)] = part.lastUsed[size_t(from)];
  part.idOf[size_t(from)] = -1;
  *part.rowOf.find(id) = to;
}

void DynamicTable::save(std::vector<checkpoint::SavedTensor> *out,
                        std::vector<std::unique_ptr<Tensor>> *owned) {
  for (auto &p : parts_) {
    std::lock_guard<std::mutex> lock(p->mu);
    // Compact: the live rows move to [1, live + 1), the last ones into the
    // holes eviction left.
    const int64_t live = int64_t(p->rowOf.size());
    int64_t hole = 1, tail = p->next - 1;
    while (true) {
      while (hole <= live && p->idOf[size_t(hole)] != -1)
        ++hole;
      while (tail > live && p->idOf[size_t(tail)] == -1)
        --tail;
      if (hole > live || tail <= live)
        break;
      moveRow(*p, tail, hole);
    }
    p->freeRows.clear();
    p->next = live + 1;
    auto keys = std::make_unique<Tensor>(Tensor::allocate(DType::I64, {live}));
    if (live)
      std::memcpy(keys->data<int64_t>(), p->idOf.data() + 1,
                  size_t(live) * sizeof(int64_t));
    out->push_back(checkpoint::SavedTensor::whole(
        savedName(var_.name(), p->index) + "-keys", *keys));
    owned->push_back(std::move(keys));
    auto viewOf = [&](Tensor *t) {
      std::vector<int64_t> shape = t->shape();
      shape[0] = live;
      return std::make_unique<Tensor>(Tensor::view(
          t->dtype(), shape, t->data<float>() + (p->offset + 1) * width_));
    };
    auto value = viewOf(value_);
    out->push_back(checkpoint::SavedTensor::whole(
        savedName(var_.name(), p->index), *value));
    owned->push_back(std::move(value));
    for (auto &[slotVar, t] : slots_) {
      auto slot = viewOf(t);
      out->push_back(checkpoint::SavedTensor::whole(
          savedName(slotVar->name(), p->index), *slot));
      owned->push_back(std::move(slot));
    }
  }
}

Status DynamicTable::restore(const checkpoint::CheckpointReader &reader,
                             int64_t step) {
  for (auto &p : parts_) {
    const std::string base = savedName(var_.name(), p->index);
    const checkpoint::TensorInfo *keysInfo = reader.find(base + "-keys");
    const checkpoint::TensorInfo *valueInfo = reader.find(base);
    if (!keysInfo || !valueInfo || keysInfo->dtype != DType::I64 ||
        keysInfo->shape.size() != 1)
      return errorStatus("checkpoint ",
                         checkpoint::checkpointName(reader.step()),
                         " has no dynamic table '", base, "' (", base,
                         "-keys and ", base, ")");
    const int64_t live = keysInfo->shape[0];
    if (live > p->rows - 1)
      return errorStatus("checkpoint ",
                         checkpoint::checkpointName(reader.step()), " holds ",
                         live, " rows of the dynamic table '", base,
                         "', more than its capacity here (", p->rows - 1,
                         "); raise capacity to at least that");
    std::vector<int64_t> expect = value_->shape();
    expect[0] = live;
    if (valueInfo->shape != expect)
      return errorStatus("checkpoint ",
                         checkpoint::checkpointName(reader.step()), " has '",
                         base, "' of shape ", shapeString(valueInfo->shape),
                         ", not ", shapeString(expect));
    Tensor keys;
    DTF_RETURN_IF_ERROR(reader.read(base + "-keys", &keys));
    auto readRows = [&](const std::string &name, Tensor *t) {
      Tensor view = Tensor::view(t->dtype(), expect,
                                 t->data<float>() + (p->offset + 1) * width_);
      return reader.readRowsInto(name, 0, &view);
    };
    DTF_RETURN_IF_ERROR(readRows(base, value_));
    for (auto &[slotVar, t] : slots_)
      DTF_RETURN_IF_ERROR(readRows(savedName(slotVar->name(), p->index), t));
    std::lock_guard<std::mutex> lock(p->mu);
    p->rowOf.clear();
    p->pending.clear();
    p->freeRows.clear();
    std::fill(p->idOf.begin(), p->idOf.end(), -1);
    const int64_t *id = keys.data<int64_t>();
    for (int64_t i = 0; i < live; ++i) {
      if (dynamicShardOf(id[i], numParts_) != p->index || p->rowOf.find(id[i]))
        return errorStatus(
            "checkpoint ", checkpoint::checkpointName(reader.step()), ": id ",
            id[i], " in ", base,
            "-keys is repeated or does not belong to shard ", p->index);
      p->rowOf.at(id[i], 0) = i + 1;
      p->idOf[size_t(i + 1)] = id[i];
      p->lastUsed[size_t(i + 1)] = step;
    }
    p->next = live + 1;
  }
  return Status::ok();
}

std::vector<std::string> DynamicTable::variableNames() const {
  std::vector<std::string> names{var_.name()};
  for (const auto &[slotVar, t] : slots_)
    names.push_back(slotVar->name());
  return names;
}

DynamicTableStats DynamicTable::stats() const {
  DynamicTableStats s;
  for (const auto &p : parts_) {
    std::lock_guard<std::mutex> lock(p->mu);
    s.live += int64_t(p->rowOf.size());
    s.capacity += p->rows - 1;
    s.created += p->created;
    s.evicted += p->evicted;
    s.refused += p->refused;
  }
  return s;
}

Status DynamicTables::create(const plan::Plan &plan, uint64_t runSeed,
                             exec::VariableStore *store,
                             std::unique_ptr<DynamicTables> *out) {
  auto tables = std::make_unique<DynamicTables>();
  for (const plan::Variable &var : plan.variables()) {
    if (!var.dynamic().enabled() || !var.slot_of().empty())
      continue;
    Tensor *value = store->find(var.name());
    if (!value)
      continue; // not held here
    std::vector<std::pair<const plan::Variable *, Tensor *>> slots;
    for (const plan::Variable &s : plan.variables())
      if (s.slot_of() == var.name()) {
        Tensor *t = store->find(s.name());
        if (!t || t->shape() != value->shape())
          return errorStatus("the slot '", plan::printable(s.name()),
                             "' of the dynamic table '",
                             plan::printable(var.name()),
                             "' is not held "
                             "beside it");
        slots.push_back({&s, t});
      }
    if (value->dtype() != DType::F32 || value->rank() != 2)
      return errorStatus("the dynamic table '", plan::printable(var.name()),
                         "' is ", value->describe(), ", not f32 rows");
    // Shards as the fixed-size partitioner cuts axis 0.
    const int64_t parts = std::max<int64_t>(var.partitions(), 1);
    const int64_t rows = rowsOf(var);
    std::vector<int> index;
    std::vector<int64_t> offsets, counts;
    int64_t offset = 0;
    for (int64_t k = 0; k < parts; ++k) {
      const int64_t n = rows / parts + (k < rows % parts ? 1 : 0);
      index.push_back(int(k));
      offsets.push_back(offset);
      counts.push_back(n);
      offset += n;
    }
    tables->add(std::make_unique<DynamicTable>(
        var, runSeed, value, std::move(slots), index, offsets, counts));
  }
  *out = std::move(tables);
  return Status::ok();
}

void DynamicTables::add(std::unique_ptr<DynamicTable> table, std::string key) {
  if (key.empty())
    key = table->name();
  for (const std::string &v : table->variableNames())
    variables_[v] = key;
  tables_[key] = std::move(table);
}

DynamicTable *DynamicTables::find(const std::string &name) {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

bool DynamicTables::holdsVariable(const std::string &variable) const {
  return variables_.count(variable) > 0;
}

bool DynamicTables::savesTensor(const std::string &name) const {
  for (const auto &[n, table] : tables_)
    if (table->savesTensor(name))
      return true;
  return false;
}

Status DynamicTables::rows(const std::string &table, const Tensor &ids,
                           bool create, int64_t step, Tensor *out) {
  DynamicTable *t = find(table);
  if (!t)
    return errorStatus("no dynamic table '", plan::printable(table),
                       "' is held here");
  if (!out->defined() || !out->canHold(DType::I64, ids.shape()))
    *out = Tensor::allocate(DType::I64, ids.shape());
  else
    out->retype(DType::I64, ids.shape());
  const int64_t n = ids.numElements();
  if (ids.dtype() == DType::I64)
    return t->rows(ids.data<int64_t>(), n, create, step, out->data<int64_t>());
  if (ids.dtype() != DType::I32)
    return errorStatus("dtf.dynamic_rows takes i32 or i64 ids, got ",
                       ids.describe());
  std::vector<int64_t> wide(ids.data<int32_t>(), ids.data<int32_t>() + n);
  return t->rows(wide.data(), n, create, step, out->data<int64_t>());
}

void DynamicTables::setThreadPool(ThreadPool *pool) {
  for (auto &[name, table] : tables_)
    table->setThreadPool(pool);
}

void DynamicTables::sweep(int64_t step) {
  for (auto &[name, table] : tables_)
    table->sweep(step);
}

void DynamicTables::clear() {
  for (auto &[name, table] : tables_)
    table->clear();
}

void DynamicTables::save(std::vector<checkpoint::SavedTensor> *out,
                         std::vector<std::unique_ptr<Tensor>> *owned) {
  for (auto &[name, table] : tables_)
    table->save(out, owned);
}

Status DynamicTables::restore(const checkpoint::CheckpointReader &reader,
                              int64_t step) {
  for (auto &[name, table] : tables_)
    DTF_RETURN_IF_ERROR(table->restore(reader, step));
  return Status::ok();
}

std::string DynamicTables::describe() const {
  std::string s;
  for (const auto &[name, table] : tables_) {
    DynamicTableStats st = table->stats();
    if (!s.empty())
      s += "; ";
    s += name + ": " + std::to_string(st.live) + " of " +
         std::to_string(st.capacity) + " rows (" + std::to_string(st.created) +
         " made, " + std::to_string(st.evicted) + " evicted" +
         (st.refused ? ", " + std::to_string(st.refused) + " refused: full"
                     : std::string()) +
         ")";
  }
  return s;
}

Status restoreVariables(const checkpoint::CheckpointReader &reader,
                        const std::string &what, exec::VariableStore *store,
                        DynamicTables *tables) {
  for (const std::string &name : store->names()) {
    if (tables && tables->holdsVariable(name))
      continue;
    if (!reader.find(name))
      return errorStatus(what, " has no variable '", name,
                         "': it was saved by a different model");
    DTF_RETURN_IF_ERROR(reader.readInto(name, store->find(name)));
  }
  return tables ? tables->restore(reader, reader.step()) : Status::ok();
}

} // namespace dtf::train
