// RUN: tensorc-opt %s -split-input-file -tensorc-simplify | FileCheck %s
// RUN: tensorc-opt %s -split-input-file -tensorc-simplify -tensorc-decompose | tensorc-opt -tensorc-simplify > /dev/null

// Masks that hide nothing disappear: a where on a condition true everywhere
// (Hugging Face's traced `arange >= 0`, folded) picks its branch, and an
// additive mask of zeros or an all-true bool mask leaves the attention
// (the backward too).
// CHECK-LABEL: func.func @no_op_masks
// CHECK-NOT: tc.where
// CHECK: %[[A:.*]] = tc.scaled_dot_product_attention %arg0, %arg1, %arg2 {scale = 1.250000e-01 : f64} : (!tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>) -> !tc.tensor<[2, 3, 8, 64], bf16>
// CHECK: tc.scaled_dot_product_attention %arg0, %arg1, %arg2 :
// CHECK: tc.scaled_dot_product_attention_backward %arg0, %arg0, %arg1, %arg2 {is_causal = true, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0>}
// CHECK-NOT: tc.where
func.func @no_op_masks(%q: !tc.tensor<[2, 3, 8, 64], bf16>, %k: !tc.tensor<[2, 3, 8, 64], bf16>, %v: !tc.tensor<[2, 3, 8, 64], bf16>)
    -> (!tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>) {
  %true = tc.constant {value = dense<true> : tensor<1x1x8x1xi1>} : () -> !tc.tensor<[1, 1, 8, 1], i1>
  %all = tc.broadcast_to %true {shape = [2, 1, 8, 8]} : (!tc.tensor<[1, 1, 8, 1], i1>) -> !tc.tensor<[2, 1, 8, 8], i1>
  %zero = tc.constant {value = dense<0.0> : tensor<bf16>} : () -> !tc.tensor<[], bf16>
  %low = tc.constant {value = dense<0xFF80> : tensor<bf16>} : () -> !tc.tensor<[], bf16>
  %m = tc.where %all, %zero, %low : (!tc.tensor<[2, 1, 8, 8], i1>, !tc.tensor<[], bf16>, !tc.tensor<[], bf16>) -> !tc.tensor<[2, 1, 8, 8], bf16>
  %a = tc.scaled_dot_product_attention %q, %k, %v, %m {scale = 0.125 : f64} : (!tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 1, 8, 8], bf16>) -> !tc.tensor<[2, 3, 8, 64], bf16>
  %b = tc.scaled_dot_product_attention %q, %k, %v, %all : (!tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 1, 8, 8], i1>) -> !tc.tensor<[2, 3, 8, 64], bf16>
  %dq, %dk, %dv = tc.scaled_dot_product_attention_backward %q, %q, %k, %v, %m {is_causal = true, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0>} : (!tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 1, 8, 8], bf16>) -> (!tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>)
  return %a, %b, %dq : !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>, !tc.tensor<[2, 3, 8, 64], bf16>
}

// -----

// A causal mask over square scores becomes is_causal: keys j <= i visible
// (le(col, row) of positions), 0 there and the dtype's lowest elsewhere; as
// a bool mask; from iotas or folded constants. A mask of another shape
// (j >= i), or with a fill that does not hide (-100), stays.
// CHECK-LABEL: func.func @causal_masks
// CHECK: tc.scaled_dot_product_attention %arg0, %arg1, %arg2 {is_causal = true} :
// CHECK: tc.scaled_dot_product_attention %arg0, %arg1, %arg2 {is_causal = true} :
// CHECK: tc.scaled_dot_product_attention %arg0, %arg1, %arg2 {is_causal = true} :
// CHECK: tc.scaled_dot_product_attention %arg0, %arg1, %arg2, %{{.*}} :
// CHECK: tc.scaled_dot_product_attention %arg0, %arg1, %arg2, %{{.*}} :
func.func @causal_masks(%q: !tc.tensor<[2, 3, 4, 16], f32>, %k: !tc.tensor<[2, 3, 4, 16], f32>, %v: !tc.tensor<[2, 3, 4, 16], f32>)
    -> (!tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>) {
  %i = tc.iota {end = 4 : i64} : () -> !tc.tensor<[4], i64>
  %col = tc.reshape %i {shape = [1, 1, 1, 4]} : (!tc.tensor<[4], i64>) -> !tc.tensor<[1, 1, 1, 4], i64>
  %row = tc.reshape %i {shape = [1, 1, 4, 1]} : (!tc.tensor<[4], i64>) -> !tc.tensor<[1, 1, 4, 1], i64>
  %le = tc.le %col, %row : (!tc.tensor<[1, 1, 1, 4], i64>, !tc.tensor<[1, 1, 4, 1], i64>) -> !tc.tensor<[1, 1, 4, 4], i1>
  %c = tc.broadcast_to %le {shape = [2, 1, 4, 4]} : (!tc.tensor<[1, 1, 4, 4], i1>) -> !tc.tensor<[2, 1, 4, 4], i1>
  %zero = tc.constant {value = dense<0.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %low = tc.constant {value = dense<-3.4028234663852886e+38> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %m = tc.where %c, %zero, %low : (!tc.tensor<[2, 1, 4, 4], i1>, !tc.tensor<[], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 1, 4, 4], f32>
  %a = tc.scaled_dot_product_attention %q, %k, %v, %m : (!tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 1, 4, 4], f32>) -> !tc.tensor<[2, 3, 4, 16], f32>
  %b = tc.scaled_dot_product_attention %q, %k, %v, %c : (!tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 1, 4, 4], i1>) -> !tc.tensor<[2, 3, 4, 16], f32>
  %tri = tc.constant {value = dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>} : () -> !tc.tensor<[4, 4], i1>
  %c2 = tc.where %tri, %zero, %low : (!tc.tensor<[4, 4], i1>, !tc.tensor<[], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[4, 4], f32>
  %d = tc.scaled_dot_product_attention %q, %k, %v, %c2 : (!tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[4, 4], f32>) -> !tc.tensor<[2, 3, 4, 16], f32>
  %ge = tc.ge %col, %row : (!tc.tensor<[1, 1, 1, 4], i64>, !tc.tensor<[1, 1, 4, 1], i64>) -> !tc.tensor<[1, 1, 4, 4], i1>
  %e = tc.scaled_dot_product_attention %q, %k, %v, %ge : (!tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[1, 1, 4, 4], i1>) -> !tc.tensor<[2, 3, 4, 16], f32>
  %soft = tc.constant {value = dense<-100.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %m2 = tc.where %le, %zero, %soft : (!tc.tensor<[1, 1, 4, 4], i1>, !tc.tensor<[], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[1, 1, 4, 4], f32>
  %f = tc.scaled_dot_product_attention %q, %k, %v, %m2 : (!tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[1, 1, 4, 4], f32>) -> !tc.tensor<[2, 3, 4, 16], f32>
  return %a, %b, %d, %e, %f : !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>, !tc.tensor<[2, 3, 4, 16], f32>
}
