// ps_update per held tensor, done once by dtfc when it writes a plan
// (docs/plan-format.md, "Per-task programs"). The cut itself is MLIR passes
// (dialects/Dtf/Transforms: dtf-cut-train-step, dtf-cut-stages); this step
// works on the plan's protobuf, after them, because the shards are the
// plan's variables' (Variable.partitions). Tasks bind these programs to
// their cluster (schema/Placement.h) and never cut again.
#pragma once

#include "schema/Status.h"

#include "plan.pb.h"

namespace dtf::plan {

/// Rewrites plan.ps_update (and plan.lookups.ps_update, when the plan has
/// the lookup cut), as the cut wrote them (one op per update, reading whole
/// variables, each recv whole), into the program per held tensor: each
/// update once per axis-0 shard of its variable, over that shard's rows,
/// marked with the shard's Op.held; reads of `<var>/part_<k>`; the recvs of
/// values shaped like the variable take the shard's rows
/// (`<key>/part_<k>`, with row_offset and rows), others whole and once; each
/// recv fed under its key (a sparse one's rows under `<key>#rows`).
Status shardPsPrograms(Plan *plan);

} // namespace dtf::plan
