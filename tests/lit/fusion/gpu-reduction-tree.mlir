// A kernel with reductions on the GPU is a block-wide tree (docs/kernels.md,
// "The GPU code"): each thread sums its share of the reduced elements into
// a slot of workgroup (shared) memory, then log2(threads per output) levels,
// a bar.sync after each, fold the upper half of the slots into the lower.
// Needs the CUDA toolkit.
// REQUIRES: cuda

// The plan records the launch shape: an elementwise kernel keeps one thread
// per element; a row (the accuracy's mean, reduce:r) gets a block of 256
// threads per output element; columns, many (the dense layer's relu_grad
// with its bias gradient, reduce:rk over 500) or few (the residual CNN's
// batch statistics, a few channels), 32 outputs per block of 32 x 8
// threads, the rows split into chunks over grid.y with a workspace (the
// last buffer parameter) for the chunks' partial sums and the column
// groups' counters, and 4 bytes of shared memory more for the "last block"
// flag. (The seed CNN's convolution bias gradients are lone sums since
// dtf-fuse-library folds their relu_grads into max_pool_grad.)
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fuse-reductions=all --emit=plan-text | FileCheck %s --check-prefix=PLAN
// PLAN-LABEL: name: "dtf_fused_0"
// PLAN: block: 256
// PLAN-NEXT: launch: "grid.x = ceil(elements / block), block.x = block"
// PLAN-LABEL: name: "dtf_fused_3"
// PLAN: block: 256
// PLAN-NEXT: launch: "grid.x = ceil(elements / outputs_per_block), block.x = block, block.y = block_y"
// PLAN: outputs_per_block: 1
// PLAN-NEXT: shared_bytes: 1024
// PLAN-LABEL: name: "dtf_fused_5"
// PLAN: meaning: "reduce:rk"
// PLAN-NEXT: }
// PLAN-NEXT: params {
// PLAN-NEXT: kind: "buffer"
// PLAN-NEXT: meaning: "workspace"
// PLAN-NEXT: }
// PLAN-NEXT: block: 32
// PLAN-NEXT: launch: "grid.x = ceil(elements / outputs_per_block), grid.y = row chunks (dtf-run\'s rule), block.x = block, block.y = block_y"
// PLAN: cpu_columns_symbol: "dtf_fused_5_columns"
// PLAN-NEXT: block_y: 8
// PLAN-NEXT: outputs_per_block: 32
// PLAN-NEXT: shared_bytes: 1028
// RUN: dtfc %S/../../../models/resnet.dtf --no-data-check --fuse-reductions=all --emit=plan-text | FileCheck %s --check-prefix=FEW
// FEW-LABEL: name: "dtf_fused_0"
// FEW: meaning: "workspace"
// FEW-NEXT: }
// FEW-NEXT: block: 32
// FEW: cpu_columns_symbol: "dtf_fused_0_columns"
// FEW-NEXT: block_y: 8
// FEW-NEXT: outputs_per_block: 32
// FEW-NEXT: shared_bytes: 1028

// The row's tree: 256 slots of f32, 8 levels (slot + 128, + 64, ... + 1).
// RUN: dtfc %S/../../../models/mnist_cnn.dtf --no-data-check --fuse-reductions=all --emit=ptx | FileCheck %s
// CHECK-LABEL: .visible .entry dtf_fused_3(
// CHECK: .shared .align 4 .b8 __wg_dtf_fused_3_0[1024];
// CHECK: st.shared.f32 [%[[SLOT:rd[0-9]+]]]
// CHECK-NEXT: bar.sync 0;
// CHECK: setp.gt.u32 %{{p[0-9]+}}, %[[LANE:r[0-9]+]], 127;
// CHECK: ld.shared.f32 %{{f[0-9]+}}, [%[[SLOT]]+512];
// CHECK: bar.sync 0;
// CHECK: setp.gt.u32 %{{p[0-9]+}}, %[[LANE]], 63;
// CHECK: ld.shared.f32 %{{f[0-9]+}}, [%[[SLOT]]+256];
// CHECK: bar.sync 0;
// CHECK: [%[[SLOT]]+128];
// CHECK: bar.sync 0;
// CHECK: [%[[SLOT]]+64];
// CHECK: bar.sync 0;
// CHECK: [%[[SLOT]]+32];
// CHECK: bar.sync 0;
// CHECK: [%[[SLOT]]+16];
// CHECK: bar.sync 0;
// CHECK: [%[[SLOT]]+8];
// CHECK: bar.sync 0;
// CHECK: [__wg_dtf_fused_3_0+4];
// CHECK: bar.sync 0;
// CHECK-NOT: bar.sync
// CHECK-LABEL: .visible .entry dtf_fused_5(
// The columns' tree over this block's chunk of rows (grid.y chunks of
// ceil(R / chunks) rows): 8 row lanes of 32 outputs, 3 levels (+ 4 rows,
// + 2, + 1).
// CHECK: .shared .align 4 .b8 __wg_dtf_fused_5_0[1024];
// CHECK: .shared .align 4 .u32 [[FLAG:__wg_dtf_fused_5_1[_$0-9]*]];
// CHECK: mov.u32 %{{r[0-9]+}}, %ctaid.y;
// CHECK: mov.u32 %{{r[0-9]+}}, %nctaid.y;
// CHECK: st.shared.f32 [%[[SLOT2:rd[0-9]+]]]
// CHECK-NEXT: bar.sync 0;
// CHECK: ld.shared.f32 %{{f[0-9]+}}, [%[[SLOT2]]+512];
// CHECK: bar.sync 0;
// CHECK: ld.shared.f32 %{{f[0-9]+}}, [%[[SLOT2]]+256];
// CHECK: bar.sync 0;
// CHECK: ld.shared.f32 %{{f[0-9]+}}, [%[[SLOT2]]+128];
// CHECK: bar.sync 0;
// Several chunks: the partials out, a fence, the block counted in its
// column group's counter by thread (0, 0), the flag shared...
// CHECK: fence.acq_rel.gpu;
// CHECK: bar.sync 0;
// CHECK: atom.global.add.u32 %{{r[0-9]+}}, [%[[COUNTER:rd[0-9]+]]], 1;
// CHECK: st.shared.u32 {{\[}}[[FLAG]]{{\]}}
// CHECK: bar.sync 0;
// CHECK-NEXT: ld.shared.u32 %{{r[0-9]+}}, {{\[}}[[FLAG]]{{\]}};
// ...and the last block sums the partials in chunk order with the same tree,
// then sets the counter back to 0.
// CHECK: fence.acq_rel.gpu;
// CHECK: bar.sync 0;
// CHECK: ld.shared.f32 %{{f[0-9]+}}, [%[[SLOT2]]+512];
// CHECK: bar.sync 0;
// CHECK: bar.sync 0;
// CHECK: bar.sync 0;
// CHECK: st.global.u32 [%[[COUNTER]]], %{{r[0-9]+}};
// CHECK-NOT: bar.sync
// CHECK-LABEL: .visible .entry dtf_fused_6(
