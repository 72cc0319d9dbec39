// dtf-optimize: Keras 3's CosineDecay as ops of the global step. The cosine
// is a polynomial (the dialect has no cos op); its values are checked against
// Keras' formula in gradients.Schedules (tests/unit/gradients).
// RUN: dtf-opt %s --dtf-optimize --split-input-file | FileCheck %s

// Without a warmup: the step held at decay_steps, then the cosine.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "sgd", learning_rate = {kind = "cosine_decay", initial_learning_rate = 1.000000e-01 : f64, decay_steps = 600 : i64, alpha = 1.000000e-01 : f64}}}} {
  dtf.variable @W : tensor<4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<4xf32> {dtf.grad_of = @W}) {
    %g = dtf.constant dense<1.0> : tensor<4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: %[[STEP:.*]] = dtf.read_variable @global_step
// CHECK: %[[S:.*]] = dtf.cast %[[STEP]] : tensor<i64> to tensor<f32>
// CHECK: %[[MAX:.*]] = dtf.constant dense<6.000000e+02> : tensor<f32>
// CHECK: %[[HELD:.*]] = dtf.minimum %[[S]], %[[MAX]]
// CHECK: %[[F:.*]] = dtf.div %[[HELD]], %{{.*}}
// The cosine's half, kept in [0, 1] against the polynomial's last bit.
// CHECK: dtf.maximum
// CHECK-NEXT: dtf.minimum
// CHECK-NOT: dtf.select
// CHECK: dtf.apply_sgd @W

// -----

// With a warmup: held at warmup_steps + decay_steps; the warmup line while
// the step is below warmup_steps, else the cosine from warmup_target.
module attributes {dtf.model = "m", dtf.train = {optimizer = {kind = "sgd", learning_rate = {kind = "cosine_decay", initial_learning_rate = 0.000000e+00 : f64, decay_steps = 600 : i64, warmup_target = 1.000000e-03 : f64, warmup_steps = 50 : i64}}}} {
  dtf.variable @W : tensor<4xf32> = #dtf.init<zeros> {trainable}
  func.func @train_step() -> (tensor<f32> {dtf.name = "loss"}, tensor<4xf32> {dtf.grad_of = @W}) {
    %g = dtf.constant dense<1.0> : tensor<4xf32>
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l, %g : tensor<f32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: dtf.constant dense<6.500000e+02> : tensor<f32>
// CHECK: %[[HELD:.*]] = dtf.minimum
// CHECK: %[[W:.*]] = dtf.constant dense<5.000000e+01> : tensor<f32>
// CHECK: dtf.sub %[[HELD]], %[[W]]
// CHECK: %[[COND:.*]] = dtf.compare lt, %[[HELD]], %{{.*}}
// CHECK: %[[LR:.*]] = dtf.select %[[COND]], %{{.*}}, %{{.*}}
// CHECK: dtf.apply_sgd @W, %{{.*}}, %[[LR]]
