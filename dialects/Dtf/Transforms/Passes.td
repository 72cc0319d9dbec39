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
    every dropout a seed so that its gradient draws the same mask. Under loss
    scaling (the module's `dtf.loss_scale`, from dtf-loss-scale) the backward
    pass starts from the scale's variable instead of 1: the gradients of
    loss * scale.
  }];
  let dependentDialects = ["::mlir::dtf::DtfDialect", "::mlir::func::FuncDialect"];
}

def DtfOptimize : Pass<"dtf-optimize", "::mlir::ModuleOp"> {
  let summary = "Turns gradients into optimizer updates of the variables";
  let description = [{
    Reads the optimizers of the module's `dtf.train` attribute (`optimizer`,
    and `optimizer_groups`: `{group, variables, optimizer}` for the variables
    a group names, which take that optimizer and its own learning rate) and
    replaces the gradient results of `@train_step` by each variable's update
    ops (`dtf.apply_adam`, `dtf.sparse_apply_ftrl`, ...; the variable records
    its optimizer as `dtf.optimizer`),
    with their slot variables (created next to their variable, with its
    device), a `global_step` variable incremented once per step, the
    learning-rate schedule computed from it, clipping by global norm and
    moving averages when asked for. Under loss scaling (`dtf.loss_scale`)
    the gradients first go through `dtf.unscale_gradients` (divided by the
    scale, checked finite); a dynamic scale then gets
    `dtf.adjust_loss_scale` and `dtf.skip_updates_unless` before the
    updates, and every update is dense (a sparse one would not see the
    whole gradient's check).
  }];
  let dependentDialects = ["::mlir::dtf::DtfDialect", "::mlir::func::FuncDialect"];
}

def DtfLossScale : Pass<"dtf-loss-scale", "::mlir::ModuleOp"> {
  let summary = "Adds mixed_float16's loss scale: its variables and the step's scaling";
  let description = [{
    Under the policy `mixed_float16` (the `precision` of the module's
    `dtf.train` attribute, or the `policy` option), with TensorFlow's
    LossScaleOptimizer semantics: creates the variable `@loss_scale` (f32
    scalar, `initial_scale` of the train block's `loss_scale` setting, 2^15
    by default) and, for a dynamic scale (the default), `@loss_scale_good_steps`
    (i64 scalar, 0), both marked `dtf.loss_scale`, and records them in the
    module's `dtf.loss_scale` attribute (`scale`, `good_steps`,
    `growth_steps`: `dynamic_growth_steps`, 2000 by default). dtf-autodiff
    then seeds the backward pass with the scale (the gradients of loss *
    scale), and dtf-optimize divides the gradients by it
    (`dtf.unscale_gradients`), adjusts the scale (`dtf.adjust_loss_scale`)
    and skips the step's updates when a gradient is not finite
    (`dtf.skip_updates_unless`). A fixed scale (`loss_scale = 1024`) only
    scales and unscales. Under `float32` and `mixed_bfloat16` nothing
    changes (bf16 has f32's range). Runs before dtf-autodiff.

    ```mlir
    dtf.variable @loss_scale : tensor<f32> = #dtf.init<constant, {value = 3.276800e+04 : f64}> {dtf.loss_scale}
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "float32, mixed_bfloat16 or mixed_float16; empty: the module's "
           "dtf.train precision (float32 when it has none)">
  ];
  let dependentDialects = ["::mlir::dtf::DtfDialect"];
}

def DtfMixedPrecision : Pass<"dtf-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Applies the precision policy: matmuls, convolutions and LSTM layers in bf16 or f16 with f32 accumulation";
  let description = [{
    Under the policy `mixed_bfloat16` (Keras' name; the `precision` of the
    module's `dtf.train` attribute, or the `policy` option, which then
    replaces it there), every `matmul` (batched too), `conv2d`,
    `conv2d_bias`, `conv2d_backprop_input` and `conv2d_backprop_filter`
    with f32 operands, in every function (the forward ops and the gradients
    dtf-autodiff made for them alike), gets `compute_dtype "bf16"`: its
    kernel rounds the operands to bf16 (to nearest even), accumulates in f32
    and writes an f32 result. So do the library LSTM ops (`lstm`,
    `lstm_train`, `lstm_grad`) whose floating-point operands are f32 (their
    i32 workspace aside): oneDNN's bf16 LSTM primitives take x, the kernels
    and the hidden state in bf16 and keep the bias, the cell state, the sums
    and the gradients in f32. The GRU ops stay f32 (oneDNN 2.6's bf16 GRU
    trains slower than its f32 one on CPUs without AMX). Everything else stays f32: softmax, losses,
    norm statistics, reductions, every optimizer update, and the variables,
    which are the f32 master weights. Ops the model keeps in f32 (a layer's
    `dtype = f32`, marked `dtf.keep_f32` by the front end and on its
    gradients by dtf-autodiff) are left alone. Ops placed on a GPU are
    marked alike (dtf-run computes them with cublasGemmEx and cuDNN's
    tensor-op math on bf16 or f16 operand copies). Under `float32` nothing changes; either way the
    `dtf.keep_f32` marks are removed. Under `mixed_float16` the same ops
    get `compute_dtype "f16"` (dtf-loss-scale, run before dtf-autodiff,
    adds the loss scaling f16 needs).

    ```mlir
    %y = dtf.matmul %x, %w compute_dtype "bf16" : (tensor<?x784xf32>, tensor<784x500xf32>) -> tensor<?x500xf32>
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "float32, mixed_bfloat16 or mixed_float16; empty: the module's "
           "dtf.train precision (float32 when it has none)">
  ];
  let dependentDialects = ["::mlir::dtf::DtfDialect"];
}

def DtfFuse : Pass<"dtf-fuse", "::mlir::ModuleOp"> {
  let summary = "Groups chains of elementwise ops into dtf.fused regions";
  let description = [{
    In every function, groups maximal chains of elementwise ops (add, sub,
    mul, float div, maximum, minimum, compare, select, neg, relu, exp, log,
    sqrt, rsqrt, sigmoid, tanh, cast, erf, floor, ceil, round, abs, float
    floor_mod, bucketize and the relu, sigmoid and tanh gradients) whose results share one shape into a `dtf.fused` op that
    keeps them in its region. An operand joins as an input when it has that
    shape, holds one element, or has static trailing dims of it (a bias).
    A group is closed once an op outside it uses one of its values, so the
    fused op can stand where its last op stood. Groups of one op stay as
    they are. Each fused op gets `kernel`, its index in the module (in
    function order), which becomes its index in Plan.kernels. With
    `reductions`, sums and means over a contiguous run of axes may end a
    region (docs/kernels.md): `rows` (the default) those over the last axes
    (or over every axis), `all` also columns (the batch axes of a bias
    gradient or batch statistic), `none` no reduction.
    With `updates` (the default), each dense optimizer update (apply_sgd,
    apply_momentum, apply_adam, apply_adagrad, apply_rmsprop) becomes a
    region of its own with no results: its kernel updates the variable and
    its slots in place.
    With `rows` (the default), each softmax, log_softmax, softmax
    cross-entropy (dense or sparse labels), their gradients and argmax along
    the last axis becomes a region of its own: its kernel takes one row per
    iteration.
    With `dropout` (the default), each dropout and dropout_grad on f32 or
    f64 becomes a region of its own: its kernel draws the op-by-op kernel's
    mask from a per-step key that dtf-run passes it.
  }];
  let options = [
    Option<"reductions", "reductions", "std::string", /*default=*/"\"rows\"",
           "which reductions may end a region: rows, all or none">,
    Option<"updates", "updates", "bool", /*default=*/"true",
           "each dense optimizer update becomes a dtf.fused region of its "
           "own, run in place on the variable and its slots">,
    Option<"rows", "rows", "bool", /*default=*/"true",
           "each softmax, log_softmax, cross-entropy, their gradients and "
           "argmax along the last axis becomes a dtf.fused region of its own "
           "(a row kernel)">,
    Option<"dropout", "dropout", "bool", /*default=*/"true",
           "each dropout and dropout_grad becomes a dtf.fused region of its "
           "own (a dropout kernel)">
  ];
  let dependentDialects = ["::mlir::dtf::DtfDialect"];
}

def DtfFuseLibrary : Pass<"dtf-fuse-library", "::mlir::ModuleOp"> {
  let summary = "Folds a bias add and relu into the convolution before them, and relu_grad into max_pool_grad";
  let description = [{
    Where the library fuses better than a generated kernel: a CPU-placed f32
    `conv2d` used only by an `add` of a bias (one value per output channel),
    and that add used only by `relu` (and by `relu_grad` as its x), become one
    `conv2d_bias` (with `relu`), which dtf-run runs as one oneDNN convolution
    with a bias and a relu post-op. `relu_grad` then reads the relu's result,
    which is positive where its input was. Convolutions placed on a GPU are
    left alone. Likewise `relu_grad(max_pool_grad(x, dy), x)` becomes
    `max_pool_grad` with `relu`: one pass that sends each dy to its window's
    maximum only where that maximum is positive. Then a CPU-placed f32/f64
    `max_pool` whose gradients are `max_pool_grad`s on its device becomes
    `max_pool_with_argmax`, and those gradients
    `max_pool_grad_with_argmax`, which read the kept window positions and dy
    instead of x (windows of at most 127 positions; `pool-argmax=false`
    keeps the old pair). dtfc runs it before dtf-fuse, unless
    `--fusion=off`.
  }];
  let options = [
    Option<"poolArgmax", "pool-argmax", "bool", /*default=*/"true",
           "a max pool with a gradient keeps its argmax for it">
  ];
  let dependentDialects = ["::mlir::dtf::DtfDialect"];
}

def DtfGpuClip : Pass<"dtf-gpu-clip", "::mlir::ModuleOp"> {
  let summary = "Clips gradients made on one GPU by their global norm there";
  let description = [{
    A `global_norm_clip` (placed on the task's CPU by dtf-optimize) whose
    every gradient is made by an op on the same GPU becomes, on that GPU,
    the ops that compute it: per gradient the sum of its squares in f64
    (`cast`, `mul`, `sum`), their sum, its `sqrt` (the global norm),
    `clip_norm / maximum(norm, clip_norm) + (norm - norm)` (NaN when the
    norm is not finite, as the CPU kernel gives) and each gradient times
    that scale, cast to its type. dtf-fuse then makes them generated
    kernels, so the gradients stay on the GPU instead of going to the CPU
    and back each step. dtfc runs it before dtf-fuse, unless
    `--fusion=off` (the GPU has no op-by-op kernels for these ops).
  }];
  let dependentDialects = ["::mlir::dtf::DtfDialect"];
}

def DtfCutTrainStep : Pass<"dtf-cut-train-step", "::mlir::ModuleOp"> {
  let summary = "Cuts @train_step into the worker's @worker_step and the ps's @ps_update";
  let description = [{
    The cut for ps/worker training (docs/plan-format.md, "Per-task
    programs"). Every op that updates a variable (the optimizers' apply ops,
    dtf.assign_add, the moving averages, a dtf.fused update) goes to
    `@ps_update`; everything else stays in `@worker_step`, which ends by
    pushing each other operand of an update to the ps (`dtf.push`, one per
    value, keyed `<var>:grad` for a gradient and `<var>:<op>:<operand>`
    otherwise); in `@ps_update` each update takes what was pushed
    (`dtf.pushed`). A sparse update becomes on the worker the sum of
    `dtf.gather_grad` of its (ids, rows) pairs and on the ps the dense update
    with `lazy` (its slots of absent rows stay as they are).

    With `lookups` (the default), for between-graph training in one task per
    replica, also `@lookup_worker_step`, `@lookup_ps_update` and
    `@lookup_eval`: the cut in which an embedding table whose every use is a
    dtf.gather and a sparse update is looked up on its ps (dtf.ps_gather) and
    its sparse gradient pushed as (ids, rows) pairs (`<var>:grad:<k>`); a
    dynamic table's ids go raw. Made only where a table qualifies.
  }];
  let options = [
    Option<"lookups", "lookups", "bool", /*default=*/"true",
           "Also make the lookup cut (@lookup_*) where a table qualifies">,
  ];
  let dependentDialects = ["::mlir::dtf::DtfDialect", "::mlir::func::FuncDialect"];
}

def DtfCutStages : Pass<"dtf-cut-stages", "::mlir::ModuleOp"> {
  let summary = "Cuts @worker_step into one program per model-parallel stage";
  let description = [{
    When ops of `@worker_step` are placed on several worker tasks of a
    replica (`dtf.device = "/job:worker/task:K"`, model parallelism), creates
    `@worker_step_stage_<K>` for each task K of the span: the ops placed
    there (constants and variable reads on every stage that uses them, the
    inputs, fetches and pushes on stage 0), a `dtf.send` after each op whose
    value another stage uses and a `dtf.recv` before its first use there,
    keyed `v<n>:<from>-><to>`. Nothing when the replica spans one task; an
    error when an op is placed beyond the largest span.
  }];
  let dependentDialects = ["::mlir::dtf::DtfDialect", "::mlir::func::FuncDialect"];
}

def DtfShardPsUpdate : Pass<"dtf-shard-ps-update", "::mlir::ModuleOp"> {
  let summary = "Cuts @ps_update per held tensor: each update once per axis-0 shard of its variable";
  let description = [{
    The last step of the cut for ps/worker training (docs/plan-format.md,
    "Per-task programs"), after dtf-cut-train-step: in `@ps_update` and
    `@lookup_ps_update`, each update (an optimizer's apply op, dtf.assign_add,
    a moving average, a dtf.fused update) becomes one op per axis-0 shard of
    the variable it updates, marked with the held tensor it serves
    (`dtf.held`, the plan's Op.held: a ps task runs the ops of what it
    holds). A variable with `dtf.partitions = N` (a slot or moving average:
    its owner's, `dtf.slot_of`) has N shards, rows split as evenly as they go
    (schema/Placement's axisZeroRows), each declared as a
    `dtf.variable_shard @"<var>/part_<k>"`; the update of shard k names the
    shards of its variable and slots, and each operand shaped like the
    variable becomes shard k's rows of it: a `dtf.pushed` keyed
    `<key>/part_<k>` with `row_offset` and `rows`. A sparse pair (the lookup
    cut's) becomes each shard's pair, keyed likewise, with the shard's
    `row_offset` and `rows` (a whole table's too: row_offset 0 and all its
    rows). Other operands (a learning rate) are taken whole, once. A
    variable that is not partitioned keeps its name and its operands: its
    update only gets `dtf.held`. Every `dtf.pushed` stands before the first
    update that takes it. A function whose updates carry `dtf.held` already
    is left as it is.

    ```mlir
    dtf.variable_shard @"emb/part_1" of @emb row_offset 5 : tensor<5x4xf32>
    func.func @ps_update() {
      %g1 = dtf.pushed {key = "emb:grad/part_1", row_offset = 5 : i64, rows = 5 : i64, variable = @emb} : tensor<5x4xf32>
      dtf.apply_sgd @"emb/part_1", %g1, %lr {dtf.held = "emb/part_1"} : tensor<5x4xf32>, tensor<f32>
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::dtf::DtfDialect", "::mlir::func::FuncDialect"];
}

#endif // DTF_PASSES_TD
