// dtf-fuse-library: a CPU-placed max pool with a gradient keeps its argmax
// (max_pool_with_argmax), and the gradient reads it and dy instead of x
// (max_pool_grad_with_argmax); with pool-argmax=false both stay as they are.
// RUN: dtf-opt %s --dtf-fuse-library --split-input-file | FileCheck %s
// RUN: dtf-opt %s --dtf-fuse-library=pool-argmax=false --split-input-file | FileCheck %s --check-prefix=OFF
// OFF-NOT: with_argmax
// OFF: dtf.max_pool_grad %arg0, %arg1 padding valid window [2, 2] strides [2, 2] relu
// OFF-NOT: with_argmax

// The pool, its gradient and the relu_grad after it (folded first): the
// argmax is the pooled shape with ceil(5 / 4) = 2 in the last dimension.
// CHECK-LABEL: func.func @pool_and_grad
// CHECK-NEXT: %[[Y:.*]], %[[I:.*]] = dtf.max_pool_with_argmax %arg0 padding valid window [2, 2] strides [2, 2] : tensor<?x8x8x5xf32> -> tensor<?x4x4x5xf32>, tensor<?x4x4x2xi32>
// CHECK-NEXT: %[[G:.*]] = dtf.max_pool_grad_with_argmax %[[I]], %arg1 padding valid window [2, 2] strides [2, 2] input_shape [-1, 8, 8, 5] relu : (tensor<?x4x4x2xi32>, tensor<?x4x4x5xf32>) -> tensor<?x8x8x5xf32>
// CHECK-NEXT: return %[[Y]], %[[G]]
func.func @pool_and_grad(%x: tensor<?x8x8x5xf32>, %dy: tensor<?x4x4x5xf32>) -> (tensor<?x4x4x5xf32>, tensor<?x8x8x5xf32>) {
  %y = dtf.max_pool %x padding valid window [2, 2] strides [2, 2] : tensor<?x8x8x5xf32> -> tensor<?x4x4x5xf32>
  %p = dtf.max_pool_grad %x, %dy padding valid window [2, 2] strides [2, 2] : tensor<?x8x8x5xf32>, tensor<?x4x4x5xf32>
  %g = dtf.relu_grad %p, %x : tensor<?x8x8x5xf32>
  return %y, %g : tensor<?x4x4x5xf32>, tensor<?x8x8x5xf32>
}

// -----

// f64, overlapping padded windows, no relu, on a CPU device (kept on both).
// CHECK-LABEL: func.func @f64_same
// CHECK-NEXT: %[[Y:.*]], %[[I:.*]] = dtf.max_pool_with_argmax %arg0 padding same window [3, 3] strides [2, 2] {dtf.device = "/job:worker/task:0/device:CPU:0"} : tensor<2x7x7x8xf64> -> tensor<2x4x4x8xf64>, tensor<2x4x4x2xi32>
// CHECK-NEXT: dtf.max_pool_grad_with_argmax %[[I]], %arg1 padding same window [3, 3] strides [2, 2] input_shape [2, 7, 7, 8] {dtf.device = "/job:worker/task:0/device:CPU:0"} : (tensor<2x4x4x2xi32>, tensor<2x4x4x8xf64>) -> tensor<2x7x7x8xf64>
func.func @f64_same(%x: tensor<2x7x7x8xf64>, %dy: tensor<2x4x4x8xf64>) -> (tensor<2x4x4x8xf64>, tensor<2x7x7x8xf64>) {
  %y = dtf.max_pool %x padding same window [3, 3] strides [2, 2] {dtf.device = "/job:worker/task:0/device:CPU:0"} : tensor<2x7x7x8xf64> -> tensor<2x4x4x8xf64>
  %p = dtf.max_pool_grad %x, %dy padding same window [3, 3] strides [2, 2] {dtf.device = "/job:worker/task:0/device:CPU:0"} : tensor<2x7x7x8xf64>, tensor<2x4x4x8xf64>
  return %y, %p : tensor<2x4x4x8xf64>, tensor<2x7x7x8xf64>
}

// -----

// Left alone: pools and gradients on a GPU (cuDNN's x/y/dy path), a pool
// with no gradient (evaluation, %3), a gradient on another device than its
// pool (%0), a window of 144 positions (more than seven bits), a pool with a
// gradient of another padding (%6), and a pool whose gradient comes before
// it.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: with_argmax
// CHECK: return
func.func @kept(%x: tensor<?x12x12x4xf32>, %dy: tensor<?x6x6x4xf32>, %dy1: tensor<?x1x1x4xf32>, %dy3: tensor<?x4x4x4xf32>) -> (tensor<?x6x6x4xf32>, tensor<?x6x6x4xf32>, tensor<?x12x12x4xf32>, tensor<?x6x6x4xf32>, tensor<?x12x12x4xf32>, tensor<?x1x1x4xf32>, tensor<?x12x12x4xf32>, tensor<?x4x4x4xf32>, tensor<?x12x12x4xf32>) {
  %eval = dtf.max_pool %x padding valid window [2, 2] strides [2, 2] : tensor<?x12x12x4xf32> -> tensor<?x6x6x4xf32>
  %gy = dtf.max_pool %x padding same window [2, 2] strides [2, 2] {dtf.device = "/job:worker/task:0/device:GPU:0"} : tensor<?x12x12x4xf32> -> tensor<?x6x6x4xf32>
  %gg = dtf.max_pool_grad %x, %dy padding same window [2, 2] strides [2, 2] {dtf.device = "/job:worker/task:0/device:GPU:0"} : tensor<?x12x12x4xf32>, tensor<?x6x6x4xf32>
  %cy = dtf.max_pool %x padding valid window [2, 2] strides [2, 1] {dtf.device = "/job:worker/task:0/device:CPU:0"} : tensor<?x12x12x4xf32> -> tensor<?x6x11x4xf32>
  %big = dtf.max_pool %x padding valid window [12, 12] strides [1, 1] : tensor<?x12x12x4xf32> -> tensor<?x1x1x4xf32>
  %bg = dtf.max_pool_grad %x, %dy1 padding valid window [12, 12] strides [1, 1] : tensor<?x12x12x4xf32>, tensor<?x1x1x4xf32>
  %three = dtf.max_pool %x padding valid window [3, 3] strides [3, 3] : tensor<?x12x12x4xf32> -> tensor<?x4x4x4xf32>
  %other = dtf.max_pool_grad %x, %dy padding valid window [2, 2] strides [2, 2] {dtf.device = "/job:worker/task:1/device:CPU:0"} : tensor<?x12x12x4xf32>, tensor<?x6x6x4xf32>
  %early = dtf.max_pool_grad %x, %dy3 padding same window [3, 3] strides [3, 3] : tensor<?x12x12x4xf32>, tensor<?x4x4x4xf32>
  %late = dtf.max_pool %x padding same window [3, 3] strides [3, 3] : tensor<?x12x12x4xf32> -> tensor<?x4x4x4xf32>
  return %eval, %gy, %gg, %gy, %bg, %big, %other, %late, %early : tensor<?x6x6x4xf32>, tensor<?x6x6x4xf32>, tensor<?x12x12x4xf32>, tensor<?x6x6x4xf32>, tensor<?x12x12x4xf32>, tensor<?x1x1x4xf32>, tensor<?x12x12x4xf32>, tensor<?x4x4x4xf32>, tensor<?x12x12x4xf32>
}
