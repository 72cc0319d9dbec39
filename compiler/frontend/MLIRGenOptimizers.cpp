// The train block's optimizer per group of variables: `optimizer for wide,
// "cross_*" = ftrl(...)` names the variables of a layer (its `as` name), a
// variable, or a glob of variable names, and gives them their own optimizer.
#include "compiler/frontend/ModelGen.h"

#include "compiler/frontend/Builtins.h"
#include "dialects/Dtf/IR/DtfDialect.h"

#include "llvm/Support/GlobPattern.h"

namespace mlir::dtf::frontend {

namespace {
/// Whether `target` names variable `name`: a glob matches the whole name;
/// a name matches the variable itself or those of the layer (or network
/// call) it names, "wide" matching "wide/embeddings".
bool names(const ast::TrainItem::GroupTarget &target,
           const std::optional<llvm::GlobPattern> &glob, StringRef name) {
  if (target.pattern)
    return glob && glob->match(name);
  return name == target.text ||
         (name.starts_with(target.text) &&
          name.drop_front(target.text.size()).starts_with("/"));
}
} // namespace

Attribute ModelGen::genOptimizerGroups(
    ArrayRef<const ast::TrainItem *> items) {
  if (items.empty())
    return {};
  SmallVector<VariableOp> all;
  for (auto var : module.getOps<VariableOp>())
    all.push_back(var);
  // Each trainable variable's group (its index) and the target naming it.
  llvm::StringMap<std::pair<size_t, ast::Loc>> owner;
  SmallVector<Attribute> groups;
  bool ok = true;
  for (const ast::TrainItem *item : items) {
    if (item->key != "optimizer") {
      error(item->group.front().loc)
          << "only the optimizer is set per group of variables (`optimizer "
             "for NAME = ...`); '"
          << item->key << "' applies to the whole model: drop `for ...`";
      ok = false;
      continue;
    }
    if (!item->extra.empty()) {
      error(item->extra.front().keyLoc) << "'optimizer' takes one value";
      ok = false;
    }
    Attribute optimizer =
        configCall(item->value.get(), BuiltinKind::Optimizer, "optimizer");
    ok &= bool(optimizer);
    const size_t index = groups.size();
    std::string label;
    SmallVector<Attribute> members;
    for (const ast::TrainItem::GroupTarget &target : item->group) {
      label += (label.empty() ? "" : ", ") +
               (target.pattern ? "\"" + target.text + "\"" : target.text);
      std::optional<llvm::GlobPattern> glob;
      if (target.pattern) {
        auto made = llvm::GlobPattern::create(target.text);
        if (!made) {
          error(target.loc) << "\"" << target.text
                            << "\" is not a glob of variable names ("
                            << llvm::toString(made.takeError())
                            << "); * matches any text, ? one character";
          ok = false;
          continue;
        }
        glob = std::move(*made);
      }
      bool any = false;
      std::optional<std::string> untrained;
      for (VariableOp var : all) {
        StringRef name = var.getSymName();
        if (!names(target, glob, name))
          continue;
        if (!var.getTrainable()) {
          untrained = name.str();
          continue;
        }
        any = true;
        auto [it, inserted] = owner.try_emplace(name, index, target.loc);
        if (inserted) {
          members.push_back(builder.getStringAttr(name));
        } else if (it->second.first != index) {
          auto diag = error(target.loc)
                      << "variable '" << name
                      << "' is in two optimizer groups; a variable has one "
                         "optimizer: leave it out of one (a glob such as "
                         "\"wide/*\" picks fewer)";
          diag.attachNote(loc(it->second.second))
              << "its first group names it here";
          ok = false;
        }
      }
      ok &= any;
      if (any || (graphErrors > 0 && !untrained))
        continue;
      auto diag = error(target.loc) << "optimizer for "
                                    << (target.pattern ? "\"" : "'")
                                    << target.text
                                    << (target.pattern ? "\"" : "'");
      if (untrained) {
        diag << " names only variables that are not trained ('" << *untrained
             << "' has trainable = false)";
        continue;
      }
      diag << " names no trainable variable: write a layer's `as` name, a "
              "variable, or a \"glob\" of variable names such as \"wide*\"";
      std::vector<std::string> candidates;
      for (const auto &layer : layerNames)
        candidates.push_back(layer.getKey().str());
      for (VariableOp var : all)
        if (var.getTrainable())
          candidates.push_back(var.getSymName().str());
      if (!target.pattern)
        if (auto s = closestName(target.text, candidates))
          diag << "; did you mean '" << *s << "'?";
    }
    NamedAttrList group;
    group.append("group", builder.getStringAttr(label));
    group.append("variables", builder.getArrayAttr(members));
    if (optimizer)
      group.append("optimizer", optimizer);
    groups.push_back(group.getDictionary(context));
  }
  if (!ok)
    return {};
  return builder.getArrayAttr(groups);
}

} // namespace mlir::dtf::frontend
