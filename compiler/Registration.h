// One place that registers every dialect and pass dtf's tools use, so dtfc,
// dtf-opt and the tests all see the same set.
#pragma once

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::dtf {

/// Adds the dtf dialect and the upstream dialects it builds on (func).
void registerDialects(DialectRegistry &registry);

/// Registers dtf's passes and the upstream passes its pipelines use.
void registerPasses();

} // namespace mlir::dtf
