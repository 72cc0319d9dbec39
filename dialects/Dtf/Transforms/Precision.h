// The precision policy that dtf-mixed-precision and dtf-loss-scale follow.
#pragma once

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::dtf {

/// The pass's own `policy` option when set (dtfc --precision), else the
/// train block's `precision`, else "float32".
inline std::string chosenPrecision(ModuleOp module, const std::string &option) {
  if (!option.empty())
    return option;
  auto train = module->getAttrOfType<DictionaryAttr>("dtf.train");
  auto set = train ? train.getAs<StringAttr>("precision") : StringAttr();
  return set ? set.getValue().str() : "float32";
}

} // namespace mlir::dtf
