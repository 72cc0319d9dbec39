// The verifiers of the shards dtf-shard-ps-update declares and of what a ps
// takes of a push: each refuses what it cannot hold, naming why.
// RUN: dtf-opt %s --split-input-file --verify-diagnostics

dtf.variable @W : tensor<5x2xf32> = #dtf.init<zeros>
// expected-error @+1 {{'dtf.variable_shard' op holds rows [4, 6) of @W, which has 5}}
dtf.variable_shard @"W/part_1" of @W row_offset 4 : tensor<2x2xf32>

// -----

dtf.variable @W : tensor<5x2xf32> = #dtf.init<zeros>
// expected-error @+1 {{'dtf.variable_shard' op has type 'tensor<2x3xf32>', which is not rows of @W's 'tensor<5x2xf32>'}}
dtf.variable_shard @"W/part_1" of @W row_offset 3 : tensor<2x3xf32>

// -----

// expected-error @+1 {{'dtf.variable_shard' op is a shard of @W, which is not a dtf.variable in scope}}
dtf.variable_shard @"W/part_1" of @W row_offset 3 : tensor<2x3xf32>

// -----

func.func @rows_without_their_shape() {
  // expected-error @+1 {{'dtf.pushed' op takes 2 rows of the pushed value, but its type is 'tensor<3x2xf32>'}}
  %g = dtf.pushed {key = "W:grad/part_1", row_offset = 3 : i64, rows = 2 : i64, variable = @W} : tensor<3x2xf32>
  return
}

// -----

func.func @offset_without_rows() {
  // expected-error @+1 {{'dtf.pushed' op has a row_offset but no rows}}
  %g = dtf.pushed {key = "W:grad/part_1", row_offset = 3 : i64, variable = @W} : tensor<2x2xf32>
  return
}

// -----

func.func @held_is_a_name(%g: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'dtf.apply_sgd' op has a dtf.held that is not a name}}
  dtf.apply_sgd @W, %g, %lr {dtf.held = 3 : i64} : tensor<3xf32>, tensor<f32>
  return
}
