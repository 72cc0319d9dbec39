// The verifiers and type constraints of the math ops of issue 36.
// RUN: dtf-opt %s --split-input-file --verify-diagnostics

func.func @bucketize_unsorted(%x: tensor<?xf32>) {
  // expected-error @+1 {{'dtf.bucketize' op boundaries must be sorted ascending, got 1.000000e+00 after 2.000000e+00 at position 2}}
  %0 = dtf.bucketize %x boundaries [0.0, 2.0, 1.0] : tensor<?xf32> -> tensor<?xi32>
  return
}

// -----

func.func @bucketize_not_finite(%x: tensor<?xf32>) {
  // expected-error @+1 {{'dtf.bucketize' op boundaries must be finite, got INF at position 1}}
  %0 = dtf.bucketize %x boundaries [0.0, 0x7FF0000000000000] : tensor<?xf32> -> tensor<?xi32>
  return
}

// -----

func.func @bucketize_shape(%x: tensor<?x3xf32>) {
  // expected-error @+1 {{'dtf.bucketize' op keeps the shape of its input, got 'tensor<?x3xf32>' to 'tensor<?x4xi32>'}}
  %0 = dtf.bucketize %x boundaries [0.0] : tensor<?x3xf32> -> tensor<?x4xi32>
  return
}

// -----

func.func @bucketize_result_i32(%x: tensor<3xf32>) {
  // expected-error @+1 {{'dtf.bucketize' op result #0 must be ranked tensor of 32-bit signless integer values}}
  %0 = "dtf.bucketize"(%x) {boundaries = array<f64: 0.0>} : (tensor<3xf32>) -> tensor<3xi64>
  return
}

// -----

func.func @floor_on_integers(%x: tensor<3xi32>) {
  // expected-error @+1 {{'dtf.floor' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values}}
  %0 = dtf.floor %x : tensor<3xi32>
  return
}

// -----

func.func @floor_mod_not_broadcastable(%a: tensor<2x3xi32>, %b: tensor<2x4xi32>) {
  // expected-error @+2 {{floor_mod expects shapes that broadcast, got 'tensor<2x3xi32>' and 'tensor<2x4xi32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.floor_mod %a, %b : (tensor<2x3xi32>, tensor<2x4xi32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @abs_on_bool(%x: tensor<3xi1>) {
  // expected-error @+1 {{'dtf.abs' op operand #0 must be ranked tensor of}}
  %0 = dtf.abs %x : tensor<3xi1>
  return
}
