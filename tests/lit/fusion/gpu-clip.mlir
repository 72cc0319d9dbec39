// dtf-gpu-clip: a global_norm_clip whose gradients are all made on one GPU
// becomes the ops that compute it, on that GPU, right after the last op
// that makes a gradient (before the host ops between, the learning rate).
// RUN: dtf-opt %s --dtf-gpu-clip --split-input-file | FileCheck %s

// Two f32 gradients on GPU 0: squares summed in f64, the norm, the scale
// (NaN for a norm that is not finite: + (norm - norm)), each gradient
// times the scale cast to f32; all on GPU 0, before the learning rate.
// CHECK-LABEL: func.func @on_gpu
// CHECK: %[[A:.*]] = dtf.mul %arg0, %arg0 {dtf.device = "/gpu:0"}
// CHECK: %[[B:.*]] = dtf.mul %arg1, %arg1 {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[A64:.*]] = dtf.cast %[[A]] {dtf.device = "/gpu:0"} : tensor<4x3xf32> to tensor<4x3xf64>
// CHECK-NEXT: %[[SQA:.*]] = dtf.mul %[[A64]], %[[A64]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[SA:.*]] = dtf.sum %[[SQA]] {dtf.device = "/gpu:0"} : tensor<4x3xf64> -> tensor<f64>
// CHECK-NEXT: %[[B64:.*]] = dtf.cast %[[B]] {dtf.device = "/gpu:0"} : tensor<3xf32> to tensor<3xf64>
// CHECK-NEXT: %[[SQB:.*]] = dtf.mul %[[B64]], %[[B64]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[SB:.*]] = dtf.sum %[[SQB]] {dtf.device = "/gpu:0"} : tensor<3xf64> -> tensor<f64>
// CHECK-NEXT: %[[T:.*]] = dtf.add %[[SA]], %[[SB]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[N:.*]] = dtf.sqrt %[[T]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[C:.*]] = dtf.constant {dtf.device = "/gpu:0"} dense<5.000000e+00> : tensor<f64>
// CHECK-NEXT: %[[M:.*]] = dtf.maximum %[[N]], %[[C]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[D:.*]] = dtf.div %[[C]], %[[M]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[Z:.*]] = dtf.sub %[[N]], %[[N]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[S:.*]] = dtf.add %[[D]], %[[Z]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[S32:.*]] = dtf.cast %[[S]] {dtf.device = "/gpu:0"} : tensor<f64> to tensor<f32>
// CHECK-NEXT: %[[CA:.*]] = dtf.mul %[[A]], %[[S32]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[CB:.*]] = dtf.mul %[[B]], %[[S32]] {dtf.device = "/gpu:0"}
// CHECK-NEXT: %[[LR:.*]] = dtf.mul %arg2, %arg2 :
// CHECK-NOT: global_norm_clip
// CHECK: return %[[CA]], %[[CB]], %[[LR]]
func.func @on_gpu(%x: tensor<4x3xf32>, %y: tensor<3xf32>, %s: tensor<f32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<f32>) {
  %a = dtf.mul %x, %x {dtf.device = "/gpu:0"} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %b = dtf.mul %y, %y {dtf.device = "/gpu:0"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %lr = dtf.mul %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %c:2 = dtf.global_norm_clip %a, %b clip_norm 5.0 : tensor<4x3xf32>, tensor<3xf32>
  return %c#0, %c#1, %lr : tensor<4x3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// f64 gradients: no casts.
// CHECK-LABEL: func.func @f64
// CHECK-NOT: dtf.cast
// CHECK: dtf.sqrt
// CHECK-NOT: dtf.cast
// CHECK: return
func.func @f64(%x: tensor<4xf64>) -> tensor<4xf64> {
  %a = dtf.mul %x, %x {dtf.device = "/job:worker/task:0/device:GPU:1"} : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  %c = dtf.global_norm_clip %a clip_norm 1.0 : tensor<4xf64>
  return %c : tensor<4xf64>
}

// -----

// Left alone: a gradient made on the CPU, gradients on two GPUs, a gradient
// that is an argument.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: dtf.global_norm_clip
// CHECK-NOT: dtf.sqrt
// CHECK: return
func.func @kept(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %g = dtf.mul %x, %x {dtf.device = "/gpu:0"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %h = dtf.mul %x, %x {dtf.device = "/gpu:1"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = dtf.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r:2 = dtf.global_norm_clip %g, %c clip_norm 1.0 : tensor<4xf32>, tensor<4xf32>
  %s:2 = dtf.global_norm_clip %g, %h clip_norm 1.0 : tensor<4xf32>, tensor<4xf32>
  %t:2 = dtf.global_norm_clip %g, %x clip_norm 1.0 : tensor<4xf32>, tensor<4xf32>
  return %r#0, %s#0, %t#0 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
