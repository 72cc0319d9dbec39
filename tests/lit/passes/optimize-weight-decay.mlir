// dtf-optimize: Keras 3's decoupled weight decay is the update's
// `weight_decay`: adamw is Adam with 0.004 and Keras' epsilon 1e-7 unless
// told; any optimizer takes one; a table that is only gathered keeps its
// sparse update (decaying the rows looked up) unless lazy = false.
// RUN: dtf-opt %s --dtf-optimize --split-input-file | FileCheck %s

module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "adamw", learning_rate = 1.000000e-03 : f64}}} {
  dtf.variable @W : tensor<4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<4xf32> {dtf.grad_of = @W}) {
    %g = dtf.constant dense<1.0> : tensor<4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: dtf.apply_adam @W, @"W/Adam", @"W/Adam_1", %{{.*}}, %{{.*}}, %{{.*}} beta1 9.000000e-01 beta2 0.998999{{[0-9]*}} epsilon 9.99999{{[0-9]*}}E-8 {weight_decay = 4.000000e-03 : f64}

// -----

module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "adamw", learning_rate = 1.000000e-03 : f64, weight_decay = 5.000000e-02 : f64, epsilon = 1.000000e-08 : f64}}} {
  dtf.variable @W : tensor<4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<4xf32> {dtf.grad_of = @W}) {
    %g = dtf.constant dense<1.0> : tensor<4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: dtf.apply_adam @W, {{.*}} epsilon 1.000000e-08 {weight_decay = 5.000000e-02 : f64}

// -----

// adamw with weight_decay = 0 is Adam; plain adam has no decay.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "adamw", learning_rate = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64}}} {
  dtf.variable @W : tensor<4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<4xf32> {dtf.grad_of = @W}) {
    %g = dtf.constant dense<1.0> : tensor<4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: dtf.apply_adam @W, {{.*}} epsilon 9.99999{{[0-9]*}}E-8 : tensor<4xf32>

// -----

module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "momentum", learning_rate = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64}}} {
  dtf.variable @W : tensor<4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<4xf32> {dtf.grad_of = @W}) {
    %g = dtf.constant dense<1.0> : tensor<4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: dtf.apply_momentum @W, @"W/Momentum", %{{.*}}, %{{.*}} momentum 9.000000e-01 {weight_decay = 1.000000e-02 : f64}

// -----

// SGD and Adagrad with a decay: sparse by default (the rows looked up decay).
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "adagrad", learning_rate = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64}}} {
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
// CHECK: dtf.sparse_apply_adagrad @E, @"E/Adagrad", {{.*}} {weight_decay = 1.000000e-02 : f64}

// -----

// lazy = false: the whole table decays each step, as Keras: a dense update.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "sgd", learning_rate = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64, lazy = false}}} {
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
// CHECK-NOT: dtf.sparse_apply_sgd
// CHECK: dtf.apply_sgd @E, %{{.*}}, %{{.*}} {weight_decay = 1.000000e-02 : f64}
