// dtf-shard-ps-update: @ps_update (and @lookup_ps_update) per held tensor.
// Each update runs once per axis-0 shard of its variable (dtf.partitions),
// over dtf.variable_shard declarations of the variable and its slots, with
// the shard's rows of every operand shaped like the variable; a variable
// that is not partitioned keeps its update, marked with dtf.held.
// RUN: dtf-opt %s --dtf-shard-ps-update --split-input-file --verify-diagnostics | FileCheck %s
// A second run finds the functions cut already and leaves them as they are.
// RUN: dtf-opt %s --dtf-shard-ps-update --dtf-shard-ps-update --split-input-file --verify-diagnostics | FileCheck %s

// A partitioned variable with a slot (7 rows in 3 shards: 3, 2, 2), one
// that is not partitioned, and the global step; the learning rate serves
// every update and is received once, whole.
module attributes {dtf.model = "m"} {
  dtf.variable @W : tensor<7x2xf32> = #dtf.init<zeros> {dtf.partitions = 3 : i64, trainable}
  dtf.variable @"W/Momentum" : tensor<7x2xf32> = #dtf.init<zeros> {dtf.slot_of = @W}
  dtf.variable @b : tensor<2xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @global_step : tensor<i64> = #dtf.init<zeros>
  func.func @ps_update() {
    %g = dtf.pushed {key = "W:grad", variable = @W} : tensor<7x2xf32>
    %lr = dtf.pushed {key = "W:apply_momentum:3", variable = @W} : tensor<f32>
    dtf.apply_momentum @W, @"W/Momentum", %g, %lr momentum 9.000000e-01 : tensor<7x2xf32>, tensor<f32>
    %gb = dtf.pushed {key = "b:grad", variable = @b} : tensor<2xf32>
    dtf.apply_sgd @b, %gb, %lr : tensor<2xf32>, tensor<f32>
    %one = dtf.pushed {key = "global_step:assign_add:1", variable = @global_step} : tensor<i64>
    dtf.assign_add @global_step, %one : tensor<i64>
    return
  }
}

// CHECK: dtf.variable @W : tensor<7x2xf32>
// CHECK-NEXT: dtf.variable_shard @"W/part_0" of @W row_offset 0 : tensor<3x2xf32>
// CHECK-NEXT: dtf.variable_shard @"W/part_1" of @W row_offset 3 : tensor<2x2xf32>
// CHECK-NEXT: dtf.variable_shard @"W/part_2" of @W row_offset 5 : tensor<2x2xf32>
// CHECK-NEXT: dtf.variable @"W/Momentum" : tensor<7x2xf32>
// CHECK-NEXT: dtf.variable_shard @"W/Momentum/part_0" of @"W/Momentum" row_offset 0 : tensor<3x2xf32>
// CHECK-NEXT: dtf.variable_shard @"W/Momentum/part_1" of @"W/Momentum" row_offset 3 : tensor<2x2xf32>
// CHECK-NEXT: dtf.variable_shard @"W/Momentum/part_2" of @"W/Momentum" row_offset 5 : tensor<2x2xf32>
// CHECK-NEXT: dtf.variable @b : tensor<2xf32>
// CHECK-NEXT: dtf.variable @global_step
// CHECK-LABEL: func.func @ps_update()
// CHECK-NEXT: %[[G0:.*]] = dtf.pushed {key = "W:grad/part_0", row_offset = 0 : i64, rows = 3 : i64, variable = @W} : tensor<3x2xf32>
// CHECK-NEXT: %[[LR:.*]] = dtf.pushed {key = "W:apply_momentum:3", variable = @W} : tensor<f32>
// CHECK-NEXT: dtf.apply_momentum @"W/part_0", @"W/Momentum/part_0", %[[G0]], %[[LR]] momentum 9.000000e-01 {dtf.held = "W/part_0"} : tensor<3x2xf32>, tensor<f32>
// CHECK-NEXT: %[[G1:.*]] = dtf.pushed {key = "W:grad/part_1", row_offset = 3 : i64, rows = 2 : i64, variable = @W} : tensor<2x2xf32>
// CHECK-NEXT: dtf.apply_momentum @"W/part_1", @"W/Momentum/part_1", %[[G1]], %[[LR]] momentum 9.000000e-01 {dtf.held = "W/part_1"} : tensor<2x2xf32>, tensor<f32>
// CHECK-NEXT: %[[G2:.*]] = dtf.pushed {key = "W:grad/part_2", row_offset = 5 : i64, rows = 2 : i64, variable = @W} : tensor<2x2xf32>
// CHECK-NEXT: dtf.apply_momentum @"W/part_2", @"W/Momentum/part_2", %[[G2]], %[[LR]] momentum 9.000000e-01 {dtf.held = "W/part_2"} : tensor<2x2xf32>, tensor<f32>
// The unpartitioned variable: its own name and operands, whole.
// CHECK-NEXT: %[[GB:.*]] = dtf.pushed {key = "b:grad", variable = @b} : tensor<2xf32>
// CHECK-NEXT: dtf.apply_sgd @b, %[[GB]], %[[LR]] {dtf.held = "b"} : tensor<2xf32>, tensor<f32>
// CHECK-NEXT: %[[ONE:.*]] = dtf.pushed {key = "global_step:assign_add:1", variable = @global_step} : tensor<i64>
// CHECK-NEXT: dtf.assign_add @global_step, %[[ONE]] {dtf.held = "global_step"} : tensor<i64>
// CHECK-NEXT: return

// -----

// A generated (dtf.fused) Adam update of a partitioned variable: each
// shard's region takes the shard's rows and names the shards of the
// variable and both slots; the kernel stays the one generated (it loops
// over the elements it is given). A moving average of that variable: the
// shards of the average and of the variable.
module attributes {dtf.model = "m"} {
  dtf.variable @W : tensor<5x2xf32> = #dtf.init<zeros> {dtf.partitions = 2 : i64, trainable}
  dtf.variable @"W/ExponentialMovingAverage" : tensor<5x2xf32> = #dtf.init<zeros> {dtf.moving_average, dtf.slot_of = @W}
  dtf.variable @"W/Adam" : tensor<5x2xf32> = #dtf.init<zeros> {dtf.slot_of = @W}
  dtf.variable @"W/Adam_1" : tensor<5x2xf32> = #dtf.init<zeros> {dtf.slot_of = @W}
  func.func @ps_update() {
    %g = dtf.pushed {key = "W:grad", variable = @W} : tensor<5x2xf32>
    %lr = dtf.pushed {key = "W:fused:4", variable = @W} : tensor<f32>
    %step = dtf.pushed {key = "W:fused:5", variable = @W} : tensor<i64>
    dtf.fused(%g, %lr, %step) {kernel = 3 : i64} : (tensor<5x2xf32>, tensor<f32>, tensor<i64>) -> () {
    ^bb0(%a0: tensor<5x2xf32>, %a1: tensor<f32>, %a2: tensor<i64>):
      dtf.apply_adam @W, @"W/Adam", @"W/Adam_1", %a0, %a1, %a2 beta1 9.000000e-01 beta2 9.990000e-01 epsilon 1.000000e-07 : tensor<5x2xf32>, tensor<f32>, tensor<i64>
      dtf.yield
    }
    %d = dtf.pushed {key = "W/ExponentialMovingAverage:moving_average_update:2", variable = @"W/ExponentialMovingAverage"} : tensor<f32>
    dtf.moving_average_update @"W/ExponentialMovingAverage", @W decay 9.900000e-01, %d : tensor<f32>
    return
  }
}

// CHECK: dtf.variable_shard @"W/ExponentialMovingAverage/part_1" of @"W/ExponentialMovingAverage" row_offset 3 : tensor<2x2xf32>
// CHECK: dtf.variable_shard @"W/Adam_1/part_1" of @"W/Adam_1" row_offset 3 : tensor<2x2xf32>
// CHECK-LABEL: func.func @ps_update()
// CHECK-NEXT: %[[G0:.*]] = dtf.pushed {key = "W:grad/part_0", row_offset = 0 : i64, rows = 3 : i64, variable = @W} : tensor<3x2xf32>
// CHECK-NEXT: %[[LR:.*]] = dtf.pushed {key = "W:fused:4", variable = @W} : tensor<f32>
// CHECK-NEXT: %[[STEP:.*]] = dtf.pushed {key = "W:fused:5", variable = @W} : tensor<i64>
// CHECK-NEXT: dtf.fused(%[[G0]], %[[LR]], %[[STEP]]) {dtf.held = "W/part_0", kernel = 3 : i64} : (tensor<3x2xf32>, tensor<f32>, tensor<i64>) -> () {
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<3x2xf32>, %{{.*}}: tensor<f32>, %{{.*}}: tensor<i64>):
// CHECK-NEXT: dtf.apply_adam @"W/part_0", @"W/Adam/part_0", @"W/Adam_1/part_0", {{.*}} : tensor<3x2xf32>, tensor<f32>, tensor<i64>
// CHECK-NEXT: dtf.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[G1:.*]] = dtf.pushed {key = "W:grad/part_1", row_offset = 3 : i64, rows = 2 : i64, variable = @W} : tensor<2x2xf32>
// CHECK-NEXT: dtf.fused(%[[G1]], %[[LR]], %[[STEP]]) {dtf.held = "W/part_1", kernel = 3 : i64} : (tensor<2x2xf32>, tensor<f32>, tensor<i64>) -> () {
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x2xf32>,
// CHECK-NEXT: dtf.apply_adam @"W/part_1", @"W/Adam/part_1", @"W/Adam_1/part_1", {{.*}} : tensor<2x2xf32>, tensor<f32>, tensor<i64>
// CHECK: %[[D:.*]] = dtf.pushed {key = "W/ExponentialMovingAverage:moving_average_update:2", variable = @"W/ExponentialMovingAverage"} : tensor<f32>
// CHECK-NEXT: dtf.moving_average_update @"W/ExponentialMovingAverage/part_0", @"W/part_0" decay {{.*}}, %[[D]] : tensor<f32> {dtf.held = "W/ExponentialMovingAverage/part_0"}
// CHECK-NEXT: dtf.moving_average_update @"W/ExponentialMovingAverage/part_1", @"W/part_1" decay {{.*}}, %[[D]] : tensor<f32> {dtf.held = "W/ExponentialMovingAverage/part_1"}
// CHECK-NEXT: return

// -----

// The lookup cut's sparse pairs: each shard of a partitioned table takes
// the ids in its rows (relative to its first) and their rows, keyed
// `<key>/part_<k>`; a whole table's pair is the pair over all its rows.
module attributes {dtf.model = "m"} {
  dtf.variable @emb : tensor<5x4xf32> = #dtf.init<zeros> {dtf.partitions = 2 : i64, trainable}
  dtf.variable @"emb/Adagrad" : tensor<5x4xf32> = #dtf.init<zeros> {dtf.slot_of = @emb}
  dtf.variable @whole : tensor<6x4xf32> = #dtf.init<zeros> {trainable}
  func.func @lookup_ps_update() {
    %lr = dtf.pushed {key = "emb:sparse_apply_adagrad:2", variable = @emb} : tensor<f32>
    %p:2 = dtf.pushed {key = "emb:grad:0", sparse, variable = @emb} : tensor<?xi64>, tensor<?x4xf32>
    dtf.sparse_apply_adagrad @emb, @"emb/Adagrad", %lr, %p#0, %p#1 : tensor<f32>, tensor<?xi64>, tensor<?x4xf32>
    %q:2 = dtf.pushed {key = "whole:grad:0", sparse, variable = @whole} : tensor<?xi64>, tensor<?x4xf32>
    dtf.sparse_apply_sgd @whole, %lr, %q#0, %q#1 : tensor<f32>, tensor<?xi64>, tensor<?x4xf32>
    return
  }
}

// CHECK-LABEL: func.func @lookup_ps_update()
// CHECK-NEXT: %[[LR:.*]] = dtf.pushed {key = "emb:sparse_apply_adagrad:2", variable = @emb} : tensor<f32>
// CHECK-NEXT: %[[P0:.*]]:2 = dtf.pushed {key = "emb:grad:0/part_0", row_offset = 0 : i64, rows = 3 : i64, sparse, variable = @emb} : tensor<?xi64>, tensor<?x4xf32>
// CHECK-NEXT: dtf.sparse_apply_adagrad @"emb/part_0", @"emb/Adagrad/part_0", %[[LR]], %[[P0]]#0, %[[P0]]#1 {dtf.held = "emb/part_0"}
// CHECK-NEXT: %[[P1:.*]]:2 = dtf.pushed {key = "emb:grad:0/part_1", row_offset = 3 : i64, rows = 2 : i64, sparse, variable = @emb} : tensor<?xi64>, tensor<?x4xf32>
// CHECK-NEXT: dtf.sparse_apply_adagrad @"emb/part_1", @"emb/Adagrad/part_1", %[[LR]], %[[P1]]#0, %[[P1]]#1 {dtf.held = "emb/part_1"}
// CHECK-NEXT: %[[Q:.*]]:2 = dtf.pushed {key = "whole:grad:0", row_offset = 0 : i64, rows = 6 : i64, sparse, variable = @whole} : tensor<?xi64>, tensor<?x4xf32>
// CHECK-NEXT: dtf.sparse_apply_sgd @whole, %[[LR]], %[[Q]]#0, %[[Q]]#1 {dtf.held = "whole"}
// CHECK-NEXT: return

// -----

module attributes {dtf.model = "m"} {
  func.func @ps_update() {
    %g = dtf.pushed {key = "nope:grad", variable = @nope} : tensor<3xf32>
    %lr = dtf.pushed {key = "nope:apply_sgd:2", variable = @nope} : tensor<f32>
    // expected-error @+1 {{'dtf.apply_sgd' op updates @nope, which the module does not declare as a dtf.variable}}
    dtf.apply_sgd @nope, %g, %lr : tensor<3xf32>, tensor<f32>
    return
  }
}

// -----

// A symbol already named like a shard is not taken for one.
module attributes {dtf.model = "m"} {
  dtf.variable @W : tensor<4x2xf32> = #dtf.init<zeros> {dtf.partitions = 2 : i64, trainable}
  dtf.variable @"W/part_1" : tensor<2x2xf32> = #dtf.init<zeros>
  func.func @ps_update() {
    %g = dtf.pushed {key = "W:grad", variable = @W} : tensor<4x2xf32>
    %lr = dtf.pushed {key = "W:apply_sgd:2", variable = @W} : tensor<f32>
    // expected-error @+1 {{'dtf.apply_sgd' op updates shard 1 of @W, but the module already declares @"W/part_1" as something else; rename that symbol}}
    dtf.apply_sgd @W, %g, %lr : tensor<4x2xf32>, tensor<f32>
    return
  }
}
