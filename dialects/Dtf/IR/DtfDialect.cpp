// Registration of the dtf dialect, its attributes and constant materialization.
#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::dtf;

#include "dialects/Dtf/IR/DtfOpsDialect.cpp.inc"
#include "dialects/Dtf/IR/DtfOpsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dtf/IR/DtfOpsAttrs.cpp.inc"

void DtfDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Dtf/IR/DtfOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Dtf/IR/DtfOpsAttrs.cpp.inc"
      >();
}

Operation *DtfDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}

LogicalResult DtfDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  // The plan's Op.held: what a ps must hold to run the op (psProgramFor).
  if (attr.getName() == "dtf.held") {
    auto held = dyn_cast<StringAttr>(attr.getValue());
    if (!held || held.getValue().empty())
      return op->emitOpError()
             << "has a dtf.held that is not a name: it names the variable or "
                "shard the op serves, e.g. dtf.held = \"emb/part_1\"";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// InitializerAttr
//===----------------------------------------------------------------------===//

namespace {

/// The parameters each initializer kind accepts.
ArrayRef<StringRef> allowedParams(InitKind kind) {
  static const StringRef none[] = {""};
  static const StringRef constant[] = {"value"};
  static const StringRef uniform[] = {"minval", "maxval", "seed"};
  static const StringRef normal[] = {"mean", "stddev", "seed"};
  static const StringRef seedOnly[] = {"seed"};
  static const StringRef orthogonal[] = {"gain", "seed"};
  switch (kind) {
  case InitKind::zeros:
  case InitKind::ones:
    return ArrayRef<StringRef>(none).drop_front();
  case InitKind::constant:
    return constant;
  case InitKind::uniform:
    return uniform;
  case InitKind::normal:
  case InitKind::truncated_normal:
    return normal;
  case InitKind::glorot_uniform:
  case InitKind::he_normal:
    return seedOnly;
  case InitKind::orthogonal:
    return orthogonal;
  }
  return {};
}

/// An integer parameter that fits int64 and is not a bool.
std::optional<int64_t> integerOf(Attribute attr) {
  auto i = dyn_cast<IntegerAttr>(attr);
  if (!i || i.getType().isInteger(1) || i.getValue().getSignificantBits() > 64)
    return std::nullopt;
  return i.getValue().getSExtValue();
}

} // namespace

std::optional<double> mlir::dtf::numberOf(Attribute attr) {
  if (auto f = dyn_cast_or_null<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (std::optional<int64_t> i = attr ? integerOf(attr) : std::nullopt)
    return static_cast<double>(*i);
  return std::nullopt;
}

LogicalResult InitializerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      InitKind kind, DictionaryAttr params) {
  if (!params)
    return kind == InitKind::constant
               ? emitError() << "initializer constant needs a value, as in "
                                "#dtf.init<constant, {value = 0.5}>"
               : success();
  ArrayRef<StringRef> allowed = allowedParams(kind);
  for (NamedAttribute param : params) {
    StringRef name = param.getName().strref();
    if (!llvm::is_contained(allowed, name)) {
      auto diag = emitError() << "initializer " << stringifyInitKind(kind)
                              << " has no parameter '" << name << "'";
      if (allowed.empty())
        diag << " (it takes none)";
      else {
        diag << " (it takes ";
        llvm::interleaveComma(allowed, diag);
        diag << ")";
      }
      return diag;
    }
    if (name == "seed") {
      if (!integerOf(param.getValue()))
        return emitError() << "initializer seed must be a 64-bit integer, got "
                           << param.getValue();
      continue;
    }
    std::optional<double> value = numberOf(param.getValue());
    if (!value || !std::isfinite(*value))
      return emitError() << "initializer parameter '" << name
                         << "' must be a finite number, got "
                         << param.getValue();
    if (name == "stddev" && !(*value > 0))
      return emitError() << "initializer " << stringifyInitKind(kind)
                         << " needs stddev > 0, got " << *value;
  }
  if (kind == InitKind::constant && !params.get("value"))
    return emitError() << "initializer constant needs a value, as in "
                          "#dtf.init<constant, {value = 0.5}>";
  if (kind == InitKind::uniform) {
    auto param = [&](StringRef name, double fallback) {
      Attribute attr = params.get(name);
      return numberOf(attr).value_or(fallback);
    };
    double lo = param("minval", 0.0), hi = param("maxval", 1.0);
    if (!(lo < hi))
      return emitError() << "initializer uniform needs minval < maxval, got "
                         << lo << " and " << hi;
  }
  return success();
}

double InitializerAttr::getParam(StringRef name, double fallback) const {
  Attribute attr = getParams() ? getParams().get(name) : Attribute();
  return attr ? numberOf(attr).value_or(fallback) : fallback;
}

bool InitializerAttr::isRandom() const {
  switch (getKind()) {
  case InitKind::zeros:
  case InitKind::ones:
  case InitKind::constant:
    return false;
  default:
    return true;
  }
}
