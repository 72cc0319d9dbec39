// dtf-fuse-library: conv2d + bias add (+ relu) on the CPU become one
// conv2d_bias, which dtf-run runs as one oneDNN convolution with post-ops.
// RUN: dtf-opt %s --dtf-fuse-library --split-input-file | FileCheck %s

// conv + bias + relu, with the relu's gradient reading the sum: one
// conv2d_bias relu, and relu_grad reads its result.
// CHECK-LABEL: func.func @train
// CHECK-NEXT: %[[Y:.*]] = dtf.conv2d_bias %arg0, %arg1, %arg2 padding same strides [1, 1] dilations [1, 1] relu
// CHECK-NEXT: %[[G:.*]] = dtf.relu_grad %arg3, %[[Y]]
// CHECK-NEXT: return %[[Y]], %[[G]]
func.func @train(%x: tensor<?x8x8x2xf32>, %f: tensor<3x3x2x4xf32>, %b: tensor<4xf32>, %dy: tensor<?x8x8x4xf32>) -> (tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>) {
  %c = dtf.conv2d %x, %f padding same strides [1, 1] dilations [1, 1] : (tensor<?x8x8x2xf32>, tensor<3x3x2x4xf32>) -> tensor<?x8x8x4xf32>
  %s = dtf.add %c, %b : (tensor<?x8x8x4xf32>, tensor<4xf32>) -> tensor<?x8x8x4xf32>
  %r = dtf.relu %s : tensor<?x8x8x4xf32>
  %g = dtf.relu_grad %dy, %s : tensor<?x8x8x4xf32>
  return %r, %g : tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>
}

// -----

// The bias first, no relu: conv2d_bias without relu.
// CHECK-LABEL: func.func @bias_only
// CHECK-NEXT: %[[Y:.*]] = dtf.conv2d_bias %arg0, %arg1, %arg2 padding valid strides [2, 2] dilations [1, 1] :
// CHECK-NEXT: %[[T:.*]] = dtf.tanh %[[Y]]
func.func @bias_only(%x: tensor<?x8x8x2xf32>, %f: tensor<3x3x2x4xf32>, %b: tensor<4xf32>) -> tensor<?x3x3x4xf32> {
  %c = dtf.conv2d %x, %f padding valid strides [2, 2] dilations [1, 1] : (tensor<?x8x8x2xf32>, tensor<3x3x2x4xf32>) -> tensor<?x3x3x4xf32>
  %s = dtf.add %b, %c : (tensor<4xf32>, tensor<?x3x3x4xf32>) -> tensor<?x3x3x4xf32>
  %t = dtf.tanh %s : tensor<?x3x3x4xf32>
  return %t : tensor<?x3x3x4xf32>
}

// -----

// Left alone: a convolution on a GPU (cuDNN runs it), one whose result is
// read twice, and an add of something that is not a per-channel bias.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: conv2d_bias
// CHECK: return
func.func @kept(%x: tensor<?x8x8x2xf32>, %f: tensor<3x3x2x4xf32>, %b: tensor<4xf32>, %m: tensor<?x8x8x4xf32>) -> (tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>) {
  %c = dtf.conv2d %x, %f padding same strides [1, 1] dilations [1, 1] {dtf.device = "/job:worker/task:0/device:GPU:0"} : (tensor<?x8x8x2xf32>, tensor<3x3x2x4xf32>) -> tensor<?x8x8x4xf32>
  %s = dtf.add %c, %b {dtf.device = "/job:worker/task:0/device:GPU:0"} : (tensor<?x8x8x4xf32>, tensor<4xf32>) -> tensor<?x8x8x4xf32>
  %c2 = dtf.conv2d %x, %f padding same strides [1, 1] dilations [1, 1] : (tensor<?x8x8x2xf32>, tensor<3x3x2x4xf32>) -> tensor<?x8x8x4xf32>
  %s2 = dtf.add %c2, %b : (tensor<?x8x8x4xf32>, tensor<4xf32>) -> tensor<?x8x8x4xf32>
  %c3 = dtf.conv2d %x, %f padding same strides [1, 1] dilations [1, 1] : (tensor<?x8x8x2xf32>, tensor<3x3x2x4xf32>) -> tensor<?x8x8x4xf32>
  %s3 = dtf.add %c3, %m : (tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>) -> tensor<?x8x8x4xf32>
  return %s, %s2, %c2, %s3 : tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>
}

// -----

// relu_grad after max_pool_grad of the same x: one max_pool_grad relu.
// CHECK-LABEL: func.func @pool_grad
// CHECK-NEXT: %[[G:.*]] = dtf.max_pool_grad %arg0, %arg1 padding valid window [2, 2] strides [2, 2] relu :
// CHECK-NEXT: return %[[G]]
func.func @pool_grad(%x: tensor<?x8x8x4xf32>, %dy: tensor<?x4x4x4xf32>) -> tensor<?x8x8x4xf32> {
  %p = dtf.max_pool_grad %x, %dy padding valid window [2, 2] strides [2, 2] : tensor<?x8x8x4xf32>, tensor<?x4x4x4xf32>
  %g = dtf.relu_grad %p, %x : tensor<?x8x8x4xf32>
  return %g : tensor<?x8x8x4xf32>
}

// -----

// Left alone: the pool gradient read twice, a relu_grad of another x, and
// ops on a GPU (cuDNN runs the pool gradient).
// CHECK-LABEL: func.func @pool_grad_kept
// CHECK-NOT: relu :
// CHECK-COUNT-3: dtf.relu_grad
// CHECK: return
func.func @pool_grad_kept(%x: tensor<?x8x8x4xf32>, %m: tensor<?x8x8x4xf32>, %dy: tensor<?x4x4x4xf32>) -> (tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>) {
  %p = dtf.max_pool_grad %x, %dy padding valid window [2, 2] strides [2, 2] : tensor<?x8x8x4xf32>, tensor<?x4x4x4xf32>
  %g = dtf.relu_grad %p, %x : tensor<?x8x8x4xf32>
  %p2 = dtf.max_pool_grad %x, %dy padding valid window [2, 2] strides [2, 2] : tensor<?x8x8x4xf32>, tensor<?x4x4x4xf32>
  %g2 = dtf.relu_grad %p2, %m : tensor<?x8x8x4xf32>
  %p3 = dtf.max_pool_grad %x, %dy padding valid window [2, 2] strides [2, 2] {dtf.device = "/job:worker/task:0/device:GPU:0"} : tensor<?x8x8x4xf32>, tensor<?x4x4x4xf32>
  %g3 = dtf.relu_grad %p3, %x {dtf.device = "/job:worker/task:0/device:GPU:0"} : tensor<?x8x8x4xf32>
  return %g, %p, %g2, %g3 : tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>, tensor<?x8x8x4xf32>
}
