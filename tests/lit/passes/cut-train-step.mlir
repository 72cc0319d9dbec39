// dtf-cut-train-step: the worker keeps everything but the updates and pushes
// their operands (each value once, under its first consumer's key); the ps
// takes them and updates. Sparse updates go dense through dtf.gather_grad
// unless the table is looked up on the ps (the lookup cut).
// RUN: dtf-opt %s --dtf-cut-train-step --split-input-file --verify-diagnostics | FileCheck %s

module attributes {dtf.model = "m"} {
  dtf.variable @W : tensor<4x3xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @b : tensor<3xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @global_step : tensor<i64> = #dtf.init<zeros>
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}) {
    %x = dtf.input "x" : tensor<?x4xf32>
    %w = dtf.read_variable @W : tensor<4x3xf32>
    %gw = dtf.constant dense<1.0> : tensor<4x3xf32>
    %gb = dtf.constant dense<1.0> : tensor<3xf32>
    %lr = dtf.constant dense<0.1> : tensor<f32>
    %one = dtf.constant dense<1> : tensor<i64>
    %l = dtf.constant dense<0.0> : tensor<f32>
    dtf.apply_sgd @W, %gw, %lr : tensor<4x3xf32>, tensor<f32>
    dtf.apply_sgd @b, %gb, %lr : tensor<3xf32>, tensor<f32>
    dtf.assign_add @global_step, %one : tensor<i64>
    return %l : tensor<f32>
  }
}

// The train_step stays as it was.
// CHECK-LABEL: func.func @train_step()
// CHECK: dtf.apply_sgd @W
// CHECK-LABEL: func.func @worker_step() -> (tensor<f32> {dtf.name = "loss"})
// CHECK-NOT: dtf.apply_sgd
// CHECK-NOT: dtf.assign_add
// CHECK: dtf.push %{{.*}} {key = "W:grad", variable = @W} : tensor<4x3xf32>
// CHECK-NEXT: dtf.push %[[LR:.*]] {key = "W:apply_sgd:2", variable = @W} : tensor<f32>
// CHECK-NEXT: dtf.push %{{.*}} {key = "b:grad", variable = @b} : tensor<3xf32>
// CHECK-NEXT: dtf.push %{{.*}} {key = "global_step:assign_add:1", variable = @global_step} : tensor<i64>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @ps_update() {
// CHECK-NEXT: %[[G:.*]] = dtf.pushed {key = "W:grad", variable = @W} : tensor<4x3xf32>
// CHECK-NEXT: %[[R:.*]] = dtf.pushed {key = "W:apply_sgd:2", variable = @W} : tensor<f32>
// CHECK-NEXT: dtf.apply_sgd @W, %[[G]], %[[R]]
// The learning rate comes once and serves both updates.
// CHECK-NEXT: %[[GB:.*]] = dtf.pushed {key = "b:grad", variable = @b} : tensor<3xf32>
// CHECK-NEXT: dtf.apply_sgd @b, %[[GB]], %[[R]]
// CHECK-NEXT: %[[ONE:.*]] = dtf.pushed {key = "global_step:assign_add:1", variable = @global_step} : tensor<i64>
// CHECK-NEXT: dtf.assign_add @global_step, %[[ONE]]
// CHECK-NEXT: return
// No table qualifies: no lookup cut.
// CHECK-NOT: @lookup_worker_step

// -----

// A table only gathered and updated sparsely (`emb`) and one also used whole
// (`other`). The dense cut sums each sparse gradient's pairs on the worker
// and updates densely, lazily where the optimizer has slots; the lookup cut
// looks `emb` up on its ps and pushes (ids, rows).
module attributes {dtf.model = "m"} {
  dtf.variable @emb : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @"emb/Momentum" : tensor<10x4xf32> = #dtf.init<zeros> {dtf.slot_of = @emb}
  dtf.variable @other : tensor<6x4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}) {
    %ids = dtf.input "ids" : tensor<?x3xi64>
    %e = dtf.read_variable @emb : tensor<10x4xf32>
    %rows = dtf.gather %e, %ids : (tensor<10x4xf32>, tensor<?x3xi64>) -> tensor<?x3x4xf32>
    %o = dtf.read_variable @other : tensor<6x4xf32>
    %orows = dtf.gather %o, %ids : (tensor<6x4xf32>, tensor<?x3xi64>) -> tensor<?x3x4xf32>
    %lr = dtf.constant dense<0.1> : tensor<f32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    dtf.sparse_apply_momentum @emb, @"emb/Momentum", %lr, %ids, %rows, %ids, %rows momentum 9.000000e-01 : tensor<f32>, tensor<?x3xi64>, tensor<?x3x4xf32>, tensor<?x3xi64>, tensor<?x3x4xf32>
    dtf.sparse_apply_sgd @other, %lr, %ids, %orows : tensor<f32>, tensor<?x3xi64>, tensor<?x3x4xf32>
    %w = dtf.read_variable @other : tensor<6x4xf32>
    %s = dtf.sum %w axes [0, 1] : tensor<6x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @eval() -> (tensor<?x3x4xf32> {dtf.name = "rows"}) {
    %ids = dtf.input "ids" : tensor<?x3xi64>
    %e = dtf.read_variable @emb : tensor<10x4xf32>
    %rows = dtf.gather %e, %ids : (tensor<10x4xf32>, tensor<?x3xi64>) -> tensor<?x3x4xf32>
    return %rows : tensor<?x3x4xf32>
  }
}

// CHECK-LABEL: func.func @worker_step()
// CHECK: %[[G0:.*]] = dtf.gather_grad %{{.*}}, %{{.*}} params_shape [10, 4]
// CHECK-NEXT: %[[G1:.*]] = dtf.gather_grad %{{.*}}, %{{.*}} params_shape [10, 4]
// CHECK-NEXT: %[[SUM:.*]] = dtf.add %[[G0]], %[[G1]]
// CHECK: dtf.push %[[SUM]] {key = "emb:grad", variable = @emb} : tensor<10x4xf32>
// CHECK-LABEL: func.func @ps_update()
// CHECK: dtf.apply_momentum @emb, @"emb/Momentum", %{{.*}}, %{{.*}} momentum {{.*}} {lazy}
// Plain SGD has no slot to keep: not lazy.
// CHECK: dtf.apply_sgd @other, %{{.*}}, %{{.*}} :

// The lookup cut: `emb` is never read on the worker.
// CHECK-LABEL: func.func @lookup_worker_step()
// CHECK-NOT: dtf.read_variable @emb
// CHECK: dtf.ps_gather %{{.*}} {variable = "emb"} : (tensor<?x3xi64>) -> tensor<?x3x4xf32>
// CHECK: dtf.read_variable @other
// CHECK: dtf.push %[[IDS:.*]], %[[ROWS:.*]] {key = "emb:grad:0", sparse, variable = @emb}
// CHECK-NEXT: dtf.push %{{.*}}, %{{.*}} {key = "emb:grad:1", sparse, variable = @emb}
// CHECK-LABEL: func.func @lookup_ps_update()
// CHECK: %{{.*}}:2 = dtf.pushed {key = "emb:grad:0", sparse, variable = @emb} : tensor<?xi64>, tensor<?x4xf32>
// CHECK: dtf.sparse_apply_momentum @emb
// CHECK: dtf.apply_sgd @other
// CHECK-LABEL: func.func @lookup_eval()
// CHECK-NOT: dtf.read_variable @emb
// CHECK: dtf.ps_gather

// -----

// A replica that spans worker tasks (model parallelism) keeps the dense cut.
module attributes {dtf.model = "m"} {
  dtf.variable @emb : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<?x3x4xf32> {dtf.name = "rows"}) {
    %ids = dtf.input "ids" : tensor<?x3xi64>
    %e = dtf.read_variable @emb : tensor<10x4xf32>
    %rows = dtf.gather %e, %ids {dtf.device = "/job:worker/task:1"} : (tensor<10x4xf32>, tensor<?x3xi64>) -> tensor<?x3x4xf32>
    %lr = dtf.constant dense<0.1> : tensor<f32>
    dtf.sparse_apply_sgd @emb, %lr, %ids, %rows : tensor<f32>, tensor<?x3xi64>, tensor<?x3x4xf32>
    return %rows : tensor<?x3x4xf32>
  }
}

// CHECK-LABEL: func.func @ps_update()
// CHECK: dtf.apply_sgd @emb
// CHECK-NOT: @lookup_worker_step

// -----

// FTRL: the dense cut's update is lazy (a dense FTRL update would re-derive
// the rows no step looked up); the lookup cut keeps the sparse update, with
// both slots, on the ps.
module attributes {dtf.model = "m"} {
  dtf.variable @emb : tensor<10x1xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @"emb/Ftrl" : tensor<10x1xf32> = #dtf.init<zeros> {dtf.slot_of = @emb}
  dtf.variable @"emb/Ftrl_1" : tensor<10x1xf32> = #dtf.init<zeros> {dtf.slot_of = @emb}
  func.func @train_step() -> (tensor<?x3x1xf32> {dtf.name = "rows"}) {
    %ids = dtf.input "ids" : tensor<?x3xi64>
    %e = dtf.read_variable @emb : tensor<10x1xf32>
    %rows = dtf.gather %e, %ids : (tensor<10x1xf32>, tensor<?x3xi64>) -> tensor<?x3x1xf32>
    %lr = dtf.constant dense<0.1> : tensor<f32>
    dtf.sparse_apply_ftrl @emb, @"emb/Ftrl", @"emb/Ftrl_1", %lr, %ids, %rows lr_power -5.000000e-01 l1 1.000000e-02 l2 0.000000e+00 l2_shrinkage 0.000000e+00 beta 0.000000e+00 : tensor<f32>, tensor<?x3xi64>, tensor<?x3x1xf32>
    return %rows : tensor<?x3x1xf32>
  }
}

// CHECK-LABEL: func.func @worker_step()
// CHECK: %[[G:.*]] = dtf.gather_grad %{{.*}}, %{{.*}} params_shape [10, 1]
// CHECK: dtf.push %[[G]] {key = "emb:grad", variable = @emb} : tensor<10x1xf32>
// CHECK-LABEL: func.func @ps_update()
// CHECK: dtf.apply_ftrl @emb, @"emb/Ftrl", @"emb/Ftrl_1", %{{.*}}, %{{.*}} lr_power -5.000000e-01 l1 1.000000e-02 {{.*}} {lazy}
// CHECK-LABEL: func.func @lookup_ps_update()
// CHECK: dtf.sparse_apply_ftrl @emb, @"emb/Ftrl", @"emb/Ftrl_1"

// -----

// expected-error @+1 {{dtf-cut-train-step needs @train_step}}
module attributes {dtf.model = "m"} {
  func.func @eval() {
    return
  }
}
