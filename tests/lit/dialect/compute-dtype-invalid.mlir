// compute_dtype is "bf16", "f16" or absent, and only on f32 operands.
// RUN: dtf-opt %s --split-input-file --verify-diagnostics

func.func @other_value(%x: tensor<2x4xf32>, %w: tensor<4x5xf32>) {
  // expected-error @+1 {{attribute 'compute_dtype' failed to satisfy constraint: string attribute the compute dtype "bf16" or "f16"}}
  %y = dtf.matmul %x, %w compute_dtype "f8" : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @not_f32(%x: tensor<2x4xf64>, %w: tensor<4x5xf64>) {
  // expected-error @+1 {{failed to verify that compute_dtype is set only where every operand is f32}}
  %y = dtf.matmul %x, %w compute_dtype "bf16" : (tensor<2x4xf64>, tensor<4x5xf64>) -> tensor<2x5xf64>
  return
}

// -----

func.func @f16_not_f32(%x: tensor<2x4xf64>, %w: tensor<4x5xf64>) {
  // expected-error @+1 {{failed to verify that compute_dtype is set only where every operand is f32}}
  %y = dtf.matmul %x, %w compute_dtype "f16" : (tensor<2x4xf64>, tensor<4x5xf64>) -> tensor<2x5xf64>
  return
}
