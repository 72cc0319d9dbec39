// dtf-fuse and the math ops of issue 36: erf, floor, ceil, round, abs, float
// floor_mod and bucketize join a region; integer floor_mod stays op by op
// (its kernel reports a zero divisor, which a generated kernel cannot).
// RUN: dtf-opt %s --dtf-fuse --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @float_chain
// CHECK: dtf.fused(
// CHECK-NEXT: ^bb0(
// CHECK-NEXT:   dtf.erf
// CHECK-NEXT:   dtf.floor
// CHECK-NEXT:   dtf.ceil
// CHECK-NEXT:   dtf.round
// CHECK-NEXT:   dtf.abs
// CHECK-NEXT:   dtf.floor_mod
// CHECK-NEXT:   dtf.bucketize
// CHECK-NEXT:   dtf.yield
func.func @float_chain(%x: tensor<?x4xf32>, %y: tensor<f32>) -> tensor<?x4xi32> {
  %0 = dtf.erf %x : tensor<?x4xf32>
  %1 = dtf.floor %0 : tensor<?x4xf32>
  %2 = dtf.ceil %1 : tensor<?x4xf32>
  %3 = dtf.round %2 : tensor<?x4xf32>
  %4 = dtf.abs %3 : tensor<?x4xf32>
  %5 = dtf.floor_mod %4, %y : (tensor<?x4xf32>, tensor<f32>) -> tensor<?x4xf32>
  %6 = dtf.bucketize %5 boundaries [0.0, 1.0] : tensor<?x4xf32> -> tensor<?x4xi32>
  return %6 : tensor<?x4xi32>
}

// -----

// CHECK-LABEL: func.func @integer_floor_mod
// CHECK: %[[A:.*]] = dtf.fused
// CHECK: dtf.abs
// CHECK: dtf.yield
// CHECK: %[[M:.*]] = dtf.floor_mod %[[A]], %{{.*}} : (tensor<?xi32>, tensor<i32>) -> tensor<?xi32>
// CHECK: dtf.fused(%[[M]]
// CHECK: dtf.abs
func.func @integer_floor_mod(%x: tensor<?xi32>, %y: tensor<i32>) -> tensor<?xi32> {
  %0 = dtf.abs %x : tensor<?xi32>
  %1 = dtf.neg %0 : tensor<?xi32>
  %2 = dtf.floor_mod %1, %y : (tensor<?xi32>, tensor<i32>) -> tensor<?xi32>
  %3 = dtf.abs %2 : tensor<?xi32>
  %4 = dtf.neg %3 : tensor<?xi32>
  return %4 : tensor<?xi32>
}
