// dtf-fuse with dropout (the default): each dtf.dropout and dtf.dropout_grad
// on f32 or f64 becomes a dtf.fused region of its own (a dropout kernel);
// with dropout=false (dtfc --fuse-dropout=off) each stays op by op. Its CPU
// kernel is one scf.parallel over the elements: the key word (stream key,
// first element) loaded, SplitMix64's mix of key + (first + i + 1) * golden
// in i64 ops, the 24 high bits to f32 times 2^-24 compared (oge) with the
// rate in f32, then x * scale or 0 (runtime/kernels/cpu/Random.cpp).
// RUN: dtf-opt %s --dtf-fuse --split-input-file | FileCheck %s
// RUN: dtf-opt %s --dtf-fuse=dropout=false --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: dtf-opt %s --dtf-fuse --split-input-file --dtf-fused-to-loops | FileCheck %s --check-prefix=LOOPS
// OFF-NOT: dtf.fused

func.func @train_step(%x: tensor<?x10xf32>, %dy: tensor<?x3xf64>) -> (tensor<?x10xf32>, tensor<?x3xf64>) {
  %0 = dtf.dropout %x rate 2.500000e-01 {seed = 7 : i64} : tensor<?x10xf32>
  %1 = dtf.dropout_grad %dy rate 5.000000e-01 seed 3 : tensor<?x3xf64>
  return %0, %1 : tensor<?x10xf32>, tensor<?x3xf64>
}
// CHECK-LABEL: func.func @train_step
// CHECK: dtf.fused(%{{.*}}) {kernel = 0 : i64} : (tensor<?x10xf32>) -> tensor<?x10xf32> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<?x10xf32>):
// CHECK-NEXT: dtf.dropout %[[X]] rate 2.500000e-01 {seed = 7 : i64}
// CHECK-NEXT: dtf.yield
// CHECK: dtf.fused(%{{.*}}) {kernel = 1 : i64} : (tensor<?x3xf64>) -> tensor<?x3xf64> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.dropout_grad %{{.*}} rate 5.000000e-01 seed 3
// OFF: dtf.dropout %
// OFF: dtf.dropout_grad %
// LOOPS-LABEL: func.func @dtf_fused_0
// LOOPS: scf.parallel
// LOOPS: llvm.load %{{.*}} : !llvm.ptr -> i64
// LOOPS: llvm.load %{{.*}} : !llvm.ptr -> i64
// LOOPS: arith.muli
// LOOPS: arith.shrui
// LOOPS: arith.xori
// LOOPS: arith.uitofp %{{.*}} : i64 to f32
// LOOPS: arith.cmpf oge, %{{.*}}, %{{.*}} : f32
// LOOPS: arith.mulf %{{.*}}, %{{.*}} : f32
// LOOPS: arith.select
// LOOPS: llvm.store
// The f64 gradient: the same mask in f32, the product and zero in f64.
// LOOPS-LABEL: func.func @dtf_fused_1
// LOOPS: arith.cmpf oge, %{{.*}}, %{{.*}} : f32
// LOOPS: arith.mulf %{{.*}}, %{{.*}} : f64
// LOOPS: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f64
