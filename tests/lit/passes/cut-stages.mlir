// dtf-cut-stages: the worker_step of a replica that spans worker tasks, cut
// into one function per stage with dtf.send after the op that makes a value
// another stage uses and dtf.recv before its first use there. Constants and
// variable reads are repeated where used; inputs, fetches and pushes stay on
// stage 0.
// RUN: dtf-opt %s --dtf-cut-stages --split-input-file --verify-diagnostics | FileCheck %s

module attributes {dtf.model = "m"} {
  dtf.variable @W : tensor<4x3xf32> = #dtf.init<zeros> {trainable}
  func.func @worker_step() -> (tensor<?x3xf32> {dtf.name = "logits"}) {
    %x = dtf.input "x" : tensor<?x4xf32>
    %w = dtf.read_variable @W : tensor<4x3xf32>
    %h = dtf.matmul %x, %w {dtf.device = "/job:worker/task:1"} : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
    %r = dtf.relu %h {dtf.device = "/job:worker/task:2"} : tensor<?x3xf32>
    %s = dtf.add %r, %h : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
    %g = dtf.sum %w axes [0] {dtf.device = "/job:worker/task:2"} : tensor<4x3xf32> -> tensor<3xf32>
    dtf.push %g {key = "W:grad", variable = @W} : tensor<3xf32>
    return %s : tensor<?x3xf32>
  }
}

// CHECK-LABEL: func.func @worker_step_stage_0() -> (tensor<?x3xf32> {dtf.name = "logits"})
// CHECK-NEXT: %[[X:.*]] = dtf.input "x"
// CHECK-NEXT: dtf.send %[[X]] {key = "v0:0->1", peer = 1 : i64}
// CHECK-NEXT: %[[R:.*]] = dtf.recv {key = "v3:2->0", peer = 2 : i64}
// CHECK-NEXT: %[[H:.*]] = dtf.recv {key = "v2:1->0", peer = 1 : i64}
// CHECK-NEXT: %[[S:.*]] = dtf.add %[[R]], %[[H]]
// CHECK-NEXT: %[[G:.*]] = dtf.recv {key = "v5:2->0", peer = 2 : i64}
// CHECK-NEXT: dtf.push %[[G]] {key = "W:grad", variable = @W}
// CHECK-NEXT: return %[[S]]
// CHECK-LABEL: func.func @worker_step_stage_1() {
// CHECK-NEXT: %[[W1:.*]] = dtf.read_variable @W
// CHECK-NEXT: %[[X1:.*]] = dtf.recv {key = "v0:0->1", peer = 0 : i64}
// CHECK-NEXT: %[[H1:.*]] = dtf.matmul %[[X1]], %[[W1]]
// CHECK-NEXT: dtf.send %[[H1]] {key = "v2:1->0", peer = 0 : i64}
// CHECK-NEXT: dtf.send %[[H1]] {key = "v2:1->2", peer = 2 : i64}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @worker_step_stage_2() {
// CHECK-NEXT: dtf.read_variable @W
// CHECK-NEXT: dtf.recv {key = "v2:1->2", peer = 1 : i64}
// CHECK-NEXT: dtf.relu
// CHECK-NEXT: dtf.send %{{.*}} {key = "v3:2->0", peer = 0 : i64}
// CHECK-NEXT: dtf.sum
// CHECK-NEXT: dtf.send %{{.*}} {key = "v5:2->0", peer = 0 : i64}
// CHECK-NEXT: return

// -----

// One task: nothing to cut.
module attributes {dtf.model = "m"} {
  func.func @worker_step() -> (tensor<f32> {dtf.name = "loss"}) {
    %l = dtf.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @worker_step()
// CHECK-NOT: @worker_step_stage_0

// -----

module attributes {dtf.model = "m"} {
  func.func @worker_step() -> (tensor<?x4xf32> {dtf.name = "y"}) {
    %x = dtf.input "x" : tensor<?x4xf32>
    // expected-error @+1 {{dtf.relu is placed on /job:worker/task:1024: a replica spans at most 1024 worker tasks}}
    %r = dtf.relu %x {dtf.device = "/job:worker/task:1024"} : tensor<?x4xf32>
    return %r : tensor<?x4xf32>
  }
}
