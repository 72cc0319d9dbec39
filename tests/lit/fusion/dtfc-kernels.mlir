// dtfc's kernel flags on the seed CNN: --emit=kernels lists each fused
// region with its ops and source lines, --emit=fused-mlir shows the regions,
// --emit=kernel-llvm the optimized CPU code (vectorized for AVX2: 8 floats),
// and --fusion=off writes a plan without any. --emit=kernels names a
// reduced kernel's spec (reduce:<k, r or 1 per axis>, docs/plan-format.md).
// The default is all.
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --emit=kernels | FileCheck %s --check-prefix=LIST
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fuse-reductions=all --emit=kernels | FileCheck %s --check-prefix=LIST
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fuse-reductions=rows --emit=kernels | FileCheck %s --check-prefix=ROWS
// With rows the one reduced kernel is the accuracy: compare, cast and the
// mean of everything (reduce:r, to one element), in both programs.
// ROWS-NOT: reduce:rk
// ROWS: dtf_fused_3: 3 ops, 2 inputs, 1 outputs, over i32[B], reduce:r{{$}}
// ROWS-NOT: reduce:rk
// ROWS: dtf_fused_16: 3 ops, 2 inputs, 1 outputs, over i32[B], reduce:r{{$}}
// RUN: not dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fuse-reductions=some 2>&1 | FileCheck %s --check-prefix=BADRED
// BADRED: --fuse-reductions must be all, rows or none, not 'some'
// The convolutions' bias adds and relus go to oneDNN (conv2d_bias, below):
// the dense layer's stay a generated kernel.
// LIST: dtf_fused_0: 2 ops, 2 inputs, 2 outputs, over f32[B,500]
// LIST-NEXT:   dtf.add  {{.*}}mnist_cnn.dtf:43:10
// LIST-NEXT:   dtf.relu  {{.*}}mnist_cnn.dtf:43:10
// The loss and argmax: row kernels of one op each (one row per iteration).
// LIST: dtf_fused_1: 1 ops, 2 inputs, 1 outputs, over f32[B,10], rows of the last axis
// LIST-NEXT:   dtf.sparse_softmax_cross_entropy  {{.*}}mnist_cnn.dtf:46:17
// LIST: dtf_fused_2: 1 ops, 1 inputs, 1 outputs, over f32[B,10], rows of the last axis
// LIST-NEXT:   dtf.argmax  {{.*}}mnist_cnn.dtf:47:26
// LIST: dtf_fused_3: 3 ops, 2 inputs, 1 outputs, over i32[B], reduce:r
// LIST-NEXT:   dtf.compare  {{.*}}mnist_cnn.dtf:47:44
// LIST-NEXT:   dtf.cast  {{.*}}mnist_cnn.dtf:47:21
// LIST-NEXT:   dtf.mean  {{.*}}mnist_cnn.dtf:47:16
// With --fuse-reductions=all (the default), the dense layer's relu_grad
// with its bias gradient: one loop over the bias's elements, summing the
// leading axes (with rows, the seed CNN's only reduced kernels are the
// accuracy's). The convolutions' relu_grads are not there: dtf-fuse-library
// folded each into the max_pool_grad before it.
// LIST: dtf_fused_4: 1 ops, 3 inputs, 1 outputs, over f32[B,10], rows of the last axis
// LIST-NEXT:   dtf.sparse_softmax_cross_entropy_grad
// LIST: dtf_fused_5: 2 ops, 3 inputs, 2 outputs, over f32[B,500], reduce:rk
// LIST-NEXT:   dtf.relu_grad  {{.*}}mnist_cnn.dtf:43:10
// LIST-NEXT:   dtf.sum_to_shape  {{.*}}mnist_cnn.dtf:43:10
// LIST-NOT: relu_grad
// Each Adam update: its variable and two slots written in place.
// LIST: dtf_fused_6: 1 ops, 6 inputs, 0 outputs, over f32[5,5,1,32], 3 in place
// LIST-NEXT:   dtf.apply_adam

// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --emit=fused-mlir | FileCheck %s --check-prefix=MLIR
// MLIR: func.func @train_step
// MLIR: dtf.conv2d_bias {{.*}} relu
// MLIR: dtf.fused
// MLIR: dtf.add
// MLIR-NEXT: dtf.relu
// MLIR-NEXT: dtf.yield

// Each convolution's relu_grad is folded into the max_pool_grad before it,
// and in train_step each pool keeps its argmax for its gradient, which reads
// it instead of x; the evaluation program's pools stay plain max_pools.
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --emit=fused-mlir | FileCheck %s --check-prefix=POOLGRAD
// POOLGRAD: func.func @eval
// POOLGRAD-COUNT-2: dtf.max_pool {{.*}} -> tensor<
// POOLGRAD: func.func @train_step
// POOLGRAD: dtf.max_pool_with_argmax {{.*}} -> tensor<?x14x14x32xf32>, tensor<?x14x14x8xi32>
// POOLGRAD: dtf.max_pool_with_argmax {{.*}} -> tensor<?x7x7x64xf32>, tensor<?x7x7x16xi32>
// POOLGRAD-COUNT-2: dtf.max_pool_grad_with_argmax {{.*}} relu :
// POOLGRAD-NOT: dtf.max_pool_grad

// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --emit=kernel-llvm | FileCheck %s --check-prefix=LLVM
// LLVM: define void @dtf_fused_0(ptr {{.*}}, ptr {{.*}}, i64 {{.*}}, i64 {{.*}})
// LLVM: <8 x float>
// LLVM: attributes {{.*}}"target-cpu"="x86-64-v3"

// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fusion=off --emit=kernels | FileCheck %s --check-prefix=OFF
// OFF: no fused kernels
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fusion=off --emit=fused-mlir | FileCheck %s --check-prefix=NOLIB
// NOLIB-NOT: conv2d_bias
// NOLIB: dtf.conv2d
// --fusion=off keeps the op-by-op pools: max_pool_grad reads x.
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fusion=off --emit=fused-mlir | FileCheck %s --check-prefix=NOARGMAX
// NOARGMAX-NOT: with_argmax
// NOARGMAX: dtf.max_pool_grad
// NOARGMAX-NOT: with_argmax

// RUN: not dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fusion=maybe 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: Cannot find option named 'maybe'

// The plan carries the object and its baseline.
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --gpu-kernels=off --emit=plan-text | FileCheck %s --check-prefix=PLAN
// PLAN: cpu_object: "\177ELF
// PLAN: cpu_target: "x86-64-v3"
// PLAN: kernels {
// PLAN: name: "dtf_fused_0"
// PLAN: params {
// PLAN: kind: "buffer"
// PLAN-NEXT: meaning: "same"
// PLAN: meaning: "suffix"
// PLAN: meaning: "output"
// PLAN: cpu_symbol: "dtf_fused_0"
