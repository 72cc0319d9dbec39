// RUN: dtf-opt %s --split-input-file --verify-diagnostics

//===----------------------------------------------------------------------===//
// Broadcasting binary ops
//===----------------------------------------------------------------------===//

func.func @add_not_broadcastable(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{add expects shapes that broadcast, got 'tensor<2x3xf32>' and 'tensor<2x4xf32>' (sizes must be equal or 1 in each dimension, aligned at the right)}}
  // expected-error @+1 {{'dtf.add' op failed to infer returned types}}
  %0 = dtf.add %a, %b : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @sub_not_broadcastable(%a: tensor<?x10xf32>, %b: tensor<5xf32>) {
  // expected-error @+2 {{sub expects shapes that broadcast, got 'tensor<?x10xf32>' and 'tensor<5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.sub %a, %b : (tensor<?x10xf32>, tensor<5xf32>) -> tensor<?x10xf32>
  return
}

// -----

func.func @mul_not_broadcastable(%a: tensor<3x4xi32>, %b: tensor<4x3xi32>) {
  // expected-error @+2 {{mul expects shapes that broadcast, got 'tensor<3x4xi32>' and 'tensor<4x3xi32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.mul %a, %b : (tensor<3x4xi32>, tensor<4x3xi32>) -> tensor<3x4xi32>
  return
}

// -----

func.func @div_not_broadcastable(%a: tensor<2x3x4xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+2 {{div expects shapes that broadcast, got 'tensor<2x3x4xf32>' and 'tensor<3x5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.div %a, %b : (tensor<2x3x4xf32>, tensor<3x5xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @maximum_not_broadcastable(%a: tensor<10xf32>, %b: tensor<11xf32>) {
  // expected-error @+2 {{maximum expects shapes that broadcast, got 'tensor<10xf32>' and 'tensor<11xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.maximum %a, %b : (tensor<10xf32>, tensor<11xf32>) -> tensor<10xf32>
  return
}

// -----

func.func @minimum_not_broadcastable(%a: tensor<2x2xi64>, %b: tensor<3xi64>) {
  // expected-error @+2 {{minimum expects shapes that broadcast, got 'tensor<2x2xi64>' and 'tensor<3xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.minimum %a, %b : (tensor<2x2xi64>, tensor<3xi64>) -> tensor<2x2xi64>
  return
}

// -----

func.func @pow_not_broadcastable(%a: tensor<4x5xf32>, %b: tensor<4x6xf32>) {
  // expected-error @+2 {{pow expects shapes that broadcast, got 'tensor<4x5xf32>' and 'tensor<4x6xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.pow %a, %b : (tensor<4x5xf32>, tensor<4x6xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @add_dtype_mismatch(%a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+2 {{add expects operands of the same dtype, got 'f32' and 'i32' (use cast to convert one)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.add %a, %b : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @add_wrong_result_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {
  // expected-error @+2 {{'dtf.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.add %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @compare_mixed_dtypes(%a: tensor<?xi32>, %b: tensor<?xi64>) {
  // expected-error @+2 {{compare expects operands of the same dtype, got 'i32' and 'i64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.compare eq, %a, %b : (tensor<?xi32>, tensor<?xi64>) -> tensor<?xi1>
  return
}


// -----

func.func @compare_result_not_bool(%a: tensor<?xi32>, %b: tensor<?xi32>) {
  // expected-error @+1 {{'dtf.compare' op result #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<?xi32>'}}
  %0 = dtf.compare lt, %a, %b : (tensor<?xi32>, tensor<?xi32>) -> tensor<?xi32>
  return
}
// -----

func.func @select_condition_not_broadcastable(%c: tensor<3xi1>, %t: tensor<2x4xf32>, %f: tensor<f32>) {
  // expected-error @+2 {{select expects a condition that broadcasts with the values, got 'tensor<3xi1>' and 'tensor<2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.select %c, %t, %f : (tensor<3xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return
}


// -----

func.func @select_condition_not_bool(%c: tensor<4xf32>, %t: tensor<4xf32>, %f: tensor<4xf32>) {
  // expected-error @+1 {{'dtf.select' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = dtf.select %c, %t, %f : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}
// -----

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

func.func @exp_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'dtf.exp' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = dtf.exp %x : tensor<4xi32>
  return
}

// -----

func.func @log_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'dtf.log' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = dtf.log %x : tensor<4xi32>
  return
}

// -----

func.func @sqrt_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'dtf.sqrt' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = dtf.sqrt %x : tensor<4xi32>
  return
}

// -----

func.func @rsqrt_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'dtf.rsqrt' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = dtf.rsqrt %x : tensor<4xi32>
  return
}

// -----

func.func @sigmoid_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'dtf.sigmoid' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = dtf.sigmoid %x : tensor<4xi32>
  return
}

// -----

func.func @tanh_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'dtf.tanh' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = dtf.tanh %x : tensor<4xi32>
  return
}

// -----

func.func @relu_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{'dtf.relu' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = dtf.relu %x : tensor<4xi1>
  return
}

// -----

func.func @cast_changes_shape(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{'dtf.cast' op keeps the shape and changes only the dtype, got 'tensor<2x3xi32>' to 'tensor<3x2xf32>'}}
  %0 = dtf.cast %x : tensor<2x3xi32> to tensor<3x2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

func.func @matmul_inner_mismatch(%a: tensor<?x784xf32>, %b: tensor<500x10xf32>) {
  // expected-error @+2 {{matmul expects inner dimensions to match, got 'tensor<?x784xf32>' and 'tensor<500x10xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.matmul %a, %b : (tensor<?x784xf32>, tensor<500x10xf32>) -> tensor<?x10xf32>
  return
}

// -----

func.func @matmul_inner_mismatch_transposed(%a: tensor<784x32xf32>, %b: tensor<784x10xf32>) {
  // expected-error @+2 {{matmul expects inner dimensions to match, got 'tensor<784x32xf32>' and 'tensor<784x10xf32>' (transposed)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.matmul %a, %b transpose_b : (tensor<784x32xf32>, tensor<784x10xf32>) -> tensor<784x784xf32>
  return
}

// -----

func.func @matmul_rank1(%a: tensor<784xf32>, %b: tensor<784x10xf32>) {
  // expected-error @+2 {{matmul expects operands of rank 2 or more, got 'tensor<784xf32>' and 'tensor<784x10xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.matmul %a, %b : (tensor<784xf32>, tensor<784x10xf32>) -> tensor<10xf32>
  return
}

// -----

func.func @matmul_batch_mismatch(%a: tensor<8x4x5xf32>, %b: tensor<7x5x6xf32>) {
  // expected-error @+2 {{matmul expects batch dimensions that broadcast, got 'tensor<8x4x5xf32>' and 'tensor<7x5x6xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.matmul %a, %b : (tensor<8x4x5xf32>, tensor<7x5x6xf32>) -> tensor<8x4x6xf32>
  return
}

// -----

func.func @matmul_dtype_mismatch(%a: tensor<4x5xf32>, %b: tensor<5x6xf16>) {
  // expected-error @+2 {{matmul expects operands of the same dtype, got 'f32' and 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.matmul %a, %b : (tensor<4x5xf32>, tensor<5x6xf16>) -> tensor<4x6xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

func.func @conv2d_channel_mismatch(%x: tensor<?x28x28x3xf32>, %k: tensor<5x5x1x32xf32>) {
  // expected-error @+2 {{conv2d expects the filter's input channels (dimension 2, 1) to match the input's channels (dimension 3, 3), got 'tensor<?x28x28x3xf32>' and 'tensor<5x5x1x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.conv2d %x, %k padding same strides [1, 1] dilations [1, 1] : (tensor<?x28x28x3xf32>, tensor<5x5x1x32xf32>) -> tensor<?x28x28x32xf32>
  return
}

// -----

func.func @conv2d_input_rank3(%x: tensor<28x28x1xf32>, %k: tensor<5x5x1x32xf32>) {
  // expected-error @+2 {{conv2d expects an NHWC input of rank 4, got 'tensor<28x28x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.conv2d %x, %k padding same strides [1, 1] dilations [1, 1] : (tensor<28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<28x28x32xf32>
  return
}

// -----

func.func @conv2d_filter_rank3(%x: tensor<?x28x28x1xf32>, %k: tensor<5x5x32xf32>) {
  // expected-error @+2 {{conv2d expects a filter [height, width, in_channels, out_channels] of rank 4, got 'tensor<5x5x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.conv2d %x, %k padding same strides [1, 1] dilations [1, 1] : (tensor<?x28x28x1xf32>, tensor<5x5x32xf32>) -> tensor<?x28x28x32xf32>
  return
}


// -----

func.func @conv2d_dtype_mismatch(%x: tensor<?x28x28x1xf32>, %k: tensor<5x5x1x32xf16>) {
  // expected-error @+2 {{conv2d expects input and filter of the same dtype, got 'f32' and 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.conv2d %x, %k padding same strides [1, 1] dilations [1, 1] : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf16>) -> tensor<?x28x28x32xf32>
  return
}
// -----

func.func @conv2d_zero_stride(%x: tensor<?x28x28x1xf32>, %k: tensor<5x5x1x32xf32>) {
  // expected-error @+2 {{conv2d expects strides to be two numbers in [1, 2147483648] [height, width], got [0, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.conv2d %x, %k padding same strides [0, 1] dilations [1, 1] : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x28x28x32xf32>
  return
}

// -----

func.func @conv2d_three_dilations(%x: tensor<?x28x28x1xf32>, %k: tensor<5x5x1x32xf32>) {
  // expected-error @+1 {{'dtf.conv2d' op attribute 'dilations' failed to satisfy constraint: i64 dense array attribute with exactly 2 elements}}
  %0 = dtf.conv2d %x, %k padding same strides [1, 1] dilations [1, 1, 1] : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x28x28x32xf32>
  return
}

// -----

func.func @conv2d_valid_input_too_small(%x: tensor<?x4x4x1xf32>, %k: tensor<5x5x1x32xf32>) {
  // expected-error @+2 {{conv2d with valid padding needs an input at least as large as the dilated filter, got 'tensor<?x4x4x1xf32>' and 'tensor<5x5x1x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.conv2d %x, %k padding valid strides [1, 1] dilations [1, 1] : (tensor<?x4x4x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x1x1x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

func.func @max_pool_rank3(%x: tensor<28x28x32xf32>) {
  // expected-error @+2 {{max_pool expects an NHWC input of rank 4, got 'tensor<28x28x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.max_pool %x padding valid window [2, 2] strides [2, 2] : tensor<28x28x32xf32> -> tensor<14x14x32xf32>
  return
}

// -----

func.func @avg_pool_window_too_large(%x: tensor<?x3x3x8xf32>) {
  // expected-error @+2 {{avg_pool with valid padding needs an input at least as large as the window, got 'tensor<?x3x3x8xf32>' and window [4, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.avg_pool %x padding valid window [4, 4] strides [1, 1] : tensor<?x3x3x8xf32> -> tensor<?x1x1x8xf32>
  return
}

// -----

func.func @max_pool_zero_strides(%x: tensor<?x28x28x32xf32>) {
  // expected-error @+2 {{max_pool expects strides to be two numbers in [1, 2147483648] [height, width], got [0, 0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.max_pool %x padding same window [2, 2] strides [0, 0] : tensor<?x28x28x32xf32> -> tensor<?x14x14x32xf32>
  return
}


// -----

func.func @avg_pool_zero_window(%x: tensor<?x28x28x1xf32>) {
  // expected-error @+2 {{avg_pool expects window to be two numbers in [1, 2147483648] [height, width], got [0, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.avg_pool %x padding same window [0, 2] strides [1, 1] : tensor<?x28x28x1xf32> -> tensor<?x28x28x1xf32>
  return
}

// -----

func.func @max_pool_one_window_size(%x: tensor<?x28x28x1xf32>) {
  // expected-error @+1 {{'dtf.max_pool' op attribute 'window' failed to satisfy constraint: i64 dense array attribute with exactly 2 elements}}
  %0 = dtf.max_pool %x padding valid window [2] strides [2, 2] : tensor<?x28x28x1xf32> -> tensor<?x14x14x1xf32>
  return
}
// -----

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

func.func @reshape_element_count(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{reshape cannot change the number of elements, got 'tensor<4x6xf32>' (24 elements) to 'tensor<5x5xf32>' (25 elements)}}
  %0 = dtf.reshape %x : tensor<4x6xf32> -> tensor<5x5xf32>
  return
}

// -----

func.func @reshape_element_count_batch(%x: tensor<?x784xf32>) {
  // expected-error @+1 {{reshape cannot change the number of elements, got 'tensor<?x784xf32>' (784 x batch elements) to 'tensor<?x27x27x1xf32>' (729 x batch elements)}}
  %0 = dtf.reshape %x : tensor<?x784xf32> -> tensor<?x27x27x1xf32>
  return
}

// -----

func.func @reshape_changes_dtype(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{reshape keeps the dtype, got 'f32' to 'f16' (use cast to convert)}}
  %0 = dtf.reshape %x : tensor<4x6xf32> -> tensor<24xf16>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<3x4xf32>) {
  // expected-error @+2 {{transpose expects a permutation of 0..1 for an input of rank 2, got [0, 0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.transpose %x [0, 0] : tensor<3x4xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @transpose_wrong_length(%x: tensor<3x4xf32>) {
  // expected-error @+2 {{transpose expects a permutation of 0..1 for an input of rank 2, got [1, 0, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.transpose %x [1, 0, 2] : tensor<3x4xf32> -> tensor<4x3xf32>
  return
}


// -----

func.func @transpose_negative_entry(%x: tensor<3x4xf32>) {
  // expected-error @+2 {{transpose expects a permutation of 0..1 for an input of rank 2, got [-1, 0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.transpose %x [-1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
  return
}
// -----

func.func @concat_axis_out_of_range(%a: tensor<?x3xf32>, %b: tensor<?x5xf32>) {
  // expected-error @+2 {{concat expects an axis in [-2, 2) for an input of rank 2, got 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.concat %a, %b axis 2 : (tensor<?x3xf32>, tensor<?x5xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @concat_size_mismatch(%a: tensor<4x3xf32>, %b: tensor<5x5xf32>) {
  // expected-error @+2 {{concat expects inputs of equal sizes except along axis 1, got 'tensor<4x3xf32>' and 'tensor<5x5xf32>' (input 1, dimension 0)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.concat %a, %b axis 1 : (tensor<4x3xf32>, tensor<5x5xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @concat_dtype_mismatch(%a: tensor<?x3xf32>, %b: tensor<?x5xi32>) {
  // expected-error @+2 {{concat expects inputs of the same dtype and rank, got 'tensor<?x3xf32>' and 'tensor<?x5xi32>' (input 1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.concat %a, %b axis 1 : (tensor<?x3xf32>, tensor<?x5xi32>) -> tensor<?x8xf32>
  return
}


// -----

func.func @concat_no_inputs() {
  // expected-error @+2 {{concat expects at least one input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.concat axis 0 : () -> tensor<1xf32>
  return
}
// -----

func.func @slice_past_end(%x: tensor<?x10xf32>) {
  // expected-error @+2 {{slice of dimension 1 (size 10) from 8 with size 3 goes past its end}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.slice %x begin [0, 8] size [-1, 3] : tensor<?x10xf32> -> tensor<?x3xf32>
  return
}

// -----

func.func @slice_begin_length(%x: tensor<?x10xf32>) {
  // expected-error @+2 {{slice expects begin and size with one entry per dimension (2), got 1 and 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.slice %x begin [2] size [-1, 3] : tensor<?x10xf32> -> tensor<?x3xf32>
  return
}

// -----

func.func @slice_negative_begin(%x: tensor<?x10xf32>) {
  // expected-error @+2 {{slice expects begin >= 0 and size >= -1, got begin -1 and size 3 in dimension 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.slice %x begin [0, -1] size [-1, 3] : tensor<?x10xf32> -> tensor<?x3xf32>
  return
}

// -----

func.func @broadcast_to_not_broadcastable(%x: tensor<3xf32>) {
  // expected-error @+1 {{broadcast_to expects a shape that broadcasts to the result, got [3] to [2, 4]}}
  %0 = dtf.broadcast_to %x : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @broadcast_to_changes_dtype(%x: tensor<10xf32>) {
  // expected-error @+1 {{'dtf.broadcast_to' op keeps the dtype, got 'tensor<10xf32>' to 'tensor<?x10xf16>'}}
  %0 = dtf.broadcast_to %x : tensor<10xf32> -> tensor<?x10xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

func.func @sum_axis_out_of_range(%x: tensor<?x10xf32>) {
  // expected-error @+2 {{sum expects an axis in [-2, 2) for an input of rank 2, got 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.sum %x axes [2] : tensor<?x10xf32> -> tensor<?xf32>
  return
}

// -----

func.func @mean_axis_out_of_range(%x: tensor<?x10xf32>) {
  // expected-error @+2 {{mean expects an axis in [-2, 2) for an input of rank 2, got -3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.mean %x axes [-3] : tensor<?x10xf32> -> tensor<10xf32>
  return
}

// -----

func.func @max_axis_out_of_range(%x: tensor<f32>) {
  // expected-error @+2 {{max expects an axis in [0, 0) for an input of rank 0, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.max %x axes [0] : tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @sum_axis_repeated(%x: tensor<?x10xf32>) {
  // expected-error @+2 {{sum names axis 1 twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.sum %x axes [1, -1] : tensor<?x10xf32> -> tensor<?xf32>
  return
}


// -----

func.func @sum_keep_dims_wrong_result(%x: tensor<?x10xf32>) {
  // expected-error @+2 {{'dtf.sum' op inferred type(s) 'tensor<?x1xf32>' are incompatible with return type(s) of operation 'tensor<?xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.sum %x axes [1] keep_dims : tensor<?x10xf32> -> tensor<?xf32>
  return
}
// -----

func.func @argmax_wrong_result_shape(%x: tensor<?x10xf32>) {
  // expected-error @+1 {{'dtf.argmax' op result must have the input's shape without axis 1, expected 'tensor<?xi32>', got 'tensor<?x1xi32>'}}
  %0 = dtf.argmax %x axis 1 : tensor<?x10xf32> -> tensor<?x1xi32>
  return
}

// -----

func.func @argmax_axis_out_of_range(%x: tensor<?x10xf32>) {
  // expected-error @+1 {{argmax expects an axis in [-2, 2) for an input of rank 2, got 2}}
  %0 = dtf.argmax %x axis 2 : tensor<?x10xf32> -> tensor<?xi32>
  return
}

// -----

func.func @argmax_float_result(%x: tensor<?x10xf32>) {
  // expected-error @+1 {{'dtf.argmax' op result #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?xf32>'}}
  %0 = dtf.argmax %x axis 1 : tensor<?x10xf32> -> tensor<?xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Softmax and losses
//===----------------------------------------------------------------------===//

func.func @softmax_axis_out_of_range(%x: tensor<?x10xf32>) {
  // expected-error @+1 {{softmax expects an axis in [-2, 2) for an input of rank 2, got 2}}
  %0 = dtf.softmax %x axis 2 : tensor<?x10xf32>
  return
}

// -----

func.func @log_softmax_axis_out_of_range(%x: tensor<?x10xf32>) {
  // expected-error @+1 {{log_softmax expects an axis in [-2, 2) for an input of rank 2, got -3}}
  %0 = dtf.log_softmax %x axis -3 : tensor<?x10xf32>
  return
}


// -----

func.func @softmax_int(%x: tensor<?x10xi32>) {
  // expected-error @+1 {{'dtf.softmax' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<?x10xi32>'}}
  %0 = dtf.softmax %x axis 1 : tensor<?x10xi32>
  return
}
// -----

func.func @softmax_cross_entropy_shape_mismatch(%logits: tensor<?x10xf32>, %labels: tensor<?x9xf32>) {
  // expected-error @+2 {{softmax_cross_entropy expects logits and labels of the same shape and dtype [..., classes], got 'tensor<?x10xf32>' and 'tensor<?x9xf32>' (for class indices, use sparse_softmax_cross_entropy)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.softmax_cross_entropy %logits, %labels : (tensor<?x10xf32>, tensor<?x9xf32>) -> tensor<?xf32>
  return
}


// -----

func.func @softmax_cross_entropy_dtype_mismatch(%logits: tensor<?x10xf32>, %labels: tensor<?x10xf16>) {
  // expected-error @+2 {{softmax_cross_entropy expects logits and labels of the same shape and dtype [..., classes], got 'tensor<?x10xf32>' and 'tensor<?x10xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.softmax_cross_entropy %logits, %labels : (tensor<?x10xf32>, tensor<?x10xf16>) -> tensor<?xf32>
  return
}
// -----

func.func @sparse_softmax_cross_entropy_label_rank(%logits: tensor<?x10xf32>, %labels: tensor<?x1xi32>) {
  // expected-error @+2 {{sparse_softmax_cross_entropy expects logits [..., classes] and class indices [...] with the leading shape of the logits, got 'tensor<?x10xf32>' and 'tensor<?x1xi32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.sparse_softmax_cross_entropy %logits, %labels : (tensor<?x10xf32>, tensor<?x1xi32>) -> tensor<?xf32>
  return
}

// -----

func.func @sparse_softmax_cross_entropy_float_labels(%logits: tensor<?x10xf32>, %labels: tensor<?xf32>) {
  // expected-error @+1 {{'dtf.sparse_softmax_cross_entropy' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?xf32>'}}
  %0 = dtf.sparse_softmax_cross_entropy %logits, %labels : (tensor<?x10xf32>, tensor<?xf32>) -> tensor<?xf32>
  return
}

// -----

func.func @one_hot_depth_zero(%y: tensor<?xi32>) {
  // expected-error @+1 {{'dtf.one_hot' op needs depth in [1, 2147483648], got 0}}
  %0 = dtf.one_hot %y depth 0 : tensor<?xi32> -> tensor<?x0xf32>
  return
}

// -----

func.func @one_hot_wrong_result_shape(%y: tensor<?xi32>) {
  // expected-error @+1 {{'dtf.one_hot' op result must be the indices' shape followed by depth, expected 'tensor<?x10xf32>', got 'tensor<10x?xf32>'}}
  %0 = dtf.one_hot %y depth 10 : tensor<?xi32> -> tensor<10x?xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Gather and dropout
//===----------------------------------------------------------------------===//

func.func @gather_scalar_params(%p: tensor<f32>, %i: tensor<?xi32>) {
  // expected-error @+2 {{gather expects params of rank 1 or more, got 'tensor<f32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.gather %p, %i : (tensor<f32>, tensor<?xi32>) -> tensor<?xf32>
  return
}

// -----

func.func @gather_float_indices(%p: tensor<100x64xf32>, %i: tensor<?xf32>) {
  // expected-error @+1 {{'dtf.gather' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?xf32>'}}
  %0 = dtf.gather %p, %i : (tensor<100x64xf32>, tensor<?xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @dropout_rate_one(%x: tensor<?x500xf32>) {
  // expected-error @+1 {{'dtf.dropout' op needs a rate in [0, 1), got 1.000000e+00}}
  %0 = dtf.dropout %x rate 1.0 : tensor<?x500xf32>
  return
}

// -----

func.func @dropout_rate_negative(%x: tensor<?x500xf32>) {
  // expected-error @+1 {{'dtf.dropout' op needs a rate in [0, 1), got -1.000000e-01}}
  %0 = dtf.dropout %x rate -0.1 : tensor<?x500xf32>
  return
}


// -----

func.func @dropout_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'dtf.dropout' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = dtf.dropout %x rate 0.5 : tensor<4xi32>
  return
}
// -----

//===----------------------------------------------------------------------===//
// Variables and initializers
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'dtf.variable' op @W needs a static shape (a variable has no batch dimension), got 'tensor<?x10xf32>'}}
dtf.variable @W : tensor<?x10xf32> = #dtf.init<zeros>


// -----

// expected-error @+1 {{'dtf.variable' op attribute 'type' failed to satisfy constraint: type attribute of ranked tensor of}}
dtf.variable @W : f32 = #dtf.init<zeros>
// -----

// expected-error @+1 {{'dtf.variable' op @step: initializer normal draws floating-point numbers, but the variable is 'tensor<i32>' (use zeros, ones or constant)}}
dtf.variable @step : tensor<i32> = #dtf.init<normal>

// -----

// expected-error @+1 {{'dtf.variable' op @step cannot be trainable: only floating-point variables have gradients, got 'tensor<i32>'}}
dtf.variable @step : tensor<i32> = #dtf.init<zeros> {trainable}

// -----

// expected-error @+1 {{initializer normal has no parameter 'scale' (it takes mean, stddev, seed)}}
dtf.variable @W : tensor<10xf32> = #dtf.init<normal, {scale = 2.0 : f64}>

// -----

// expected-error @+1 {{initializer zeros has no parameter 'value' (it takes none)}}
dtf.variable @W : tensor<10xf32> = #dtf.init<zeros, {value = 1.0 : f64}>

// -----

// expected-error @+1 {{initializer uniform needs minval < maxval, got 1.000000e+00 and 1.000000e+00}}
dtf.variable @W : tensor<10xf32> = #dtf.init<uniform, {minval = 1.0 : f64, maxval = 1.0 : f64}>

// -----

// expected-error @+1 {{initializer constant needs a value, as in #dtf.init<constant, {value = 0.5}>}}
dtf.variable @W : tensor<10xf32> = #dtf.init<constant>

// -----

// expected-error @+1 {{initializer constant needs a value, as in #dtf.init<constant, {value = 0.5}>}}
dtf.variable @W : tensor<10xf32> = #dtf.init<constant, {}>

// -----

// expected-error @+1 {{initializer truncated_normal needs stddev > 0, got 0.000000e+00}}
dtf.variable @W : tensor<10xf32> = #dtf.init<truncated_normal, {stddev = 0.0 : f64}>


// -----

// expected-error @+1 {{initializer normal needs stddev > 0, got -1.000000e+00}}
dtf.variable @W : tensor<10xf32> = #dtf.init<normal, {mean = 0.0 : f64, stddev = -1.0 : f64}>
// -----

// expected-error @+1 {{initializer seed must be a 64-bit integer, got 1.500000e+00 : f64}}
dtf.variable @W : tensor<10xf32> = #dtf.init<glorot_uniform, {seed = 1.5 : f64}>

// -----

// expected-error @+1 {{initializer parameter 'value' must be a finite number, got "half"}}
dtf.variable @W : tensor<10xf32> = #dtf.init<constant, {value = "half"}>

// -----

dtf.variable @W : tensor<784x10xf32> = #dtf.init<zeros>

func.func @read_missing_variable() {
  // expected-error @+1 {{'dtf.read_variable' op reads @V, which is not a dtf.variable in scope}}
  %0 = dtf.read_variable @V : tensor<784x10xf32>
  return
}

// -----

dtf.variable @W : tensor<784x10xf32> = #dtf.init<zeros>

func.func @read_variable_wrong_type() {
  // expected-error @+1 {{'dtf.read_variable' op reads @W of type 'tensor<784x10xf32>' as 'tensor<10x784xf32>'}}
  %0 = dtf.read_variable @W : tensor<10x784xf32>
  return
}


// -----

func.func private @F()

func.func @read_variable_of_function() {
  // expected-error @+1 {{'dtf.read_variable' op reads @F, which is not a dtf.variable in scope}}
  %0 = dtf.read_variable @F : tensor<4xf32>
  return
}
// -----

func.func @input_empty_name() {
  // expected-error @+1 {{'dtf.input' op needs a non-empty name}}
  %0 = dtf.input "" : tensor<?x784xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

// A dynamic type cannot be written in the custom form (the parser wants a
// static shape for the elements literal); in the generic form the value and
// the result type differ, which AllTypesMatch rejects before the op's own
// verifier runs.
func.func @constant_dynamic_type() {
  // expected-error @+1 {{'dtf.constant' op failed to verify that all of {value, output} have same type}}
  %0 = "dtf.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<?xf32>
  return
}

// -----

func.func @constant_unsupported_dtype() {
  // expected-error @+1 {{'dtf.constant' op result #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer or 1-bit signless integer values, but got 'tensor<4xi8>'}}
  %0 = dtf.constant dense<1> : tensor<4xi8>
  return
}

// -----
// Regressions: integer attributes are read signed, sizes cannot overflow.

func.func @one_hot_negative_depth(%y: tensor<?xi32>) {
  // expected-error @+1 {{'dtf.one_hot' op needs depth in [1, 2147483648], got -5}}
  %0 = dtf.one_hot %y depth -5 : tensor<?xi32> -> tensor<?x10xf32>
  return
}

// -----

func.func @one_hot_dynamic_marker_depth(%y: tensor<?xi32>) {
  // expected-error @+1 {{needs depth in [1, 2147483648], got -9223372036854775808}}
  %0 = dtf.one_hot %y depth -9223372036854775808 : tensor<?xi32> -> tensor<?x?xf32>
  return
}

// -----

func.func @argmax_negative_axis_in_message(%x: tensor<?x10xf32>) {
  // expected-error @+1 {{result must have the input's shape without axis -1, expected 'tensor<?xi32>', got 'tensor<?x1xi32>'}}
  %0 = dtf.argmax %x axis -1 : tensor<?x10xf32> -> tensor<?x1xi32>
  return
}

// -----

func.func @slice_size_overflow(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{slice of dimension 1 (size 3) from 1 with size 9223372036854775807 goes past its end}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.slice %x begin [0, 1] size [-1, 9223372036854775807] : tensor<2x3xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @conv2d_huge_dilation(%x: tensor<1x28x28x1xf32>, %k: tensor<5x5x1x32xf32>) {
  // expected-error @+2 {{conv2d expects dilations to be two numbers in [1, 2147483648]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.conv2d %x, %k padding valid strides [1, 1] dilations [9223372036854775807, 1] : (tensor<1x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<1x32x24x32xf32>
  return
}

// -----

func.func @reshape_overflow(%x: tensor<4294967296x4294967296xf32>) {
  // expected-error @+1 {{has more elements than fit in 64 bits}}
  %0 = dtf.reshape %x : tensor<4294967296x4294967296xf32> -> tensor<1xf32>
  return
}

// -----

func.func @sparse_xent_rank0_logits(%l: tensor<f32>, %y: tensor<i32>) {
  // expected-error @+2 {{sparse_softmax_cross_entropy expects logits [..., classes]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.sparse_softmax_cross_entropy %l, %y : (tensor<f32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

func.func @transpose_rank0(%x: tensor<f32>) {
  // expected-error @+2 {{transpose of a rank-0 input expects an empty permutation, got [0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = dtf.transpose %x [0] : tensor<f32> -> tensor<f32>
  return
}

// -----

// expected-error @+1 {{initializer parameter 'stddev' must be a finite number}}
dtf.variable @nan_stddev : tensor<10xf32> = #dtf.init<normal, {stddev = 0x7FF8000000000000 : f64}>

// -----

// expected-error @+1 {{initializer seed must be a 64-bit integer, got true}}
dtf.variable @bool_seed : tensor<10xf32> = #dtf.init<normal, {seed = true}>

// -----

// expected-error @+1 {{initializer seed must be a 64-bit integer}}
dtf.variable @wide_seed : tensor<10xf32> = #dtf.init<normal, {seed = 123456789012345678901234567890 : i128}>

// -----

// expected-error @+1 {{'dtf.variable' op @int_half: constant 5.000000e-01 does not fit the variable's dtype 'i32'}}
dtf.variable @int_half : tensor<10xi32> = #dtf.init<constant, {value = 0.5 : f64}>

// -----

dtf.variable @table : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
func.func @sparse_odd_slices(%lr: tensor<f32>, %ids: tensor<3xi64>) {
  // expected-error @+1 {{'dtf.sparse_apply_sgd' op expects pairs of (indices, rows), got 1 slice operands}}
  dtf.sparse_apply_sgd @table, %lr, %ids : tensor<f32>, tensor<3xi64>
  return
}

// -----

dtf.variable @table : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
func.func @sparse_float_ids(%lr: tensor<f32>, %ids: tensor<3xf32>, %rows: tensor<3x4xf32>) {
  // expected-error @+1 {{'dtf.sparse_apply_sgd' op expects integer indices in slice 0, got 'tensor<3xf32>'}}
  dtf.sparse_apply_sgd @table, %lr, %ids, %rows : tensor<f32>, tensor<3xf32>, tensor<3x4xf32>
  return
}

// -----

dtf.variable @table : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
func.func @sparse_row_shape(%lr: tensor<f32>, %ids: tensor<?x2xi64>, %rows: tensor<?x2x5xf32>) {
  // expected-error @+1 {{'dtf.sparse_apply_adagrad' op expects rows shaped as the indices 'tensor<?x2xi64>' followed by the row shape of 'tensor<10x4xf32>', got 'tensor<?x2x5xf32>'}}
  dtf.sparse_apply_adagrad @table, @acc, %lr, %ids, %rows : tensor<f32>, tensor<?x2xi64>, tensor<?x2x5xf32>
  return
}

// -----

dtf.variable @table : tensor<10x4xf64> = #dtf.init<zeros> {trainable}
func.func @sparse_row_dtype(%lr: tensor<f64>, %ids: tensor<2xi32>, %rows: tensor<2x4xf32>) {
  // expected-error @+1 {{'dtf.sparse_apply_sgd' op expects rows of the learning rate's dtype 'f64' in slice 0, got 'tensor<2x4xf32>'}}
  dtf.sparse_apply_sgd @table, %lr, %ids, %rows : tensor<f64>, tensor<2xi32>, tensor<2x4xf32>
  return
}

// -----

func.func @argmax_type(%x: tensor<?x8x8x5xf32>) {
  // expected-error @+1 {{'dtf.max_pool_with_argmax' op expects its argmax of type 'tensor<?x4x4x2xi32>' (the pooled shape, four bytes to an i32 in the last dimension), got 'tensor<?x4x4x5xi32>'}}
  %y, %i = dtf.max_pool_with_argmax %x padding valid window [2, 2] strides [2, 2] : tensor<?x8x8x5xf32> -> tensor<?x4x4x5xf32>, tensor<?x4x4x5xi32>
  return
}

// -----

func.func @argmax_window(%x: tensor<?x16x16x4xf32>) {
  // expected-error @+1 {{'dtf.max_pool_with_argmax' op keeps a window position in seven bits, so its window has at most 127 positions, got [16, 8]}}
  %y, %i = dtf.max_pool_with_argmax %x padding valid window [16, 8] strides [1, 1] : tensor<?x16x16x4xf32> -> tensor<?x1x9x4xf32>, tensor<?x1x9x1xi32>
  return
}

// -----

func.func @argmax_grad_shape(%i: tensor<?x4x4x2xi32>, %dy: tensor<?x4x4x5xf32>) {
  // expected-error @+1 {{'dtf.max_pool_grad_with_argmax' op expects input_shape to be its result's shape (-1 where dynamic), got 'tensor<?x8x8x5xf32>' and input_shape of 3 dimensions}}
  %dx = dtf.max_pool_grad_with_argmax %i, %dy padding valid window [2, 2] strides [2, 2] input_shape [8, 8, 5] : (tensor<?x4x4x2xi32>, tensor<?x4x4x5xf32>) -> tensor<?x8x8x5xf32>
  return
}

// -----

func.func @argmax_grad_dy(%i: tensor<?x4x4x2xi32>, %dy: tensor<?x3x4x5xf32>) {
  // expected-error @+1 {{'dtf.max_pool_grad_with_argmax' op pools 'tensor<?x8x8x5xf32>' to 'tensor<?x4x4x5xf32>', got 'tensor<?x3x4x5xf32>'}}
  %dx = dtf.max_pool_grad_with_argmax %i, %dy padding valid window [2, 2] strides [2, 2] input_shape [-1, 8, 8, 5] : (tensor<?x4x4x2xi32>, tensor<?x3x4x5xf32>) -> tensor<?x8x8x5xf32>
  return
}

// -----

func.func @lstm_gates(%x: tensor<?x5x3xf32>, %k: tensor<3x6xf32>, %r: tensor<2x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'dtf.lstm' op expects kernel [F, 4 U], recurrent_kernel [U, 4 U] and bias [4 U] for x [B, T, F], got 'tensor<?x5x3xf32>', 'tensor<3x6xf32>', 'tensor<2x8xf32>' and 'tensor<8xf32>'}}
  %0 = dtf.lstm %x, %k, %r, %b : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<?x2xf32>
  return
}

// -----

func.func @lstm_output(%x: tensor<?x5x3xf32>, %k: tensor<3x8xf32>, %r: tensor<2x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'dtf.lstm' op expects its output [B, T, U] with U = 2 for x 'tensor<?x5x3xf32>', got 'tensor<?x2xf32>'}}
  %0 = dtf.lstm %x, %k, %r, %b return_sequences : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<?x2xf32>
  return
}

// -----

func.func @lstm_grad_types(%x: tensor<?x5x3xf32>, %k: tensor<3x8xf32>, %r: tensor<2x8xf32>, %b: tensor<8xf32>, %y: tensor<?x2xf32>, %ws: tensor<?xi32>) {
  // expected-error @+1 {{'dtf.lstm_grad' op expects result 2 of operand 2's type 'tensor<2x8xf32>', got 'tensor<8x2xf32>'}}
  %dx, %dk, %dr, %db = dtf.lstm_grad %x, %k, %r, %b, %y, %ws, %y
      : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?x2xf32>)
        -> (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<8x2xf32>, tensor<8xf32>)
  return
}

// -----

func.func @lstm_workspace_rank(%x: tensor<?x5x3xf32>, %k: tensor<3x8xf32>, %r: tensor<2x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'dtf.lstm_train' op expects a workspace of rank 1, got 'tensor<?x2xi32>'}}
  %y, %ws = dtf.lstm_train %x, %k, %r, %b : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @lstm_compute_dtype_f64(%x: tensor<?x5x3xf64>, %k: tensor<3x8xf64>, %r: tensor<2x8xf64>, %b: tensor<8xf64>) {
  // expected-error @+1 {{'dtf.lstm' op failed to verify that compute_dtype is set only where every floating-point operand is f32}}
  %0 = dtf.lstm %x, %k, %r, %b compute_dtype "bf16" : (tensor<?x5x3xf64>, tensor<3x8xf64>, tensor<2x8xf64>, tensor<8xf64>) -> tensor<?x2xf64>
  return
}

// -----

func.func @lstm_compute_dtype_value(%x: tensor<?x5x3xf32>, %k: tensor<3x8xf32>, %r: tensor<2x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'dtf.lstm' op attribute 'compute_dtype' failed to satisfy constraint: string attribute the compute dtype "bf16" or "f16"}}
  %0 = dtf.lstm %x, %k, %r, %b compute_dtype "f8" : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<?x2xf32>
  return
}

// -----

func.func @gru_biases(%x: tensor<?x5x3xf32>, %k: tensor<3x6xf32>, %r: tensor<2x6xf32>, %b: tensor<6xf32>, %rb: tensor<8xf32>) {
  // expected-error @+1 {{'dtf.gru' op expects kernel [F, 3 U], recurrent_kernel [U, 3 U] and bias and recurrent_bias [3 U] for x [B, T, F], got 'tensor<?x5x3xf32>', 'tensor<3x6xf32>', 'tensor<2x6xf32>', 'tensor<6xf32>' and 'tensor<8xf32>'}}
  %0 = dtf.gru %x, %k, %r, %b, %rb : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<8xf32>) -> tensor<?x2xf32>
  return
}

// -----

func.func @gru_grad_types(%x: tensor<?x5x3xf32>, %k: tensor<3x6xf32>, %r: tensor<2x6xf32>, %b: tensor<6xf32>, %y: tensor<?x2xf32>, %ws: tensor<?xi32>) {
  // expected-error @+1 {{'dtf.gru_grad' op expects result 4 of operand 4's type 'tensor<6xf32>', got 'tensor<6xf64>'}}
  %dx, %dk, %dr, %db, %drb = dtf.gru_grad %x, %k, %r, %b, %b, %y, %ws, %y
      : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?x2xf32>)
        -> (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf64>)
  return
}

// -----

// FTRL's hyperparameters have Keras' ranges: lr_power <= 0, the others >= 0.
dtf.variable @w : tensor<4xf32> = #dtf.init<zeros> {trainable}
func.func @ftrl_lr_power(%g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'dtf.apply_ftrl' op expects lr_power <= 0, got 5.000000e-01}}
  dtf.apply_ftrl @w, @"w/Ftrl", @"w/Ftrl_1", %g, %lr lr_power 5.000000e-01 l1 0.000000e+00 l2 0.000000e+00 l2_shrinkage 0.000000e+00 beta 0.000000e+00 : tensor<4xf32>, tensor<f32>
  return
}

// -----

dtf.variable @table : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
func.func @sparse_ftrl_l1(%lr: tensor<f32>, %ids: tensor<3xi64>, %rows: tensor<3x4xf32>) {
  // expected-error @+1 {{'dtf.sparse_apply_ftrl' op expects l1 >= 0, got -1.000000e-01}}
  dtf.sparse_apply_ftrl @table, @"table/Ftrl", @"table/Ftrl_1", %lr, %ids, %rows lr_power -5.000000e-01 l1 -1.000000e-01 l2 0.000000e+00 l2_shrinkage 0.000000e+00 beta 0.000000e+00 : tensor<f32>, tensor<3xi64>, tensor<3x4xf32>
  return
}

// -----

dtf.variable @table : tensor<10x4xf32> = #dtf.init<zeros> {trainable}
func.func @sparse_ftrl_rows(%lr: tensor<f32>, %ids: tensor<3xi64>, %rows: tensor<3x5xf32>) {
  // expected-error @+1 {{'dtf.sparse_apply_ftrl' op expects rows shaped as the indices 'tensor<3xi64>' followed by the row shape of 'tensor<10x4xf32>', got 'tensor<3x5xf32>'}}
  dtf.sparse_apply_ftrl @table, @"table/Ftrl", @"table/Ftrl_1", %lr, %ids, %rows lr_power -5.000000e-01 l1 0.000000e+00 l2 0.000000e+00 l2_shrinkage 0.000000e+00 beta 0.000000e+00 : tensor<f32>, tensor<3xi64>, tensor<3x5xf32>
  return
}

// -----

dtf.variable @w : tensor<4xf32> = #dtf.init<zeros> {trainable}
func.func @ftrl_beta(%g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'dtf.apply_ftrl' op expects beta >= 0, got -2.000000e+00}}
  dtf.apply_ftrl @w, @"w/Ftrl", @"w/Ftrl_1", %g, %lr lr_power -5.000000e-01 l1 0.000000e+00 l2 0.000000e+00 l2_shrinkage 0.000000e+00 beta -2.000000e+00 : tensor<4xf32>, tensor<f32>
  return
}
