// The loss-scaling ops' verifiers: scalars where a scale, a count or a
// finiteness flag goes, scalar variables of the right dtype, a positive
// growth interval, at least one gradient.
// RUN: dtf-opt %s --split-input-file --verify-diagnostics

func.func @scale_not_scalar(%g: tensor<4xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'dtf.unscale_gradients' op expects the scale as an f32 scalar, got 'tensor<2xf32>'}}
  %f, %u = dtf.unscale_gradients %g by %s : tensor<4xf32> by tensor<2xf32> -> tensor<i1>
  return
}

// -----

func.func @finite_not_scalar(%g: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'dtf.unscale_gradients' op expects finite as an i1 scalar, got 'tensor<1xi1>'}}
  %f, %u = dtf.unscale_gradients %g by %s : tensor<4xf32> by tensor<f32> -> tensor<1xi1>
  return
}

// -----

func.func @no_gradients(%s: tensor<f32>) {
  // expected-error @+1 {{'dtf.unscale_gradients' op expects at least one gradient}}
  %f = "dtf.unscale_gradients"(%s) : (tensor<f32>) -> tensor<i1>
  return
}

// -----

dtf.variable @loss_scale : tensor<f64> = #dtf.init<zeros>
dtf.variable @good : tensor<i64> = #dtf.init<zeros>
func.func @scale_variable_f64(%f: tensor<i1>) {
  // expected-error @+1 {{'dtf.adjust_loss_scale' op expects the scale @loss_scale to be a 'f32' scalar variable, got 'tensor<f64>'}}
  dtf.adjust_loss_scale @loss_scale, @good, %f growth_steps 2000 : tensor<i1>
  return
}

// -----

dtf.variable @loss_scale : tensor<f32> = #dtf.init<zeros>
dtf.variable @good : tensor<2xi64> = #dtf.init<zeros>
func.func @count_not_scalar(%f: tensor<i1>) {
  // expected-error @+1 {{'dtf.adjust_loss_scale' op expects the count @good to be a 'i64' scalar variable, got 'tensor<2xi64>'}}
  dtf.adjust_loss_scale @loss_scale, @good, %f growth_steps 2000 : tensor<i1>
  return
}

// -----

dtf.variable @loss_scale : tensor<f32> = #dtf.init<zeros>
dtf.variable @good : tensor<i64> = #dtf.init<zeros>
func.func @growth_zero(%f: tensor<i1>) {
  // expected-error @+1 {{attribute 'growth_steps' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  dtf.adjust_loss_scale @loss_scale, @good, %f growth_steps 0 : tensor<i1>
  return
}

// -----

func.func @guard_not_scalar(%f: tensor<2xi1>) {
  // expected-error @+1 {{'dtf.skip_updates_unless' op expects finite as an i1 scalar, got 'tensor<2xi1>'}}
  dtf.skip_updates_unless %f : tensor<2xi1>
  return
}
