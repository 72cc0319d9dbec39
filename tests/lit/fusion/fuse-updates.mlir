// dtf-fuse with updates (the default): each dense optimizer update becomes a
// dtf.fused region of its own with no results, the update alone inside (it
// still names its variable and slots: the kernel writes them in place). An
// update the generated code does not know (centered RMSProp, lazy, a sparse
// update) stays as it is; with updates=false (dtfc --fuse-updates=off) every
// update does.
// RUN: dtf-opt %s --dtf-fuse --split-input-file | FileCheck %s
// RUN: dtf-opt %s --dtf-fuse=updates=false --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: dtf-opt %s --dtf-fuse --split-input-file --dtf-fused-to-loops | FileCheck %s --check-prefix=LOOPS
// OFF-NOT: dtf.fused

module {
  dtf.variable @W : tensor<3x5xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @"W/m" : tensor<3x5xf32> = #dtf.init<zeros> {dtf.slot_of = @W}
  dtf.variable @"W/v" : tensor<3x5xf32> = #dtf.init<zeros> {dtf.slot_of = @W}
  func.func @train_step(%g: tensor<3x5xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
    dtf.apply_adam @W, @"W/m", @"W/v", %g, %lr, %step beta1 9.000000e-01 beta2 9.990000e-01 epsilon 1.000000e-08 : tensor<3x5xf32>, tensor<f32>, tensor<i64>
    return
  }
}
// CHECK-LABEL: func.func @train_step
// CHECK: dtf.fused(%{{.*}}, %{{.*}}, %{{.*}}) {kernel = 0 : i64} : (tensor<3x5xf32>, tensor<f32>, tensor<i64>) -> () {
// CHECK-NEXT: ^bb0(%[[G:.*]]: tensor<3x5xf32>, %[[LR:.*]]: tensor<f32>, %[[S:.*]]: tensor<i64>):
// CHECK-NEXT: dtf.apply_adam @W, @"W/m", @"W/v", %[[G]], %[[LR]], %[[S]]
// CHECK-NEXT: dtf.yield
// OFF: dtf.apply_adam @W
// The kernel: buffers var, m, v, grad, lr, step; the bias correction's pow
// before the loop; fused multiply-adds for m and v.
// LOOPS-LABEL: func.func @dtf_fused_0
// LOOPS-COUNT-6: llvm.getelementptr %{{.*}}[{{[0-5]}}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// LOOPS: math.powf
// LOOPS: math.powf
// LOOPS: scf.parallel
// LOOPS: llvm.intr.fma
// LOOPS: llvm.intr.fma
// LOOPS: llvm.intr.fma
// LOOPS: math.sqrt
// LOOPS-COUNT-3: llvm.store

// -----

// SGD, momentum (nesterov too), Adagrad and RMSProp each get a region; the
// centered RMSProp (an attribute the generated code does not know) does not.
module {
  dtf.variable @A : tensor<7xf64> = #dtf.init<zeros> {trainable}
  dtf.variable @B : tensor<7xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @"B/acc" : tensor<7xf32> = #dtf.init<zeros> {dtf.slot_of = @B}
  dtf.variable @C : tensor<7xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @"C/ms" : tensor<7xf32> = #dtf.init<zeros> {dtf.slot_of = @C}
  dtf.variable @"C/mom" : tensor<7xf32> = #dtf.init<zeros> {dtf.slot_of = @C}
  func.func @train_step(%a: tensor<7xf64>, %b: tensor<7xf32>, %lr: tensor<f32>, %lr64: tensor<f64>) {
    dtf.apply_sgd @A, %a, %lr64 : tensor<7xf64>, tensor<f64>
    dtf.apply_momentum @B, @"B/acc", %b, %lr momentum 9.000000e-01 nesterov : tensor<7xf32>, tensor<f32>
    dtf.apply_adagrad @B, @"B/acc", %b, %lr : tensor<7xf32>, tensor<f32>
    dtf.apply_rmsprop @C, @"C/ms", @"C/mom", %b, %lr decay 9.000000e-01 momentum 0.000000e+00 epsilon 1.000000e-10 : tensor<7xf32>, tensor<f32>
    dtf.apply_rmsprop @C, @"C/ms", @"C/mom", %b, %lr decay 9.000000e-01 momentum 0.000000e+00 epsilon 1.000000e-10 {centered} : tensor<7xf32>, tensor<f32>
    return
  }
}
// CHECK-LABEL: func.func @train_step
// CHECK: dtf.fused{{.*}}kernel = 0
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.apply_sgd @A
// CHECK: dtf.fused{{.*}}kernel = 1
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.apply_momentum @B, @"B/acc", {{.*}} nesterov
// CHECK: dtf.fused{{.*}}kernel = 2
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.apply_adagrad
// CHECK: dtf.fused{{.*}}kernel = 3
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.apply_rmsprop
// CHECK: dtf.yield
// CHECK-NEXT: }
// CHECK-NEXT: dtf.apply_rmsprop {{.*}} {centered}
// CHECK-NEXT: return
