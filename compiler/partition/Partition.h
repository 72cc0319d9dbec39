// The train_step cut for ps/worker training, done once by dtfc when it
// writes a plan: every task's program (docs/plan-format.md, "Per-task
// programs"). No MLIR: it works on the plan's protobuf. Tasks bind these
// programs to their cluster (schema/Placement.h) and never cut again.
#pragma once

#include "schema/Status.h"

#include "plan.pb.h"

namespace dtf::plan {

/// Every task's program, written into `plan`:
/// - worker_step and ps_update, split from the train_step at its updates:
///   every op that updates a variable in place (the optimizers' apply ops,
///   assign_add, moving-average updates) goes to ps_update with the variable
///   reads it updates or averages; everything else stays on the worker,
///   which sends each other operand of an update under a rendezvous key (a
///   value several updates take, a learning rate, is sent once). Sparse
///   updates become dense ones there (dtf.gather_grad, `lazy`). ps_update
///   holds each update once per axis-0 shard of its variable, marked with
///   the shard's Op.held, so that a ps runs the ops of what it holds.
/// - Plan.stages: with model parallelism (ops placed on several worker
///   tasks), the program of each stage of a replica, with dtf.send and
///   dtf.recv where values cross stages (keys "v<value>:<from>-><to>");
///   empty when a replica spans one task.
/// - Plan.lookups: for between-graph training with one task per replica, the
///   cut in which an embedding table whose every use is a dtf.gather and a
///   sparse update is looked up on its ps (dtf.ps_gather, attribute
///   `variable`), and each (ids, rows) pair of its sparse update is one sparse
///   Transfer ("emb:grad:0", rows_value) that the ps's dtf.sparse_apply_*
///   takes as it is; its eval gathers the same way. Empty when no table
///   qualifies.
Status cutPlan(Plan *plan);

} // namespace dtf::plan
