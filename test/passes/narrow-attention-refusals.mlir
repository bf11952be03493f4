// RUN: tensorc-opt %s -split-input-file -tensorc-narrow-attention | FileCheck %s

// What stays f32 attention: a scaled v (the kernel has no output scale),
// operands from different 16-bit dtypes, and an additive mask computed in
// f32 (not a converted 16-bit value).
// CHECK-LABEL: func.func @refused
// CHECK-NOT: out_dtype
// CHECK: return
func.func @refused(%q: !tc.tensor<[1, 2, 4, 16], bf16>, %k: !tc.tensor<[1, 2, 4, 16], bf16>, %v: !tc.tensor<[1, 2, 4, 16], bf16>,
                   %kh: !tc.tensor<[1, 2, 4, 16], f16>, %m: !tc.tensor<[1, 1, 4, 4], f32>)
    -> (!tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>) {
  %qf = tc.cast %q {to = f32} : (!tc.tensor<[1, 2, 4, 16], bf16>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %kf = tc.cast %k {to = f32} : (!tc.tensor<[1, 2, 4, 16], bf16>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %vf = tc.cast %v {to = f32} : (!tc.tensor<[1, 2, 4, 16], bf16>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %khf = tc.cast %kh {to = f32} : (!tc.tensor<[1, 2, 4, 16], f16>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %c = tc.constant {tc.literal, value = dense<0.5> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %vs = tc.mul %vf, %c : (!tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %a = tc.scaled_dot_product_attention %qf, %kf, %vs : (!tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %b = tc.scaled_dot_product_attention %qf, %khf, %vf : (!tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %d = tc.scaled_dot_product_attention %qf, %kf, %vf, %m : (!tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 1, 4, 4], f32>) -> !tc.tensor<[1, 2, 4, 16], f32>
  return %a, %b, %d : !tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>
}

// -----

// A bool mask stays as it is; the attention narrows (default scale kept: 1/4).
// CHECK-LABEL: func.func @bool_mask
// CHECK: tc.scaled_dot_product_attention %arg0, %arg1, %arg2, %arg3 {out_dtype = f32, scale = 2.500000e-01 : f64}
func.func @bool_mask(%q: !tc.tensor<[1, 2, 4, 16], f16>, %k: !tc.tensor<[1, 2, 4, 16], f16>, %v: !tc.tensor<[1, 2, 4, 16], f16>,
                     %m: !tc.tensor<[4, 4], i1>) -> !tc.tensor<[1, 2, 4, 16], f32> {
  %qf = tc.cast %q {to = f32} : (!tc.tensor<[1, 2, 4, 16], f16>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %kf = tc.cast %k {to = f32} : (!tc.tensor<[1, 2, 4, 16], f16>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %vf = tc.cast %v {to = f32} : (!tc.tensor<[1, 2, 4, 16], f16>) -> !tc.tensor<[1, 2, 4, 16], f32>
  %a = tc.scaled_dot_product_attention %qf, %kf, %vf, %m : (!tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[1, 2, 4, 16], f32>, !tc.tensor<[4, 4], i1>) -> !tc.tensor<[1, 2, 4, 16], f32>
  return %a : !tc.tensor<[1, 2, 4, 16], f32>
}
