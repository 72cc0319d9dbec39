// dtf-fused-to-loops: each dtf.fused region becomes a C ABI function whose
// body loops over [begin, end) on scalars (scf.parallel; with a bias, rows
// of the bias's size, the bias read at i - row start); a scalar is read at 0,
// and bools are stored as bytes.
// RUN: dtf-opt %s --dtf-fused-to-loops | FileCheck %s

// CHECK-LABEL: func.func @dtf_fused_0
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[BEGIN:.*]]: i64, %[[END:.*]]: i64)
// CHECK-COUNT-3: llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// A bias of 3: rows of 3 over [begin, end), the bias read at i - row start.
// CHECK: %[[C3:.*]] = arith.constant 3 : i64
// CHECK: %[[FIRST:.*]] = arith.divsi %[[BEGIN]], %[[C3]] : i64
// CHECK: scf.for %[[R:.*]] = {{.*}} {
// CHECK: %[[ROW:.*]] = arith.index_cast %[[R]] : index to i64
// CHECK: %[[START:.*]] = arith.muli %[[ROW]], %[[C3]] : i64
// CHECK: %[[LO:.*]] = arith.maxsi %[[BEGIN]], %[[START]] : i64
// CHECK: arith.minsi %[[END]],
// CHECK: scf.parallel (%[[IV:.*]]) =
// CHECK: %[[I:.*]] = arith.index_cast %[[IV]] : index to i64
// CHECK: llvm.getelementptr %{{.*}}[%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: %[[J:.*]] = arith.subi %[[I]], %[[START]] : i64
// CHECK: llvm.getelementptr %{{.*}}[%[[J]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: arith.addf
// relu: x < 0 ? 0 : x
// CHECK: arith.cmpf olt
// CHECK: arith.select
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr
func.func @dense(%x: tensor<?x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  %r = dtf.fused(%x, %b) {kernel = 0 : i64} : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32> {
  ^bb0(%a: tensor<?x3xf32>, %c: tensor<3xf32>):
    %s = dtf.add %a, %c : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
    %y = dtf.relu %s : tensor<?x3xf32>
    dtf.yield %y : tensor<?x3xf32>
  }
  return %r : tensor<?x3xf32>
}

// CHECK-LABEL: func.func @dtf_fused_1
// The scalar is read at index 0.
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK: llvm.getelementptr %{{.*}}[%[[ZERO]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// maximum propagates NaN: (a > b || a != a) ? a : b
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf uno
// CHECK: arith.ori
// CHECK: arith.select
// CHECK: arith.cmpf oge
// f32 -> i32 saturates and sends NaN to 0
// CHECK: arith.fptosi
// CHECK: arith.cmpf olt
// CHECK: arith.cmpf oge
// CHECK: arith.cmpf uno
// the outputs at the end: the i1 stored as a byte
// CHECK: arith.extui %{{.*}} : i1 to i8
// CHECK: llvm.store %{{.*}}, %{{.*}} : i8, !llvm.ptr
// CHECK: llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr
func.func @mixed(%x: tensor<5xf32>, %s: tensor<f32>) -> (tensor<5xi1>, tensor<5xi32>) {
  %r:2 = dtf.fused(%x, %s) {kernel = 1 : i64} : (tensor<5xf32>, tensor<f32>) -> (tensor<5xi1>, tensor<5xi32>) {
  ^bb0(%a: tensor<5xf32>, %c: tensor<f32>):
    %m = dtf.maximum %a, %c : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
    %k = dtf.compare ge, %m, %a : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
    %i = dtf.cast %m : tensor<5xf32> to tensor<5xi32>
    dtf.yield %k, %i : tensor<5xi1>, tensor<5xi32>
  }
  return %r#0, %r#1 : tensor<5xi1>, tensor<5xi32>
}

// A row statistic [B,1] against [B,4] (a "prefix" input) is read at i / 4.
// CHECK-LABEL: func.func @dtf_fused_7
// CHECK: %[[C4:.*]] = arith.constant 4 : i64
// CHECK: arith.divsi %{{.*}}, %[[C4]] : i64
func.func @prefix(%x: tensor<?x4xf32>, %m: tensor<?x1xf32>) -> tensor<?x4xf32> {
  %r = dtf.fused(%x, %m) {kernel = 7 : i64} : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32> {
  ^bb0(%a: tensor<?x4xf32>, %b: tensor<?x1xf32>):
    %s = dtf.sub %a, %b : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
    %y = dtf.relu %s : tensor<?x4xf32>
    dtf.yield %y : tensor<?x4xf32>
  }
  return %r : tensor<?x4xf32>
}
