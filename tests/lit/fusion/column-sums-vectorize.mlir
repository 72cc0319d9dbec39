// A column reduction's CPU loop (relu_grad with the bias gradient of the seed
// CNN's 500-unit layer, reduce:rk) vectorizes: every buffer access carries
// its own alias scope (the buffers do not overlap), and each pass over a
// reduced row loads the outputs 8 floats at a time, adds the row, stores them.
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fuse-reductions=all --gpu-kernels=off --emit=kernels | FileCheck %s --check-prefix=LIST
// LIST: dtf_fused_5: 2 ops, 3 inputs, 2 outputs, over f32[B,500], reduce:rk

// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fuse-reductions=all --gpu-kernels=off --emit=kernel-llvm | FileCheck %s
// CHECK-LABEL: define void @dtf_fused_5(
// CHECK: vector.body{{[0-9]*}}:
// CHECK: load <8 x float>, ptr %{{.*}}, !alias.scope !{{[0-9]+}}, !noalias !{{[0-9]+}}
// CHECK: %[[SUM:[0-9]+]] = fadd <8 x float> %wide.load{{[0-9]*}}, %{{[0-9]+}}
// CHECK-NEXT: fadd <8 x float>
// CHECK-NEXT: store <8 x float> %[[SUM]], ptr %{{.*}}, !alias.scope !{{[0-9]+}}, !noalias !{{[0-9]+}}
// CHECK: define void @dtf_fused_6(
