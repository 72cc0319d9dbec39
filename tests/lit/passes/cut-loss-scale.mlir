// mixed_float16's dynamic loss scale across the ps (dtf-cut-train-step, then
// dtf-shard-ps-update): the worker keeps dtf.skip_updates_unless and pushes
// its flag under "loss_scale:finite"; the pushes that only guarded updates
// take are `skippable` (withheld when the flag is false), the flag and the
// global step's increment are not. @ps_update starts with its own guard over
// the pushed flag (held by no tensor: every ps runs it), before every update,
// shards included; dtf.adjust_loss_scale and the global step's assign_add
// stay unguarded.
// RUN: dtf-opt %s --dtf-cut-train-step --dtf-shard-ps-update --split-input-file --verify-diagnostics | FileCheck %s

module attributes {dtf.model = "m"} {
  dtf.variable @W : tensor<4x3xf32> = #dtf.init<zeros> {dtf.partitions = 2 : i64, trainable}
  dtf.variable @b : tensor<3xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @global_step : tensor<i64> = #dtf.init<zeros>
  dtf.variable @loss_scale : tensor<f32> = #dtf.init<constant, {value = 3.276800e+04 : f64}> {dtf.loss_scale}
  dtf.variable @loss_scale_good_steps : tensor<i64> = #dtf.init<zeros> {dtf.loss_scale}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}) {
    %s = dtf.read_variable @loss_scale : tensor<f32>
    %gw0 = dtf.constant dense<1.0> : tensor<4x3xf32>
    %gb0 = dtf.constant dense<1.0> : tensor<3xf32>
    %finite, %g:2 = dtf.unscale_gradients %gw0, %gb0 by %s : tensor<4x3xf32>, tensor<3xf32> by tensor<f32> -> tensor<i1>
    dtf.skip_updates_unless %finite : tensor<i1>
    %lr = dtf.constant dense<0.1> : tensor<f32>
    %one = dtf.constant dense<1> : tensor<i64>
    %l = dtf.constant dense<0.0> : tensor<f32>
    dtf.apply_sgd @W, %g#0, %lr : tensor<4x3xf32>, tensor<f32>
    dtf.apply_sgd @b, %g#1, %lr : tensor<3xf32>, tensor<f32>
    dtf.assign_add @global_step, %one : tensor<i64>
    dtf.adjust_loss_scale @loss_scale, @loss_scale_good_steps, %finite growth_steps 2000 : tensor<i1>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @worker_step()
// CHECK: %[[F:.*]], %{{.*}}:2 = dtf.unscale_gradients
// CHECK-NEXT: dtf.skip_updates_unless %[[F]] : tensor<i1>
// CHECK-NOT: dtf.apply_sgd
// CHECK-NOT: dtf.adjust_loss_scale
// CHECK: dtf.push %[[F]] {key = "loss_scale:finite", variable = @loss_scale} : tensor<i1>
// CHECK-NEXT: dtf.push %{{.*}} {key = "W:grad", skippable, variable = @W} : tensor<4x3xf32>
// CHECK-NEXT: dtf.push %{{.*}} {key = "W:apply_sgd:2", skippable, variable = @W} : tensor<f32>
// CHECK-NEXT: dtf.push %{{.*}} {key = "b:grad", skippable, variable = @b} : tensor<3xf32>
// CHECK-NEXT: dtf.push %{{.*}} {key = "global_step:assign_add:1", variable = @global_step} : tensor<i64>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @ps_update()
// CHECK-NEXT: %[[PF:.*]] = dtf.pushed {key = "loss_scale:finite", variable = @loss_scale} : tensor<i1>
// CHECK-NEXT: dtf.skip_updates_unless %[[PF]] : tensor<i1>
// CHECK-NOT: dtf.held
// CHECK: dtf.pushed {key = "W:grad/part_0", row_offset = 0 : i64, rows = 2 : i64, skippable, variable = @W} : tensor<2x3xf32>
// CHECK: dtf.apply_sgd @"W/part_0"
// CHECK: dtf.pushed {key = "W:grad/part_1", row_offset = 2 : i64, rows = 2 : i64, skippable, variable = @W} : tensor<2x3xf32>
// CHECK: dtf.apply_sgd @"W/part_1"
// CHECK: dtf.apply_sgd @b, {{.*}} {dtf.held = "b"}
// CHECK: %[[ONE:.*]] = dtf.pushed {key = "global_step:assign_add:1", variable = @global_step} : tensor<i64>
// CHECK-NEXT: dtf.assign_add @global_step, %[[ONE]] {{.*}}dtf.held = "global_step"
// CHECK-NEXT: dtf.adjust_loss_scale @loss_scale, @loss_scale_good_steps, %[[PF]] growth_steps 2000 {dtf.held = "loss_scale"}
// CHECK-NEXT: return

// -----

// Without a loss scale nothing is skippable and the ps has no guard.
module attributes {dtf.model = "m"} {
  dtf.variable @b : tensor<3xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}) {
    %gb = dtf.constant dense<1.0> : tensor<3xf32>
    %lr = dtf.constant dense<0.1> : tensor<f32>
    dtf.apply_sgd @b, %gb, %lr : tensor<3xf32>, tensor<f32>
    return %lr : tensor<f32>
  }
}

// CHECK-LABEL: func.func @worker_step()
// CHECK-NOT: skippable
// CHECK-LABEL: func.func @ps_update()
// CHECK-NOT: dtf.skip_updates_unless
// CHECK: return

// -----

// A guard with no scale to adjust cannot be cut: the flag has no ps to go to.
module attributes {dtf.model = "m"} {
  dtf.variable @b : tensor<3xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}) {
    %gb = dtf.constant dense<1.0> : tensor<3xf32>
    %t = dtf.constant dense<true> : tensor<i1>
    // expected-error @+1 {{guards a step without dtf.adjust_loss_scale}}
    dtf.skip_updates_unless %t : tensor<i1>
    %lr = dtf.constant dense<0.1> : tensor<f32>
    dtf.apply_sgd @b, %gb, %lr : tensor<3xf32>, tensor<f32>
    return %lr : tensor<f32>
  }
}
