// The dtf.fused verifier: region arguments, yield and result shapes.
// RUN: dtf-opt %s --split-input-file --verify-diagnostics

func.func @args(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has 1 inputs but its region takes 2 arguments}}
  %r = dtf.fused(%x) {kernel = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    dtf.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @yield(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{yields 1 values whose types differ from its results}}
  %r = dtf.fused(%x) {kernel = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %c = dtf.cast %a : tensor<4xf32> to tensor<4xf64>
    dtf.yield %c : tensor<4xf64>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @shapes(%x: tensor<4xf32>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<f32>) {
  // expected-error @+1 {{has results of different shapes}}
  %r:2 = dtf.fused(%x, %s) {kernel = 0 : i64} : (tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<f32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<f32>):
    dtf.yield %a, %b : tensor<4xf32>, tensor<f32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<f32>
}
