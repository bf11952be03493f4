// RUN: tensorc-opt %s -split-input-file -verify-diagnostics
// One case per verifier error.

func.func @f(%a: !tc.tensor<[B, 784], f32>, %b: !tc.tensor<[512, 256], f32>) {
  // expected-error @+1 {{inner dims differ: lhs is (B, 784), rhs is (512, 256)}}
  %0 = tc.matmul %a, %b : (!tc.tensor<[B, 784], f32>, !tc.tensor<[512, 256], f32>) -> !tc.tensor<[B, 256], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], f32>, %b: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{cannot broadcast lhs (3) with rhs (4): 3 vs 4}}
  %0 = tc.add %a, %b : (!tc.tensor<[3], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[4], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[B], f32>, %b: !tc.tensor<[C], f32>) {
  // expected-error @+1 {{cannot broadcast lhs (B) with rhs (C): B vs C}}
  %0 = tc.add %a, %b : (!tc.tensor<[B], f32>, !tc.tensor<[C], f32>) -> !tc.tensor<[B], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], f32>, %b: !tc.tensor<[3], f16>) {
  // expected-error @+1 {{dtypes differ: lhs is (3) f32, rhs is (3) f16 (insert a cast)}}
  %0 = tc.add %a, %b : (!tc.tensor<[3], f32>, !tc.tensor<[3], f16>) -> !tc.tensor<[3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], f32>) {
  // expected-error @+1 {{result #0 is declared '!tc.tensor<[4], f32>' but inferred as '!tc.tensor<[3], f32>'}}
  %0 = tc.add %a, %a : (!tc.tensor<[3], f32>, !tc.tensor<[3], f32>) -> !tc.tensor<[4], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], i64>) {
  // expected-error @+1 {{x is (3) i64; a float dtype is required}}
  %0 = tc.exp %a : (!tc.tensor<[3], i64>) -> !tc.tensor<[3], i64>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], i1>) {
  // expected-error @+1 {{a numeric dtype (not i1) is required}}
  %0 = tc.neg %a : (!tc.tensor<[3], i1>) -> !tc.tensor<[3], i1>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], i32>) {
  // expected-error @+1 {{a float dtype is required}}
  %0 = tc.div %a, %a : (!tc.tensor<[3], i32>, !tc.tensor<[3], i32>) -> !tc.tensor<[3], i32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], f32>) {
  // expected-error @+1 {{the condition must be i1}}
  %0 = tc.where %a, %a, %a : (!tc.tensor<[3], f32>, !tc.tensor<[3], f32>, !tc.tensor<[3], f32>) -> !tc.tensor<[3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], f32>) {
  // expected-error @+1 {{needs at least one of 'min' and 'max'}}
  %0 = tc.clamp %a : (!tc.tensor<[3], f32>) -> !tc.tensor<[3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], f32>) {
  // expected-error @+1 {{attribute 'approximate' is "fast"; expected one of "none", "tanh"}}
  %0 = tc.gelu %a {approximate = "fast"} : (!tc.tensor<[3], f32>) -> !tc.tensor<[3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3, 4], f32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = tc.sum %a {axes = array<i64: 2>} : (!tc.tensor<[3, 4], f32>) -> !tc.tensor<[3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3, 4], f32>) {
  // expected-error @+1 {{axis 1 appears twice in axes}}
  %0 = tc.sum %a {axes = array<i64: 1, -1>} : (!tc.tensor<[3, 4], f32>) -> !tc.tensor<[3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3, 4], f32>) {
  // expected-error @+1 {{axes is empty; omit it to use every axis}}
  %0 = tc.sum %a {axes = array<i64>} : (!tc.tensor<[3, 4], f32>) -> !tc.tensor<[3, 4], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], i64>) {
  // expected-error @+1 {{a float dtype is required}}
  %0 = tc.mean %a : (!tc.tensor<[3], i64>) -> !tc.tensor<[], i64>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], f32>) {
  // expected-error @+1 {{correction must be >= 0}}
  %0 = tc.var %a {correction = -1 : i64} : (!tc.tensor<[3], f32>) -> !tc.tensor<[], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[], f32>) {
  // expected-error @+1 {{matmul needs operands of rank >= 1}}
  %0 = tc.matmul %a, %a : (!tc.tensor<[], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[3], f32>) {
  // expected-error @+1 {{axis 1 is out of range for rank 1}}
  %0 = tc.softmax %a {axis = 1 : i64} : (!tc.tensor<[3], f32>) -> !tc.tensor<[3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[2, 8], f32>, %w: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{weight is (4) f32; expected shape (8) to match x is (2, 8) f32}}
  %0 = tc.layer_norm %a, %w {operandSegmentSizes = array<i32: 1, 1, 0>} : (!tc.tensor<[2, 8], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[2, 8], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 10], f32>, %t: !tc.tensor<[5], i64>) {
  // expected-error @+1 {{target is (5) i64; expected target shape (4) for logits is (4, 10) f32}}
  %0 = tc.cross_entropy %a, %t : (!tc.tensor<[4, 10], f32>, !tc.tensor<[5], i64>) -> !tc.tensor<[], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 10], f32>, %t: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{an integer dtype (i64 or i32) is required}}
  %0 = tc.cross_entropy %a, %t : (!tc.tensor<[4, 10], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 10], f32>, %t: !tc.tensor<[4], i64>) {
  // expected-error @+1 {{attribute 'reduction' is "avg"}}
  %0 = tc.cross_entropy %a, %t {reduction = "avg"} : (!tc.tensor<[4, 10], f32>, !tc.tensor<[4], i64>) -> !tc.tensor<[], f32>
  return
}

// -----

func.func @f(%g: !tc.tensor<[4, 5, 3], f32>, %i: !tc.tensor<[4], i64>) {
  // expected-error @+1 {{expected the indices' shape (4) plus one dim}}
  %0 = tc.embedding_backward %g, %i {num_weights = 10 : i64} : (!tc.tensor<[4, 5, 3], f32>, !tc.tensor<[4], i64>) -> !tc.tensor<[10, 3], f32>
  return
}

// -----

func.func @f(%g: !tc.tensor<[4, 3], bf16>, %i: !tc.tensor<[4], i64>) {
  // expected-error @+1 {{result #0 is declared '!tc.tensor<[10, 3], bf16>' but inferred as '!tc.tensor<[10, 3], f32>'}}
  %0 = tc.embedding_backward %g, %i {num_weights = 10 : i64} : (!tc.tensor<[4, 3], bf16>, !tc.tensor<[4], i64>) -> !tc.tensor<[10, 3], bf16>
  return
}

// -----

func.func @f(%i: !tc.tensor<[4], f32>, %w: !tc.tensor<[10, 3], f32>) {
  // expected-error @+1 {{indices is (4) f32; an integer dtype}}
  %0 = tc.embedding %i, %w : (!tc.tensor<[4], f32>, !tc.tensor<[10, 3], f32>) -> !tc.tensor<[4, 3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4], f32>, %s: !tc.tensor<[], i64>) {
  // expected-error @+1 {{p must be in [0, 1]}}
  %0 = tc.dropout %a, %s {p = 1.5 : f64} : (!tc.tensor<[4], f32>, !tc.tensor<[], i64>) -> !tc.tensor<[4], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4], f32>, %s: !tc.tensor<[2], i64>) {
  // expected-error @+1 {{seed is (2) i64; rank 0 is required}}
  %0 = tc.dropout %a, %s : (!tc.tensor<[4], f32>, !tc.tensor<[2], i64>) -> !tc.tensor<[4], f32>
  return
}

// -----

func.func @f(%x: !tc.tensor<[1, 3, 8, 8], f32>, %w: !tc.tensor<[4, 3, 3, 3], f32>) {
  // expected-error @+1 {{channels must divide by groups=2}}
  %0 = tc.conv2d %x, %w {groups = 2 : i64} : (!tc.tensor<[1, 3, 8, 8], f32>, !tc.tensor<[4, 3, 3, 3], f32>) -> !tc.tensor<[1, 4, 6, 6], f32>
  return
}

// -----

func.func @f(%x: !tc.tensor<[1, 3, 2, 2], f32>, %w: !tc.tensor<[4, 3, 3, 3], f32>) {
  // expected-error @+1 {{does not fit the padded input}}
  %0 = tc.conv2d %x, %w : (!tc.tensor<[1, 3, 2, 2], f32>, !tc.tensor<[4, 3, 3, 3], f32>) -> !tc.tensor<[1, 4, 1, 1], f32>
  return
}

// -----

func.func @f(%x: !tc.tensor<[1, 3, 8, 8], f32>, %w: !tc.tensor<[4, 3, 3, 3], f32>) {
  // expected-error @+1 {{stride values must be >= 1, got 0}}
  %0 = tc.conv2d %x, %w {stride = array<i64: 0, 1>} : (!tc.tensor<[1, 3, 8, 8], f32>, !tc.tensor<[4, 3, 3, 3], f32>) -> !tc.tensor<[1, 4, 6, 6], f32>
  return
}

// -----

func.func @f(%x: !tc.tensor<[1, 3, H, 8], f32>, %w: !tc.tensor<[4, 3, 3, 3], f32>) {
  // expected-error @+1 {{dim 2 must be static for conv2d}}
  %0 = tc.conv2d %x, %w : (!tc.tensor<[1, 3, H, 8], f32>, !tc.tensor<[4, 3, 3, 3], f32>) -> !tc.tensor<[1, 4, 6, 6], f32>
  return
}

// -----

func.func @f(%x: !tc.tensor<[1, 3, 8, 8], f32>) {
  // expected-error @+1 {{padding must be at most half the kernel size}}
  %0 = tc.max_pool2d %x {kernel_size = array<i64: 2, 2>, padding = array<i64: 2, 2>} : (!tc.tensor<[1, 3, 8, 8], f32>) -> !tc.tensor<[1, 3, 6, 6], f32>
  return
}

// -----

func.func @f(%x: !tc.tensor<[2, 3, 4], f32>, %m: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{running_mean is (4) f32; expected shape (3)}}
  %0:3 = tc.batch_norm %x, %m, %m {operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>} : (!tc.tensor<[2, 3, 4], f32>, !tc.tensor<[4], f32>, !tc.tensor<[4], f32>) -> (!tc.tensor<[2, 3, 4], f32>, !tc.tensor<[4], f32>, !tc.tensor<[4], f32>)
  return
}

// -----

func.func @f(%q: !tc.tensor<[2, 5, 8], f32>, %k: !tc.tensor<[2, 6, 4], f32>) {
  // expected-error @+1 {{query and key embedding dims differ}}
  %0 = tc.scaled_dot_product_attention %q, %k, %k : (!tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 6, 4], f32>, !tc.tensor<[2, 6, 4], f32>) -> !tc.tensor<[2, 5, 4], f32>
  return
}

// -----

func.func @f(%q: !tc.tensor<[2, 5, 8], f32>, %m: !tc.tensor<[5, 5], i64>) {
  // expected-error @+1 {{the mask must be i1 or the query's dtype}}
  %0 = tc.scaled_dot_product_attention %q, %q, %q, %m : (!tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[5, 5], i64>) -> !tc.tensor<[2, 5, 8], f32>
  return
}

// -----

func.func @f(%q: !tc.tensor<[2, 5, 8], f32>) {
  // expected-error @+1 {{out_dtype f32 needs f16 or bf16 operands}}
  %0 = tc.scaled_dot_product_attention %q, %q, %q {out_dtype = f32} : (!tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>) -> !tc.tensor<[2, 5, 8], f32>
  return
}

// -----

func.func @f(%q: !tc.tensor<[2, 5, 8], bf16>) {
  // expected-error @+1 {{out_dtype f16: only f32 is supported}}
  %0 = tc.scaled_dot_product_attention %q, %q, %q {out_dtype = f16} : (!tc.tensor<[2, 5, 8], bf16>, !tc.tensor<[2, 5, 8], bf16>, !tc.tensor<[2, 5, 8], bf16>) -> !tc.tensor<[2, 5, 8], f16>
  return
}

// -----

func.func @f(%q: !tc.tensor<[2, 5, 8], f32>) {
  // expected-error @+1 {{dropout_p > 0 without a seed operand}}
  %0 = tc.scaled_dot_product_attention %q, %q, %q {dropout_p = 0.1 : f64} : (!tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>) -> !tc.tensor<[2, 5, 8], f32>
  return
}

// -----

func.func @f(%q: !tc.tensor<[2, 5, 8], f32>, %s: !tc.tensor<[], i64>) {
  // expected-error @+1 {{a dropout seed without dropout_p > 0}}
  %0 = tc.scaled_dot_product_attention %q, %q, %q, %s {operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>} : (!tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[], i64>) -> !tc.tensor<[2, 5, 8], f32>
  return
}

// -----

func.func @f(%q: !tc.tensor<[2, 5, 8], f32>, %s: !tc.tensor<[2], i64>) {
  // expected-error @+1 {{rank 0}}
  %0 = tc.scaled_dot_product_attention %q, %q, %q, %s {dropout_p = 0.1 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>} : (!tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2], i64>) -> !tc.tensor<[2, 5, 8], f32>
  return
}

// -----

func.func @f(%q: !tc.tensor<[2, 5, 8], f32>, %s: !tc.tensor<[], i64>) {
  // expected-error @+1 {{dropout_p must be in [0, 1)}}
  %0 = tc.scaled_dot_product_attention %q, %q, %q, %s {dropout_p = 1.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>} : (!tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[2, 5, 8], f32>, !tc.tensor<[], i64>) -> !tc.tensor<[2, 5, 8], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 6], f32>) {
  // expected-error @+1 {{element counts differ: x is (4, 6) f32 has 24, shape (5, 5) has 25}}
  %0 = tc.reshape %a {shape = [5, 5]} : (!tc.tensor<[4, 6], f32>) -> !tc.tensor<[5, 5], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 6], f32>) {
  // expected-error @+1 {{has more than one -1}}
  %0 = tc.reshape %a {shape = [-1, -1]} : (!tc.tensor<[4, 6], f32>) -> !tc.tensor<[4, 6], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[B, 6], f32>) {
  // expected-error @+1 {{element counts differ}}
  %0 = tc.reshape %a {shape = ["B", 5]} : (!tc.tensor<[B, 6], f32>) -> !tc.tensor<[B, 5], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[B], f32>) {
  // expected-error @+1 {{malformed dim "B+1"}}
  %0 = tc.reshape %a {shape = ["B+1"]} : (!tc.tensor<[B], f32>) -> !tc.tensor<[B], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 6], f32>) {
  // expected-error @+1 {{dims is not a permutation: axis 0 repeats}}
  %0 = tc.permute %a {dims = array<i64: 0, 0>} : (!tc.tensor<[4, 6], f32>) -> !tc.tensor<[4, 4], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 6], f32>) {
  // expected-error @+1 {{dim1 5 is out of range for rank 2}}
  %0 = tc.transpose %a {dim0 = 0 : i64, dim1 = 5 : i64} : (!tc.tensor<[4, 6], f32>) -> !tc.tensor<[4, 6], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 6], f32>) {
  // expected-error @+1 {{cannot broadcast x is (4, 6) f32 to (4, 5)}}
  %0 = tc.broadcast_to %a {shape = [4, 5]} : (!tc.tensor<[4, 6], f32>) -> !tc.tensor<[4, 5], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[B], f32>) {
  // expected-error @+1 {{cannot slice symbolic dim B}}
  %0 = tc.slice %a {starts = array<i64: 0>, ends = array<i64: 2>} : (!tc.tensor<[B], f32>) -> !tc.tensor<[2], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{steps must be >= 1, got 0}}
  %0 = tc.slice %a {starts = array<i64: 0>, ends = array<i64: 2>, steps = array<i64: 0>} : (!tc.tensor<[4], f32>) -> !tc.tensor<[2], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[B], f32>, %b: !tc.tensor<[C], f32>) {
  // expected-error @+1 {{cannot concatenate B and C along axis 0: the sum is not a monomial}}
  %0 = tc.concat %a, %b : (!tc.tensor<[B], f32>, !tc.tensor<[C], f32>) -> !tc.tensor<[B], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[2, 3], f32>, %b: !tc.tensor<[2, 4], f32>) {
  // expected-error @+1 {{dim 1 differs}}
  %0 = tc.concat %a, %b {axis = 0 : i64} : (!tc.tensor<[2, 3], f32>, !tc.tensor<[2, 4], f32>) -> !tc.tensor<[4, 3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{sizes add up to 3 but dim 0 of x is (4) f32 is 4}}
  %0:2 = tc.split %a {sizes = array<i64: 1, 2>} : (!tc.tensor<[4], f32>) -> (!tc.tensor<[1], f32>, !tc.tensor<[2], f32>)
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 2], f32>, %i: !tc.tensor<[4, 3], i64>) {
  // expected-error @+1 {{index dim 1 must not exceed the input's}}
  %0 = tc.gather %a, %i {axis = 0 : i64} : (!tc.tensor<[4, 2], f32>, !tc.tensor<[4, 3], i64>) -> !tc.tensor<[4, 3], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 2], f32>, %i: !tc.tensor<[2, 2], i64>) {
  // expected-error @+1 {{index is (2, 2) i64; rank 1 is required}}
  %0 = tc.index_select %a, %i {axis = 0 : i64} : (!tc.tensor<[4, 2], f32>, !tc.tensor<[2, 2], i64>) -> !tc.tensor<[2, 2], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{pads must hold (before, after) pairs}}
  %0 = tc.pad %a {pads = array<i64: 1>} : (!tc.tensor<[4], f32>) -> !tc.tensor<[5], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{below zero size}}
  %0 = tc.pad %a {pads = array<i64: -3, -3>} : (!tc.tensor<[4], f32>) -> !tc.tensor<[0], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{result #0 is declared '!tc.tensor<[3], f32>' but inferred as '!tc.tensor<[2], f32>'}}
  %0 = tc.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> !tc.tensor<[3], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{has a dim that is not positive}}
  %0 = tc.full {shape = [0, 2], value = 1.0 : f64} : () -> !tc.tensor<[0, 2], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{step must not be 0}}
  %0 = tc.iota {end = 5 : i64, step = 0 : i64} : () -> !tc.tensor<[5], i64>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{unknown attribute 'bogus'}}
  %0 = tc.zeros {shape = [4], dtype = f32, bogus = 1 : i64} : () -> !tc.tensor<[4], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4, 6], f32>) {
  // expected-error @+1 {{requires attribute 'dim1'}}
  %0 = tc.transpose %a {dim0 = 0 : i64} : (!tc.tensor<[4, 6], f32>) -> !tc.tensor<[4, 6], f32>
  return
}

// -----

func.func @f(%a: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{attribute 'to' must be a dtype}}
  %0 = tc.cast %a {to = f8E4M3FN} : (!tc.tensor<[4], f32>) -> !tc.tensor<[4], f32>
  return
}

// -----
// expected-error @+1 {{element type must be f64, f32, f16, bf16, i64, i32 or i1}}
func.func @f(%a: !tc.tensor<[4], ui8>) {
  return
}

// -----

// expected-error @+1 {{!tc.tensor has more than 2^40 elements}}
func.func @f(%a: !tc.tensor<[1048576, 1048576, 2], f32>) {
  return
}

// -----

// expected-error @+1 {{expected a dim (integer or symbol)}}
func.func @f(%a: !tc.tensor<[4, ?], f32>) {
  return
}

// -----

// expected-error @+1 {{axis "x" appears twice}}
tc.mesh @m axes = ["x", "x"] sizes = [2, 2]

// -----

// expected-error @+1 {{axis "x" has size 0}}
tc.mesh @m axes = ["x"] sizes = [0]

// -----

tc.mesh @m axes = ["x"] sizes = [4]
// expected-error @+1 {{sharding uses axis "y" not in mesh @m}}
func.func @f(%a: !tc.tensor<[8], f32> {tc.sharding = #tc.sharding<@m, [["y"]]>}) {
  return
}

// -----

tc.mesh @m axes = ["x"] sizes = [4]
// expected-error @+1 {{sharding splits dim 0 of size 6 into 4 parts}}
func.func @f(%a: !tc.tensor<[6], f32> {tc.sharding = #tc.sharding<@m, [["x"]]>}) {
  return
}

// -----

tc.mesh @m axes = ["x"] sizes = [2]
// expected-error @+1 {{sharding has 1 dim entries for a value of rank 2}}
func.func @f(%a: !tc.tensor<[6, 2], f32> {tc.sharding = #tc.sharding<@m, [["x"]]>}) {
  return
}

// -----

tc.mesh @m axes = ["x", "y"] sizes = [2, 2]
// expected-error @+1 {{sharding uses mesh axis "x" twice}}
func.func @f(%a: !tc.tensor<[4, 4], f32> {tc.sharding = #tc.sharding<@m, [["x"], ["x"]]>}) {
  return
}

// -----

// expected-error @+1 {{sharding names unknown mesh @nomesh}}
func.func @f(%a: !tc.tensor<[4], f32> {tc.sharding = #tc.sharding<@nomesh, [[]]>}) {
  return
}

// -----

// expected-error @+1 {{'tc.dim_bounds' entry 'B' must be array<i64: min> or array<i64: min, max>}}
func.func @f(%a: !tc.tensor<[B], f32>) attributes {tc.dim_bounds = {B = array<i64: 5, 2>}} {
  return
}

// -----

tc.mesh @m axes = ["data", "model"] sizes = [2, 3]
func.func @f(%a: !tc.tensor<[4, 8], f32>) {
  // expected-error @+1 {{dim 0 (4) is not divisible by the group size 3 (axes ["model"] of mesh "m")}}
  %0 = tc.reduce_scatter %a {mesh = "m", axes = ["model"]} : (!tc.tensor<[4, 8], f32>) -> !tc.tensor<[1, 8], f32>
  return
}

// -----

tc.mesh @m axes = ["data"] sizes = [2]
func.func @f(%a: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{mesh "grid" is not declared; meshes: "m"}}
  %0 = tc.all_reduce %a {mesh = "grid", axes = ["data"]} : (!tc.tensor<[4], f32>) -> !tc.tensor<[4], f32>
  return
}

// -----

tc.mesh @m axes = ["data"] sizes = [2]
func.func @f(%a: !tc.tensor<[4], f32>) {
  // expected-error @+1 {{result #0 is declared '!tc.tensor<[4], f32>' but inferred as '!tc.tensor<[8], f32>'}}
  %0 = tc.all_gather %a {mesh = "m", axes = ["data"]} : (!tc.tensor<[4], f32>) -> !tc.tensor<[4], f32>
  return
}

// -----

tc.mesh @m axes = ["data"] sizes = [2]
func.func @f() {
  // expected-error @+1 {{axis "model" is not an axis of mesh "m"}}
  %0 = tc.axis_index {mesh = "m", axes = ["model"]} : () -> !tc.tensor<[], i64>
  return
}
