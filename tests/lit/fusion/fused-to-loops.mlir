// dtf-fused-to-loops: each dtf.fused region becomes a C ABI function whose
// body is one scf.parallel loop over [begin, end) on scalars; a bias input is
// read at i mod its size, a scalar at 0, and bools are stored as bytes.
// RUN: dtf-opt %s --dtf-fused-to-loops | FileCheck %s

// CHECK-LABEL: func.func @dtf_fused_0
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[BEGIN:.*]]: i64, %[[END:.*]]: i64)
// CHECK-COUNT-3: llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: %[[LO:.*]] = arith.index_cast %[[BEGIN]] : i64 to index
// CHECK: %[[HI:.*]] = arith.index_cast %[[END]] : i64 to index
// CHECK: scf.parallel (%[[IV:.*]]) = (%[[LO]]) to (%[[HI]])
// CHECK: %[[I:.*]] = arith.index_cast %[[IV]] : index to i64
// CHECK: llvm.getelementptr %{{.*}}[%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: %[[C3:.*]] = arith.constant 3 : i64
// CHECK: %[[J:.*]] = arith.remsi %[[I]], %[[C3]] : i64
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
