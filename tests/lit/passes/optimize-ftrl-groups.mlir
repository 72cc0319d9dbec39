// dtf-optimize: FTRL (its Ftrl and Ftrl_1 slots, dense and sparse) and an
// optimizer per group of variables: each variable takes its group's
// optimizer and learning rate, the others the model's, and each variable
// says which updates it (dtf.optimizer).
// RUN: dtf-opt %s --dtf-optimize --split-input-file | FileCheck %s

// A table only gathered (FTRL, sparse by default) and a dense variable
// (Adagrad, the model's optimizer).
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "adagrad", learning_rate = 5.000000e-02 : f64}, optimizer_groups = [{group = "E", optimizer = {kind = "ftrl", learning_rate = 2.000000e-01 : f64, l1 = 1.000000e-02 : f64, l2_shrinkage = 1.000000e-03 : f64, beta = 5.000000e-01 : f64, initial_accumulator_value = 2.000000e-01 : f64}, variables = ["E"]}]}} {
  dtf.variable @E : tensor<10x1xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @W : tensor<3x4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<10x1xf32> {dtf.grad_of = @E}, tensor<3x4xf32> {dtf.grad_of = @W}) {
    %ids = dtf.input "ids" : tensor<?x3xi64>
    %dy = dtf.input "dy" : tensor<?x3x1xf32>
    %gw = dtf.input "gw" : tensor<3x4xf32>
    %a = dtf.gather_grad %dy, %ids params_shape [10, 1] : (tensor<?x3x1xf32>, tensor<?x3xi64>) -> tensor<10x1xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %a, %gw : tensor<f32>, tensor<10x1xf32>, tensor<3x4xf32>
  }
}

// CHECK: dtf.variable @E : tensor<10x1xf32> = #dtf.init<zeros> {dtf.optimizer = "ftrl (optimizer for E)", trainable}
// CHECK-DAG: dtf.variable @"E/Ftrl_1" : tensor<10x1xf32> = #dtf.init<zeros> {dtf.slot_of = @E}
// CHECK-DAG: dtf.variable @"E/Ftrl" : tensor<10x1xf32> = #dtf.init<constant, {value = 2.000000e-01 : f64}> {dtf.slot_of = @E}
// CHECK: dtf.variable @W : tensor<3x4xf32> = #dtf.init<zeros> {dtf.optimizer = "adagrad", trainable}
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: %[[MODEL_LR:.*]] = dtf.constant dense<5.000000e-02> : tensor<f32>
// CHECK-DAG: %[[FTRL_LR:.*]] = dtf.constant dense<2.000000e-01> : tensor<f32>
// CHECK: dtf.sparse_apply_ftrl @E, @"E/Ftrl", @"E/Ftrl_1", %[[FTRL_LR]], %{{.*}}, %{{.*}} lr_power -5.000000e-01 l1 1.000000e-02 l2 0.000000e+00 l2_shrinkage 1.000000e-03 beta 5.000000e-01 : tensor<f32>, tensor<?x3xi64>, tensor<?x3x1xf32>
// CHECK: dtf.apply_adagrad @W, @"W/Adagrad", %{{.*}}, %[[MODEL_LR]] : tensor<3x4xf32>, tensor<f32>

// -----

// FTRL on a dense variable, with its own schedule, and lazy = false on the
// table: both updates dense. No model optimizer: no unused learning rate.
module attributes {dtf.model = "m", dtf.train = {optimizer_groups = [{group = "\22*\22", optimizer = {kind = "ftrl", lazy = false, learning_rate_power = -1.000000e+00 : f64, learning_rate = {kind = "exponential_decay", learning_rate = 1.000000e-01 : f64, decay_steps = 10 : i64, decay_rate = 5.000000e-01 : f64}}, variables = ["E", "W"]}]}} {
  dtf.variable @E : tensor<10x1xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @W : tensor<3x4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<10x1xf32> {dtf.grad_of = @E}, tensor<3x4xf32> {dtf.grad_of = @W}) {
    %ids = dtf.input "ids" : tensor<?x3xi64>
    %dy = dtf.input "dy" : tensor<?x3x1xf32>
    %gw = dtf.input "gw" : tensor<3x4xf32>
    %a = dtf.gather_grad %dy, %ids params_shape [10, 1] : (tensor<?x3x1xf32>, tensor<?x3xi64>) -> tensor<10x1xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %a, %gw : tensor<f32>, tensor<10x1xf32>, tensor<3x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: dtf.constant dense<1.000000e-03>
// CHECK: %[[LR:.*]] = dtf.mul %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NOT: sparse_apply
// CHECK: dtf.apply_ftrl @E, @"E/Ftrl", @"E/Ftrl_1", %{{.*}}, %[[LR]] lr_power -1.000000e+00 l1 0.000000e+00 l2 0.000000e+00 l2_shrinkage 0.000000e+00 beta 0.000000e+00 : tensor<10x1xf32>, tensor<f32>
// CHECK: dtf.apply_ftrl @W, @"W/Ftrl", @"W/Ftrl_1", %{{.*}}, %[[LR]] lr_power
