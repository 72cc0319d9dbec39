// dtf-fuse: chains of elementwise ops over one shape become dtf.fused
// regions; a bias and a scalar join as inputs; library ops stay outside.
// RUN: dtf-opt %s --dtf-fuse --split-input-file | FileCheck %s

// matmul + bias + relu: the add and the relu fuse, the matmul stays.
// CHECK-LABEL: func.func @dense
// CHECK: %[[MM:.*]] = dtf.matmul
// CHECK-NEXT: %[[F:.*]] = dtf.fused(%[[MM]], %[[B:.*]]) {kernel = 0 : i64} : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<?x3xf32>, %[[A1:.*]]: tensor<3xf32>):
// CHECK-NEXT:   %[[S:.*]] = dtf.add %[[A0]], %[[A1]]
// CHECK-NEXT:   %[[R:.*]] = dtf.relu %[[S]]
// CHECK-NEXT:   dtf.yield %[[R]] : tensor<?x3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @dense(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  %mm = dtf.matmul %x, %w : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  %y = dtf.add %mm, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %r = dtf.relu %y : tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}

// -----

// A value used after the region is one of its results; the scalar joins,
// and so does the sum of everything (a reduction to one element).
// CHECK-LABEL: func.func @two_results
// CHECK: %[[F:[0-9]+]]:2 = dtf.fused(%{{.*}}, %{{.*}}) {kernel = 0 : i64} : (tensor<2x5xf32>, tensor<f32>) -> (tensor<2x5xf32>, tensor<f32>)
// CHECK: dtf.mul
// CHECK: dtf.exp
// CHECK: dtf.sub
// CHECK: dtf.sum
// CHECK: dtf.yield
// CHECK: return %[[F]]#1, %[[F]]#0
func.func @two_results(%x: tensor<2x5xf32>, %s: tensor<f32>) -> (tensor<f32>, tensor<2x5xf32>) {
  %m = dtf.mul %x, %s : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
  %e = dtf.exp %m : tensor<2x5xf32>
  %d = dtf.sub %e, %m : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %t = dtf.sum %m : tensor<2x5xf32> -> tensor<f32>
  return %t, %d : tensor<f32>, tensor<2x5xf32>
}

// -----

// An op outside the group that uses its value closes it: the chain after the
// sum starts a second region, and kernels are numbered in order.
// CHECK-LABEL: func.func @closed
// CHECK: dtf.fused{{.*}}kernel = 0
// CHECK: dtf.sum
// CHECK: dtf.fused{{.*}}kernel = 1
func.func @closed(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<f32>, tensor<8xf32>) {
  %a = dtf.add %x, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %b = dtf.tanh %a : tensor<8xf32>
  %s = dtf.sum %b : tensor<8xf32> -> tensor<f32>
  %c = dtf.mul %b, %s : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %d = dtf.sigmoid %c : tensor<8xf32>
  return %s, %d : tensor<f32>, tensor<8xf32>
}

// -----

// Not fused: a single op, integer division, a [B,1,4] operand against
// [B,3,4] (no flat index reaches it: i, 0, i mod n and i / n do not), and
// ops over a different shape than their neighbour's.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: dtf.fused
// CHECK: return
func.func @not_fused(%x: tensor<?x4xi32>, %y: tensor<?x4xi32>, %c: tensor<?x1x4xf32>, %f: tensor<?x3x4xf32>) -> (tensor<?x4xi32>, tensor<?x3x4xf32>) {
  %q = dtf.div %x, %y : (tensor<?x4xi32>, tensor<?x4xi32>) -> tensor<?x4xi32>
  %n = dtf.neg %q : tensor<?x4xi32>
  %m = dtf.mul %f, %c : (tensor<?x3x4xf32>, tensor<?x1x4xf32>) -> tensor<?x3x4xf32>
  %r = dtf.relu %m : tensor<?x3x4xf32>
  return %n, %r : tensor<?x4xi32>, tensor<?x3x4xf32>
}

// -----

// A row statistic [B,1] against [B,4] joins as an input read at i / 4 (KernelParam
// meaning "prefix:4").
// CHECK-LABEL: func.func @row_statistic
// CHECK: dtf.fused(%{{.*}}, %{{.*}}) {kernel = 0 : i64} : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
// CHECK: dtf.mul
// CHECK-NEXT: dtf.relu
func.func @row_statistic(%c: tensor<?x1xf32>, %f: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %m = dtf.mul %f, %c : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %r = dtf.relu %m : tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// -----

// Compare, select and cast fuse across element types; the relu gradient too.
// CHECK-LABEL: func.func @mixed
// CHECK: dtf.fused
// CHECK: dtf.compare gt
// CHECK: dtf.select
// CHECK: dtf.relu_grad
// CHECK: dtf.cast
// CHECK: dtf.yield
// CHECK-NOT: dtf.fused
func.func @mixed(%x: tensor<?x4xf32>, %dy: tensor<?x4xf32>, %z: tensor<f32>) -> tensor<?x4xf64> {
  %c = dtf.compare gt, %x, %z : (tensor<?x4xf32>, tensor<f32>) -> tensor<?x4xi1>
  %s = dtf.select %c, %x, %dy : (tensor<?x4xi1>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %g = dtf.relu_grad %dy, %s : tensor<?x4xf32>
  %d = dtf.cast %g : tensor<?x4xf32> to tensor<?x4xf64>
  return %d : tensor<?x4xf64>
}

// -----

// A region runs on one device: ops placed on different devices stay apart,
// and the fused op keeps its ops' device.
// CHECK-LABEL: func.func @devices
// CHECK: dtf.fused{{.*}}dtf.device = "/job:worker/task:0"{{.*}}kernel = 0
// CHECK: dtf.fused{{.*}}dtf.device = "/job:worker/task:1"{{.*}}kernel = 1
func.func @devices(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %a = dtf.add %x, %y {dtf.device = "/job:worker/task:0"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %b = dtf.relu %a {dtf.device = "/job:worker/task:0"} : tensor<8xf32>
  %c = dtf.mul %b, %y {dtf.device = "/job:worker/task:1"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %d = dtf.tanh %c {dtf.device = "/job:worker/task:1"} : tensor<8xf32>
  return %d : tensor<8xf32>
}
