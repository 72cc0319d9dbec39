// dtf-loss-scale: under mixed_float16 (the module's dtf.train precision, or
// the policy option) a dynamic loss scale: @loss_scale (f32, 2^15 unless
// initial_scale says otherwise) and @loss_scale_good_steps (i64, 0), and the
// module's dtf.loss_scale naming them with the growth interval (2000 unless
// dynamic_growth_steps says otherwise); a fixed scale has no count and no
// interval; float32 and mixed_bfloat16 get nothing.
// RUN: dtf-opt %s --dtf-loss-scale --split-input-file | FileCheck %s
// RUN: dtf-opt %s --dtf-loss-scale=policy=float32 --split-input-file | FileCheck %s --check-prefix=F32
// RUN: dtf-opt %s --dtf-loss-scale=policy=mixed_bfloat16 --split-input-file | FileCheck %s --check-prefix=F32
// F32-NOT: dtf.loss_scale =
// F32-NOT: dtf.variable @loss_scale

// CHECK: module attributes {dtf.loss_scale = {good_steps = @loss_scale_good_steps, growth_steps = 2000 : i64, scale = @loss_scale}
// CHECK-DAG: dtf.variable @loss_scale : tensor<f32> = #dtf.init<constant, {value = 3.276800e+04 : f64}> {dtf.loss_scale}
// The count is the scale's slot: a cluster places both on one ps.
// CHECK-DAG: dtf.variable @loss_scale_good_steps : tensor<i64> = #dtf.init<zeros> {dtf.loss_scale, dtf.slot_of = @loss_scale}
module attributes {dtf.train = {precision = "mixed_float16"}} {
}

// -----

// CHECK: module attributes {dtf.loss_scale = {good_steps = @loss_scale_good_steps, growth_steps = 3 : i64, scale = @loss_scale}
// CHECK: dtf.variable @loss_scale : tensor<f32> = #dtf.init<constant, {value = 1.024000e+03 : f64}> {dtf.loss_scale}
module attributes {dtf.train = {precision = "mixed_float16",
    loss_scale = {kind = "dynamic", initial_scale = 1024.0 : f64, dynamic_growth_steps = 3 : i64}}} {
}

// -----

// A fixed scale: only the variable, never adjusted.
// CHECK: module attributes {dtf.loss_scale = {scale = @loss_scale}
// CHECK: dtf.variable @loss_scale : tensor<f32> = #dtf.init<constant, {value = 1.280000e+02 : f64}> {dtf.loss_scale}
// CHECK-NOT: @loss_scale_good_steps
module attributes {dtf.train = {precision = "mixed_float16",
    loss_scale = {kind = "fixed", initial_scale = 128.0 : f64}}} {
}

// -----

// mixed_bfloat16 scales nothing (bf16 has f32's range), as Keras' policy.
// CHECK-LABEL: module attributes {dtf.train = {precision = "mixed_bfloat16"}}
// CHECK-NOT: loss_scale
module attributes {dtf.train = {precision = "mixed_bfloat16"}} {
}
