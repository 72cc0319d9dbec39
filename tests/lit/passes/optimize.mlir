// dtf-optimize: gradients become updates with slots beside their variable,
// a global step and the learning-rate schedule.
// RUN: dtf-opt %s --dtf-optimize --split-input-file | FileCheck %s

module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "adam", learning_rate = 1.000000e-03 : f64}}} {
  dtf.variable @W : tensor<4xf32> = #dtf.init<zeros> {dtf.device = "/job:ps/task:1", trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<4xf32> {dtf.grad_of = @W}) {
    %g = dtf.constant dense<1.0> : tensor<4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<4xf32>
  }
}

// CHECK: dtf.variable @global_step : tensor<i64> = #dtf.init<zeros>
// CHECK: dtf.variable @W
// Adam's slots live with their variable, on its device.
// CHECK-NEXT: dtf.variable @"W/Adam_1" : tensor<4xf32> = #dtf.init<zeros> {dtf.device = "/job:ps/task:1", dtf.slot_of = @W}
// CHECK-NEXT: dtf.variable @"W/Adam" : tensor<4xf32> = #dtf.init<zeros> {dtf.device = "/job:ps/task:1", dtf.slot_of = @W}
// CHECK-LABEL: func.func @train_step() -> (tensor<f32> {dtf.name = "loss"})
// CHECK: %[[STEP:.*]] = dtf.read_variable @global_step : tensor<i64>
// CHECK: %[[LR:.*]] = dtf.constant dense<1.000000e-03> : tensor<f32>
// CHECK: dtf.apply_adam @W, @"W/Adam", @"W/Adam_1", %{{.*}}, %[[LR]], %[[STEP]] beta1 9.000000e-01
// CHECK: dtf.assign_add @global_step, %{{.*}} : tensor<i64>
// CHECK-NEXT: return %{{.*}} : tensor<f32>

// -----

// An exponential decay with staircase divides the integer step.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "sgd", learning_rate = {kind = "exponential_decay", learning_rate = 1.000000e-01 : f64, decay_steps = 100 : i64, decay_rate = 5.000000e-01 : f64, staircase = true}}, clip_gradients = {kind = "global_norm", clip_norm = 5.000000e+00 : f64}}} {
  dtf.variable @W : tensor<4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<4xf32> {dtf.grad_of = @W}) {
    %g = dtf.constant dense<1.0> : tensor<4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @train_step()
// CHECK: %[[STEP:.*]] = dtf.read_variable @global_step
// CHECK: %[[HUNDRED:.*]] = dtf.constant dense<100> : tensor<i64>
// CHECK: %[[Q:.*]] = dtf.div %[[STEP]], %[[HUNDRED]] : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[E:.*]] = dtf.cast %[[Q]] : tensor<i64> to tensor<f32>
// CHECK: %[[P:.*]] = dtf.pow %{{.*}}, %[[E]]
// CHECK: %[[LR:.*]] = dtf.mul %{{.*}}, %[[P]]
// CHECK: %[[C:.*]] = dtf.global_norm_clip %{{.*}} clip_norm 5.000000e+00
// CHECK: dtf.apply_sgd @W, %[[C]], %[[LR]]
