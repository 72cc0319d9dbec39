// The math ops of issue 36 (erf, floor, ceil, round, abs, floor_mod,
// bucketize) parse, print, and parse again to the same text; the generic form
// round-trips too.
// RUN: dtf-opt %s | dtf-opt | FileCheck %s
// RUN: dtf-opt %s --mlir-print-op-generic | dtf-opt | FileCheck %s

// CHECK-LABEL: func.func @math
func.func @math(%a: tensor<?x10xf32>, %d: tensor<3xf64>, %i: tensor<?xi32>,
                %n: tensor<i32>, %l: tensor<4xi64>) {
  // CHECK: dtf.erf %{{.*}} : tensor<?x10xf32>
  %0 = dtf.erf %a : tensor<?x10xf32>
  // CHECK: dtf.floor %{{.*}} : tensor<?x10xf32>
  %1 = dtf.floor %a : tensor<?x10xf32>
  // CHECK: dtf.ceil %{{.*}} : tensor<3xf64>
  %2 = dtf.ceil %d : tensor<3xf64>
  // CHECK: dtf.round %{{.*}} : tensor<?x10xf32>
  %3 = dtf.round %a : tensor<?x10xf32>
  // CHECK: dtf.abs %{{.*}} : tensor<?xi32>
  %4 = dtf.abs %i : tensor<?xi32>
  // CHECK: dtf.abs %{{.*}} : tensor<3xf64>
  %5 = dtf.abs %d : tensor<3xf64>
  // CHECK: dtf.floor_mod %{{.*}}, %{{.*}} : (tensor<?xi32>, tensor<i32>) -> tensor<?xi32>
  %6 = dtf.floor_mod %i, %n : (tensor<?xi32>, tensor<i32>) -> tensor<?xi32>
  // CHECK: dtf.floor_mod %{{.*}}, %{{.*}} : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?x10xf32>
  %7 = dtf.floor_mod %a, %a : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?x10xf32>
  // CHECK: dtf.bucketize %{{.*}} boundaries [0.000000e+00, 1.000000e+01, 1.000000e+01, 1.000000e+02] : tensor<?x10xf32> -> tensor<?x10xi32>
  %8 = dtf.bucketize %a boundaries [0.0, 10.0, 10.0, 100.0] : tensor<?x10xf32> -> tensor<?x10xi32>
  // CHECK: dtf.bucketize %{{.*}} boundaries [-2.500000e+00] : tensor<4xi64> -> tensor<4xi32>
  %9 = dtf.bucketize %l boundaries [-2.5] : tensor<4xi64> -> tensor<4xi32>
  // CHECK: dtf.bucketize %{{.*}} boundaries [] : tensor<?xi32> -> tensor<?xi32>
  %10 = dtf.bucketize %i boundaries [] : tensor<?xi32> -> tensor<?xi32>
  return
}
