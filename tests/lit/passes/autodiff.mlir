// dtf-autodiff: the gradient rules compose into @train_step; values that lead
// to no trainable variable get no gradient.
// RUN: dtf-opt %s --dtf-autodiff --split-input-file | FileCheck %s

module attributes {dtf.model = "m"} {
  dtf.variable @W : tensor<4x3xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @b : tensor<3xf32> = #dtf.init<zeros> {trainable}
  dtf.variable @frozen : tensor<3xf32> = #dtf.init<ones>
  func.func @m() -> (tensor<f32> {dtf.name = "loss"}) {
    %x = dtf.input "x" : tensor<?x4xf32>
    %w = dtf.read_variable @W : tensor<4x3xf32>
    %b = dtf.read_variable @b : tensor<3xf32>
    %f = dtf.read_variable @frozen : tensor<3xf32>
    %mm = dtf.matmul %x, %w : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %y = dtf.add %mm, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
    %z = dtf.mul %y, %f : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
    %r = dtf.relu %z : tensor<?x3xf32>
    %l = dtf.mean %r : tensor<?x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// The forward function is kept, and @eval is a copy without dropout.
// CHECK-LABEL: func.func @m()
// CHECK-LABEL: func.func @eval()
// CHECK-LABEL: func.func @train_step()
// CHECK-SAME: -> (tensor<f32> {dtf.name = "loss"}, tensor<4x3xf32> {dtf.grad_of = @W}, tensor<3xf32> {dtf.grad_of = @b})
// CHECK: %[[X:.*]] = dtf.input "x"
// CHECK: %[[F:.*]] = dtf.read_variable @frozen
// CHECK: %[[Y:.*]] = dtf.add
// CHECK: %[[Z:.*]] = dtf.mul %[[Y]], %[[F]]
// CHECK: %[[L:.*]] = dtf.mean
// CHECK: %[[ONE:.*]] = dtf.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DR:.*]] = dtf.reduce_grad %[[ONE]], %{{.*}} mean : tensor<f32> to tensor<?x3xf32>
// CHECK: %[[DZ:.*]] = dtf.relu_grad %[[DR]], %[[Z]]
// The frozen variable's gradient is not computed: only y's.
// CHECK: %[[DY:.*]] = dtf.mul %[[DZ]], %[[F]]
// CHECK-NOT: dtf.mul %[[DZ]], %[[Y]]
// CHECK: %[[DB:.*]] = dtf.sum_to_shape %[[DY]], %{{.*}} : tensor<?x3xf32> to tensor<3xf32>
// CHECK: %[[DW:.*]] = dtf.matmul %[[X]], %[[DY]] transpose_a : (tensor<?x4xf32>, tensor<?x3xf32>) -> tensor<4x3xf32>
// CHECK: return %[[L]], %[[DW]], %[[DB]]

// -----

// A variable read twice gets the sum of both gradients; dropout gets a seed
// that its gradient shares, and @eval has no dropout.
module attributes {dtf.model = "m"} {
  dtf.variable @W : tensor<3xf32> = #dtf.init<ones> {trainable}
  func.func @m() -> (tensor<f32> {dtf.name = "loss"}) {
    %w1 = dtf.read_variable @W : tensor<3xf32>
    %w2 = dtf.read_variable @W : tensor<3xf32>
    %p = dtf.mul %w1, %w2 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %d = dtf.dropout %p rate 5.000000e-01 : tensor<3xf32>
    %l = dtf.sum %d : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @m()
// CHECK: dtf.dropout %{{.*}} rate 5.000000e-01 {seed = 1 : i64}
// CHECK-LABEL: func.func @eval()
// CHECK-NOT: dtf.dropout
// CHECK: return
// CHECK-LABEL: func.func @train_step()
// CHECK-SAME: tensor<3xf32> {dtf.grad_of = @W})
// CHECK: dtf.dropout_grad %{{.*}} rate 5.000000e-01 seed 1
// CHECK: %[[G1:.*]] = dtf.mul
// CHECK: %[[G2:.*]] = dtf.mul
// CHECK: %[[SUM:.*]] = dtf.add %[[G2]], %[[G1]]
// CHECK: return %{{.*}}, %[[SUM]]

// -----

// A value sliced into pieces that tile it along one axis (an LSTM's gates)
// gets its pieces' gradients joined by one dtf.concat, in the axis's order,
// not a sum of zero-padded slice_grads. Pieces that leave a gap keep the sum.
module attributes {dtf.model = "m"} {
  dtf.variable @W : tensor<4x6xf32> = #dtf.init<ones> {trainable}
  dtf.variable @V : tensor<4x6xf32> = #dtf.init<ones> {trainable}
  func.func @m() -> (tensor<f32> {dtf.name = "loss"}) {
    %x = dtf.input "x" : tensor<?x4xf32>
    %w = dtf.read_variable @W : tensor<4x6xf32>
    %z = dtf.matmul %x, %w : (tensor<?x4xf32>, tensor<4x6xf32>) -> tensor<?x6xf32>
    %a = dtf.slice %z begin [0, 0] size [-1, 2] : tensor<?x6xf32> -> tensor<?x2xf32>
    %c = dtf.slice %z begin [0, 4] size [-1, 2] : tensor<?x6xf32> -> tensor<?x2xf32>
    %b = dtf.slice %z begin [0, 2] size [-1, 2] : tensor<?x6xf32> -> tensor<?x2xf32>
    %ta = dtf.tanh %a : tensor<?x2xf32>
    %sb = dtf.sigmoid %b : tensor<?x2xf32>
    %p = dtf.mul %ta, %sb : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %q = dtf.mul %p, %c : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %v = dtf.read_variable @V : tensor<4x6xf32>
    %y = dtf.matmul %x, %v : (tensor<?x4xf32>, tensor<4x6xf32>) -> tensor<?x6xf32>
    %g1 = dtf.slice %y begin [0, 0] size [-1, 2] : tensor<?x6xf32> -> tensor<?x2xf32>
    %g2 = dtf.slice %y begin [0, 4] size [-1, 2] : tensor<?x6xf32> -> tensor<?x2xf32>
    %r = dtf.mul %g1, %g2 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %s = dtf.add %q, %r : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %l = dtf.sum %s : tensor<?x2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step()
// CHECK: dtf.slice_grad %{{.*}} begin [0, 4]
// CHECK: dtf.slice_grad %{{.*}} begin [0, 0]
// CHECK: dtf.add
// CHECK: %[[DB:.*]] = dtf.sigmoid_grad
// CHECK: %[[DA:.*]] = dtf.tanh_grad
// CHECK: %[[DZ:.*]] = dtf.concat %[[DA]], %[[DB]], %{{.*}} axis 1 : (tensor<?x2xf32>, tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x6xf32>
// CHECK-NOT: dtf.slice_grad
// CHECK: dtf.matmul %{{.*}}, %[[DZ]] transpose_a
// CHECK-NEXT: return

// -----

// A class token repeated over the batch (tile, and broadcast_to taking the
// batch from an input): tile's gradient sums dy over the repeats
// (tile_grad), broadcast_to's sums it back to the token's shape; the input
// that gives the batch gets none.
module attributes {dtf.model = "m"} {
  dtf.variable @cls : tensor<1x1x4xf32> = #dtf.init<ones> {trainable}
  func.func @m() -> (tensor<f32> {dtf.name = "loss"}) {
    %x = dtf.input "x" : tensor<?x4xf32>
    %c = dtf.read_variable @cls : tensor<1x1x4xf32>
    %t = dtf.tile %c multiples [-1, 2, 1] batch_of %x : tensor<1x1x4xf32>, tensor<?x4xf32> -> tensor<?x2x4xf32>
    %b = dtf.broadcast_to %c batch_of %x : tensor<1x1x4xf32>, tensor<?x4xf32> -> tensor<?x1x4xf32>
    %s = dtf.sum %t : tensor<?x2x4xf32> -> tensor<f32>
    %u = dtf.sum %b : tensor<?x1x4xf32> -> tensor<f32>
    %l = dtf.add %s, %u : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step()
// CHECK-SAME: tensor<1x1x4xf32> {dtf.grad_of = @cls}
// CHECK: %[[X:.*]] = dtf.input "x"
// CHECK: %[[C:.*]] = dtf.read_variable @cls
// CHECK-DAG: dtf.sum_to_shape %{{.*}}, %[[C]] : tensor<?x1x4xf32> to tensor<1x1x4xf32>
// CHECK-DAG: dtf.tile_grad %{{.*}}, %[[C]] : tensor<?x2x4xf32> to tensor<1x1x4xf32>
// CHECK-NOT: %[[X]] :
// CHECK: return
