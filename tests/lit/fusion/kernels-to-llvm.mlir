// dtf-lower-kernels-to-llvm: the loop functions in the LLVM dialect, ready
// for translation: a loop in blocks; float32 exp and tanh as polynomial
// approximations (fma, floor, fabs: no call, so the loop vectorizes);
// float64 tanh as a libm call; nothing of scf, arith, math or func left.
// RUN: dtf-opt %s --dtf-fused-to-loops --dtf-lower-kernels-to-llvm | FileCheck %s

// CHECK: llvm.func @tanh(f64) -> f64
// CHECK-NOT: llvm.func @tanhf
// CHECK-LABEL: llvm.func @dtf_fused_0
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// CHECK-NOT: {{scf|arith|math}}.
// CHECK: llvm.icmp "slt"
// CHECK-NOT: llvm.call
// CHECK: llvm.intr.floor
// CHECK: llvm.intr.fma
// CHECK: llvm.intr.fabs
// CHECK: llvm.intr.sqrt
// CHECK: llvm.fdiv
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @dtf_fused_1
// CHECK: llvm.call @tanh
// CHECK: llvm.return
func.func @act(%x: tensor<?x7xf32>) -> tensor<?x7xf32> {
  %r = dtf.fused(%x) {kernel = 0 : i64} : (tensor<?x7xf32>) -> tensor<?x7xf32> {
  ^bb0(%a: tensor<?x7xf32>):
    %e = dtf.exp %a : tensor<?x7xf32>
    %t = dtf.tanh %e : tensor<?x7xf32>
    %s = dtf.rsqrt %t : tensor<?x7xf32>
    dtf.yield %s : tensor<?x7xf32>
  }
  return %r : tensor<?x7xf32>
}

func.func @act64(%x: tensor<?x7xf64>) -> tensor<?x7xf64> {
  %r = dtf.fused(%x) {kernel = 1 : i64} : (tensor<?x7xf64>) -> tensor<?x7xf64> {
  ^bb0(%a: tensor<?x7xf64>):
    %t = dtf.tanh %a : tensor<?x7xf64>
    %n = dtf.neg %t : tensor<?x7xf64>
    dtf.yield %n : tensor<?x7xf64>
  }
  return %r : tensor<?x7xf64>
}
