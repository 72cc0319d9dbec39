// dtfc --emit=dot: each task's program of a plan as a Graphviz graph.
#pragma once

#include "schema/Placement.h"

#include "plan.pb.h"

#include <string>

namespace dtf::plan {

/// A digraph with one cluster per task program: the worker_step (what every
/// worker runs), and ps_update split per ps task when `placement` is given
/// (numPs > 0), else one cluster for the ps side. Ops are nodes (name and
/// source location), values are edges; the rendezvous keys are dashed edges
/// from the worker's send to the ps ops that receive them, and pulls dotted
/// edges from the variable on its ps to the worker's read.
std::string planToDot(const Plan &plan, const Placement *placement);

} // namespace dtf::plan
