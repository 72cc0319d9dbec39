// dtf-mixed-precision: under mixed_bfloat16 (the module's dtf.train precision,
// or the policy option) every f32 matmul and convolution, forward and
// gradient, computes in bf16 (under mixed_float16 in f16); softmax, losses, reductions and updates stay
// f32; the library LSTM computes in bf16 as well (its i32 workspace aside),
// the GRU stays f32; ops kept in f32 (dtf.keep_f32) are left alone, GPU-placed ones are
// marked alike (dtf-run's GPU kernels compute them with cublasGemmEx and
// cuDNN's tensor ops), and the marks go either way.
// RUN: dtf-opt %s --dtf-mixed-precision --split-input-file | FileCheck %s
// RUN: dtf-opt %s --dtf-mixed-precision=policy=float32 --split-input-file | FileCheck %s --check-prefix=F32
// RUN: dtf-opt %s --dtf-mixed-precision=policy=mixed_float16 --split-input-file | FileCheck %s --check-prefix=F16
// RUN: not dtf-opt %s --dtf-mixed-precision=policy=fp8 --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD
// F32: precision = "float32"
// F32-NOT: compute_dtype
// F32-NOT: dtf.keep_f32
// F16: precision = "mixed_float16"
// F16: dtf.matmul %arg0, %arg1 compute_dtype "f16" :
// F16: dtf.matmul %arg0, %{{.*}} transpose_a compute_dtype "f16" :
// F16: dtf.conv2d %arg2, %arg3 {{.*}} compute_dtype "f16" :
// F16: dtf.conv2d_backprop_input {{.*}} compute_dtype "f16" :
// F16: dtf.conv2d_backprop_filter {{.*}} compute_dtype "f16" :
// F16: dtf.matmul %arg0, %arg1 :
// F16: dtf.matmul %arg0, %arg1 compute_dtype "f16" {dtf.device = "/job:worker/gpu:0"} :
// F16-NOT: compute_dtype "bf16"
// BAD: error: precision must be float32, mixed_bfloat16 or mixed_float16, not 'fp8'

// CHECK: precision = "mixed_bfloat16"
// CHECK-LABEL: func.func @step
// CHECK: dtf.matmul %arg0, %arg1 compute_dtype "bf16" :
// CHECK: dtf.matmul %arg0, %{{.*}} transpose_a compute_dtype "bf16" :
// CHECK: dtf.conv2d %arg2, %arg3 padding same strides [1, 1] dilations [1, 1] compute_dtype "bf16" :
// CHECK: dtf.conv2d_backprop_input %{{.*}}, %arg3 {{.*}} input_shape [-1, 8, 8, 3] compute_dtype "bf16" :
// CHECK: dtf.conv2d_backprop_filter %arg2, %{{.*}} filter_shape [3, 3, 3, 4] compute_dtype "bf16" :
// The kept layer and the f64 one: no compute_dtype, no mark; the GPU one
// in bf16 as on the CPU.
// CHECK: dtf.matmul %arg0, %arg1 :
// CHECK: dtf.matmul %arg0, %arg1 compute_dtype "bf16" {dtf.device = "/job:worker/gpu:0"} :
// CHECK: dtf.matmul %arg4, %arg4 :
// CHECK: dtf.softmax
// CHECK-NOT: compute_dtype
// CHECK-NOT: dtf.keep_f32
module attributes {dtf.train = {precision = "mixed_bfloat16"}} {
  func.func @step(%x: tensor<?x4xf32>, %w: tensor<4x5xf32>, %img: tensor<?x8x8x3xf32>,
                  %k: tensor<3x3x3x4xf32>, %d: tensor<4x4xf64>) {
    %y = dtf.matmul %x, %w : (tensor<?x4xf32>, tensor<4x5xf32>) -> tensor<?x5xf32>
    %g = dtf.matmul %x, %y transpose_a : (tensor<?x4xf32>, tensor<?x5xf32>) -> tensor<4x5xf32>
    %c = dtf.conv2d %img, %k padding same strides [1, 1] dilations [1, 1]
        : (tensor<?x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<?x8x8x4xf32>
    %dx = dtf.conv2d_backprop_input %c, %k padding same strides [1, 1] dilations [1, 1] input_shape [-1, 8, 8, 3]
        : (tensor<?x8x8x4xf32>, tensor<3x3x3x4xf32>) -> tensor<?x8x8x3xf32>
    %dk = dtf.conv2d_backprop_filter %img, %c padding same strides [1, 1] dilations [1, 1] filter_shape [3, 3, 3, 4]
        : (tensor<?x8x8x3xf32>, tensor<?x8x8x4xf32>) -> tensor<3x3x3x4xf32>
    %kept = dtf.matmul %x, %w {dtf.keep_f32} : (tensor<?x4xf32>, tensor<4x5xf32>) -> tensor<?x5xf32>
    %gpu = dtf.matmul %x, %w {dtf.device = "/job:worker/gpu:0"} : (tensor<?x4xf32>, tensor<4x5xf32>) -> tensor<?x5xf32>
    %f64 = dtf.matmul %d, %d : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>
    %s = dtf.softmax %y axis -1 : tensor<?x5xf32>
    return
  }
}

// -----

// The library LSTM in its three forms computes in bf16 too (its i32
// workspace aside); a layer kept in f32 stays f32, and so does the GRU
// (oneDNN 2.6's bf16 GRU trains slower than its f32 one here).
// CHECK-LABEL: func.func @recurrent
// CHECK: dtf.lstm %arg0, %arg1, %arg2, %arg3 compute_dtype "bf16" :
// CHECK: dtf.lstm_train %arg0, %arg1, %arg2, %arg3 compute_dtype "bf16" :
// CHECK: dtf.lstm_grad %arg0, %arg1, %arg2, %arg3, %{{.*}}, %{{.*}}, %arg7 compute_dtype "bf16" :
// CHECK: dtf.gru_train %arg0, %arg4, %arg5, %arg6, %arg6 return_sequences :
// CHECK: dtf.gru_grad {{.*}}, %arg8 return_sequences :
// CHECK: dtf.lstm %arg0, %arg1, %arg2, %arg3 :
// CHECK-NOT: compute_dtype
// CHECK-NOT: dtf.keep_f32
// F16-LABEL: func.func @recurrent
// F16: dtf.lstm %arg0, %arg1, %arg2, %arg3 compute_dtype "f16" :
// F16: dtf.lstm_grad {{.*}} compute_dtype "f16" :
// F16: dtf.lstm %arg0, %arg1, %arg2, %arg3 :
module attributes {dtf.train = {precision = "mixed_bfloat16"}} {
  func.func @recurrent(%x: tensor<?x5x3xf32>, %k: tensor<3x8xf32>, %r: tensor<2x8xf32>,
                       %b: tensor<8xf32>, %gk: tensor<3x6xf32>, %gr: tensor<2x6xf32>,
                       %gb: tensor<6xf32>, %dh: tensor<?x2xf32>, %ds: tensor<?x5x2xf32>) {
    %h = dtf.lstm %x, %k, %r, %b
        : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<?x2xf32>
    %t, %ws = dtf.lstm_train %x, %k, %r, %b
        : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>)
          -> (tensor<?x2xf32>, tensor<?xi32>)
    %dx, %dk, %dr, %db = dtf.lstm_grad %x, %k, %r, %b, %t, %ws, %dh
        : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>,
           tensor<?x2xf32>, tensor<?xi32>, tensor<?x2xf32>)
          -> (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>)
    %gt, %gws = dtf.gru_train %x, %gk, %gr, %gb, %gb return_sequences
        : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>)
          -> (tensor<?x5x2xf32>, tensor<?xi32>)
    %g:5 = dtf.gru_grad %x, %gk, %gr, %gb, %gb, %gt, %gws, %ds return_sequences
        : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>,
           tensor<?x5x2xf32>, tensor<?xi32>, tensor<?x5x2xf32>)
          -> (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>)
    %kept = dtf.lstm %x, %k, %r, %b {dtf.keep_f32}
        : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<?x2xf32>
    return
  }
}
