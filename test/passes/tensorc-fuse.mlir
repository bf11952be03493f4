// RUN: tensorc-opt %s -split-input-file -tensorc-fuse | FileCheck %s
// RUN: tensorc-opt %s -split-input-file -tensorc-fuse=report=true -o /dev/null | FileCheck %s --check-prefix=REPORT

// A chain of elementwise ops with a broadcast and a literal is one kernel.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[K:.*]] = tc.fused "k0"(%arg0, %arg1) {kind = "elementwise"}
// CHECK:        tc.constant
// CHECK:        tc.mul
// CHECK:        tc.add
// CHECK:        tc.tanh
// CHECK:        tc.yield
// CHECK:      return %[[K]]
// REPORT-LABEL: fusion of @chain: 1 kernels, 0 library calls
// REPORT-NEXT: kernel k0 (elementwise): a (mul), b (add), c (tanh)
func.func @chain(%x: !tc.tensor<[B, 4], f32>, %y: !tc.tensor<[4], f32>) -> !tc.tensor<[B, 4], f32> {
  %two = tc.constant {tc.literal, value = dense<2.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %a = tc.mul %x, %two : (!tc.tensor<[B, 4], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[B, 4], f32> loc("a")
  %b = tc.add %a, %y : (!tc.tensor<[B, 4], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[B, 4], f32> loc("b")
  %c = tc.tanh %b : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("c")
  return %c : !tc.tensor<[B, 4], f32>
}

// -----

// matmul keeps its elementwise epilogue but not a prologue; the softmax
// takes its epilogue.
// REPORT-LABEL: fusion of @mlp: 3 kernels
// REPORT-NEXT: kernel k0 (elementwise): s (mul)
// REPORT-NEXT: kernel k1 (matmul): m (matmul), r (relu), e (exp)
// REPORT-NEXT: kernel k2 (reduction): sm (softmax), o (mul)
// REPORT: not fused: s (mul) -> m (matmul): no prologue fusion into m (matmul): the library call reads its operands from memory
// REPORT: not fused: e (exp) -> sm (softmax): both kernels have an anchor (m (matmul), sm (softmax))
func.func @mlp(%x: !tc.tensor<[B, 4], f32>, %w: !tc.tensor<[4, 4], f32>) -> !tc.tensor<[B, 4], f32> {
  %s = tc.mul %x, %x : (!tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("s")
  %m = tc.matmul %s, %w : (!tc.tensor<[B, 4], f32>, !tc.tensor<[4, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("m")
  %r = tc.relu %m : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("r")
  %e = tc.exp %r : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("e")
  %sm = tc.softmax %e : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("sm")
  %o = tc.mul %sm, %x : (!tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("o")
  return %o : !tc.tensor<[B, 4], f32>
}

// -----

// Two independent reductions of the same input share one kernel (horizontal).
// CHECK-LABEL: func.func @horizontal
// CHECK-NEXT: %[[K:.*]]:2 = tc.fused "k0"(%arg0, %arg1) {kind = "reduction"}
// CHECK:      return %[[K]]#0, %[[K]]#1
// REPORT-LABEL: fusion of @horizontal: 1 kernels
func.func @horizontal(%g: !tc.tensor<[B, 8], f32>, %x: !tc.tensor<[B, 8], f32>) -> (!tc.tensor<[8], f32>, !tc.tensor<[8], f32>) {
  %gx = tc.mul %g, %x : (!tc.tensor<[B, 8], f32>, !tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 8], f32> loc("gx")
  %dw = tc.sum %gx {axes = array<i64: 0>} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[8], f32> loc("dw")
  %db = tc.sum %g {axes = array<i64: 0>} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[8], f32> loc("db")
  return %dw, %db : !tc.tensor<[8], f32>, !tc.tensor<[8], f32>
}

// -----

// Attention is its own kernel; a lone matmul is a library call; reshapes
// at kernel boundaries alias.
// CHECK-LABEL: func.func @attention
// CHECK:      tc.fused "k0"({{.*}}) {kind = "attention"}
// CHECK:      tc.reshape
// CHECK:      tc.matmul
// REPORT-LABEL: fusion of @attention: 1 kernels, 1 library calls, 1 view-only groups (no launch: reshapes, GEMM transposes)
// REPORT: not fused: a (scaled_dot_product_attention) -> f (reshape): attention runs as its own kernel
func.func @attention(%q: !tc.tensor<[2, 8, 4], f32>, %w: !tc.tensor<[4, 4], f32>) -> !tc.tensor<[16, 4], f32> {
  %a = tc.scaled_dot_product_attention %q, %q, %q : (!tc.tensor<[2, 8, 4], f32>, !tc.tensor<[2, 8, 4], f32>, !tc.tensor<[2, 8, 4], f32>) -> !tc.tensor<[2, 8, 4], f32> loc("a")
  %f = tc.reshape %a {shape = [16, 4]} : (!tc.tensor<[2, 8, 4], f32>) -> !tc.tensor<[16, 4], f32> loc("f")
  %m = tc.matmul %f, %w : (!tc.tensor<[16, 4], f32>, !tc.tensor<[4, 4], f32>) -> !tc.tensor<[16, 4], f32> loc("m")
  return %m : !tc.tensor<[16, 4], f32>
}
