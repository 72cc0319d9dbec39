// broadcast_to and tile whose batch comes from another tensor (batch_of),
// and tile_grad: they print as they parse.
// RUN: dtf-opt %s | dtf-opt | FileCheck %s

// CHECK-LABEL: func.func @batch_shapes
func.func @batch_shapes(%x: tensor<?x784xf32>, %cls: tensor<1x1x64xf32>,
                        %h: tensor<?x1xf32>, %w: tensor<4x3xi32>) {
  // CHECK: dtf.broadcast_to %{{.*}} batch_of %{{.*}} : tensor<1x1x64xf32>, tensor<?x784xf32> -> tensor<?x1x64xf32>
  %0 = dtf.broadcast_to %cls batch_of %x : tensor<1x1x64xf32>, tensor<?x784xf32> -> tensor<?x1x64xf32>
  // x's own batch needs no batch_of.
  // CHECK: dtf.broadcast_to %{{.*}} : tensor<?x1xf32> -> tensor<?x10xf32>
  %1 = dtf.broadcast_to %h : tensor<?x1xf32> -> tensor<?x10xf32>
  // CHECK: dtf.tile %{{.*}} multiples [-1, 2, 1] batch_of %{{.*}} : tensor<1x1x64xf32>, tensor<?x784xf32> -> tensor<?x2x64xf32>
  %2 = dtf.tile %cls multiples [-1, 2, 1] batch_of %x : tensor<1x1x64xf32>, tensor<?x784xf32> -> tensor<?x2x64xf32>
  // CHECK: dtf.tile %{{.*}} multiples [1, 3] : tensor<?x1xf32> -> tensor<?x3xf32>
  %3 = dtf.tile %h multiples [1, 3] : tensor<?x1xf32> -> tensor<?x3xf32>
  // CHECK: dtf.tile %{{.*}} multiples [2, 2] : tensor<4x3xi32> -> tensor<8x6xi32>
  %4 = dtf.tile %w multiples [2, 2] : tensor<4x3xi32> -> tensor<8x6xi32>
  // CHECK: dtf.tile_grad %{{.*}}, %{{.*}} : tensor<?x2x64xf32> to tensor<1x1x64xf32>
  %5 = dtf.tile_grad %2, %cls : tensor<?x2x64xf32> to tensor<1x1x64xf32>
  return
}
