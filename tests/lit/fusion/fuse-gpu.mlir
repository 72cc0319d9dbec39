// dtf-fuse on ops placed on a GPU: the GPU has no library kernel for an
// elementwise op or a reduction, so a region may hold a single op, a lone
// reduction (a bias gradient's column sum too, even with the default
// reductions=rows) starts its own region, and every region keeps its GPU.
// The same ops on the CPU stay library ops: one op is no region, a reduction
// starts none, and a column sum joins none by default.
// A reduction to one element is not a region (docs/kernels.md).
// RUN: dtf-opt %s --dtf-fuse --split-input-file | FileCheck %s
// RUN: dtf-opt %s --dtf-fuse --split-input-file --dtf-fused-to-loops | FileCheck %s --check-prefix=LOOPS
// RUN: dtf-opt %s --dtf-fuse=reductions=none --split-input-file | FileCheck %s --check-prefix=NONE

// A column sum (a bias gradient) joins the region of its operand even with
// the default reductions=rows.
// CHECK-LABEL: func.func @lone_ops_on_gpu
// CHECK: %[[G:.*]]:2 = dtf.fused(%{{.*}}, %{{.*}}, %{{.*}}) {dtf.device = "/device:GPU:0", kernel = 0 : i64} : (tensor<?x3xf32>, tensor<?x3xf32>, tensor<3xf32>) -> (tensor<?x3xf32>, tensor<3xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.relu_grad
// CHECK-NEXT: dtf.sum_to_shape
// CHECK-NEXT: dtf.yield
// A lone reduction of an argument: a region of its own.
// CHECK: dtf.fused(%{{.*}}) {dtf.device = "/job:worker/task:0/gpu:0", kernel = 1 : i64} : (tensor<?x3xf32>) -> tensor<?xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.mean {{.*}} axes [1]
// CHECK-NEXT: dtf.yield
// A lone elementwise op: a region of its own.
// CHECK: dtf.fused(%{{.*}}) {dtf.device = "/gpu:0", kernel = 2 : i64} : (tensor<?x3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtf.neg
// CHECK-NEXT: dtf.yield
// A reduction to one element stays a library op.
// CHECK: dtf.mean %{{.*}} {dtf.device = "/gpu:0"} : tensor<?x3xf32> -> tensor<f32>
// The lone mean's kernel loops over its outputs.
// LOOPS-LABEL: func.func @dtf_fused_1
// LOOPS: scf.parallel
// With no reductions at all, the lone elementwise op is still a region.
// NONE-LABEL: func.func @lone_ops_on_gpu
// NONE: dtf.fused
// NONE-NEXT: ^bb0
// NONE-NEXT: dtf.relu_grad
// NONE-NEXT: dtf.yield
// NONE: dtf.sum_to_shape {{.*}}dtf.device = "/device:GPU:0"
// NONE: dtf.mean {{.*}}dtf.device = "/job:worker/task:0/gpu:0"
func.func @lone_ops_on_gpu(%dy: tensor<?x3xf32>, %x: tensor<?x3xf32>, %b: tensor<3xf32>) -> (tensor<?x3xf32>, tensor<3xf32>, tensor<?xf32>, tensor<?x3xf32>, tensor<f32>) {
  %g = dtf.relu_grad %dy, %x {dtf.device = "/device:GPU:0"} : tensor<?x3xf32>
  %db = dtf.sum_to_shape %g, %b {dtf.device = "/device:GPU:0"} : tensor<?x3xf32> to tensor<3xf32>
  %m = dtf.mean %x axes [1] {dtf.device = "/job:worker/task:0/gpu:0"} : tensor<?x3xf32> -> tensor<?xf32>
  %n = dtf.neg %x {dtf.device = "/gpu:0"} : tensor<?x3xf32>
  %all = dtf.mean %x {dtf.device = "/gpu:0"} : tensor<?x3xf32> -> tensor<f32>
  return %g, %db, %m, %n, %all : tensor<?x3xf32>, tensor<3xf32>, tensor<?xf32>, tensor<?x3xf32>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @lone_ops_on_cpu
// CHECK-NOT: dtf.fused
// CHECK: dtf.relu_grad
// CHECK: dtf.sum_to_shape
// CHECK: dtf.mean
func.func @lone_ops_on_cpu(%dy: tensor<?x3xf32>, %x: tensor<?x3xf32>, %b: tensor<3xf32>) -> (tensor<?x3xf32>, tensor<3xf32>, tensor<?xf32>) {
  %g = dtf.relu_grad %dy, %x {dtf.device = "/cpu:0"} : tensor<?x3xf32>
  %db = dtf.sum_to_shape %dy, %b {dtf.device = "/cpu:0"} : tensor<?x3xf32> to tensor<3xf32>
  %m = dtf.mean %x axes [1] : tensor<?x3xf32> -> tensor<?xf32>
  return %g, %db, %m : tensor<?x3xf32>, tensor<3xf32>, tensor<?xf32>
}
