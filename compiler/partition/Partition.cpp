// ps_update per held tensor, done once by dtfc after the cut passes
// (dtf-cut-train-step, dtf-cut-stages) wrote the programs: each update once
// per axis-0 shard of its variable. No MLIR: it works on the plan's
// protobuf. Every task binds these programs to its cluster
// (schema/Placement.h); none cuts again.
#include "compiler/partition/Partition.h"
#include "dtf/OpNames.h"

#include "schema/Placement.h"
#include "schema/PlanSchema.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace dtf::plan {
namespace {

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

} // namespace

Status shardPsPrograms(Plan *plan) {
  Program sharded;
  DTF_RETURN_IF_ERROR(shardPsUpdate(*plan, plan->ps_update(), &sharded));
  *plan->mutable_ps_update() = std::move(sharded);
  if (!plan->has_lookups())
    return Status::ok();
  DTF_RETURN_IF_ERROR(shardPsUpdate(*plan, plan->lookups().ps_update(), &sharded));
  *plan->mutable_lookups()->mutable_ps_update() = std::move(sharded);
  return Status::ok();
}

} // namespace dtf::plan
