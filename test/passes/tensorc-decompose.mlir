// RUN: tensorc-opt %s -split-input-file -tensorc-decompose -verify-diagnostics | FileCheck %s
// RUN: tensorc-opt %s -split-input-file -tensorc-decompose=ops=layer_norm -verify-diagnostics | FileCheck %s --check-prefix=ONLY

// softmax -> max, sub, exp, sum, div; the final node keeps the name.
// CHECK-LABEL: func.func @softmax
// CHECK:      %[[M:.*]] = tc.max %arg0 {axes = array<i64: 1>, keepdim = true}
// CHECK-NEXT: %[[Z:.*]] = tc.sub %arg0, %[[M]]
// CHECK-NEXT: %[[E:.*]] = tc.exp %[[Z]]
// CHECK-NEXT: %[[S:.*]] = tc.sum %[[E]] {axes = array<i64: 1>, keepdim = true}
// CHECK-NEXT: %[[Y:.*]] = tc.div %[[E]], %[[S]]
// layer_norm's mean is taken around the row's first element (accurate when
// the mean is large against the spread).
// CHECK-NEXT: %[[X0:.*]] = tc.slice %arg0 {axes = array<i64: 1>, ends = array<i64: 1>, starts = array<i64: 0>}
// CHECK-NEXT: %[[D:.*]] = tc.sub %arg0, %[[X0]]
// CHECK-NEXT: %[[LN:.*]] = tc.mean %[[D]]
// CHECK-NEXT: tc.sub %[[D]], %[[LN]]
// CHECK-NOT:  tc.layer_norm
// CHECK-NOT:  tc.softmax
// CHECK:      return %[[Y]]
// ONLY-LABEL: func.func @softmax
// ONLY:       tc.softmax
// ONLY-NOT:   tc.layer_norm
func.func @softmax(%x: !tc.tensor<[B, 5], f32> {tc.name = "x"}) -> (!tc.tensor<[B, 5], f32> {tc.name = "y"}, !tc.tensor<[B, 5], f32> {tc.name = "n"}) {
  %y = tc.softmax %x {axis = 1 : i64} : (!tc.tensor<[B, 5], f32>) -> !tc.tensor<[B, 5], f32> loc("y")
  %n = tc.layer_norm %x {operandSegmentSizes = array<i32: 1, 0, 0>} : (!tc.tensor<[B, 5], f32>) -> !tc.tensor<[B, 5], f32> loc("n")
  return %y, %n : !tc.tensor<[B, 5], f32>, !tc.tensor<[B, 5], f32>
}

// -----

// Causal attention with a symbolic length builds its mask from iota.
// CHECK-LABEL: func.func @attention
// CHECK:      tc.matmul
// CHECK:      tc.iota {length = ["T"]}
// CHECK:      tc.ge
// CHECK:      tc.where
// CHECK:      tc.exp
// CHECK:      tc.matmul
// CHECK-NOT:  tc.scaled_dot_product_attention
func.func @attention(%q: !tc.tensor<[T, 4], f32> {tc.name = "q"}) -> (!tc.tensor<[T, 4], f32> {tc.name = "o"}) {
  %o = tc.scaled_dot_product_attention %q, %q, %q {is_causal = true} : (!tc.tensor<[T, 4], f32>, !tc.tensor<[T, 4], f32>, !tc.tensor<[T, 4], f32>) -> !tc.tensor<[T, 4], f32> loc("o")
  return %o : !tc.tensor<[T, 4], f32>
}

// -----

// Primitives are left alone.
// CHECK-LABEL: func.func @primitives
// CHECK-NEXT: tc.matmul
// CHECK-NEXT: tc.relu
// CHECK-NEXT: return
func.func @primitives(%x: !tc.tensor<[2, 3], f32> {tc.name = "x"}, %w: !tc.tensor<[3, 3], f32> {tc.name = "w"}) -> (!tc.tensor<[2, 3], f32> {tc.name = "r"}) {
  %m = tc.matmul %x, %w : (!tc.tensor<[2, 3], f32>, !tc.tensor<[3, 3], f32>) -> !tc.tensor<[2, 3], f32> loc("m")
  %r = tc.relu %m : (!tc.tensor<[2, 3], f32>) -> !tc.tensor<[2, 3], f32> loc("r")
  return %r : !tc.tensor<[2, 3], f32>
}
