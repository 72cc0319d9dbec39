// The verifiers of broadcast_to's and tile's batch_of, tile's multiples and
// tile_grad's shapes.
// RUN: dtf-opt %s --split-input-file --verify-diagnostics

func.func @broadcast_to_batch_without_batch_of(%x: tensor<10xf32>) {
  // expected-error @+1 {{'dtf.broadcast_to' op needs batch_of for its dynamic size in dimension 0 of 'tensor<?x10xf32>' (a tensor with the batch at that position)}}
  %0 = dtf.broadcast_to %x : tensor<10xf32> -> tensor<?x10xf32>
  return
}

// -----

func.func @broadcast_to_needless_batch_of(%h: tensor<?x1xf32>, %x: tensor<?x4xf32>) {
  // expected-error @+1 {{'dtf.broadcast_to' op takes no size from batch_of, so it needs none}}
  %0 = dtf.broadcast_to %h batch_of %x : tensor<?x1xf32>, tensor<?x4xf32> -> tensor<?x10xf32>
  return
}

// -----

func.func @broadcast_to_batch_of_without_batch(%c: tensor<1x4xf32>, %w: tensor<3x4xf32>) {
  // expected-error @+1 {{'dtf.broadcast_to' op takes dimension 0 of 'tensor<?x4xf32>' from batch_of 'tensor<3x4xf32>', which has no batch there}}
  %0 = dtf.broadcast_to %c batch_of %w : tensor<1x4xf32>, tensor<3x4xf32> -> tensor<?x4xf32>
  return
}

// -----

func.func @tile_wrong_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtf.tile' op tile expects one multiple per dimension (2), got 3}}
  %0 = dtf.tile %x multiples [1, 2, 3] : tensor<2x3xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @tile_zero(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtf.tile' op tile multiples must be positive (or -1 for the batch), got 0 in dimension 1}}
  %0 = dtf.tile %x multiples [1, 0] : tensor<2x3xf32> -> tensor<2x0xf32>
  return
}

// -----

func.func @tile_batch_over_size_2(%x: tensor<2x3xf32>, %b: tensor<?x3xf32>) {
  // expected-error @+1 {{'dtf.tile' op tile repeats only a dimension of size 1 over the batch, got size 2 in dimension 0}}
  %0 = dtf.tile %x multiples [-1, 1] batch_of %b : tensor<2x3xf32>, tensor<?x3xf32> -> tensor<?x3xf32>
  return
}

// -----

func.func @tile_wrong_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtf.tile' op of 'tensor<2x3xf32>' gives 'tensor<4x3xf32>', not 'tensor<4x6xf32>'}}
  %0 = dtf.tile %x multiples [2, 1] : tensor<2x3xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @tile_batch_without_batch_of(%x: tensor<1x3xf32>) {
  // expected-error @+1 {{'dtf.tile' op needs batch_of for its dynamic size in dimension 0 of 'tensor<?x3xf32>' (a tensor with the batch at that position)}}
  %0 = dtf.tile %x multiples [-1, 1] : tensor<1x3xf32> -> tensor<?x3xf32>
  return
}

// -----

func.func @tile_grad_not_a_multiple(%dy: tensor<5x3xf32>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtf.tile_grad' op expects each size of dy to be a multiple of the input's, got 'tensor<5x3xf32>' for 'tensor<2x3xf32>'}}
  %0 = dtf.tile_grad %dy, %x : tensor<5x3xf32> to tensor<2x3xf32>
  return
}
