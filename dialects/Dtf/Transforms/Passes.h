// dtf's passes, declared from Passes.td.
#pragma once

#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::dtf {

#define GEN_PASS_DECL
#include "dialects/Dtf/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/Dtf/Transforms/Passes.h.inc"

} // namespace mlir::dtf
