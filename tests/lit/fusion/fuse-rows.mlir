// dtf-fuse with rows (the default): each softmax, log_softmax, their
// gradients, softmax cross-entropy (dense or sparse labels), its gradients
// and argmax along the last axis becomes a dtf.fused region of its own (a
// row kernel); along another axis it stays op by op, and with rows=false
// (dtfc --fuse-rows=off) every one does. Its CPU kernel loops over rows
// (scf.parallel) with an inner loop over the row (scf.for): the maximum, the
// sum of exponentials, then the outputs; exp and log are libm's calls, as in
// the op-by-op kernels (not the polynomials of other regions).
// RUN: dtf-opt %s --dtf-fuse --split-input-file | FileCheck %s
// RUN: dtf-opt %s --dtf-fuse=rows=false --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: dtf-opt %s --dtf-fuse --split-input-file --dtf-fused-to-loops | FileCheck %s --check-prefix=LOOPS
// OFF-NOT: dtf.fused

func.func @train_step(%x: tensor<?x10xf32>, %y: tensor<?xi32>, %d: tensor<?xf32>) -> (tensor<?xf32>, tensor<?x10xf32>, tensor<?xi64>) {
  %0 = dtf.sparse_softmax_cross_entropy %x, %y : (tensor<?x10xf32>, tensor<?xi32>) -> tensor<?xf32>
  %1 = dtf.sparse_softmax_cross_entropy_grad %d, %x, %y : tensor<?xf32>, tensor<?x10xf32>, tensor<?xi32>
  %2 = dtf.argmax %x axis 1 : tensor<?x10xf32> -> tensor<?xi64>
  return %0, %1, %2 : tensor<?xf32>, tensor<?x10xf32>, tensor<?xi64>
}
// CHECK-LABEL: func.func @train_step
// CHECK: dtf.fused(%{{.*}}, %{{.*}}) {kernel = 0 : i64} : (tensor<?x10xf32>, tensor<?xi32>) -> tensor<?xf32> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<?x10xf32>, %[[Y:.*]]: tensor<?xi32>):
// CHECK-NEXT: dtf.sparse_softmax_cross_entropy %[[X]], %[[Y]]
// CHECK-NEXT: dtf.yield
// CHECK: dtf.fused(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = 1 : i64}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.sparse_softmax_cross_entropy_grad
// CHECK: dtf.fused(%{{.*}}) {kernel = 2 : i64} : (tensor<?x10xf32>) -> tensor<?xi64>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.argmax
// OFF: dtf.sparse_softmax_cross_entropy %
// OFF: dtf.argmax
// The loss: rows in parallel; max, sum of exp, the label checked against
// [0, C) (NaN outside), log.
// LOOPS-LABEL: func.func @dtf_fused_0
// LOOPS: scf.parallel
// LOOPS: scf.for
// LOOPS: arith.cmpf olt
// LOOPS: scf.for
// LOOPS: func.call @expf(
// LOOPS: arith.cmpi sge
// LOOPS: arith.cmpi slt
// LOOPS: func.call @logf(
// LOOPS: 0x7FC00000
// LOOPS: llvm.store
// The gradient: dloss / sum, then one pass writing exp(x - max) * scale
// minus dloss at the label.
// LOOPS-LABEL: func.func @dtf_fused_1
// LOOPS: scf.parallel
// LOOPS: arith.divf
// LOOPS: scf.for
// LOOPS: func.call @expf(
// LOOPS: arith.cmpi eq
// LOOPS: llvm.store
// argmax: the first largest (a strict ogt), from element 1.
// LOOPS-LABEL: func.func @dtf_fused_2
// LOOPS: scf.for
// LOOPS: arith.cmpf ogt
// LOOPS: llvm.store %{{.*}} : i64

// -----

// softmax, log_softmax, their gradients and the dense cross-entropy with its
// gradient, on f64 too; a softmax along axis 0 of a rank-2 tensor stays.
func.func @eval(%x: tensor<4x6xf64>, %l: tensor<4x6xf64>, %dl: tensor<4xf64>, %z: tensor<4x6xf32>) -> (tensor<4x6xf64>, tensor<4x6xf64>, tensor<4x6xf64>, tensor<4x6xf64>, tensor<4xf64>, tensor<4x6xf64>, tensor<4x6xf32>) {
  %0 = dtf.softmax %x axis -1 : tensor<4x6xf64>
  %1 = dtf.log_softmax %x axis 1 : tensor<4x6xf64>
  %2 = dtf.softmax_grad %l, %0 axis -1 : tensor<4x6xf64>
  %3 = dtf.log_softmax_grad %l, %1 axis 1 : tensor<4x6xf64>
  %4 = dtf.softmax_cross_entropy %x, %l : (tensor<4x6xf64>, tensor<4x6xf64>) -> tensor<4xf64>
  %5 = dtf.softmax_cross_entropy_grad %dl, %x, %l : tensor<4xf64>, tensor<4x6xf64>, tensor<4x6xf64>
  %6 = dtf.softmax %z axis 0 : tensor<4x6xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4x6xf64>, tensor<4x6xf64>, tensor<4x6xf64>, tensor<4x6xf64>, tensor<4xf64>, tensor<4x6xf64>, tensor<4x6xf32>
}
// CHECK-LABEL: func.func @eval
// CHECK-COUNT-6: dtf.fused
// CHECK-NOT: dtf.fused
// CHECK: dtf.softmax %{{.*}} axis 0
// OFF: dtf.softmax %{{.*}} axis -1
// LOOPS-LABEL: func.func @dtf_fused_0
// LOOPS: func.call @exp(
// LOOPS: arith.divf
// LOOPS: arith.mulf
// The gradients and the dense loss: GCC's elementwise contractions as fused
// multiply-adds; a sum over the row multiplies and adds where GCC's vector
// loop does (its first C - C mod 4 elements in f64: 4 of 6) and contracts
// its scalar remainder.
// LOOPS-LABEL: func.func @dtf_fused_2
// LOOPS: arith.remsi %{{.*}}, %c4_i64
// LOOPS: arith.mulf
// LOOPS-NEXT: arith.addf
// LOOPS-NEXT: llvm.intr.fma
// LOOPS-NEXT: arith.cmpi slt
// LOOPS-NEXT: arith.select
// LOOPS-LABEL: func.func @dtf_fused_3
// LOOPS: func.call @exp(
// LOOPS: llvm.intr.fma
// LOOPS-LABEL: func.func @dtf_fused_4
// LOOPS: func.call @log(
// LOOPS: arith.mulf
// LOOPS-NEXT: arith.addf
// LOOPS-NEXT: llvm.intr.fma
// LOOPS-LABEL: func.func @dtf_fused_5
// LOOPS: llvm.intr.fma
