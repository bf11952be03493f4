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

// A matmul takes no prologue; an epilogue read only by reductions joins
// their kernel (which reads the GEMM's product: no epilogue kernel writing
// relu/exp for the softmax to read back).
// REPORT-LABEL: fusion of @mlp: 2 kernels, 1 library calls
// REPORT-NEXT: kernel k0 (elementwise): s (mul)
// REPORT-NEXT: library m (matmul)
// REPORT-NEXT: kernel k1 (reduction): r (relu), e (exp), sm (softmax), o (mul)
// REPORT: not fused: s (mul) -> m (matmul): no prologue fusion into m (matmul): the library call reads its operands from memory
// REPORT: not fused: m (matmul) -> r (relu): read only by reductions: joins their kernel
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

// An epilogue that is also a result stays with the matmul (it is written
// anyway); the softmax reads it.
// REPORT-LABEL: fusion of @epilogue_kept: 2 kernels
// REPORT-NEXT: kernel k0 (matmul): m (matmul), r (relu), e (exp)
// REPORT-NEXT: kernel k1 (reduction): sm (softmax)
// REPORT: not fused: e (exp) -> sm (softmax): both kernels have an anchor (m (matmul), sm (softmax))
func.func @epilogue_kept(%x: !tc.tensor<[B, 4], f32>, %w: !tc.tensor<[4, 4], f32>) -> (!tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>) {
  %m = tc.matmul %x, %w : (!tc.tensor<[B, 4], f32>, !tc.tensor<[4, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("m")
  %r = tc.relu %m : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("r")
  %e = tc.exp %r : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("e")
  %sm = tc.softmax %e : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("sm")
  return %e, %sm : !tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>
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

// An elementwise group that reads what a GEMM's epilogue reads joins that
// kernel (an erf-gelu's backward: the activation recomputed for the next
// weight gradient beside its gradient, both from the pre-activation h);
// one over another value (exp of w) does not.
// REPORT-LABEL: fusion of @epilogue_sibling: 2 kernels, 2 library calls
// REPORT-NEXT: kernel k0 (elementwise): e (exp)
// REPORT-NEXT: kernel k1 (matmul): a (gelu), da (matmul), gp (mul), dh (mul)
// REPORT-NEXT: library dw (matmul)
// REPORT-NEXT: library dw2 (matmul)
func.func @epilogue_sibling(%h: !tc.tensor<[B, 8], f32>, %dy: !tc.tensor<[B, 4], f32>, %w: !tc.tensor<[4, 8], f32>, %x: !tc.tensor<[B, 8], f32>) -> (!tc.tensor<[8, 4], f32>, !tc.tensor<[8, 8], f32>, !tc.tensor<[4, 8], f32>) {
  %a = tc.gelu %h : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 8], f32> loc("a")
  %e = tc.exp %w : (!tc.tensor<[4, 8], f32>) -> !tc.tensor<[4, 8], f32> loc("e")
  %at = tc.transpose %a {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[8, B], f32> loc("at")
  %dw = tc.matmul %at, %dy : (!tc.tensor<[8, B], f32>, !tc.tensor<[B, 4], f32>) -> !tc.tensor<[8, 4], f32> loc("dw")
  %da = tc.matmul %dy, %e : (!tc.tensor<[B, 4], f32>, !tc.tensor<[4, 8], f32>) -> !tc.tensor<[B, 8], f32> loc("da")
  %gp = tc.mul %h, %h : (!tc.tensor<[B, 8], f32>, !tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 8], f32> loc("gp")
  %dh = tc.mul %da, %gp : (!tc.tensor<[B, 8], f32>, !tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 8], f32> loc("dh")
  %dht = tc.transpose %dh {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[8, B], f32> loc("dht")
  %dw2 = tc.matmul %dht, %x : (!tc.tensor<[8, B], f32>, !tc.tensor<[B, 8], f32>) -> !tc.tensor<[8, 8], f32> loc("dw2")
  return %dw, %dw2, %e : !tc.tensor<[8, 4], f32>, !tc.tensor<[8, 8], f32>, !tc.tensor<[4, 8], f32>
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

// -----

// A cross-entropy forward + gradient after decomposition. The one-hot
// eq(target[8,1], iota[1,16]) is recomputed in each kernel that reads it
// (never an [8,16] tensor in memory; the reshape of the target, an alias of
// a graph input, is copied into each kernel so that it ties none together),
// and the count of valid targets is an early kernel of its own, so the
// gradient's scale rides in the softmax kernel: one kernel reads the logits.
// CHECK-LABEL: func.func @xent_grad
// CHECK-NEXT: %[[CNT:.*]] = tc.fused "k0"(%arg1) {kind = "reduction"} : (!tc.tensor<[8], i64>) -> !tc.tensor<[], f32>
// CHECK: %[[ROWS:.*]]:2 = tc.fused "k1"(%arg0, %arg1, %[[CNT]]) {kind = "reduction"} : {{.*}} -> (!tc.tensor<[8], f32>, !tc.tensor<[8, 16], f32>)
// CHECK: tc.reshape %{{.*}} {shape = [8, 1]} : (!tc.tensor<[8], i64>)
// CHECK: tc.fused "k2"(%[[ROWS]]#0, %[[CNT]]) {kind = "reduction"}
// CHECK: tc.fused "k3"(%arg1) {kind = "elementwise"} : (!tc.tensor<[8], i64>) -> !tc.tensor<[8, 16], f32>
// CHECK: tc.reshape %{{.*}} {shape = [8, 1]} : (!tc.tensor<[8], i64>)
// REPORT-LABEL: fusion of @xent_grad: 4 kernels
// REPORT-NEXT: kernel k0 (reduction): v (ne), vf (cast), cnt (sum)
// REPORT-NEXT: kernel k1 (reduction): m (max), {{.*}}, tr (reshape), ir (reshape), eq (eq), oh (cast), d (sub), sc (div), sr (reshape), g (mul)
// REPORT-NEXT: kernel k2 (reduction): ls (sum), loss (div)
// REPORT-NEXT: kernel k3 (elementwise): {{.*}}tr (reshape), {{.*}}eq (eq), oh (cast), oh2 (mul)
// REPORT: not fused: cnt (sum) -> loss (div): a reduction of graph inputs (cnt (sum)) stays independent of ls (sum), which waits for other kernels
func.func @xent_grad(%x: !tc.tensor<[8, 16], f32>, %t: !tc.tensor<[8], i64>) -> (!tc.tensor<[], f32>, !tc.tensor<[8, 16], f32>, !tc.tensor<[8, 16], f32>) {
  %ig = tc.constant {tc.literal, value = dense<-100> : tensor<i64>} : () -> !tc.tensor<[], i64>
  %m = tc.max %x {axes = array<i64: 1>, keepdim = true} : (!tc.tensor<[8, 16], f32>) -> !tc.tensor<[8, 1], f32> loc("m")
  %s = tc.sub %x, %m : (!tc.tensor<[8, 16], f32>, !tc.tensor<[8, 1], f32>) -> !tc.tensor<[8, 16], f32> loc("s")
  %e = tc.exp %s : (!tc.tensor<[8, 16], f32>) -> !tc.tensor<[8, 16], f32> loc("e")
  %z = tc.sum %e {axes = array<i64: 1>, keepdim = true} : (!tc.tensor<[8, 16], f32>) -> !tc.tensor<[8, 1], f32> loc("z")
  %l = tc.log %z : (!tc.tensor<[8, 1], f32>) -> !tc.tensor<[8, 1], f32> loc("l")
  %r = tc.reshape %l {shape = [8]} : (!tc.tensor<[8, 1], f32>) -> !tc.tensor<[8], f32> loc("r")
  %v = tc.ne %t, %ig : (!tc.tensor<[8], i64>, !tc.tensor<[], i64>) -> !tc.tensor<[8], i1> loc("v")
  %vf = tc.cast %v {to = f32} : (!tc.tensor<[8], i1>) -> !tc.tensor<[8], f32> loc("vf")
  %lm = tc.mul %r, %vf : (!tc.tensor<[8], f32>, !tc.tensor<[8], f32>) -> !tc.tensor<[8], f32> loc("lm")
  %cnt = tc.sum %vf : (!tc.tensor<[8], f32>) -> !tc.tensor<[], f32> loc("cnt")
  %ls = tc.sum %lm : (!tc.tensor<[8], f32>) -> !tc.tensor<[], f32> loc("ls")
  %loss = tc.div %ls, %cnt : (!tc.tensor<[], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[], f32> loc("loss")
  %p = tc.div %e, %z : (!tc.tensor<[8, 16], f32>, !tc.tensor<[8, 1], f32>) -> !tc.tensor<[8, 16], f32> loc("p")
  %io = tc.iota {length = [16]} : () -> !tc.tensor<[16], i64>
  %ir = tc.reshape %io {shape = [1, 16]} : (!tc.tensor<[16], i64>) -> !tc.tensor<[1, 16], i64> loc("ir")
  %tr = tc.reshape %t {shape = [8, 1]} : (!tc.tensor<[8], i64>) -> !tc.tensor<[8, 1], i64> loc("tr")
  %eq = tc.eq %tr, %ir : (!tc.tensor<[8, 1], i64>, !tc.tensor<[1, 16], i64>) -> !tc.tensor<[8, 16], i1> loc("eq")
  %oh = tc.cast %eq {to = f32} : (!tc.tensor<[8, 16], i1>) -> !tc.tensor<[8, 16], f32> loc("oh")
  %d = tc.sub %p, %oh : (!tc.tensor<[8, 16], f32>, !tc.tensor<[8, 16], f32>) -> !tc.tensor<[8, 16], f32> loc("d")
  %sc = tc.div %vf, %cnt : (!tc.tensor<[8], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[8], f32> loc("sc")
  %sr = tc.reshape %sc {shape = [8, 1]} : (!tc.tensor<[8], f32>) -> !tc.tensor<[8, 1], f32> loc("sr")
  %g = tc.mul %d, %sr : (!tc.tensor<[8, 16], f32>, !tc.tensor<[8, 1], f32>) -> !tc.tensor<[8, 16], f32> loc("g")
  %oh2 = tc.mul %oh, %oh : (!tc.tensor<[8, 16], f32>, !tc.tensor<[8, 16], f32>) -> !tc.tensor<[8, 16], f32> loc("oh2")
  return %loss, %g, %oh2 : !tc.tensor<[], f32>, !tc.tensor<[8, 16], f32>, !tc.tensor<[8, 16], f32>
}

// -----

// The composite form (before decomposition): a cross-entropy loss and its
// gradient's softmax over the same rows of the same logits share one
// kernel (one read of each row for both), though neither uses the other.
// REPORT-LABEL: fusion of @xent_composite: 1 kernels
// REPORT-NEXT: kernel k0 (reduction): loss (cross_entropy), p (softmax), g (mul)
func.func @xent_composite(%x: !tc.tensor<[8, 16], f32>, %t: !tc.tensor<[8], i64>) -> (!tc.tensor<[], f32>, !tc.tensor<[8, 16], f32>) {
  %loss = tc.cross_entropy %x, %t : (!tc.tensor<[8, 16], f32>, !tc.tensor<[8], i64>) -> !tc.tensor<[], f32> loc("loss")
  %p = tc.softmax %x {axis = 1 : i64} : (!tc.tensor<[8, 16], f32>) -> !tc.tensor<[8, 16], f32> loc("p")
  %h = tc.constant {tc.literal, value = dense<0.125> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %g = tc.mul %p, %h : (!tc.tensor<[8, 16], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[8, 16], f32> loc("g")
  return %loss, %g : !tc.tensor<[], f32>, !tc.tensor<[8, 16], f32>
}

// -----

// A training step of a summed softmax is one kernel: the loss (a sum over
// every axis, whose first stage runs over the softmax's rows) joins the
// softmax, and the backward's recomputed 1 - rowsum joins the gradient
// before the gradient joins the softmax (its own group first, it made a
// path between the two that read as a cycle).
// CHECK-LABEL: func.func @softmax_step
// CHECK: tc.fused "k0"
// CHECK-NOT: tc.fused
// CHECK: return
// REPORT-LABEL: fusion of @softmax_step: 1 kernels
// REPORT-NEXT: kernel k0 (reduction): p (softmax), loss (sum), {{.*}}s (sum), d (sub), g (mul)
func.func @softmax_step(%x: !tc.tensor<[64, 32], f32>) -> (!tc.tensor<[], f32>, !tc.tensor<[64, 32], f32>) {
  %one = tc.constant {value = dense<1.0> : tensor<1x1xf32>} : () -> !tc.tensor<[1, 1], f32>
  %p = tc.softmax %x : (!tc.tensor<[64, 32], f32>) -> !tc.tensor<[64, 32], f32> loc("p")
  %loss = tc.sum %p : (!tc.tensor<[64, 32], f32>) -> !tc.tensor<[], f32> loc("loss")
  %dy = tc.broadcast_to %one {shape = [64, 32]} : (!tc.tensor<[1, 1], f32>) -> !tc.tensor<[64, 32], f32> loc("dy")
  %py = tc.mul %dy, %p : (!tc.tensor<[64, 32], f32>, !tc.tensor<[64, 32], f32>) -> !tc.tensor<[64, 32], f32> loc("py")
  %s = tc.sum %py {axes = array<i64: -1>, keepdim = true} : (!tc.tensor<[64, 32], f32>) -> !tc.tensor<[64, 1], f32> loc("s")
  %d = tc.sub %dy, %s : (!tc.tensor<[64, 32], f32>, !tc.tensor<[64, 1], f32>) -> !tc.tensor<[64, 32], f32> loc("d")
  %g = tc.mul %p, %d : (!tc.tensor<[64, 32], f32>, !tc.tensor<[64, 32], f32>) -> !tc.tensor<[64, 32], f32> loc("g")
  return %loss, %g : !tc.tensor<[], f32>, !tc.tensor<[64, 32], f32>
}

// -----

// A column reduction (a norm's weight gradient) of an elementwise function
// of x and row statistics recomputes that function from x in its own
// kernel: the row-wise kernel does not write it to memory for the next.
// CHECK-LABEL: func.func @norm_weight_grad
// CHECK: tc.fused "k0"
// CHECK: tc.fused "k1"
// CHECK-NOT: tc.fused
// CHECK: return
// REPORT-LABEL: fusion of @norm_weight_grad: 2 kernels
// REPORT-NEXT: kernel k0 (reduction): m (mean), xc (sub), v (mul), s (sum), gx (mul)
// REPORT-NEXT: kernel k1 (reduction): xc (sub), h (mul), dw (sum)
// REPORT-NOT: not fused
func.func @norm_weight_grad(%x: !tc.tensor<[B, 8], f32>, %dy: !tc.tensor<[8], f32>) -> (!tc.tensor<[8], f32>, !tc.tensor<[B, 8], f32>) {
  %m = tc.mean %x {axes = array<i64: -1>, keepdim = true} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 1], f32> loc("m")
  %xc = tc.sub %x, %m : (!tc.tensor<[B, 8], f32>, !tc.tensor<[B, 1], f32>) -> !tc.tensor<[B, 8], f32> loc("xc")
  %v = tc.mul %xc, %xc : (!tc.tensor<[B, 8], f32>, !tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 8], f32> loc("v")
  %s = tc.sum %v {axes = array<i64: -1>, keepdim = true} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 1], f32> loc("s")
  %gx = tc.mul %xc, %s : (!tc.tensor<[B, 8], f32>, !tc.tensor<[B, 1], f32>) -> !tc.tensor<[B, 8], f32> loc("gx")
  %h = tc.mul %xc, %dy : (!tc.tensor<[B, 8], f32>, !tc.tensor<[8], f32>) -> !tc.tensor<[B, 8], f32> loc("h")
  %dw = tc.sum %h {axes = array<i64: 0>} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[8], f32> loc("dw")
  return %dw, %gx : !tc.tensor<[8], f32>, !tc.tensor<[B, 8], f32>
}

// -----

// Two full-size graph inputs (x and a full dy, as in a backward graph): the
// column reduction recomputes x_hat * dy from both, since they are in memory
// anyway; no elementwise kernel writes the product first.
// CHECK-LABEL: func.func @norm_weight_grad_two_inputs
// CHECK: tc.fused "k0"
// CHECK: tc.fused "k1"
// CHECK-NOT: tc.fused
// CHECK: return
// REPORT-LABEL: fusion of @norm_weight_grad_two_inputs: 2 kernels
// REPORT-NEXT: kernel k0 (reduction): m (mean), xc (sub), gx (mul)
// REPORT-NEXT: kernel k1 (reduction): xc (sub), h (mul), dw (sum)
func.func @norm_weight_grad_two_inputs(%x: !tc.tensor<[B, 8], f32>, %dy: !tc.tensor<[B, 8], f32>) -> (!tc.tensor<[8], f32>, !tc.tensor<[B, 8], f32>) {
  %m = tc.mean %x {axes = array<i64: -1>, keepdim = true} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 1], f32> loc("m")
  %xc = tc.sub %x, %m : (!tc.tensor<[B, 8], f32>, !tc.tensor<[B, 1], f32>) -> !tc.tensor<[B, 8], f32> loc("xc")
  %gx = tc.mul %xc, %dy : (!tc.tensor<[B, 8], f32>, !tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 8], f32> loc("gx")
  %h = tc.mul %xc, %dy : (!tc.tensor<[B, 8], f32>, !tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 8], f32> loc("h")
  %dw = tc.sum %h {axes = array<i64: 0>} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[8], f32> loc("dw")
  return %dw, %gx : !tc.tensor<[8], f32>, !tc.tensor<[B, 8], f32>
}

// -----

// A transpose read only by a GEMM stays out of its producer's kernel: the
// kernel writes the one-hot row-major and the GEMM reads it with its
// transpose flag (inside, the kernel wrote it column-wise).
// REPORT-LABEL: fusion of @transpose_flag: 1 kernels, 1 library calls, 1 view-only groups
// REPORT-NEXT: kernel k0 (elementwise): eq (eq), oh (cast)
// REPORT-NEXT: library g (matmul)
// REPORT: not fused: oh (cast) -> ohT (transpose): a transpose read only by GEMMs is their transpose flag, not a copy
func.func @transpose_flag(%t: !tc.tensor<[8, 1], i64>, %dy: !tc.tensor<[8, 4], f32>) -> !tc.tensor<[16, 4], f32> {
  %io = tc.iota {length = [16]} : () -> !tc.tensor<[16], i64>
  %eq = tc.eq %t, %io : (!tc.tensor<[8, 1], i64>, !tc.tensor<[16], i64>) -> !tc.tensor<[8, 16], i1> loc("eq")
  %oh = tc.cast %eq {to = f32} : (!tc.tensor<[8, 16], i1>) -> !tc.tensor<[8, 16], f32> loc("oh")
  %ohT = tc.transpose %oh {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[8, 16], f32>) -> !tc.tensor<[16, 8], f32> loc("ohT")
  %g = tc.matmul %ohT, %dy : (!tc.tensor<[16, 8], f32>, !tc.tensor<[8, 4], f32>) -> !tc.tensor<[16, 4], f32> loc("g")
  return %g : !tc.tensor<[16, 4], f32>
}

// -----

// An output that is a reshape of another output of the same kernel is a view
// of it after the kernel, not a second write: the kernel yields the gradient
// once and the [8, 16] reshape the second GEMM reads aliases it (an LM head's
// [4096, 32000] logits gradient was written twice, 262 MB each).
// CHECK-LABEL: func.func @reshaped_output
// CHECK: %[[K:.*]] = tc.fused "k0"(%arg0) {kind = "elementwise"} : (!tc.tensor<[2, 4, 16], f32>) -> !tc.tensor<[2, 4, 16], f32>
// CHECK: tc.yield %{{.*}} : !tc.tensor<[2, 4, 16], f32>
// CHECK: tc.reshape %[[K]] {shape = [8, 16]}
// REPORT-LABEL: fusion of @reshaped_output: 1 kernels, 2 library calls, 1 view-only groups
// REPORT-NEXT: kernel k0 (elementwise): g (exp), g2 (reshape)
func.func @reshaped_output(%x: !tc.tensor<[2, 4, 16], f32>, %w: !tc.tensor<[16, 3], f32>, %a: !tc.tensor<[3, 8], f32>) -> (!tc.tensor<[2, 4, 3], f32>, !tc.tensor<[3, 16], f32>) {
  %g = tc.exp %x : (!tc.tensor<[2, 4, 16], f32>) -> !tc.tensor<[2, 4, 16], f32> loc("g")
  %d = tc.matmul %g, %w : (!tc.tensor<[2, 4, 16], f32>, !tc.tensor<[16, 3], f32>) -> !tc.tensor<[2, 4, 3], f32> loc("d")
  %g2 = tc.reshape %g {shape = [8, 16]} : (!tc.tensor<[2, 4, 16], f32>) -> !tc.tensor<[8, 16], f32> loc("g2")
  %dw = tc.matmul %a, %g2 : (!tc.tensor<[3, 8], f32>, !tc.tensor<[8, 16], f32>) -> !tc.tensor<[3, 16], f32> loc("dw")
  return %d, %dw : !tc.tensor<[2, 4, 3], f32>, !tc.tensor<[3, 16], f32>
}
