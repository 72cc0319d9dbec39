// The front end's placement: `on "DEVICE" { ... }` blocks and the
// `placement replicate(...)` setting (the replica device setter).
#include "compiler/frontend/ModelGen.h"

#include "compiler/frontend/Builtins.h"
#include "compiler/frontend/Diagnostics.h"
#include "compiler/frontend/Parser.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"
#include "schema/DeviceName.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <sstream>

namespace mlir::dtf::frontend {

void ModelGen::genOn(const ast::OnStmt &on) {
  ::dtf::DeviceNameParse parsed = ::dtf::parseDeviceName(on.device);
  if (parsed.name && on.device.empty()) {
    parsed.name.reset();
    parsed.error =
        "a device name is needed, as in \"/job:ps/task:0\" or \"/gpu:0\"";
  }
  if (!parsed.name) {
    // Model-level blocks are walked twice (declarations, then the graph):
    // report on the second walk only.
    if (declarationsOnly && networkStack.empty()) {
      for (const ast::StmtPtr &stmt : on.body)
        genStmt(*stmt);
      return;
    }
    // Point into the string: past the opening quote, at the bad part.
    ast::Loc at = on.deviceLoc;
    at.col += 1 + parsed.errorColumn;
    error(at) << "invalid device \"" << on.device << "\": " << parsed.error;
    // Check the body all the same, so its names exist for what follows.
    for (const ast::StmtPtr &stmt : on.body)
      genStmt(*stmt);
    return;
  }
  // As with nested tf.device scopes, the inner name's parts win and the
  // enclosing one fills the rest: on "/job:worker/task:1" { on "/gpu:0" {...} }
  // is /job:worker/task:1/gpu:0.
  ::dtf::DeviceName device = *parsed.name;
  if (!deviceTagger.devices.empty())
    device = device.completedWith(deviceTagger.devices.back());
  deviceTagger.devices.push_back(device);
  auto pop = llvm::make_scope_exit([&] { deviceTagger.devices.pop_back(); });
  for (const ast::StmtPtr &stmt : on.body)
    genStmt(*stmt);
}

void ModelGen::genPlacement() {
  for (size_t i = 1; i < model.placements.size(); ++i) {
    auto diag = error(model.placements[i].loc) << "placement is given twice";
    diag.attachNote(loc(model.placements[0].loc)) << "first given here";
  }
  if (model.placements.empty())
    return;
  const ast::Placement &p = model.placements.front();
  if (p.strategy != "replicate") {
    error(p.loc) << "unknown placement '" << p.strategy
                 << "'; write `placement replicate(ps = round_robin)` (or "
                    "greedy), or place with `on \"/job:ps/task:0\" { ... }`";
    return;
  }
  std::string strategy = "round_robin";
  for (const ast::Arg &option : p.options) {
    if (option.key != "ps") {
      error(option.keyLoc) << "replicate has no option '" << option.key
                           << "' (it takes ps = round_robin or greedy)";
      continue;
    }
    if (auto s =
            symbolValue(option.value.get(), "ps", {"round_robin", "greedy"}))
      strategy = *s;
  }
  module->setAttr("dtf.placement",
                  builder.getDictionaryAttr(builder.getNamedAttr(
                      "ps_strategy", builder.getStringAttr(strategy))));
}

} // namespace mlir::dtf::frontend
