//===- Passes.td - dtf's passes ----------------------------*- tablegen -*-===//

#ifndef DTF_PASSES_TD
#define DTF_PASSES_TD

include "mlir/Pass/PassBase.td"

def DtfAutodiff : Pass<"dtf-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds the training step: forward, then reverse-mode gradients";
  let description = [{
    For the model function (the module's `func.func` whose first result is
    named `loss` by `dtf.name`), creates `@train_step`: the forward ops, then
    the gradient of the loss with respect to every trainable variable it
    reads, by a gradient rule per op. Gradients that no trainable variable
    needs are not computed. The gradients are extra results of `@train_step`,
    each tagged `{dtf.grad_of = @var}`; dtf-optimize turns them into updates.

    Also creates `@eval`, the forward function with dropout removed, and gives
    every dropout a seed so that its gradient draws the same mask.
  }];
  let dependentDialects = ["::mlir::dtf::DtfDialect", "::mlir::func::FuncDialect"];
}

def DtfOptimize : Pass<"dtf-optimize", "::mlir::ModuleOp"> {
  let summary = "Turns gradients into optimizer updates of the variables";
  let description = [{
    Reads the optimizer of the module's `dtf.train` attribute and replaces the
    gradient results of `@train_step` by update ops (`dtf.apply_adam`, ...),
    with their slot variables (created next to their variable, with its
    device), a `global_step` variable incremented once per step, the
    learning-rate schedule computed from it, clipping by global norm and
    moving averages when asked for.
  }];
  let dependentDialects = ["::mlir::dtf::DtfDialect", "::mlir::func::FuncDialect"];
}

#endif // DTF_PASSES_TD
