// The replica device setter: which parameter-server task holds each variable
// (and each shard of a partitioned one), for a given number of ps tasks.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mlir::dtf {

struct PlacedShard {
  std::string variable; // "conv1/kernel"
  int shard = 0;        // 0 unless the variable is partitioned
  int shards = 1;
  int64_t bytes = 0;    // the shard with its optimizer slots
  int ps = -1;          // -1: not on a ps (pinned to a worker)
  bool pinned = false;  // placed by an `on` scope, not by the setter
};

struct Placement {
  std::string strategy; // round_robin or greedy
  int numPs = 0;
  std::vector<PlacedShard> shards;

  int64_t bytesOn(int ps) const;
  /// Largest over smallest bytes per ps (1 when balanced).
  double imbalance() const;
};

/// Places the model variables of `module` (slots stay with their variable,
/// the global step goes to ps 0) over `numPs` tasks: round_robin in
/// declaration order, or greedy, each to the ps with the fewest bytes so far.
/// Variables in an `on "/job:ps/task:K"` scope stay on task K (mod numPs);
/// variables on a worker are not on any ps.
Placement placeVariables(ModuleOp module, int numPs, llvm::StringRef strategy);

/// dtfc --placement-report.
void printPlacementReport(const Placement &placement, llvm::raw_ostream &os);

} // namespace mlir::dtf
