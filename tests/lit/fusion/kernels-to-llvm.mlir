// dtf-lower-kernels-to-llvm: the loop functions in the LLVM dialect, ready
// for translation: a loop in blocks, exp as an LLVM intrinsic, tanh as a
// libm call, nothing of scf, arith, math or func left.
// RUN: dtf-opt %s --dtf-fused-to-loops --dtf-lower-kernels-to-llvm | FileCheck %s

// CHECK: llvm.func @tanhf(f32) -> f32
// CHECK-LABEL: llvm.func @dtf_fused_0
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// CHECK-NOT: {{scf|arith|math}}.
// CHECK: llvm.icmp "slt"
// CHECK: llvm.intr.exp
// CHECK: llvm.call @tanhf
// CHECK: llvm.intr.sqrt
// CHECK: llvm.fdiv
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
