// Folding of the obvious cases: identities, constants, idempotence.
// RUN: dtf-opt %s --canonicalize --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @add_zero
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @add_zero(%x: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %zero = dtf.constant dense<0.0> : tensor<4x3xf32>
  %0 = dtf.add %x, %zero : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %1 = dtf.add %zero, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// Adding a zero that broadcasts x to a larger shape is not an identity.
// CHECK-LABEL: func.func @add_broadcast_zero_stays
// CHECK: dtf.add
func.func @add_broadcast_zero_stays(%x: tensor<3xf32>) -> tensor<4x3xf32> {
  %zero = dtf.constant dense<0.0> : tensor<4x3xf32>
  %0 = dtf.add %x, %zero : (tensor<3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// CHECK-LABEL: func.func @sub_mul_div_identities
// CHECK-SAME: (%[[X:.*]]: tensor<5xf32>)
// CHECK-NOT: dtf.sub
// CHECK-NOT: dtf.mul
// CHECK-NOT: dtf.div
// CHECK: return %[[X]], %[[X]], %[[X]]
func.func @sub_mul_div_identities(%x: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) {
  %zero = dtf.constant dense<0.0> : tensor<5xf32>
  %one = dtf.constant dense<1.0> : tensor<5xf32>
  %0 = dtf.sub %x, %zero : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %1 = dtf.mul %one, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %2 = dtf.div %x, %one : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  return %0, %1, %2 : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}

// -----

// CHECK-LABEL: func.func @constant_arithmetic
// CHECK-DAG: dtf.constant dense<[4.000000e+00, 6.000000e+00]> : tensor<2xf32>
// CHECK-DAG: dtf.constant dense<[3, 8]> : tensor<2xi32>
// CHECK-DAG: dtf.constant dense<-2> : tensor<2xi32>
// CHECK-NOT: dtf.add
// CHECK-NOT: dtf.mul
// CHECK-NOT: dtf.neg
func.func @constant_arithmetic() -> (tensor<2xf32>, tensor<2xi32>, tensor<2xi32>) {
  %a = dtf.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = dtf.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %0 = dtf.add %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %i = dtf.constant dense<[3, 4]> : tensor<2xi32>
  %j = dtf.constant dense<[1, 2]> : tensor<2xi32>
  %1 = dtf.mul %i, %j : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  %two = dtf.constant dense<2> : tensor<2xi32>
  %2 = dtf.neg %two : tensor<2xi32>
  return %0, %1, %2 : tensor<2xf32>, tensor<2xi32>, tensor<2xi32>
}

// -----

// Integer division by zero is left for the runtime to report.
// CHECK-LABEL: func.func @int_div_by_zero_stays
// CHECK: dtf.div
func.func @int_div_by_zero_stays() -> tensor<2xi32> {
  %a = dtf.constant dense<[3, 4]> : tensor<2xi32>
  %z = dtf.constant dense<0> : tensor<2xi32>
  %0 = dtf.div %a, %z : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

// CHECK-LABEL: func.func @involutions_and_idempotence
// CHECK-SAME: (%[[X:.*]]: tensor<5xf32>)
// CHECK-NEXT: %[[R:.*]] = dtf.relu %[[X]]
// CHECK-NEXT: return %[[X]], %[[R]], %[[X]], %[[X]]
func.func @involutions_and_idempotence(%x: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) {
  %n = dtf.neg %x : tensor<5xf32>
  %nn = dtf.neg %n : tensor<5xf32>
  %r = dtf.relu %x : tensor<5xf32>
  %rr = dtf.relu %r : tensor<5xf32>
  %m = dtf.maximum %x, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %p = dtf.minimum %x, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  return %nn, %rr, %m, %p : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}

// -----

// CHECK-LABEL: func.func @same_type_shape_ops
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32>)
// CHECK-NOT: dtf.
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @same_type_shape_ops(%x: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %0 = dtf.cast %x : tensor<4x3xf32> to tensor<4x3xf32>
  %1 = dtf.reshape %x : tensor<4x3xf32> -> tensor<4x3xf32>
  %2 = dtf.transpose %x [0, 1] : tensor<4x3xf32> -> tensor<4x3xf32>
  %3 = dtf.broadcast_to %x : tensor<4x3xf32> -> tensor<4x3xf32>
  %4 = dtf.slice %x begin [0, 0] size [-1, -1] : tensor<4x3xf32> -> tensor<4x3xf32>
  %5 = dtf.concat %x axis 0 : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %6 = dtf.dropout %x rate 0.0 : tensor<4x3xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_chains
// CHECK-SAME: (%[[X:.*]]: tensor<?x784xf32>)
// CHECK-NEXT: %[[R:.*]] = dtf.reshape %[[X]] : tensor<?x784xf32> -> tensor<?x28x28x1xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chains(%x: tensor<?x784xf32>) -> tensor<?x28x28x1xf32> {
  %0 = dtf.reshape %x : tensor<?x784xf32> -> tensor<?x28x28xf32>
  %1 = dtf.reshape %0 : tensor<?x28x28xf32> -> tensor<?x28x28x1xf32>
  return %1 : tensor<?x28x28x1xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_constant
// CHECK-NEXT: dtf.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
func.func @reshape_constant() -> tensor<2x2xf32> {
  %c = dtf.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = dtf.reshape %c : tensor<4xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// A dropout with a non-zero rate draws a mask: it stays, and two of them are
// not merged.
// CHECK-LABEL: func.func @dropout_stays
// CHECK-COUNT-2: dtf.dropout
func.func @dropout_stays(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = dtf.dropout %x rate 0.5 : tensor<4xf32>
  %1 = dtf.dropout %x rate 0.5 : tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @select_constant_condition
// CHECK-SAME: (%[[A:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>)
// CHECK-NEXT: return %[[B]]
func.func @select_constant_condition(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %c = dtf.constant dense<false> : tensor<3xi1>
  %0 = dtf.select %c, %a, %b : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// A filter with a dynamic size gives a dynamic output size, not a wrapped one.
// CHECK-LABEL: func.func @conv2d_dynamic_filter
// CHECK: -> tensor<1x?x24x32xf32>
func.func @conv2d_dynamic_filter(%x: tensor<1x28x28x1xf32>, %k: tensor<?x5x1x32xf32>) -> tensor<1x?x24x32xf32> {
  %0 = dtf.conv2d %x, %k padding valid strides [1, 1] dilations [1, 1] : (tensor<1x28x28x1xf32>, tensor<?x5x1x32xf32>) -> tensor<1x?x24x32xf32>
  return %0 : tensor<1x?x24x32xf32>
}
