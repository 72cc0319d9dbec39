// The replica device setter over a plan's variables (which ps task holds
// what), and each task's program under it: the compiler cut the programs
// (dialects/Dtf/Transforms), and every task binds them to its cluster here.
#include "schema/Placement.h"
#include "dtf/OpNames.h"

#include "schema/DeviceName.h"
#include "schema/PlanSchema.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_map>

namespace dtf::plan {
namespace {

int64_t bytesOf(const Variable &v) {
  int64_t n = 1;
  for (int64_t d : v.type().shape().dims())
    n *= std::max<int64_t>(d, 0);
  return n * elementBytes(v.type().dtype());
}


std::string humanBytes(int64_t bytes) {
  char buf[64];
  if (bytes >= (1 << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  else if (bytes >= (1 << 10))
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / double(1 << 10));
  else
    std::snprintf(buf, sizeof buf, "%lld B", (long long)bytes);
  return buf;
}

} // namespace

int64_t Placement::bytesOn(int ps) const {
  int64_t total = 0;
  for (const PlacedShard &s : shards)
    if (s.ps == ps)
      total += s.bytes;
  return total;
}

double Placement::imbalance() const {
  if (numPs == 0)
    return 1.0;
  int64_t most = 0, least = INT64_MAX;
  for (int ps = 0; ps < numPs; ++ps) {
    most = std::max(most, bytesOn(ps));
    least = std::min(least, bytesOn(ps));
  }
  return least == 0 ? (most == 0 ? 1.0 : INFINITY)
                    : double(most) / double(least);
}

std::vector<PlacedShard> Placement::shardsOf(const Plan &plan,
                                             const std::string &variable) const {
  std::string owner = variable;
  for (const Variable &v : plan.variables())
    if (v.name() == variable && !v.slot_of().empty())
      owner = v.slot_of();
  std::vector<PlacedShard> out;
  for (const PlacedShard &s : shards)
    if (s.variable == owner) {
      out.push_back(s);
      out.back().variable = variable;
    }
  return out;
}

std::vector<std::string> Placement::variablesOn(const Plan &plan,
                                                int ps) const {
  std::vector<std::string> out;
  for (const Variable &v : plan.variables())
    for (const PlacedShard &s : shardsOf(plan, v.name()))
      if (s.ps == ps) {
        out.push_back(v.name());
        break;
      }
  return out;
}

std::vector<HeldTensor> heldBy(const Plan &plan, const Placement &placement,
                               int ps) {
  std::vector<HeldTensor> out;
  for (const Variable &v : plan.variables()) {
    std::vector<PlacedShard> shards = placement.shardsOf(plan, v.name());
    std::vector<int64_t> dims(v.type().shape().dims().begin(),
                              v.type().shape().dims().end());
    for (const PlacedShard &s : shards) {
      if (s.ps != ps)
        continue;
      HeldTensor h;
      h.variable = v.name();
      h.fullDims = dims;
      h.partitioned = s.shards > 1;
      h.name = heldName(v.name(), s);
      h.rowOffset = h.partitioned ? s.rowOffset : 0;
      h.rows = h.partitioned ? s.rows : (dims.empty() ? 1 : dims[0]);
      out.push_back(h);
    }
  }
  return out;
}

std::vector<ShardRows> axisZeroRows(int64_t rows, int shards) {
  shards = std::max(shards, 1);
  std::vector<ShardRows> out;
  int64_t offset = 0;
  for (int k = 0; k < shards; ++k) {
    // Rows split as evenly as they go, the first ones one row larger.
    ShardRows r;
    r.rows = rows / shards + (k < rows % shards ? 1 : 0);
    r.rowOffset = offset;
    offset += r.rows;
    out.push_back(r);
  }
  return out;
}

std::vector<PlacedShard> axisZeroShards(const Variable &v) {
  const int shards = int(std::max<int64_t>(v.partitions(), 1));
  const int64_t rows =
      v.type().shape().dims_size() ? v.type().shape().dims(0) : 1;
  std::vector<PlacedShard> out;
  for (const ShardRows &r : axisZeroRows(rows, shards)) {
    PlacedShard shard;
    shard.variable = v.name();
    shard.optimizer = v.optimizer();
    shard.shard = int(out.size());
    shard.shards = shards;
    shard.rows = r.rows;
    shard.rowOffset = r.rowOffset;
    out.push_back(shard);
  }
  return out;
}

std::string shardName(const std::string &variable, int shard, int shards) {
  return shards > 1 ? variable + "/part_" + std::to_string(shard) : variable;
}

std::string heldName(const std::string &variable, const PlacedShard &shard) {
  return shardName(variable, shard.shard, shard.shards);
}

Status placeVariables(const Plan &plan, int numPs, const std::string &strategy,
                      Placement *out) {
  Placement placement;
  placement.strategy = !strategy.empty()           ? strategy
                       : !plan.ps_strategy().empty() ? plan.ps_strategy()
                                                     : "round_robin";
  if (placement.strategy != "round_robin" && placement.strategy != "greedy")
    return errorStatus("the ps strategy is round_robin or greedy, not '",
                       printable(placement.strategy), "'");
  placement.numPs = numPs;
  std::unordered_map<std::string, int64_t> slotBytes;
  for (const Variable &v : plan.variables())
    if (!v.slot_of().empty())
      slotBytes[v.slot_of()] += bytesOf(v);

  std::vector<int64_t> load(std::max(numPs, 0), 0);
  int next = 0;
  for (const Variable &v : plan.variables()) {
    if (!v.slot_of().empty())
      continue;
    const std::string &name = v.name();
    const int64_t total = bytesOf(v) + slotBytes[name];
    const int64_t rows =
        v.type().shape().dims_size() ? v.type().shape().dims(0) : 1;
    std::optional<int> pinnedPs;
    if (!v.device().empty()) {
      DeviceNameParse parsed = parseDeviceName(v.device());
      if (parsed.name && parsed.name->job == "ps") {
        int task = parsed.name->task.value_or(0);
        if (task >= numPs)
          return errorStatus("variable '", printable(name), "' is placed on ",
                             v.device(), ", but the cluster has ", numPs,
                             " ps task", numPs == 1 ? "" : "s",
                             " (/job:ps/task:0 to /job:ps/task:", numPs - 1,
                             "); add ps tasks or change its `on` scope");
        pinnedPs = task;
      }
      // An `on` scope naming a worker job says where the variable's ops
      // run; the variable itself is shared by the replicas, so the setter
      // still puts it on a ps.
    }
    const bool isStep = v.role() == "global_step";
    if (isStep)
      pinnedPs = 0; // as TensorFlow's replica_device_setter
    for (PlacedShard shard : axisZeroShards(v)) {
      shard.bytes = rows ? total * shard.rows / rows : total;
      shard.pinned = pinnedPs.has_value() && !isStep;
      if (numPs > 0) {
        if (pinnedPs)
          shard.ps = *pinnedPs;
        else if (placement.strategy == "greedy")
          shard.ps = int(std::min_element(load.begin(), load.end()) -
                         load.begin());
        else
          shard.ps = next++ % numPs;
        load[shard.ps] += shard.bytes;
      }
      if (shard.shard == 0)
        placement.psOf[name] = shard.ps;
      placement.shards.push_back(shard);
    }
  }
  for (const Variable &v : plan.variables())
    if (!v.slot_of().empty()) {
      auto it = placement.psOf.find(v.slot_of());
      placement.psOf[v.name()] = it == placement.psOf.end() ? 0 : it->second;
    }
  *out = std::move(placement);
  return Status::ok();
}

int stageOf(const Op &op) {
  if (op.name() == dtf::ops::kInput)
    return 0;
  if (op.name() == dtf::ops::kConstant || op.name() == dtf::ops::kReadVariable)
    return -1;
  return stageOfDevice(op.device());
}

Status checkReplicaSpan(const Plan &plan) {
  const Program &worker = plan.worker_step();
  for (int i = 0; i < worker.ops_size(); ++i)
    if (stageOf(worker.ops(i)) >= kMaxReplicaSpan)
      return errorStatus(describeOp(worker, i), " is placed on ",
                         printable(worker.ops(i).device()),
                         ": a replica spans at most ", kMaxReplicaSpan,
                         " worker tasks (/job:worker/task:0 to /job:worker/task:",
                         kMaxReplicaSpan - 1, ")");
  return Status::ok();
}

int replicaSpan(const Plan &plan) {
  int span = 1;
  for (const Op &op : plan.worker_step().ops())
    span = std::max(span, stageOf(op) + 1);
  return span;
}

Status replicasFor(const Plan &plan, int numWorkers, int *replicas) {
  DTF_RETURN_IF_ERROR(checkReplicaSpan(plan));
  const Training &t = plan.training();
  const int span = replicaSpan(plan);
  auto workers = [](int n) {
    return std::to_string(n) + " worker" + (n == 1 ? "" : "s");
  };
  if (span > 1 && t.replication() == "in_graph")
    return errorStatus("the plan places ops on ", span,
                       " worker tasks (model parallelism), which needs "
                       "between_graph replication; in in_graph replication "
                       "each tower runs on one worker");
  if (numWorkers < 1 || numWorkers % span != 0)
    return errorStatus("a replica of this plan spans ", span,
                       " worker tasks (its ops are placed up to "
                       "/job:worker/task:",
                       span - 1, "), but the cluster has ", workers(numWorkers),
                       "; give it a multiple of ", span);
  *replicas = numWorkers / span;
  if (t.update() == "sync" && t.replication() != "in_graph" &&
      t.replicas_to_aggregate() > *replicas)
    return errorStatus(
        "the plan aggregates ", t.replicas_to_aggregate(),
        " replicas per update, but the cluster has ",
        span > 1 ? std::to_string(*replicas) + " replica" +
                       (*replicas == 1 ? "" : "s") + " (" +
                       workers(numWorkers) + ", " + std::to_string(span) +
                       " per replica)"
                 : workers(numWorkers),
        "; add workers or lower replicas_to_aggregate");
  return Status::ok();
}

std::string placementReport(const Placement &placement) {
  std::string os = "placement over " + std::to_string(placement.numPs) +
                   " ps task" + (placement.numPs == 1 ? "" : "s") + " (" +
                   placement.strategy + "; bytes include optimizer slots)\n";
  for (int ps = 0; ps < placement.numPs; ++ps) {
    os += "  /job:ps/task:" + std::to_string(ps) + "  " +
          humanBytes(placement.bytesOn(ps)) + "\n";
    for (const PlacedShard &s : placement.shards) {
      if (s.ps != ps)
        continue;
      os += "    " + s.variable;
      if (s.shards > 1)
        os += " (shard " + std::to_string(s.shard) + " of " +
              std::to_string(s.shards) + ")";
      os += "  " + humanBytes(s.bytes) + (s.pinned ? "  [pinned by on]" : "") +
            (s.optimizer.empty() ? "" : "  updated by " + s.optimizer) + "\n";
    }
  }
  for (const PlacedShard &s : placement.shards)
    if (s.ps < 0)
      os += "  on a worker: " + s.variable + "  " + humanBytes(s.bytes) +
            (s.optimizer.empty() ? "" : "  updated by " + s.optimizer) + "\n";
  char buf[96];
  std::snprintf(buf, sizeof buf, "  imbalance (largest / smallest): %.2f\n",
                placement.imbalance());
  return os + buf;
}

Status psProgramFor(const Plan &plan, const Placement &placement, int ps,
                    Program *out) {
  // dtfc cut ps_update per held tensor (Op.held): this task runs the ops of
  // what it holds, with the values, recvs and feeds they use.
  std::set<std::string> held;
  for (const HeldTensor &h : heldBy(plan, placement, ps))
    held.insert(h.name);
  const Program &all = plan.ps_update();
  Program p;
  p.set_name("ps_update (ps " + std::to_string(ps) + ")");
  std::set<int32_t> used;
  // mixed_float16's guard (dtf.skip_updates_unless over the pushed flag)
  // holds no tensor: every ps that runs an update runs it first.
  bool runsUpdates = false;
  for (const Op &op : all.ops())
    runsUpdates |= held.count(op.held()) > 0;
  for (int i = 0; i < all.ops_size(); ++i) {
    const Op &op = all.ops(i);
    if (op.held().empty() && op.name() == dtf::ops::kSkipUpdatesUnless) {
      if (!runsUpdates)
        continue;
      used.insert(op.inputs().begin(), op.inputs().end());
      *p.add_ops() = op;
      continue;
    }
    if (op.held().empty())
      return errorStatus("ps_update: ", describeOp(all, i),
                         " names no held tensor (a plan of an older dtfc: "
                         "compile it again)");
    if (!held.count(op.held()))
      continue;
    used.insert(op.inputs().begin(), op.inputs().end());
    used.insert(op.outputs().begin(), op.outputs().end());
    *p.add_ops() = op;
  }
  for (const Transfer &r : all.recvs())
    if (used.count(r.value())) {
      *p.add_recvs() = r;
      if (r.sparse())
        used.insert(r.rows_value());
    }
  for (const Feed &f : all.feeds())
    if (used.count(f.value()))
      *p.add_feeds() = f;
  for (const Value &v : all.values())
    if (used.count(v.id()))
      *p.add_values() = v;
  *out = std::move(p);
  return Status::ok();
}

bool selectLookupCut(Plan *plan) {
  if (!plan->has_lookups() || plan->lookups().worker_step().ops_size() == 0)
    return false;
  Lookups *l = plan->mutable_lookups();
  plan->mutable_worker_step()->Swap(l->mutable_worker_step());
  plan->mutable_ps_update()->Swap(l->mutable_ps_update());
  plan->mutable_eval()->Swap(l->mutable_eval());
  plan->clear_lookups();
  return true;
}

Status stageProgramFor(const Plan &plan, int stage, Program *out) {
  DTF_RETURN_IF_ERROR(checkReplicaSpan(plan));
  const int span = replicaSpan(plan);
  if (stage < 0 || stage >= span)
    return errorStatus("the worker_step has no stage ", stage, " (its replica "
                       "spans ", span, " worker task", span == 1 ? "" : "s",
                       ")");
  if (span == 1) {
    *out = plan.worker_step();
    return Status::ok();
  }
  if (plan.stages_size() != span)
    return errorStatus("the plan holds ", plan.stages_size(),
                       " stage programs for a replica that spans ", span,
                       " worker tasks (a plan of an older dtfc, format ",
                       plan.format_version(), "); compile it again");
  *out = plan.stages(stage);
  return Status::ok();
}

} // namespace dtf::plan
