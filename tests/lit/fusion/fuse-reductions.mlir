// dtf-fuse with reductions: a sum, mean, max or sum_to_shape over one
// contiguous run of axes, or over every axis, joins the region of its operand
// and ends it (its result is an output, never read inside); reduce_grad over
// leading axes is elementwise (dy a bias or a scalar). A reduction over axes
// that are not contiguous, on integers, or of a value no region computes
// stays a library op.
// With reductions=all (dtfc --fuse-reductions=all) every such reduction;
// with rows (the default) only those over the last axes (or every axis): a
// column sum (bias gradient, batch statistic) stays a library op.
// RUN: dtf-opt %s --dtf-fuse=reductions=all --split-input-file | FileCheck %s
// RUN: dtf-opt %s --dtf-fuse=reductions=all --split-input-file --dtf-fused-to-loops | FileCheck %s --check-prefix=LOOPS
// RUN: dtf-opt %s --dtf-fuse=reductions=rows --split-input-file | FileCheck %s --check-prefix=ROWS
// RUN: dtf-opt %s --dtf-fuse --split-input-file | FileCheck %s --check-prefix=ROWS
// RUN: not dtf-opt %s --dtf-fuse=reductions=some --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: reductions must be all, rows or none, not 'some'
// ROWS-LABEL: func.func @bias_grad
// ROWS-NOT: dtf.fused
// ROWS: dtf.sum_to_shape
// ROWS-LABEL: func.func @variance
// ROWS: dtf.mean {{.*}} : tensor<?x4x4x8xf32> -> tensor<8xf32>
// ROWS-LABEL: func.func @rows
// ROWS: dtf.sum {{.*}} axes [1] keep_dims
// ROWS-NEXT: dtf.yield

// A bias gradient: relu_grad and the sum over the batch, one region with both
// results (the elementwise one first).
// CHECK-LABEL: func.func @bias_grad
// CHECK: %[[F:.*]]:2 = dtf.fused(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = 0 : i64} : (tensor<?x3xf32>, tensor<?x3xf32>, tensor<3xf32>) -> (tensor<?x3xf32>, tensor<3xf32>)
// CHECK: dtf.relu_grad
// CHECK-NEXT: dtf.sum_to_shape
// CHECK-NEXT: dtf.yield
// CHECK: return %[[F]]#0, %[[F]]#1
// scalars holds elements, reduced, inner. N == 1 (rows): one iteration per
// output, 16 partial sums, then the rest. Else (columns): per row of outputs
// (scf.for), a first pass storing reduced row 0, then (scf.for over the
// reduced rows) one contiguous pass each that adds its row to the outputs in
// memory: the loop the vectorizer takes (column-sums-vectorize.mlir).
// LOOPS-LABEL: func.func @dtf_fused_0
// LOOPS-COUNT-3: llvm.getelementptr %{{.*}}[{{[0-2]}}] : (!llvm.ptr) -> !llvm.ptr, i64
// LOOPS: scf.if
// LOOPS: scf.parallel
// LOOPS: scf.if
// LOOPS: scf.for {{.*}} iter_args
// LOOPS: scf.for {{.*}} iter_args
// LOOPS: } else {
// LOOPS: scf.for
// LOOPS: scf.if
// LOOPS: scf.parallel
// LOOPS: } else {
// LOOPS: scf.parallel
// LOOPS: scf.for %[[R:.*]] = {{.*}} {
// LOOPS: scf.parallel (%[[T:.*]]) =
// LOOPS-NEXT: %[[TI:.*]] = arith.index_cast %[[T]] : index to i64
// LOOPS: %[[OUT:.*]] = llvm.getelementptr %{{.*}}[%[[TI]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// LOOPS-NEXT: %[[OLD:.*]] = llvm.load %[[OUT]] : !llvm.ptr -> f32
// LOOPS-NEXT: %[[NEW:.*]] = arith.addf %[[OLD]], %{{.*}} : f32
// LOOPS-NEXT: llvm.store %[[NEW]], %[[OUT]] : f32, !llvm.ptr
func.func @bias_grad(%dy: tensor<?x3xf32>, %x: tensor<?x3xf32>, %b: tensor<3xf32>) -> (tensor<?x3xf32>, tensor<3xf32>) {
  %g = dtf.relu_grad %dy, %x : tensor<?x3xf32>
  %db = dtf.sum_to_shape %g, %b : tensor<?x3xf32> to tensor<3xf32>
  return %g, %db : tensor<?x3xf32>, tensor<3xf32>
}

// -----

// Batch statistics: (x - mean)^2 and its mean over [B, H, W] in one region;
// the op that reads the mean is outside it.
// CHECK-LABEL: func.func @variance
// CHECK: %[[F:.*]]:2 = dtf.fused(%{{.*}}, %{{.*}}) {kernel = 0 : i64} : (tensor<?x4x4x8xf32>, tensor<8xf32>) -> (tensor<?x4x4x8xf32>, tensor<8xf32>)
// CHECK: dtf.sub
// CHECK-NEXT: dtf.mul
// CHECK-NEXT: dtf.mean {{.*}} axes [0, 1, 2]
// CHECK-NEXT: dtf.yield
// CHECK: dtf.add %[[F]]#1
func.func @variance(%x: tensor<?x4x4x8xf32>, %m: tensor<8xf32>, %eps: tensor<f32>) -> (tensor<?x4x4x8xf32>, tensor<8xf32>) {
  %d = dtf.sub %x, %m : (tensor<?x4x4x8xf32>, tensor<8xf32>) -> tensor<?x4x4x8xf32>
  %s = dtf.mul %d, %d : (tensor<?x4x4x8xf32>, tensor<?x4x4x8xf32>) -> tensor<?x4x4x8xf32>
  %v = dtf.mean %s axes [0, 1, 2] : tensor<?x4x4x8xf32> -> tensor<8xf32>
  %ve = dtf.add %v, %eps : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %d, %ve : tensor<?x4x4x8xf32>, tensor<8xf32>
}

// -----

// A row reduction over the last axis (keep_dims: [B, 1]); an elementwise op
// that reads the reduction's result cannot join its region.
// CHECK-LABEL: func.func @rows
// CHECK: %[[F:.*]]:2 = dtf.fused
// CHECK: dtf.exp
// CHECK-NEXT: dtf.neg
// CHECK-NEXT: dtf.neg
// CHECK-NEXT: dtf.sum {{.*}} axes [1] keep_dims
// CHECK-NEXT: dtf.yield
// CHECK: dtf.div %[[F]]#0, %[[F]]#1
func.func @rows(%x: tensor<?x10xf32>) -> tensor<?x10xf32> {
  %e = dtf.exp %x : tensor<?x10xf32>
  %n = dtf.neg %e : tensor<?x10xf32>
  %z = dtf.neg %n : tensor<?x10xf32>
  %s = dtf.sum %z axes [1] keep_dims : tensor<?x10xf32> -> tensor<?x1xf32>
  %p = dtf.div %z, %s : (tensor<?x10xf32>, tensor<?x1xf32>) -> tensor<?x10xf32>
  return %p : tensor<?x10xf32>
}

// -----

// The gradient of a mean over the leading axes is elementwise: dy read as a
// bias and scaled by 1 / count.
// CHECK-LABEL: func.func @mean_grad
// CHECK: dtf.fused
// CHECK: dtf.reduce_grad {{.*}} axes [0, 1, 2] mean
// CHECK-NEXT: dtf.mul
// CHECK-NEXT: dtf.yield
func.func @mean_grad(%dy: tensor<8xf32>, %x: tensor<?x4x4x8xf32>) -> tensor<?x4x4x8xf32> {
  %g = dtf.reduce_grad %dy, %x axes [0, 1, 2] mean : tensor<8xf32> to tensor<?x4x4x8xf32>
  %h = dtf.mul %g, %x : (tensor<?x4x4x8xf32>, tensor<?x4x4x8xf32>) -> tensor<?x4x4x8xf32>
  return %h : tensor<?x4x4x8xf32>
}

// -----

// A sum of everything (one element) joins (reduce:rrr); not fused: axes
// that are not one run, an integer sum, and a mean of a value no region
// computes.
// CHECK-LABEL: func.func @not_fused
// CHECK: dtf.fused(%arg0) {kernel = 0 : i64} : (tensor<?x3x5xf32>) -> tensor<f32>
// CHECK: dtf.tanh
// CHECK-NEXT: dtf.sum
// CHECK-NEXT: dtf.yield
// CHECK: %[[B:.*]] = dtf.fused
// CHECK: dtf.sum %[[B]] axes [0, 2]
// CHECK: %[[C:.*]] = dtf.fused
// CHECK: dtf.sum %[[C]] axes [0] : tensor<?x3xi32>
// CHECK: dtf.mean %arg2
func.func @not_fused(%x: tensor<?x3x5xf32>, %i: tensor<?x3xi32>, %y: tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<3xi32>, tensor<3xf32>) {
  %e = dtf.exp %x : tensor<?x3x5xf32>
  %t = dtf.tanh %e : tensor<?x3x5xf32>
  %all = dtf.sum %t : tensor<?x3x5xf32> -> tensor<f32>
  %e2 = dtf.exp %x : tensor<?x3x5xf32>
  %t2 = dtf.tanh %e2 : tensor<?x3x5xf32>
  %gap = dtf.sum %t2 axes [0, 2] : tensor<?x3x5xf32> -> tensor<3xf32>
  %n = dtf.neg %i : tensor<?x3xi32>
  %a = dtf.mul %n, %n : (tensor<?x3xi32>, tensor<?x3xi32>) -> tensor<?x3xi32>
  %si = dtf.sum %a axes [0] : tensor<?x3xi32> -> tensor<3xi32>
  %m = dtf.mean %y axes [0] : tensor<?x3xf32> -> tensor<3xf32>
  return %all, %gap, %si, %m : tensor<f32>, tensor<3xf32>, tensor<3xi32>, tensor<3xf32>
}

// -----

// dtf.max joins the region of its operand like a sum (reduce:kr here), and a
// mean of everything (reduce:rr) the region of its own operand. The max's
// loop combines as the op-by-op kernel: (v > acc || v != v) ? v : acc, from
// -inf.
// CHECK-LABEL: func.func @max_and_whole
// CHECK: dtf.fused(%{{.*}}) {kernel = 0 : i64} : (tensor<?x10xf32>) -> tensor<?xf32>
// CHECK: dtf.relu
// CHECK-NEXT: dtf.max {{.*}} axes [1]
// CHECK-NEXT: dtf.yield
// CHECK: dtf.fused(%{{.*}}) {kernel = 1 : i64} : (tensor<?x10xf32>) -> tensor<f32>
// CHECK: dtf.mul
// CHECK-NEXT: dtf.mean
// CHECK-NEXT: dtf.yield
// ROWS-LABEL: func.func @max_and_whole
// ROWS-COUNT-2: dtf.fused
// LOOPS-LABEL: func.func @dtf_fused_0
// LOOPS: arith.constant 0xFF800000 : f32
// LOOPS: scf.for {{.*}} iter_args
// LOOPS: %[[G:.*]] = arith.cmpf ogt, %[[V:.*]], %[[A:.*]] : f32
// LOOPS-NEXT: %[[U:.*]] = arith.cmpf uno, %[[V]], %[[V]] : f32
// LOOPS-NEXT: %[[T:.*]] = arith.ori %[[G]], %[[U]] : i1
// LOOPS-NEXT: arith.select %[[T]], %[[V]], %[[A]] : f32
func.func @max_and_whole(%x: tensor<?x10xf32>) -> (tensor<?xf32>, tensor<f32>) {
  %r = dtf.relu %x : tensor<?x10xf32>
  %m = dtf.max %r axes [1] : tensor<?x10xf32> -> tensor<?xf32>
  %s = dtf.mul %x, %x : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?x10xf32>
  %e = dtf.mean %s : tensor<?x10xf32> -> tensor<f32>
  return %m, %e : tensor<?xf32>, tensor<f32>
}
