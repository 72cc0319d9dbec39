// The replica device setter over a plan's variables (which ps task holds
// what), and each task's program bound to a cluster. dtfc cuts the programs
// (the cut passes of dialects/Dtf/Transforms) and writes them into the plan; every task binds them
// here, and dtfc's placement report uses the same rule, so both sides and
// every task give the same answer. Placement stays a run-time binding: the
// cluster is known only then, and may change while a job runs.
#pragma once

#include "schema/Status.h"

#include "plan.pb.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtf::plan {

/// One variable (or one axis-0 shard of a partitioned one) on its ps.
struct PlacedShard {
  std::string variable; // "conv1/kernel"
  int shard = 0;        // 0 unless the variable is partitioned
  int shards = 1;
  int64_t rows = 0;     // axis-0 rows of this shard (1 for a scalar)
  int64_t rowOffset = 0;
  int64_t bytes = 0;    // the shard with its optimizer slots
  int ps = -1;          // -1: not on a ps (pinned to a worker)
  bool pinned = false;  // placed by an `on` scope, not by the setter
  std::string optimizer; // Variable.optimizer: what updates it ("" if none)
};

/// The replica device setter's answer for one ps count.
struct Placement {
  std::string strategy; // round_robin or greedy
  int numPs = 0;
  std::vector<PlacedShard> shards;
  /// Every variable (slots and moving averages too) to the ps of its first
  /// shard; -1 for variables on a worker.
  std::map<std::string, int> psOf;

  int64_t bytesOn(int ps) const;
  /// Largest over smallest bytes per ps (1 when balanced).
  double imbalance() const;
  /// The variables (slots included) held by `ps`, in declaration order; a
  /// partitioned one is listed when `ps` holds any shard of it.
  std::vector<std::string> variablesOn(const Plan &plan, int ps) const;
  /// The shards of `variable` (a slot or moving average: its owner's, under
  /// its own name), or empty for an unknown one.
  std::vector<PlacedShard> shardsOf(const Plan &plan,
                                    const std::string &variable) const;
};

/// Places the model variables of `plan` over `numPs` ps tasks: explicit `on`
/// scopes (Variable.device "/job:ps/task:K") win; otherwise round_robin in
/// declaration order or greedy (each to the ps with the fewest bytes so far,
/// TensorFlow's GreedyLoadBalancingStrategy); slots and moving averages stay
/// with their variable; the global step goes to ps 0, as with TensorFlow's
/// replica_device_setter; partitioned variables are split along axis 0. An
/// `on` scope that names a worker job does not keep a variable off the ps
/// tasks: the replicas share every variable.
/// `strategy` "" takes the plan's (round_robin when it has none). A variable
/// pinned to a ps task that the cluster lacks is an error that names both.
Status placeVariables(const Plan &plan, int numPs, const std::string &strategy,
                      Placement *out);

/// One tensor a ps task holds: a whole variable (slots included) or one
/// axis-0 shard of a partitioned one, named "<variable>/part_<k>" as
/// TensorFlow's partitioned variables are.
struct HeldTensor {
  std::string name;     // what the ps calls it: "emb" or "emb/part_1"
  std::string variable; // the plan's variable: "emb"
  std::vector<int64_t> fullDims;
  int64_t rowOffset = 0;
  int64_t rows = 0;     // of this shard; fullDims[0] (or 1) when whole
  bool partitioned = false;
};

/// What ps task `ps` holds, in declaration order (a variable's shards in
/// shard order).
std::vector<HeldTensor> heldBy(const Plan &plan, const Placement &placement,
                               int ps);

/// One axis-0 shard's rows of a variable: [rowOffset, rowOffset + rows).
struct ShardRows {
  int64_t rowOffset = 0;
  int64_t rows = 0;
};

/// The rows of each of `shards` axis-0 shards of a variable with `rows` rows
/// (1 for a scalar): split as evenly as they go, the first ones one row
/// larger. dtfc's dtf-shard-ps-update and the placement both split by it.
std::vector<ShardRows> axisZeroRows(int64_t rows, int shards);

/// The axis-0 shards of a variable (one unless it is partitioned), rows
/// from axisZeroRows; `ps` unset.
std::vector<PlacedShard> axisZeroShards(const Variable &v);

/// What a ps calls shard `shard` of `shards` of `variable`: the name itself
/// when there is one shard, else "<variable>/part_<shard>".
std::string shardName(const std::string &variable, int shard, int shards);

/// What a ps calls one shard of `variable` (a variable, slot or moving
/// average): the name itself, or "<variable>/part_<k>" when partitioned.
/// ps_update's ops carry it as Op.held.
std::string heldName(const std::string &variable, const PlacedShard &shard);

/// The program ps task `ps` runs for each (aggregated) push: the ops of
/// plan.ps_update() whose Op.held it holds (dtfc's dtf-shard-ps-update cut
/// ps_update per held tensor), with the values, recvs and feeds they use. Empty (no ops) for a
/// ps with no variables. An op with no Op.held (an older plan) is an error.
Status psProgramFor(const Plan &plan, const Placement &placement, int ps,
                    Program *out);

/// Model parallelism across tasks. An op of the worker_step placed on
/// "/job:worker/task:K" (by an `on` block, or as the gradient of such an op)
/// runs on task K of its replica, which then spans several worker tasks: its
/// stages. Task indices are relative to the replica: a cluster of W workers
/// runs W / span replicas, worker w being stage w % span of replica
/// w / span; with W == span this is TensorFlow's absolute placement. Inputs
/// are fed, and metrics, sends to the ps and unplaced ops run, on stage 0;
/// constants and variable reads are repeated on every stage that uses them.
///
/// The most worker tasks one replica may span.
inline constexpr int kMaxReplicaSpan = 1024;
/// An error naming the first op placed beyond that.
Status checkReplicaSpan(const Plan &plan);

/// The number of worker tasks one replica spans: 1 + the largest task index
/// of a worker (or chief) device among the worker_step's ops; 1 when none
/// names one.
int replicaSpan(const Plan &plan);

/// The replicas a cluster of `numWorkers` worker tasks trains: numWorkers /
/// replicaSpan. An error when the span does not divide the workers, when a
/// span over 1 meets in_graph replication, or when a sync plan aggregates
/// more replicas than there are.
Status replicasFor(const Plan &plan, int numWorkers, int *replicas);

/// The stage of one op under that rule: the task of its worker device, 0
/// for a chief device or none; -1 for ops that every stage using them
/// repeats (constants, variable reads).
int stageOf(const Op &op);

/// Between-graph training with one task per replica: the plan's lookup cut
/// (Plan.lookups, dtfc's) becomes its worker_step, ps_update and eval, so that
/// a table only gathered is looked up on its ps. False, and `plan` as it
/// was, when dtfc made none (no table qualifies, in-graph or model-parallel
/// training).
bool selectLookupCut(Plan *plan);

/// The program stage `stage` of a replica runs: plan.stages(stage), which
/// dtfc cut (the worker_step itself when the replica spans one task). An
/// error when the plan lacks the stages its worker_step's devices call for.
Status stageProgramFor(const Plan &plan, int stage, Program *out);

/// dtfc --placement-report: per ps its variables, their bytes and the
/// optimizer that updates each, and the imbalance.
std::string placementReport(const Placement &placement);

} // namespace dtf::plan
