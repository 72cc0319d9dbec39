// The replica device setter, round_robin or greedy (GreedyLoadBalancingStrategy).
#include "compiler/plan/Placement.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "runtime/core/DeviceName.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::dtf;

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
  return least == 0 ? (most == 0 ? 1.0 : INFINITY) : double(most) / double(least);
}

Placement mlir::dtf::placeVariables(ModuleOp module, int numPs, StringRef strategy) {
  Placement placement;
  placement.strategy = strategy.str();
  placement.numPs = numPs;
  // Bytes of each variable with its slots.
  std::map<std::string, int64_t> slotBytes;
  auto bytesOf = [](VariableOp v) {
    RankedTensorType t = v.getTensorType();
    return t.getNumElements() * int64_t((t.getElementType().getIntOrFloatBitWidth() + 7) / 8);
  };
  for (auto v : module.getOps<VariableOp>())
    if (auto of = v->getAttrOfType<FlatSymbolRefAttr>("dtf.slot_of"))
      slotBytes[of.getValue().str()] += bytesOf(v);

  std::vector<int64_t> load(numPs, 0);
  int next = 0;
  for (auto v : module.getOps<VariableOp>()) {
    if (v->hasAttr("dtf.slot_of"))
      continue;
    std::string name = v.getSymName().str();
    int shards = 1;
    if (auto parts = v->getAttrOfType<IntegerAttr>("dtf.partitions"))
      shards = static_cast<int>(parts.getInt());
    int64_t total = bytesOf(v) + slotBytes[name];
    int64_t rows = v.getTensorType().getRank() ? v.getTensorType().getDimSize(0) : 1;
    // A pinned device: an `on` scope that names a task.
    std::optional<int> pinnedPs;
    bool onWorker = false;
    if (auto device = v->getAttrOfType<StringAttr>("dtf.device")) {
      ::dtf::DeviceNameParse parsed = ::dtf::parseDeviceName(device.getValue());
      if (parsed.name && parsed.name->job == "ps")
        pinnedPs = parsed.name->task.value_or(0) % std::max(numPs, 1);
      else if (parsed.name && parsed.name->job && parsed.name->job != "ps")
        onWorker = true;
    }
    bool isStep = name == "global_step";
    if (isStep)
      pinnedPs = 0; // as TensorFlow's replica_device_setter
    for (int k = 0; k < shards; ++k) {
      // Rows split as evenly as they go, the first ones one row larger.
      int64_t shardRows = rows / shards + (k < rows % shards ? 1 : 0);
      PlacedShard shard{name, k, shards, rows ? total * shardRows / rows : total, -1,
                        (pinnedPs.has_value() && !isStep) || onWorker};
      if (numPs > 0 && !onWorker) {
        if (pinnedPs)
          shard.ps = *pinnedPs;
        else if (strategy == "greedy")
          shard.ps = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
        else
          shard.ps = next++ % numPs;
        load[shard.ps] += shard.bytes;
      }
      placement.shards.push_back(shard);
    }
  }
  return placement;
}

static std::string humanBytes(int64_t bytes) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (bytes >= (1 << 20))
    os << llvm::format("%.1f MiB", bytes / double(1 << 20));
  else if (bytes >= (1 << 10))
    os << llvm::format("%.1f KiB", bytes / double(1 << 10));
  else
    os << bytes << " B";
  return os.str();
}

void mlir::dtf::printPlacementReport(const Placement &placement, llvm::raw_ostream &os) {
  os << "placement over " << placement.numPs << " ps task"
     << (placement.numPs == 1 ? "" : "s") << " (" << placement.strategy
     << "; bytes include optimizer slots)\n";
  for (int ps = 0; ps < placement.numPs; ++ps) {
    os << "  /job:ps/task:" << ps << "  " << humanBytes(placement.bytesOn(ps)) << "\n";
    for (const PlacedShard &s : placement.shards) {
      if (s.ps != ps)
        continue;
      os << "    " << s.variable;
      if (s.shards > 1)
        os << " (shard " << s.shard << " of " << s.shards << ")";
      os << "  " << humanBytes(s.bytes) << (s.pinned ? "  [pinned by on]" : "") << "\n";
    }
  }
  for (const PlacedShard &s : placement.shards)
    if (s.ps < 0)
      os << "  on a worker: " << s.variable << "  " << humanBytes(s.bytes) << "\n";
  os << llvm::format("  imbalance (largest / smallest): %.2f\n", placement.imbalance());
}
