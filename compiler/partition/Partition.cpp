// The train_step cut for ps/worker training, done once by dtfc: the worker's
// and the ps's programs (the ps's per held tensor), the lookup cut of
// between-graph training, and the stages of model parallelism. Every task
// binds these programs to its cluster (schema/Placement.h); none cuts again.
#include "compiler/partition/Partition.h"
#include "dtf/OpNames.h"

#include "schema/DeviceName.h"
#include "schema/Placement.h"
#include "schema/PlanSchema.h"

#include <algorithm>
#include <map>
#include <set>
#include <type_traits>
#include <unordered_map>

namespace dtf::plan {
namespace {
std::string shortOpName(const std::string &name) {
  return name.rfind("dtf.", 0) == 0 ? name.substr(4) : name;
}

// step) before its (indices, rows) pairs, and the dense op it stands for.
struct SparseForm {
  const char *dense;
  int fixed;      // inputs before the pairs
  int gradAt;     // where the dense op takes its gradient
  bool lazyMatters; // the dense op must skip absent rows to match
};

const SparseForm *sparseForm(const std::string &name) {
  static const std::map<std::string, SparseForm, std::less<>> forms = {
      {dtf::ops::kSparseApplySgd, {dtf::ops::kApplySgd, 2, 1, false}},
      {dtf::ops::kSparseApplyMomentum, {dtf::ops::kApplyMomentum, 3, 2, true}},
      {dtf::ops::kSparseApplyAdam, {dtf::ops::kApplyAdam, 5, 3, true}},
      {dtf::ops::kSparseApplyAdagrad, {dtf::ops::kApplyAdagrad, 3, 2, false}},
      {dtf::ops::kSparseApplyRmsprop, {dtf::ops::kApplyRmsprop, 4, 3, true}},
  };
  auto it = forms.find(name);
  return it == forms.end() ? nullptr : &it->second;
}

// The cut sends dense gradients: each sparse update becomes, on the worker,
// dtf.gather_grad of its pairs (summed), and on the ps the dense update,
// told with `lazy` to leave the rows whose gradient is all zero untouched,
// so that the slots of absent rows do not decay there either.
Status densifySparseUpdates(Program *train,
                             const std::map<int32_t, std::string> &remote) {
  int32_t nextId = 0;
  std::unordered_map<int32_t, int> valueIndex;
  for (int v = 0; v < train->values_size(); ++v) {
    nextId = std::max(nextId, train->values(v).id() + 1);
    valueIndex[train->values(v).id()] = v;
  }
  google::protobuf::RepeatedPtrField<Op> ops;
  for (int i = 0; i < train->ops_size(); ++i) {
    const Op &op = train->ops(i);
    const SparseForm *form = sparseForm(op.name());
    if (!form || (op.inputs_size() > 0 && remote.count(op.inputs(0)))) {
      *ops.Add() = op;
      continue;
    }
    const int pairs = op.inputs_size() - form->fixed;
    if (pairs < 2 || pairs % 2 != 0 || !valueIndex.count(op.inputs(0)))
      return errorStatus("train_step: ", describeOp(*train, i),
                         " takes its variable, ", form->fixed - 1,
                         " other inputs and pairs of (indices, rows); the "
                         "plan gives it ",
                         op.inputs_size(), " inputs");
    const TensorType varType =
        train->values(valueIndex.at(op.inputs(0))).type();
    AttrValue paramsShape;
    for (int64_t d : varType.shape().dims())
      paramsShape.mutable_ints()->add_values(d);
    auto newValue = [&] {
      Value *v = train->add_values();
      v->set_id(nextId++);
      *v->mutable_type() = varType;
      return v->id();
    };
    int32_t grad = -1;
    for (int k = form->fixed; k + 1 < op.inputs_size(); k += 2) {
      Op *scatter = ops.Add();
      scatter->set_name(dtf::ops::kGatherGrad);
      scatter->add_inputs(op.inputs(k + 1)); // rows: the gather's dy
      scatter->add_inputs(op.inputs(k));     // indices
      scatter->add_outputs(newValue());
      (*scatter->mutable_attrs())["params_shape"] = paramsShape;
      scatter->set_device(op.device());
      scatter->set_location(op.location());
      if (grad >= 0) {
        Op *add = ops.Add();
        add->set_name(dtf::ops::kAdd);
        add->add_inputs(grad);
        add->add_inputs(scatter->outputs(0));
        add->add_outputs(newValue());
        add->set_device(op.device());
        add->set_location(op.location());
        grad = add->outputs(0);
      } else {
        grad = scatter->outputs(0);
      }
    }
    Op *dense = ops.Add();
    *dense = op;
    dense->set_name(form->dense);
    dense->clear_inputs();
    for (int k = 0; k < form->fixed; ++k) {
      if (k == form->gradAt)
        dense->add_inputs(grad);
      dense->add_inputs(op.inputs(k));
    }
    if (form->lazyMatters)
      (*dense->mutable_attrs())["lazy"].set_b(true);
  }
  *train->mutable_ops() = std::move(ops);
  return Status::ok();
}

// The embedding tables of a between-graph step that a worker looks up on
// the ps: a variable read whose every use is the table operand of a
// dtf.gather or the variable of a sparse update (and which no fetch takes).
// Read value id -> variable.
std::map<int32_t, std::string> remoteTables(const Program &train) {
  std::map<int32_t, std::vector<std::pair<const Op *, int>>> uses;
  for (const Op &op : train.ops())
    for (int k = 0; k < op.inputs_size(); ++k)
      uses[op.inputs(k)].push_back({&op, k});
  std::set<int32_t> fetched;
  for (const Fetch &f : train.fetches())
    fetched.insert(f.value());
  // Per variable (it may be read more than once): its reads, and whether
  // every use qualifies.
  struct Uses {
    std::vector<int32_t> reads;
    bool onlyRows = true, sparseUpdate = false, gathered = false;
  };
  std::map<std::string, Uses> byName;
  for (const Op &op : train.ops()) {
    if (op.name() != dtf::ops::kReadVariable || op.outputs_size() != 1 ||
        !op.attrs().count("name"))
      continue;
    Uses &u = byName[op.attrs().at("name").s()];
    u.reads.push_back(op.outputs(0));
    if (fetched.count(op.outputs(0)))
      u.onlyRows = false;
    for (const auto &[user, k] : uses[op.outputs(0)]) {
      if (user->name() == dtf::ops::kGather && k == 0 && user->inputs_size() == 2)
        u.gathered = true;
      else if (sparseForm(user->name()) && k == 0)
        u.sparseUpdate = true;
      else
        u.onlyRows = false;
    }
  }
  std::map<int32_t, std::string> out;
  for (const auto &[name, u] : byName)
    if (u.onlyRows && u.sparseUpdate && u.gathered)
      for (int32_t read : u.reads)
        out[read] = name;
  return out;
}

// The gathers of `program` whose table is a read of one of `remote`'s
// variables become dtf.ps_gather, for each variable that the program only
// gathers (and updates sparsely).
void lookUpRowsOnPs(Program *program,
                    const std::map<int32_t, std::string> &remote) {
  std::set<std::string> tables;
  for (const auto &entry : remote)
    tables.insert(entry.second);
  std::map<int32_t, std::string> reads;
  for (const Op &op : program->ops())
    if (op.name() == dtf::ops::kReadVariable && op.outputs_size() == 1 &&
        op.attrs().count("name") && tables.count(op.attrs().at("name").s()))
      reads[op.outputs(0)] = op.attrs().at("name").s();
  for (const Fetch &f : program->fetches())
    if (auto it = reads.find(f.value()); it != reads.end())
      tables.erase(it->second);
  for (const Op &op : program->ops())
    for (int k = 0; k < op.inputs_size(); ++k)
      if (auto it = reads.find(op.inputs(k)); it != reads.end())
        if ((op.name() != dtf::ops::kGather || op.inputs_size() != 2 || k != 0) &&
            !(sparseForm(op.name()) && k == 0))
          tables.erase(it->second);
  for (Op &op : *program->mutable_ops()) {
    if (op.name() != dtf::ops::kGather || op.inputs_size() != 2)
      continue;
    auto table = reads.find(op.inputs(0));
    if (table == reads.end() || !tables.count(table->second))
      continue;
    op.set_name(dtf::ops::kPsGather);
    const int32_t ids = op.inputs(1);
    op.clear_inputs();
    op.add_inputs(ids);
    (*op.mutable_attrs())["variable"].set_s(table->second);
  }
  // A dynamic table's rows are known only to the ps that holds it: the
  // worker sends the ids themselves, to look up (making rows in training)
  // and in its sparse gradients, and drops its dtf.dynamic_rows.
  std::map<int32_t, std::pair<int32_t, bool>> rawIds; // rows -> ids, create
  for (const Op &op : program->ops())
    if (op.name() == dtf::ops::kDynamicRows && op.inputs_size() == 1 &&
        op.outputs_size() == 1 && op.attrs().count("table") &&
        tables.count(op.attrs().at("table").s())) {
      auto create = op.attrs().find("create");
      rawIds[op.outputs(0)] = {op.inputs(0), create != op.attrs().end() &&
                                                 create->second.b()};
    }
  if (!rawIds.empty()) {
    for (Op &op : *program->mutable_ops()) {
      for (int k = 0; k < op.inputs_size(); ++k)
        if (auto it = rawIds.find(op.inputs(k)); it != rawIds.end()) {
          op.set_inputs(k, it->second.first);
          if (op.name() == dtf::ops::kPsGather)
            (*op.mutable_attrs())["create"].set_b(it->second.second);
        }
    }
    google::protobuf::RepeatedPtrField<Op> kept;
    for (const Op &op : program->ops())
      if (!(op.name() == dtf::ops::kDynamicRows && op.outputs_size() == 1 &&
            rawIds.count(op.outputs(0))))
        *kept.Add() = op;
    *program->mutable_ops() = std::move(kept);
    google::protobuf::RepeatedPtrField<Value> values;
    for (const Value &v : program->values())
      if (!rawIds.count(v.id()))
        *values.Add() = v;
    *program->mutable_values() = std::move(values);
  }
  // The reads of those tables that nothing else takes (a sparse update's
  // stays) are gone with their values: no task reads the table whole.
  std::set<int32_t> used;
  for (const Op &op : program->ops())
    used.insert(op.inputs().begin(), op.inputs().end());
  std::set<int32_t> dead;
  for (const auto &[value, name] : reads)
    if (tables.count(name) && !used.count(value))
      dead.insert(value);
  google::protobuf::RepeatedPtrField<Op> ops;
  for (const Op &op : program->ops())
    if (!(op.name() == dtf::ops::kReadVariable && op.outputs_size() == 1 &&
          dead.count(op.outputs(0))))
      *ops.Add() = op;
  *program->mutable_ops() = std::move(ops);
  google::protobuf::RepeatedPtrField<Value> values;
  for (const Value &v : program->values())
    if (!dead.count(v.id()))
      *values.Add() = v;
  *program->mutable_values() = std::move(values);
}


int localOperands(const Op &op) {
  int n = updatedOperands(op);
  if (op.name() == dtf::ops::kMovingAverageUpdate)
    ++n;
  return n;
}

std::string updatedVariable(const Program &program, int opIndex) {
  const Op &op = program.ops(opIndex);
  if (updatedOperands(op) == 0 || op.inputs_size() == 0)
    return "";
  for (int i = opIndex - 1; i >= 0; --i) {
    const Op &def = program.ops(i);
    for (int32_t out : def.outputs())
      if (out == op.inputs(0))
        return def.name() == dtf::ops::kReadVariable ? def.attrs().at("name").s()
                                                 : "";
  }
  return "";
}

Status cutTrainStep(Plan *plan, bool remoteLookups) {
  Program train = plan->train_step();
  const std::map<int32_t, std::string> remote =
      remoteLookups ? remoteTables(train) : std::map<int32_t, std::string>();
  DTF_RETURN_IF_ERROR(densifySparseUpdates(&train, remote));
  // A gather of a table looked up on the ps: the worker asks the ps for the
  // rows of its ids (dtf.ps_gather) and never reads the table itself.
  if (!remote.empty())
    lookUpRowsOnPs(&train, remote);
  const int numOps = train.ops_size();
  std::unordered_map<int32_t, int> definedBy;
  for (int i = 0; i < numOps; ++i)
    for (int32_t out : train.ops(i).outputs())
      definedBy[out] = i;

  // Values the worker needs besides the updates' local operands.
  std::set<int32_t> usedOnWorker;
  std::vector<bool> isUpdate(numOps, false);
  for (int i = 0; i < numOps; ++i) {
    const Op &op = train.ops(i);
    const int local = localOperands(op);
    isUpdate[i] = updatedOperands(op) > 0;
    for (int k = isUpdate[i] ? local : 0; k < op.inputs_size(); ++k)
      usedOnWorker.insert(op.inputs(k));
  }
  for (const Fetch &f : train.fetches())
    usedOnWorker.insert(f.value());

  Program worker;
  worker.set_name("worker_step");
  Program ps;
  ps.set_name("ps_update");
  std::set<int32_t> workerValues, psValues;
  std::unordered_map<int32_t, const Value *> valueById;
  for (const Value &v : train.values())
    valueById[v.id()] = &v;
  auto declare = [&](Program &p, std::set<int32_t> &declared, int32_t id) {
    if (declared.insert(id).second)
      *p.add_values() = *valueById.at(id);
  };
  // A sparse gradient's ids and rows as the ps receives them: int64 ids
  // (relative to its shard) and their rows, as many as the step's unique ids.
  auto declareSparse = [&](int32_t id, bool ids, const TensorType &var) {
    if (!psValues.insert(id).second)
      return;
    Value *v = ps.add_values();
    v->set_id(id);
    v->mutable_type()->set_dtype(ids ? I64 : var.dtype());
    Shape *shape = v->mutable_type()->mutable_shape();
    shape->add_dims(-1);
    if (!ids)
      for (int d = 1; d < var.shape().dims_size(); ++d)
        shape->add_dims(var.shape().dims(d));
  };

  for (int i = 0; i < numOps; ++i) {
    const Op &op = train.ops(i);
    if (isUpdate[i])
      continue;
    if (op.name() == dtf::ops::kReadVariable && !usedOnWorker.count(op.outputs(0)))
      continue; // read only by updates: the ps reads it
    for (int32_t out : op.outputs())
      declare(worker, workerValues, out);
    *worker.add_ops() = op;
  }
  *worker.mutable_feeds() = train.feeds();
  *worker.mutable_fetches() = train.fetches();

  // The updates, in program order, each with its local reads (a read may
  // serve several updates, the moving average after its optimizer update).
  std::set<int> psReads;
  std::set<int32_t> sent;
  for (int i = 0; i < numOps; ++i) {
    if (!isUpdate[i])
      continue;
    const Op &op = train.ops(i);
    const std::string variable = updatedVariable(train, i);
    if (variable.empty())
      return errorStatus("train_step: ", describeOp(train, i),
                         " updates a value that is not a variable read");
    const int local = localOperands(op);
    const SparseForm *form = sparseForm(op.name());
    for (int k = 0; k < op.inputs_size(); ++k) {
      const int32_t in = op.inputs(k);
      if (form && k >= form->fixed && k + 1 < op.inputs_size()) {
        // An (ids, rows) pair of a table looked up on the ps.
        Transfer send;
        send.set_key(variable + ":grad:" +
                     std::to_string((k - form->fixed) / 2));
        send.set_value(in);
        send.set_rows_value(op.inputs(k + 1));
        send.set_sparse(true);
        send.set_to("ps");
        send.set_variable(variable);
        *worker.add_sends() = send;
        const TensorType &varType = valueById.at(op.inputs(0))->type();
        declareSparse(in, true, varType);
        declareSparse(op.inputs(k + 1), false, varType);
        Transfer recv = send;
        recv.clear_to();
        *ps.add_recvs() = recv;
        ++k;
        continue;
      }
      if (k < local) {
        auto it = definedBy.find(in);
        if (it == definedBy.end() ||
            train.ops(it->second).name() != dtf::ops::kReadVariable)
          return errorStatus("train_step: ", describeOp(train, i),
                             " takes input ", k,
                             " from an op that is not a variable read");
        if (psReads.insert(it->second).second) {
          declare(ps, psValues, in);
          *ps.add_ops() = train.ops(it->second);
        }
        continue;
      }
      if (!sent.insert(in).second)
        continue;
      std::string key = variable + ":";
      // (A generated update, dtf.fused with `inplace`, takes the gradient
      // where its op-by-op update does: right after the variable and slots.)
      const bool isGrad =
          (isDenseUpdate(op.name()) || op.name() == dtf::ops::kFused) &&
          k == local;
      key += isGrad ? std::string("grad")
                    : shortOpName(op.name()) + ":" + std::to_string(k);
      Transfer send;
      send.set_key(key);
      send.set_value(in);
      send.set_to("ps");
      send.set_variable(variable);
      *worker.add_sends() = send;
      declare(ps, psValues, in);
      Transfer recv = send;
      recv.clear_to();
      *ps.add_recvs() = recv;
    }
    *ps.add_ops() = op;
  }
  // The evaluation looks the same tables up (when it only gathers them too),
  // so no task but their ps ever holds them whole.
  if (!remote.empty())
    lookUpRowsOnPs(plan->mutable_eval(), remote);
  // The reads must come before the updates that take them; ops were appended
  // read-then-update per update, which keeps program order per variable.
  *plan->mutable_worker_step() = std::move(worker);
  *plan->mutable_ps_update() = std::move(ps);
  return checkReplicaSpan(*plan);
}

// The shards of `variable` (a slot or moving average: its owner's, under its
// own name), whatever ps holds them.
std::vector<PlacedShard> shardsOf(const Plan &plan,
                                  const std::string &variable) {
  std::string owner = variable;
  for (const Variable &v : plan.variables())
    if (v.name() == variable && !v.slot_of().empty())
      owner = v.slot_of();
  std::vector<PlacedShard> out;
  for (const Variable &v : plan.variables())
    if (v.name() == owner)
      for (PlacedShard s : axisZeroShards(v)) {
        s.variable = variable;
        out.push_back(s);
      }
  return out;
}

// ps_update per held tensor: each update once per shard of its variable,
// over that shard's rows (all updates are elementwise), its ops marked with
// the shard's Op.held. A task's ps program is then the ops of what it holds
// (plan::psProgramFor): the reads name the shard, and the recvs of values
// shaped like the variable take the shard's rows ("emb:grad/part_1", with
// row_offset and rows); other operands (a learning rate) are received whole,
// once.
class PsUpdateSharder {
public:
  PsUpdateSharder(const Plan &plan, const Program &all) : plan_(plan), all_(all) {
    for (const Value &v : all.values()) {
      valueById_[v.id()] = &v;
      nextId_ = std::max(nextId_, v.id() + 1);
    }
    for (int i = 0; i < all.ops_size(); ++i)
      for (int32_t o : all.ops(i).outputs())
        definedBy_[o] = i;
    for (const Transfer &r : all.recvs())
      recvOf_[r.value()] = &r;
    for (const Variable &v : plan.variables())
      varDims_[v.name()] = {v.type().shape().dims().begin(),
                            v.type().shape().dims().end()};
  }

  Status run(Program *out) {
    out_.set_name(all_.name());
    for (int i = 0; i < all_.ops_size(); ++i) {
      if (updatedOperands(all_.ops(i)) == 0)
        continue;
      const std::string var = updatedVariable(all_, i);
      std::vector<PlacedShard> shards = shardsOf(plan_, var);
      if (shards.empty())
        return errorStatus("ps_update: ", describeOp(all_, i), " updates '",
                           printable(var), "', which the plan does not declare");
      for (const PlacedShard &shard : shards)
        DTF_RETURN_IF_ERROR(addUpdate(i, var, shard));
    }
    *out = std::move(out_);
    return Status::ok();
  }

private:
  // Update op `i` over one shard of `var`, after the reads it takes.
  Status addUpdate(int i, const std::string &var, const PlacedShard &shard) {
    const Op &op = all_.ops(i);
    Shard s{heldName(var, shard), shard.shards > 1,
            shard.shards > 1 ? "/part_" + std::to_string(shard.shard) : "",
            shard, varDims_[var]};
    Op copy = op;
    copy.clear_inputs();
    copy.set_held(s.held);
    const int local = localOperands(op);
    for (int k = 0; k < op.inputs_size(); ++k) {
      const int32_t in = op.inputs(k);
      if (k < local) {
        DTF_RETURN_IF_ERROR(addRead(i, k, s, &copy));
        continue;
      }
      auto r = recvOf_.find(in);
      if (r != recvOf_.end() && r->second->sparse() && k + 1 < op.inputs_size()) {
        DTF_RETURN_IF_ERROR(addSparseRecv(i, *r->second, s, &copy));
        ++k; // the pair's rows
        continue;
      }
      if (r == recvOf_.end()) {
        copy.add_inputs(in);
        continue;
      }
      copy.add_inputs(addDenseRecv(*r->second, s));
    }
    *out_.add_ops() = copy;
    return Status::ok();
  }

  struct Shard {
    std::string held;   // Op.held
    bool part;          // one of several shards
    std::string suffix; // "/part_<k>" or ""
    const PlacedShard &placed;
    const std::vector<int64_t> &fullDims;
  };

  void declare(const Value &v) {
    if (declared_.insert(v.id()).second)
      *out_.add_values() = v;
  }

  // A value of the variable's shape becomes the shard's rows (a new value).
  int32_t shardValue(int32_t id, const Shard &s) {
    if (!s.part)
      return id;
    Value v = *valueById_.at(id);
    std::vector<int64_t> dims(v.type().shape().dims().begin(),
                              v.type().shape().dims().end());
    if (dims != s.fullDims || dims.empty())
      return id;
    v.set_id(nextId_++);
    v.mutable_type()->mutable_shape()->set_dims(0, s.placed.rows);
    declare(v);
    return v.id();
  }

  // Input k of update op `i` (the variable or a slot): its read, of the shard.
  Status addRead(int i, int k, const Shard &s, Op *copy) {
    const int32_t in = all_.ops(i).inputs(k);
    auto d = definedBy_.find(in);
    if (d == definedBy_.end())
      return errorStatus("ps_update: ", describeOp(all_, i), " input ", k,
                         " is not a variable read");
    Op read = all_.ops(d->second);
    const std::string name = read.attrs().at("name").s();
    (*read.mutable_attrs())["name"].set_s(name + s.suffix);
    const int32_t id = shardValue(in, s);
    copy->add_inputs(id);
    if (!s.part) {
      declare(*valueById_.at(in));
      if (!emittedReads_.insert(id).second)
        return Status::ok(); // one read serves several updates
    }
    read.set_outputs(0, id);
    read.set_held(s.held);
    *out_.add_ops() = read;
    return Status::ok();
  }

  // A sparse gradient: this shard's ids (relative to its first row) and
  // their rows, fed under the key and key#rows.
  Status addSparseRecv(int i, const Transfer &sent, const Shard &s, Op *copy) {
    int32_t ids = sent.value(), rows = sent.rows_value();
    if (!valueById_.count(rows))
      return errorStatus("ps_update: ", describeOp(all_, i), " takes rows (value ",
                         rows, ") that the program does not declare");
    Transfer recv = sent;
    if (s.part) {
      Value v = *valueById_.at(ids);
      v.set_id(nextId_++);
      declare(v);
      ids = v.id();
      v = *valueById_.at(rows);
      v.set_id(nextId_++);
      declare(v);
      rows = v.id();
      recv.set_key(sent.key() + s.suffix);
      recv.set_value(ids);
      recv.set_rows_value(rows);
    } else {
      declare(*valueById_.at(ids));
      declare(*valueById_.at(rows));
    }
    recv.set_row_offset(s.placed.rowOffset);
    recv.set_rows(s.placed.rows);
    if (recvKeys_.insert(recv.key()).second) {
      *out_.add_recvs() = recv;
      Feed *f = out_.add_feeds();
      f->set_name(recv.key());
      f->set_value(ids);
      f = out_.add_feeds();
      f->set_name(recv.key() + "#rows");
      f->set_value(rows);
    }
    copy->add_inputs(ids);
    copy->add_inputs(rows);
    return Status::ok();
  }

  // Any other received operand: the shard's rows of a value shaped like the
  // variable, else the whole value, received once.
  int32_t addDenseRecv(const Transfer &sent, const Shard &s) {
    const int32_t in = sent.value();
    const int32_t id = shardValue(in, s);
    if (id == in)
      declare(*valueById_.at(in));
    Transfer recv = sent;
    if (id != in) {
      recv.set_key(recv.key() + s.suffix);
      recv.set_value(id);
      recv.set_row_offset(s.placed.rowOffset);
      recv.set_rows(s.placed.rows);
    }
    if (recvKeys_.insert(recv.key()).second) {
      *out_.add_recvs() = recv;
      Feed *f = out_.add_feeds();
      f->set_name(recv.key());
      f->set_value(recv.value());
    }
    return id;
  }

  const Plan &plan_;
  const Program &all_;
  Program out_;
  std::unordered_map<int32_t, const Value *> valueById_;
  int32_t nextId_ = 0;
  std::unordered_map<int32_t, int> definedBy_;
  std::unordered_map<int32_t, const Transfer *> recvOf_;
  std::unordered_map<std::string, std::vector<int64_t>> varDims_;
  std::set<int32_t> declared_;
  std::set<std::string> recvKeys_;
  std::set<int32_t> emittedReads_;
};

Status shardPsUpdate(const Plan &plan, const Program &all, Program *out) {
  return PsUpdateSharder(plan, all).run(out);
}

// The program stage `stage` of a replica spanning `span` worker tasks runs.
Status cutStage(const Plan &plan, int stage, int span, Program *out) {
  const Program &worker = plan.worker_step();
  const int numOps = worker.ops_size();
  std::unordered_map<int32_t, int> definedBy;
  for (int i = 0; i < numOps; ++i)
    for (int32_t out : worker.ops(i).outputs())
      definedBy[out] = i;
  std::unordered_map<int32_t, const Value *> valueById;
  for (const Value &v : worker.values())
    valueById[v.id()] = &v;

  // Where each op runs; repeated ops run on every stage that uses them.
  std::vector<int> stageOfOp(numOps);
  std::vector<std::set<int>> usersOf(numOps); // of repeated ops
  for (int i = 0; i < numOps; ++i)
    stageOfOp[i] = stageOf(worker.ops(i));
  auto use = [&](int32_t value, int at,
                 std::map<int32_t, std::set<int>> &needs) {
    auto it = definedBy.find(value);
    if (it == definedBy.end())
      return; // a feed: stage 0's
    const int def = it->second;
    if (stageOfOp[def] < 0)
      usersOf[def].insert(at);
    else if (stageOfOp[def] != at)
      needs[value].insert(at);
  };
  // Values made on one stage and used on others: value -> stages using it.
  std::map<int32_t, std::set<int>> needs;
  for (int i = 0; i < numOps; ++i)
    if (stageOfOp[i] >= 0)
      for (int32_t in : worker.ops(i).inputs())
        use(in, stageOfOp[i], needs);
  for (const Fetch &f : worker.fetches())
    use(f.value(), 0, needs);
  for (const Transfer &t : worker.sends())
    use(t.value(), 0, needs);

  auto keyOf = [](int32_t value, int from, int to) {
    return "v" + std::to_string(value) + ":" + std::to_string(from) + "->" +
           std::to_string(to);
  };
  auto attr = [](Op &op, const char *name, auto value) {
    plan::AttrValue a;
    if constexpr (std::is_same_v<decltype(value), int>)
      a.set_i(value);
    else
      a.set_s(value);
    (*op.mutable_attrs())[name] = a;
  };

  Program p;
  p.set_name(stage == 0 && span == 1 ? "worker_step"
                                     : "worker_step stage " +
                                           std::to_string(stage));
  std::set<int32_t> declared, received;
  auto declare = [&](int32_t id) {
    if (declared.insert(id).second)
      *p.add_values() = *valueById.at(id);
  };
  auto recv = [&](int32_t value) {
    auto it = definedBy.find(value);
    if (it == definedBy.end() || received.count(value))
      return;
    const int from = stageOfOp[it->second];
    if (from < 0 || from == stage)
      return;
    received.insert(value);
    declare(value);
    Op *r = p.add_ops();
    r->set_name(dtf::ops::kRecv);
    r->add_outputs(value);
    r->set_location(worker.ops(it->second).location());
    attr(*r, "key", keyOf(value, from, stage));
    attr(*r, "peer", from);
  };
  if (stage == 0)
    for (const Feed &f : worker.feeds())
      declare(f.value());
  for (int i = 0; i < numOps; ++i) {
    const Op &op = worker.ops(i);
    const bool here = stageOfOp[i] == stage ||
                      (stageOfOp[i] < 0 && usersOf[i].count(stage));
    if (!here)
      continue;
    for (int32_t in : op.inputs())
      recv(in);
    for (int32_t o : op.outputs())
      declare(o);
    *p.add_ops() = op;
    if (stageOfOp[i] < 0)
      continue;
    for (int32_t o : op.outputs()) {
      auto it = needs.find(o);
      if (it == needs.end())
        continue;
      for (int to : it->second) {
        Op *s = p.add_ops();
        s->set_name(dtf::ops::kSend);
        s->add_inputs(o);
        s->set_location(op.location());
        attr(*s, "key", keyOf(o, stage, to));
        attr(*s, "peer", to);
      }
    }
  }
  if (stage == 0) {
    for (const Fetch &f : worker.fetches())
      recv(f.value());
    for (const Transfer &t : worker.sends())
      recv(t.value());
    *p.mutable_feeds() = worker.feeds();
    *p.mutable_fetches() = worker.fetches();
    *p.mutable_sends() = worker.sends();
  }
  *out = std::move(p);
  return Status::ok();
}

} // namespace

Status cutPlan(Plan *plan) {
  DTF_RETURN_IF_ERROR(cutTrainStep(plan, false));
  Program sharded;
  DTF_RETURN_IF_ERROR(shardPsUpdate(*plan, plan->ps_update(), &sharded));
  *plan->mutable_ps_update() = std::move(sharded);
  plan->clear_stages();
  const int span = replicaSpan(*plan);
  if (span > 1)
    for (int k = 0; k < span; ++k)
      DTF_RETURN_IF_ERROR(cutStage(*plan, k, span, plan->add_stages()));
  plan->clear_lookups();
  // Between-graph training with one task per replica looks its embedding
  // tables up on the ps (only the rows of a step's ids travel); in-graph and
  // model-parallel training keep the dense cut.
  if (span > 1 || plan->training().replication() == "in_graph" ||
      remoteTables(plan->train_step()).empty())
    return Status::ok();
  Plan cut = *plan;
  DTF_RETURN_IF_ERROR(cutTrainStep(&cut, true));
  Lookups *lookups = plan->mutable_lookups();
  *lookups->mutable_worker_step() = std::move(*cut.mutable_worker_step());
  DTF_RETURN_IF_ERROR(
      shardPsUpdate(cut, cut.ps_update(), lookups->mutable_ps_update()));
  *lookups->mutable_eval() = std::move(*cut.mutable_eval());
  return Status::ok();
}

} // namespace dtf::plan