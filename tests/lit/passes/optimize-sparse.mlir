// dtf-optimize: a variable that is only gathered gets a sparse update of the
// rows its gathers picked; clipping, lazy = false (Adam, momentum, RMSProp)
// and any other use of the variable keep the dense update.
// RUN: dtf-opt %s --dtf-optimize --split-input-file | FileCheck %s

// Two gathers of one table (summed): one sparse update with both pairs; the
// dense gradient ops are gone.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "adagrad", learning_rate = 1.000000e-01 : f64}}} {
  dtf.variable @E : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<10x4xf32> {dtf.grad_of = @E}) {
    %ids = dtf.input "ids" : tensor<?x3xi64>
    %ctx = dtf.input "ctx" : tensor<?x2xi32>
    %dy = dtf.input "dy" : tensor<?x3x4xf32>
    %dc = dtf.input "dc" : tensor<?x2x4xf32>
    %a = dtf.gather_grad %dy, %ids params_shape [10, 4] : (tensor<?x3x4xf32>, tensor<?x3xi64>) -> tensor<10x4xf32>
    %b = dtf.gather_grad %dc, %ctx params_shape [10, 4] : (tensor<?x2x4xf32>, tensor<?x2xi32>) -> tensor<10x4xf32>
    %g = dtf.add %a, %b : (tensor<10x4xf32>, tensor<10x4xf32>) -> tensor<10x4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<10x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: dtf.gather_grad
// CHECK-NOT: dtf.add
// CHECK: dtf.sparse_apply_adagrad @E, @"E/Adagrad", %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<?x3xi64>, tensor<?x3x4xf32>, tensor<?x2xi32>, tensor<?x2x4xf32>
// CHECK-NOT: dtf.apply_adagrad

// -----

// Adam is lazy by default: m and v of the rows present only.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "adam", learning_rate = 1.000000e-03 : f64}}} {
  dtf.variable @E : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<10x4xf32> {dtf.grad_of = @E}) {
    %ids = dtf.input "ids" : tensor<?xi64>
    %dy = dtf.input "dy" : tensor<?x4xf32>
    %g = dtf.gather_grad %dy, %ids params_shape [10, 4] : (tensor<?x4xf32>, tensor<?xi64>) -> tensor<10x4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<10x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: %[[STEP:.*]] = dtf.read_variable @global_step
// CHECK: dtf.sparse_apply_adam @E, @"E/Adam", @"E/Adam_1", %{{.*}}, %[[STEP]], %{{.*}}, %{{.*}} beta1 9.000000e-01 beta2 {{.*}} epsilon 1.000000e-08

// -----

// lazy = false: Adam's slots decay on every row, so the update stays dense.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "adam", learning_rate = 1.000000e-03 : f64, lazy = false}}} {
  dtf.variable @E : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<10x4xf32> {dtf.grad_of = @E}) {
    %ids = dtf.input "ids" : tensor<?xi64>
    %dy = dtf.input "dy" : tensor<?x4xf32>
    %g = dtf.gather_grad %dy, %ids params_shape [10, 4] : (tensor<?x4xf32>, tensor<?xi64>) -> tensor<10x4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<10x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: dtf.gather_grad
// CHECK: dtf.apply_adam @E
// CHECK-NOT: sparse_apply

// -----

// sgd's sparse update equals the dense one, so lazy does not apply to it;
// clipping needs the dense gradient for its global norm.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "sgd", learning_rate = 1.000000e-01 : f64}, clip_gradients = {kind = "global_norm", clip_norm = 5.000000e+00 : f64}}} {
  dtf.variable @E : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<10x4xf32> {dtf.grad_of = @E}) {
    %ids = dtf.input "ids" : tensor<?xi64>
    %dy = dtf.input "dy" : tensor<?x4xf32>
    %g = dtf.gather_grad %dy, %ids params_shape [10, 4] : (tensor<?x4xf32>, tensor<?xi64>) -> tensor<10x4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<10x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: dtf.global_norm_clip
// CHECK: dtf.apply_sgd @E
// CHECK-NOT: sparse_apply

// -----

// A table that is also used densely (tied weights): its gradient is not
// only rows, so the update stays dense.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "sgd", learning_rate = 1.000000e-01 : f64}}} {
  dtf.variable @E : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<10x4xf32> {dtf.grad_of = @E}) {
    %ids = dtf.input "ids" : tensor<?xi64>
    %dy = dtf.input "dy" : tensor<?x4xf32>
    %dense = dtf.input "dense" : tensor<10x4xf32>
    %a = dtf.gather_grad %dy, %ids params_shape [10, 4] : (tensor<?x4xf32>, tensor<?xi64>) -> tensor<10x4xf32>
    %g = dtf.add %a, %dense : (tensor<10x4xf32>, tensor<10x4xf32>) -> tensor<10x4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<10x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: dtf.apply_sgd @E
// CHECK-NOT: sparse_apply
