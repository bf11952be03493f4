// RUN: tensorc-opt %s -split-input-file -tensorc-recognize-attention | FileCheck %s

// softmax(where(rows >= cols, q @ k^T / 2, -inf)) @ v is causal attention.
// CHECK-LABEL: func.func @causal
// CHECK-NEXT: %[[O:.*]] = tc.scaled_dot_product_attention %arg0, %arg1, %arg2 {is_causal = true, scale = 5.000000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @causal(%q: !tc.tensor<[2, 5, 4], f32> {tc.name = "q"}, %k: !tc.tensor<[2, 5, 4], f32> {tc.name = "k"}, %v: !tc.tensor<[2, 5, 3], f32> {tc.name = "v"}) -> (!tc.tensor<[2, 5, 3], f32> {tc.name = "o"}) {
  %kt = tc.transpose %k {dim0 = -2 : i64, dim1 = -1 : i64} : (!tc.tensor<[2, 5, 4], f32>) -> !tc.tensor<[2, 4, 5], f32> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[2, 5, 4], f32>, !tc.tensor<[2, 4, 5], f32>) -> !tc.tensor<[2, 5, 5], f32> loc("s")
  %two = tc.constant {tc.literal, value = dense<2.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %d = tc.div %s, %two : (!tc.tensor<[2, 5, 5], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 5, 5], f32> loc("d")
  %i = tc.iota {end = 5 : i64} : () -> !tc.tensor<[5], i64> loc("i")
  %r = tc.reshape %i {shape = [5, 1]} : (!tc.tensor<[5], i64>) -> !tc.tensor<[5, 1], i64> loc("r")
  %c = tc.reshape %i {shape = [1, 5]} : (!tc.tensor<[5], i64>) -> !tc.tensor<[1, 5], i64> loc("c")
  %m = tc.ge %r, %c : (!tc.tensor<[5, 1], i64>, !tc.tensor<[1, 5], i64>) -> !tc.tensor<[5, 5], i1> loc("m")
  %ninf = tc.constant {tc.literal, value = dense<0xFF800000> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %w = tc.where %m, %d, %ninf : (!tc.tensor<[5, 5], i1>, !tc.tensor<[2, 5, 5], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 5, 5], f32> loc("w")
  %p = tc.softmax %w : (!tc.tensor<[2, 5, 5], f32>) -> !tc.tensor<[2, 5, 5], f32> loc("p")
  %o = tc.matmul %p, %v : (!tc.tensor<[2, 5, 5], f32>, !tc.tensor<[2, 5, 3], f32>) -> !tc.tensor<[2, 5, 3], f32> loc("o")
  return %o : !tc.tensor<[2, 5, 3], f32>
}

// -----

// An additive mask becomes the mask operand; softmax probabilities that are
// also returned keep the pattern as written (no recomputation).
// With a user mask, a row whose every key is masked stays nan, as softmax
// makes it (the attention op gives 0, as PyTorch's SDPA): the rows whose
// additive mask is -inf throughout are made nan again.
// CHECK-LABEL: func.func @additive
// CHECK: %[[A:.*]] = tc.scaled_dot_product_attention %arg0, %arg0, %arg0, %arg1 {scale = 1.000000e+00 : f64}
// CHECK: %[[TOP:.*]] = tc.max %arg1 {axes = array<i64: -1>, keepdim = true}
// CHECK: %[[H:.*]] = tc.eq %[[TOP]], %{{.*}}
// CHECK: %[[O:.*]] = tc.where %[[H]], %{{.*}}, %[[A]]
// CHECK: return %[[O]]
func.func @additive(%q: !tc.tensor<[3, 4], f32> {tc.name = "q"}, %b: !tc.tensor<[3, 3], f32> {tc.name = "b"}) -> (!tc.tensor<[3, 4], f32> {tc.name = "o"}) {
  %kt = tc.transpose %q {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[3, 4], f32>) -> !tc.tensor<[4, 3], f32> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[3, 4], f32>, !tc.tensor<[4, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("s")
  %a = tc.add %s, %b : (!tc.tensor<[3, 3], f32>, !tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("a")
  %p = tc.softmax %a : (!tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("p")
  %o = tc.matmul %p, %q : (!tc.tensor<[3, 3], f32>, !tc.tensor<[3, 4], f32>) -> !tc.tensor<[3, 4], f32> loc("o")
  return %o : !tc.tensor<[3, 4], f32>
}

// -----

// CHECK-LABEL: func.func @kept
// CHECK-NOT: scaled_dot_product_attention
// CHECK: tc.softmax
func.func @kept(%q: !tc.tensor<[3, 4], f32> {tc.name = "q"}) -> (!tc.tensor<[3, 4], f32> {tc.name = "o"}, !tc.tensor<[3, 3], f32> {tc.name = "p"}) {
  %kt = tc.transpose %q {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[3, 4], f32>) -> !tc.tensor<[4, 3], f32> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[3, 4], f32>, !tc.tensor<[4, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("s")
  %p = tc.softmax %s : (!tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("p")
  %o = tc.matmul %p, %q : (!tc.tensor<[3, 3], f32>, !tc.tensor<[3, 4], f32>) -> !tc.tensor<[3, 4], f32> loc("o")
  return %o, %p : !tc.tensor<[3, 4], f32>, !tc.tensor<[3, 3], f32>
}

// -----

// masked_fill(rows < cols, -inf) (PyTorch's ~tril mask, as the exporter
// writes it) is causal too.
// CHECK-LABEL: func.func @masked_fill_causal
// CHECK-NEXT: %[[O:.*]] = tc.scaled_dot_product_attention %arg0, %arg1, %arg2 {is_causal = true, scale = 1.250000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @masked_fill_causal(%q: !tc.tensor<[2, 5, 4], f32> {tc.name = "q"}, %k: !tc.tensor<[2, 5, 4], f32> {tc.name = "k"}, %v: !tc.tensor<[2, 5, 3], f32> {tc.name = "v"}) -> (!tc.tensor<[2, 5, 3], f32> {tc.name = "o"}) {
  %kt = tc.transpose %k {dim0 = 1 : i64, dim1 = 2 : i64} : (!tc.tensor<[2, 5, 4], f32>) -> !tc.tensor<[2, 4, 5], f32> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[2, 5, 4], f32>, !tc.tensor<[2, 4, 5], f32>) -> !tc.tensor<[2, 5, 5], f32> loc("s")
  %eight = tc.constant {tc.literal, value = dense<8.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %d = tc.div %s, %eight : (!tc.tensor<[2, 5, 5], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 5, 5], f32> loc("d")
  %i = tc.iota {end = 5 : i64} : () -> !tc.tensor<[5], i64> loc("i")
  %r = tc.reshape %i {shape = [5, 1]} : (!tc.tensor<[5], i64>) -> !tc.tensor<[5, 1], i64> loc("r")
  %c = tc.reshape %i {shape = [1, 5]} : (!tc.tensor<[5], i64>) -> !tc.tensor<[1, 5], i64> loc("c")
  %m = tc.lt %r, %c : (!tc.tensor<[5, 1], i64>, !tc.tensor<[1, 5], i64>) -> !tc.tensor<[5, 5], i1> loc("m")
  %ninf = tc.constant {tc.literal, value = dense<0xFF800000> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %w = tc.where %m, %ninf, %d : (!tc.tensor<[5, 5], i1>, !tc.tensor<[], f32>, !tc.tensor<[2, 5, 5], f32>) -> !tc.tensor<[2, 5, 5], f32> loc("w")
  %p = tc.softmax %w : (!tc.tensor<[2, 5, 5], f32>) -> !tc.tensor<[2, 5, 5], f32> loc("p")
  %o = tc.matmul %p, %v : (!tc.tensor<[2, 5, 5], f32>, !tc.tensor<[2, 5, 3], f32>) -> !tc.tensor<[2, 5, 3], f32> loc("o")
  return %o : !tc.tensor<[2, 5, 3], f32>
}

// -----

// masked_fill(~keep, -inf) with any boolean `keep`: keep is the mask
// operand; masked_fill(m, -inf) with m not a negation is left as written
// (the attention op's boolean mask says what takes part).
// CHECK-LABEL: func.func @masked_fill_not
// CHECK: %[[A:.*]] = tc.scaled_dot_product_attention %arg0, %arg0, %arg0, %arg1 {scale = 1.000000e+00 : f64}
// CHECK: %[[L:.*]] = tc.cast %arg1 {to = f32}
// CHECK: %[[TOP:.*]] = tc.max %[[L]] {axes = array<i64: -1>, keepdim = true}
// CHECK: %[[H:.*]] = tc.eq %[[TOP]], %{{.*}}
// CHECK: %[[O:.*]] = tc.where %[[H]], %{{.*}}, %[[A]]
// CHECK: return %[[O]]
func.func @masked_fill_not(%q: !tc.tensor<[3, 4], f32> {tc.name = "q"}, %keep: !tc.tensor<[3, 3], i1> {tc.name = "keep"}) -> (!tc.tensor<[3, 4], f32> {tc.name = "o"}) {
  %kt = tc.transpose %q {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[3, 4], f32>) -> !tc.tensor<[4, 3], f32> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[3, 4], f32>, !tc.tensor<[4, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("s")
  %n = tc.logical_not %keep : (!tc.tensor<[3, 3], i1>) -> !tc.tensor<[3, 3], i1> loc("n")
  %ninf = tc.constant {tc.literal, value = dense<0xFF800000> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %w = tc.where %n, %ninf, %s : (!tc.tensor<[3, 3], i1>, !tc.tensor<[], f32>, !tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("w")
  %p = tc.softmax %w : (!tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("p")
  %o = tc.matmul %p, %q : (!tc.tensor<[3, 3], f32>, !tc.tensor<[3, 4], f32>) -> !tc.tensor<[3, 4], f32> loc("o")
  return %o : !tc.tensor<[3, 4], f32>
}

// -----

// CHECK-LABEL: func.func @masked_fill_other
// CHECK-NOT: scaled_dot_product_attention
// CHECK: tc.softmax
func.func @masked_fill_other(%q: !tc.tensor<[3, 4], f32> {tc.name = "q"}, %m: !tc.tensor<[3, 3], i1> {tc.name = "m"}) -> (!tc.tensor<[3, 4], f32> {tc.name = "o"}) {
  %kt = tc.transpose %q {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[3, 4], f32>) -> !tc.tensor<[4, 3], f32> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[3, 4], f32>, !tc.tensor<[4, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("s")
  %ninf = tc.constant {tc.literal, value = dense<0xFF800000> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %w = tc.where %m, %ninf, %s : (!tc.tensor<[3, 3], i1>, !tc.tensor<[], f32>, !tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("w")
  %p = tc.softmax %w : (!tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("p")
  %o = tc.matmul %p, %q : (!tc.tensor<[3, 3], f32>, !tc.tensor<[3, 4], f32>) -> !tc.tensor<[3, 4], f32> loc("o")
  return %o : !tc.tensor<[3, 4], f32>
}

// -----

// PyTorch's safe softmax (Dynamo's decomposition of SDPA's math path):
// where(max(s) == -inf, 0, softmax(s)) is exactly the attention op (a row
// whose every key is masked gives 0), no wrapping; the max goes too.
// CHECK-LABEL: func.func @safe_softmax
// CHECK-NEXT: %[[O:.*]] = tc.scaled_dot_product_attention %arg0, %arg0, %arg0, %arg1 {scale = 1.000000e+00 : f64}
// CHECK-NEXT: return %[[O]]
func.func @safe_softmax(%q: !tc.tensor<[3, 4], f32> {tc.name = "q"}, %b: !tc.tensor<[3, 3], f32> {tc.name = "b"}) -> (!tc.tensor<[3, 4], f32> {tc.name = "o"}) {
  %kt = tc.transpose %q {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[3, 4], f32>) -> !tc.tensor<[4, 3], f32> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[3, 4], f32>, !tc.tensor<[4, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("s")
  %a = tc.add %s, %b : (!tc.tensor<[3, 3], f32>, !tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("a")
  %p = tc.softmax %a : (!tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("p")
  %m = tc.max %a {axes = array<i64: 1>, keepdim = true} : (!tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 1], f32> loc("m")
  %ninf = tc.constant {tc.literal, value = dense<0xFF800000> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %h = tc.eq %m, %ninf : (!tc.tensor<[3, 1], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[3, 1], i1> loc("h")
  %zero = tc.constant {tc.literal, value = dense<0.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %w = tc.where %h, %zero, %p : (!tc.tensor<[3, 1], i1>, !tc.tensor<[], f32>, !tc.tensor<[3, 3], f32>) -> !tc.tensor<[3, 3], f32> loc("w")
  %o = tc.matmul %w, %q : (!tc.tensor<[3, 3], f32>, !tc.tensor<[3, 4], f32>) -> !tc.tensor<[3, 4], f32> loc("o")
  return %o : !tc.tensor<[3, 4], f32>
}

// -----

// Eager attention in bf16 (transformers' eager_attention_forward): the
// scores' softmax in f32 and cast back to bf16. The fused attention keeps the
// scores in f32 (no rounding before the softmax).
// CHECK-LABEL: func.func @eager_bf16
// CHECK-NEXT: %[[O:.*]] = tc.scaled_dot_product_attention %arg0, %arg1, %arg2 {scale = 1.250000e-01 : f64} : {{.*}} -> !tc.tensor<[2, 5, 3], bf16>
// CHECK-NEXT: return %[[O]]
func.func @eager_bf16(%q: !tc.tensor<[2, 5, 4], bf16> {tc.name = "q"}, %k: !tc.tensor<[2, 5, 4], bf16> {tc.name = "k"}, %v: !tc.tensor<[2, 5, 3], bf16> {tc.name = "v"}) -> (!tc.tensor<[2, 5, 3], bf16> {tc.name = "o"}) {
  %kt = tc.transpose %k {dim0 = -2 : i64, dim1 = -1 : i64} : (!tc.tensor<[2, 5, 4], bf16>) -> !tc.tensor<[2, 4, 5], bf16> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[2, 5, 4], bf16>, !tc.tensor<[2, 4, 5], bf16>) -> !tc.tensor<[2, 5, 5], bf16> loc("s")
  %c = tc.constant {tc.literal, value = dense<0.125> : tensor<bf16>} : () -> !tc.tensor<[], bf16>
  %d = tc.mul %s, %c : (!tc.tensor<[2, 5, 5], bf16>, !tc.tensor<[], bf16>) -> !tc.tensor<[2, 5, 5], bf16> loc("d")
  %w = tc.cast %d {to = f32} : (!tc.tensor<[2, 5, 5], bf16>) -> !tc.tensor<[2, 5, 5], f32> loc("w")
  %p = tc.softmax %w : (!tc.tensor<[2, 5, 5], f32>) -> !tc.tensor<[2, 5, 5], f32> loc("p")
  %pb = tc.cast %p {to = bf16} : (!tc.tensor<[2, 5, 5], f32>) -> !tc.tensor<[2, 5, 5], bf16> loc("pb")
  %o = tc.matmul %pb, %v : (!tc.tensor<[2, 5, 5], bf16>, !tc.tensor<[2, 5, 3], bf16>) -> !tc.tensor<[2, 5, 3], bf16> loc("o")
  return %o : !tc.tensor<[2, 5, 3], bf16>
}
