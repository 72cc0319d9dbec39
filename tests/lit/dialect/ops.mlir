// Every op of the dtf dialect parses, prints, and parses again to the same text;
// the generic form round-trips too.
// RUN: dtf-opt %s | dtf-opt | FileCheck %s
// RUN: dtf-opt %s --mlir-print-op-generic | dtf-opt | FileCheck %s

// CHECK: dtf.variable @W : tensor<784x10xf32> = #dtf.init<truncated_normal, {stddev = 1.000000e-01 : f64}> {trainable}
dtf.variable @W : tensor<784x10xf32> = #dtf.init<truncated_normal, {stddev = 0.1 : f64}> {trainable}
// CHECK: dtf.variable @b : tensor<10xf32> = #dtf.init<zeros> {trainable}
dtf.variable @b : tensor<10xf32> = #dtf.init<zeros> {trainable}
// CHECK: dtf.variable @ones : tensor<3xf16> = #dtf.init<ones>
dtf.variable @ones : tensor<3xf16> = #dtf.init<ones>
// CHECK: dtf.variable @c : tensor<2x2xbf16> = #dtf.init<constant, {value = 5.000000e-01 : f64}>
dtf.variable @c : tensor<2x2xbf16> = #dtf.init<constant, {value = 0.5 : f64}>
// CHECK: dtf.variable @u : tensor<4xf32> = #dtf.init<uniform, {maxval = 1.000000e+00 : f64, minval = -1.000000e+00 : f64, seed = 7 : i64}>
dtf.variable @u : tensor<4xf32> = #dtf.init<uniform, {minval = -1.0 : f64, maxval = 1.0 : f64, seed = 7 : i64}>
// CHECK: dtf.variable @n : tensor<4xf32> = #dtf.init<normal, {mean = 0.000000e+00 : f64, stddev = 2.000000e+00 : f64}>
dtf.variable @n : tensor<4xf32> = #dtf.init<normal, {mean = 0.0 : f64, stddev = 2.0 : f64}>
// CHECK: dtf.variable @g : tensor<4x4xf32> = #dtf.init<glorot_uniform>
dtf.variable @g : tensor<4x4xf32> = #dtf.init<glorot_uniform>
// CHECK: dtf.variable @he : tensor<3x3x1x8xf32> = #dtf.init<he_normal, {seed = 1 : i64}>
dtf.variable @he : tensor<3x3x1x8xf32> = #dtf.init<he_normal, {seed = 1 : i64}>
// CHECK: dtf.variable @global_step : tensor<i64> = #dtf.init<zeros>{{$}}
dtf.variable @global_step : tensor<i64> = #dtf.init<zeros>

// CHECK-LABEL: func.func @sources
func.func @sources() -> (tensor<?x784xf32>, tensor<784x10xf32>, tensor<2xi32>) {
  // CHECK: dtf.input "x" : tensor<?x784xf32>
  %x = dtf.input "x" : tensor<?x784xf32>
  // CHECK: dtf.read_variable @W : tensor<784x10xf32>
  %w = dtf.read_variable @W : tensor<784x10xf32>
  // CHECK: dtf.constant dense<[1, 2]> : tensor<2xi32>
  %c = dtf.constant dense<[1, 2]> : tensor<2xi32>
  return %x, %w, %c : tensor<?x784xf32>, tensor<784x10xf32>, tensor<2xi32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<?x10xf32>, %b: tensor<10xf32>, %i: tensor<3xi32>,
                       %c: tensor<?x10xi1>) {
  // CHECK: dtf.add %{{.*}}, %{{.*}} : (tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xf32>
  %0 = dtf.add %a, %b : (tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xf32>
  // CHECK: dtf.sub %{{.*}} : (tensor<10xf32>, tensor<?x10xf32>) -> tensor<?x10xf32>
  %1 = dtf.sub %b, %a : (tensor<10xf32>, tensor<?x10xf32>) -> tensor<?x10xf32>
  // CHECK: dtf.mul {{.*}} : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %2 = dtf.mul %i, %i : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  // CHECK: dtf.div
  %3 = dtf.div %a, %b : (tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xf32>
  // CHECK: dtf.maximum
  %4 = dtf.maximum %a, %b : (tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xf32>
  // CHECK: dtf.minimum
  %5 = dtf.minimum %i, %i : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  // CHECK: dtf.pow
  %6 = dtf.pow %a, %b : (tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xf32>
  // CHECK: dtf.neg %{{.*}} : tensor<3xi32>
  %7 = dtf.neg %i : tensor<3xi32>
  // CHECK: dtf.exp %{{.*}} : tensor<?x10xf32>
  %8 = dtf.exp %a : tensor<?x10xf32>
  // CHECK: dtf.log
  %9 = dtf.log %a : tensor<?x10xf32>
  // CHECK: dtf.sqrt
  %10 = dtf.sqrt %a : tensor<?x10xf32>
  // CHECK: dtf.rsqrt
  %11 = dtf.rsqrt %a : tensor<?x10xf32>
  // CHECK: dtf.relu
  %12 = dtf.relu %a : tensor<?x10xf32>
  // CHECK: dtf.sigmoid
  %13 = dtf.sigmoid %a : tensor<?x10xf32>
  // CHECK: dtf.tanh
  %14 = dtf.tanh %a : tensor<?x10xf32>
  // CHECK: dtf.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x10xi1>, tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xf32>
  %15 = dtf.select %c, %a, %b : (tensor<?x10xi1>, tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xf32>
  // CHECK: dtf.compare eq, {{.*}} : (tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xi1>
  %16 = dtf.compare eq, %a, %b : (tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xi1>
  // CHECK: dtf.compare ne,
  %17 = dtf.compare ne, %i, %i : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
  // CHECK: dtf.compare lt,
  %18 = dtf.compare lt, %a, %a : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?x10xi1>
  // CHECK: dtf.compare le,
  %19 = dtf.compare le, %a, %a : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?x10xi1>
  // CHECK: dtf.compare gt,
  %20 = dtf.compare gt, %a, %a : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?x10xi1>
  // CHECK: dtf.compare ge,
  %21 = dtf.compare ge, %a, %a : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?x10xi1>
  // CHECK: dtf.cast %{{.*}} : tensor<3xi32> to tensor<3xf32>
  %22 = dtf.cast %i : tensor<3xi32> to tensor<3xf32>
  // CHECK: dtf.cast %{{.*}} : tensor<?x10xf32> to tensor<?x10xbf16>
  %23 = dtf.cast %a : tensor<?x10xf32> to tensor<?x10xbf16>
  return
}

// CHECK-LABEL: func.func @linear_and_conv
func.func @linear_and_conv(%x: tensor<?x784xf32>, %w: tensor<784x500xf32>, %dy: tensor<?x500xf32>,
                           %img: tensor<?x28x28x1xf32>, %k: tensor<5x5x1x32xf32>,
                           %bx: tensor<4x2x3xf16>, %by: tensor<4x3x5xf16>) {
  // CHECK: dtf.matmul %{{.*}}, %{{.*}} : (tensor<?x784xf32>, tensor<784x500xf32>) -> tensor<?x500xf32>
  %0 = dtf.matmul %x, %w : (tensor<?x784xf32>, tensor<784x500xf32>) -> tensor<?x500xf32>
  // CHECK: dtf.matmul %{{.*}}, %{{.*}} transpose_a : (tensor<?x784xf32>, tensor<?x500xf32>) -> tensor<784x500xf32>
  %1 = dtf.matmul %x, %dy transpose_a : (tensor<?x784xf32>, tensor<?x500xf32>) -> tensor<784x500xf32>
  // Batch dimensions broadcast: one matrix shared over B and 16 patches.
  // CHECK: dtf.matmul %{{.*}}, %{{.*}} : (tensor<?x16x49xf32>, tensor<49x64xf32>) -> tensor<?x16x64xf32>
  %tok = dtf.reshape %x : tensor<?x784xf32> -> tensor<?x16x49xf32>
  %proj = dtf.constant dense<0.5> : tensor<49x64xf32>
  %bm = dtf.matmul %tok, %proj : (tensor<?x16x49xf32>, tensor<49x64xf32>) -> tensor<?x16x64xf32>
  // CHECK: dtf.matmul %{{.*}}, %{{.*}} transpose_b : (tensor<?x500xf32>, tensor<784x500xf32>) -> tensor<?x784xf32>
  %2 = dtf.matmul %dy, %w transpose_b : (tensor<?x500xf32>, tensor<784x500xf32>) -> tensor<?x784xf32>
  // CHECK: dtf.matmul %{{.*}}, %{{.*}} : (tensor<4x2x3xf16>, tensor<4x3x5xf16>) -> tensor<4x2x5xf16>
  %3 = dtf.matmul %bx, %by : (tensor<4x2x3xf16>, tensor<4x3x5xf16>) -> tensor<4x2x5xf16>
  // CHECK: dtf.conv2d %{{.*}}, %{{.*}} padding same strides [1, 1] dilations [1, 1] : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x28x28x32xf32>
  %4 = dtf.conv2d %img, %k padding same strides [1, 1] dilations [1, 1] : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x28x28x32xf32>
  // CHECK: dtf.conv2d %{{.*}}, %{{.*}} padding valid strides [2, 2] dilations [1, 1] : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x12x12x32xf32>
  %5 = dtf.conv2d %img, %k padding valid strides [2, 2] dilations [1, 1] : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x12x12x32xf32>
  // CHECK: dtf.conv2d {{.*}} padding valid strides [1, 1] dilations [2, 2] : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x20x20x32xf32>
  %6 = dtf.conv2d %img, %k padding valid strides [1, 1] dilations [2, 2] : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x20x20x32xf32>
  // CHECK: dtf.max_pool %{{.*}} padding valid window [2, 2] strides [2, 2] : tensor<?x28x28x32xf32> -> tensor<?x14x14x32xf32>
  %7 = dtf.max_pool %4 padding valid window [2, 2] strides [2, 2] : tensor<?x28x28x32xf32> -> tensor<?x14x14x32xf32>
  // CHECK: dtf.avg_pool %{{.*}} padding same window [3, 3] strides [2, 2] : tensor<?x28x28x32xf32> -> tensor<?x14x14x32xf32>
  %8 = dtf.avg_pool %4 padding same window [3, 3] strides [2, 2] : tensor<?x28x28x32xf32> -> tensor<?x14x14x32xf32>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<?x784xf32>, %w: tensor<784x500xf32>, %a: tensor<?x3xf32>,
                  %b: tensor<?x5xf32>, %bias: tensor<10xf32>) {
  // CHECK: dtf.reshape %{{.*}} : tensor<?x784xf32> -> tensor<?x28x28x1xf32>
  %0 = dtf.reshape %x : tensor<?x784xf32> -> tensor<?x28x28x1xf32>
  // CHECK: dtf.transpose %{{.*}} [1, 0] : tensor<784x500xf32> -> tensor<500x784xf32>
  %1 = dtf.transpose %w [1, 0] : tensor<784x500xf32> -> tensor<500x784xf32>
  // CHECK: dtf.concat %{{.*}}, %{{.*}} axis 1 : (tensor<?x3xf32>, tensor<?x5xf32>) -> tensor<?x8xf32>
  %2 = dtf.concat %a, %b axis 1 : (tensor<?x3xf32>, tensor<?x5xf32>) -> tensor<?x8xf32>
  // CHECK: dtf.concat %{{.*}}, %{{.*}} axis -1 :
  %3 = dtf.concat %a, %a axis -1 : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x6xf32>
  // CHECK: dtf.slice %{{.*}} begin [0, 2] size [-1, 3] : tensor<?x784xf32> -> tensor<?x3xf32>
  %4 = dtf.slice %x begin [0, 2] size [-1, 3] : tensor<?x784xf32> -> tensor<?x3xf32>
  // CHECK: dtf.slice %{{.*}} begin [100, 0] size [-1, 250] : tensor<784x500xf32> -> tensor<684x250xf32>
  %5 = dtf.slice %w begin [100, 0] size [-1, 250] : tensor<784x500xf32> -> tensor<684x250xf32>
  // CHECK: dtf.broadcast_to %{{.*}} batch_of %{{.*}} : tensor<10xf32>, tensor<?x784xf32> -> tensor<?x10xf32>
  %6 = dtf.broadcast_to %bias batch_of %x : tensor<10xf32>, tensor<?x784xf32> -> tensor<?x10xf32>
  return
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%l: tensor<?x10xf32>, %i: tensor<4x5xi64>) {
  // CHECK: dtf.sum %{{.*}} axes [1] : tensor<?x10xf32> -> tensor<?xf32>
  %0 = dtf.sum %l axes [1] : tensor<?x10xf32> -> tensor<?xf32>
  // CHECK: dtf.sum %{{.*}} axes [-1] keep_dims : tensor<?x10xf32> -> tensor<?x1xf32>
  %1 = dtf.sum %l axes [-1] keep_dims : tensor<?x10xf32> -> tensor<?x1xf32>
  // CHECK: dtf.mean %{{.*}} : tensor<?x10xf32> -> tensor<f32>
  %2 = dtf.mean %l : tensor<?x10xf32> -> tensor<f32>
  // CHECK: dtf.mean %{{.*}} keep_dims : tensor<?x10xf32> -> tensor<1x1xf32>
  %3 = dtf.mean %l keep_dims : tensor<?x10xf32> -> tensor<1x1xf32>
  // CHECK: dtf.max %{{.*}} axes [0, 1] : tensor<4x5xi64> -> tensor<i64>
  %4 = dtf.max %i axes [0, 1] : tensor<4x5xi64> -> tensor<i64>
  // CHECK: dtf.argmax %{{.*}} axis 1 : tensor<?x10xf32> -> tensor<?xi32>
  %5 = dtf.argmax %l axis 1 : tensor<?x10xf32> -> tensor<?xi32>
  // CHECK: dtf.argmax %{{.*}} axis -2 : tensor<4x5xi64> -> tensor<5xi64>
  %6 = dtf.argmax %i axis -2 : tensor<4x5xi64> -> tensor<5xi64>
  return
}

// CHECK-LABEL: func.func @losses
func.func @losses(%logits: tensor<?x10xf32>, %p: tensor<?x10xf32>, %y: tensor<?xi32>,
                  %ids: tensor<?x20xi64>, %table: tensor<50000x64xf32>) {
  // CHECK: dtf.softmax %{{.*}} axis -1 : tensor<?x10xf32>
  %0 = dtf.softmax %logits axis -1 : tensor<?x10xf32>
  // CHECK: dtf.log_softmax %{{.*}} axis 1 : tensor<?x10xf32>
  %1 = dtf.log_softmax %logits axis 1 : tensor<?x10xf32>
  // CHECK: dtf.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?xf32>
  %2 = dtf.softmax_cross_entropy %logits, %p : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?xf32>
  // CHECK: dtf.sparse_softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<?x10xf32>, tensor<?xi32>) -> tensor<?xf32>
  %3 = dtf.sparse_softmax_cross_entropy %logits, %y : (tensor<?x10xf32>, tensor<?xi32>) -> tensor<?xf32>
  // CHECK: dtf.one_hot %{{.*}} depth 10 : tensor<?xi32> -> tensor<?x10xf32>
  %4 = dtf.one_hot %y depth 10 : tensor<?xi32> -> tensor<?x10xf32>
  // CHECK: dtf.one_hot %{{.*}} depth 3 {off_value = -1.000000e+00 : f64, on_value = 2.000000e+00 : f64} : tensor<?xi32> -> tensor<?x3xi32>
  %5 = dtf.one_hot %y depth 3 {on_value = 2.0 : f64, off_value = -1.0 : f64} : tensor<?xi32> -> tensor<?x3xi32>
  // CHECK: dtf.gather %{{.*}}, %{{.*}} : (tensor<50000x64xf32>, tensor<?x20xi64>) -> tensor<?x20x64xf32>
  %6 = dtf.gather %table, %ids : (tensor<50000x64xf32>, tensor<?x20xi64>) -> tensor<?x20x64xf32>
  // CHECK: dtf.dropout %{{.*}} rate 5.000000e-01 : tensor<?x10xf32>
  %7 = dtf.dropout %logits rate 0.5 : tensor<?x10xf32>
  // CHECK: dtf.dropout %{{.*}} rate 2.500000e-01 {seed = 42 : i64} : tensor<?x10xf32>
  %8 = dtf.dropout %logits rate 0.25 {seed = 42 : i64} : tensor<?x10xf32>
  return
}

// CHECK-LABEL: func.func @lstm
func.func @lstm(%x: tensor<?x5x3xf32>, %k: tensor<3x8xf32>, %r: tensor<2x8xf32>,
                %b: tensor<8xf32>, %dy: tensor<?x5x2xf32>) {
  // CHECK: dtf.lstm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<?x2xf32>
  %0 = dtf.lstm %x, %k, %r, %b : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<?x2xf32>
  // CHECK: dtf.lstm_train %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} return_sequences : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<?x5x2xf32>, tensor<?xi32>)
  %1, %ws = dtf.lstm_train %x, %k, %r, %b return_sequences : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<?x5x2xf32>, tensor<?xi32>)
  // CHECK: dtf.lstm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} return_sequences : {{.*}} -> (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>)
  %dx, %dk, %dr, %db = dtf.lstm_grad %x, %k, %r, %b, %1, %ws, %dy return_sequences
      : (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<?x5x2xf32>, tensor<?xi32>, tensor<?x5x2xf32>)
        -> (tensor<?x5x3xf32>, tensor<3x8xf32>, tensor<2x8xf32>, tensor<8xf32>)
  return
}

// CHECK-LABEL: func.func @gru
func.func @gru(%x: tensor<?x5x3xf32>, %k: tensor<3x6xf32>, %r: tensor<2x6xf32>,
               %b: tensor<6xf32>, %rb: tensor<6xf32>, %dy: tensor<?x2xf32>) {
  // CHECK: dtf.gru %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} return_sequences : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<?x5x2xf32>
  %0 = dtf.gru %x, %k, %r, %b, %rb return_sequences : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<?x5x2xf32>
  // CHECK: dtf.gru_train %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<?x2xf32>, tensor<?xi32>)
  %1, %ws = dtf.gru_train %x, %k, %r, %b, %rb : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<?x2xf32>, tensor<?xi32>)
  // CHECK: dtf.gru_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : {{.*}} -> (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>)
  %dx, %dk, %dr, %db, %drb = dtf.gru_grad %x, %k, %r, %b, %rb, %1, %ws, %dy
      : (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?x2xf32>)
        -> (tensor<?x5x3xf32>, tensor<3x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// The ops of the ps/worker cut (DtfDistOps.td), as dtfc's per-task programs hold them.
// CHECK-LABEL: func.func @cut
// CHECK: dtf.send %{{.*}} {key = "v16:1->0", peer = 0 : i64} : tensor<?x8xf32>
// CHECK: dtf.recv {key = "v16:1->0", peer = 1 : i64} : tensor<?x8xf32>
// CHECK: dtf.ps_gather %{{.*}} {variable = "words/embeddings"} : (tensor<?x3xi64>) -> tensor<?x3x4xf32>
func.func @cut(%h: tensor<?x8xf32>, %ids: tensor<?x3xi64>) -> (tensor<?x8xf32>, tensor<?x3x4xf32>) {
  dtf.send %h {key = "v16:1->0", peer = 0 : i64} : tensor<?x8xf32>
  %r = dtf.recv {key = "v16:1->0", peer = 1 : i64} : tensor<?x8xf32>
  %e = dtf.ps_gather %ids {variable = "words/embeddings"} : (tensor<?x3xi64>) -> tensor<?x3x4xf32>
  return %r, %e : tensor<?x8xf32>, tensor<?x3x4xf32>
}

// A shard of a partitioned variable and what its ps takes of a push
// (dtf-shard-ps-update), and an update's region that yields nothing.
// CHECK: dtf.variable_shard @"emb/part_1" of @emb row_offset 3 : tensor<2x4xf32>
// CHECK-LABEL: func.func @shard
// CHECK: dtf.pushed {key = "emb:grad/part_1", row_offset = 3 : i64, rows = 2 : i64, variable = @emb} : tensor<2x4xf32>
// CHECK: dtf.pushed {key = "emb:grad:0/part_1", row_offset = 3 : i64, rows = 2 : i64, sparse, variable = @emb} : tensor<?xi64>, tensor<?x4xf32>
// CHECK: dtf.apply_sgd @"emb/part_1", %{{.*}}, %{{.*}} {dtf.held = "emb/part_1"}
// CHECK: dtf.yield{{$}}
dtf.variable @emb : tensor<5x4xf32> = #dtf.init<zeros> {dtf.partitions = 2 : i64}
dtf.variable_shard @"emb/part_1" of @emb row_offset 3 : tensor<2x4xf32>
func.func @shard(%lr: tensor<f32>) {
  %g = dtf.pushed {key = "emb:grad/part_1", row_offset = 3 : i64, rows = 2 : i64, variable = @emb} : tensor<2x4xf32>
  %p:2 = dtf.pushed {key = "emb:grad:0/part_1", row_offset = 3 : i64, rows = 2 : i64, sparse, variable = @emb} : tensor<?xi64>, tensor<?x4xf32>
  dtf.apply_sgd @"emb/part_1", %g, %lr {dtf.held = "emb/part_1"} : tensor<2x4xf32>, tensor<f32>
  dtf.fused(%g, %lr) {kernel = 0 : i64} : (tensor<2x4xf32>, tensor<f32>) -> () {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<f32>):
    dtf.apply_sgd @"emb/part_1", %a, %b : tensor<2x4xf32>, tensor<f32>
    dtf.yield
  }
  return
}
