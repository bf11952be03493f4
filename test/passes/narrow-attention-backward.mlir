// RUN: tensorc-opt %s -tensorc-narrow-attention | FileCheck %s
// RUN: tensorc-opt %s -tensorc-narrow-attention > %t.mlir
// RUN: rm -rf %t && mkdir -p %t/plain %t/narrow
// RUN: tensorc run %s --seed 3 --output-dir %t/plain > /dev/null
// RUN: tensorc run %t.mlir --seed 3 --output-dir %t/narrow > /dev/null
// (The outputs of multi-result ops are written under their values' names:
// y, lse as v8_0, v8_1, the gradients as v9_0..2 before and dq, dk, v9_2
// after.)
// RUN: %numpy_python -c "import numpy as np, sys; d = sys.argv[1]; [print(o, np.abs(np.load(d + '/narrow/' + n + '.npy') - np.load(d + '/plain/' + p + '.npy')).max() < 1e-6) for o, p, n in (('y', 'v8_0', 'v8_0'), ('lse', 'v8_1', 'v8_1'), ('dq', 'v9_0', 'dq'), ('dk', 'v9_1', 'dk'), ('dv', 'v9_2', 'v9_2'))]" %t | FileCheck %s --check-prefix=SAME

// A training step's math SDPA on bf16 tensors, split into forward and
// backward programs (the backward's half): q and k upcast and scaled by
// d^-1/4, v and the mask upcast, dropout; the forward saves its output and
// log-sum-exp, the backward's cotangent is the upcast of a bf16 one (the
// output was cast back). Both narrow: the forward with its log-sum-exp,
// the backward on the 16-bit cotangent and operands, without the saved
// output (it recomputes the forward), and its q and k gradients -- now of
// the unscaled q16 and k16 in a problem scaled by c_q c_k -- divided by the
// factors (0.5 each) to stay the gradients of the scaled operands.
// CHECK-LABEL: func.func @train(
// CHECK:      %[[Y:[a-z_0-9]+]], %[[L:[a-z_0-9]+]] = tc.scaled_dot_product_attention_with_lse %arg0, %arg1, %arg2, %arg3, %arg5 {dropout_p = 1.000000e-01 : f64, dropout_stream = 1 : i64, out_dtype = f32, scale = 2.500000e-01 : f64}
// CHECK:      %[[DQ0:[a-z_0-9]+]], %[[DK0:[a-z_0-9]+]], %[[DV:[a-z_0-9]+]] = tc.scaled_dot_product_attention_backward %arg4, %arg0, %arg1, %arg2, %arg3, %arg5 {dropout_p = 1.000000e-01 : f64, dropout_stream = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 1>, out_dtype = f32, scale = 2.500000e-01 : f64}
// CHECK-SAME: -> (!tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>)
// CHECK:      %[[DQ:[0-9]+]] = tc.mul %[[DQ0]], %{{.*}}
// CHECK:      %[[DK:[0-9]+]] = tc.mul %[[DK0]], %{{.*}}
// CHECK:      return %[[Y]], %[[L]], %[[DQ]], %[[DK]], %[[DV]] :
// SAME: y True
// SAME: lse True
// SAME: dq True
// SAME: dk True
// SAME: dv True
func.func @train(%q: !tc.tensor<[2, 3, 7, 16], bf16> {tc.name = "q"}, %k: !tc.tensor<[2, 3, 5, 16], bf16> {tc.name = "k"},
                 %v: !tc.tensor<[2, 3, 5, 16], bf16> {tc.name = "v"}, %m: !tc.tensor<[2, 1, 7, 5], bf16> {tc.name = "m"},
                 %g: !tc.tensor<[2, 3, 7, 16], bf16> {tc.name = "g"}, %seed: !tc.tensor<[], i64> {tc.name = "seed"})
    -> (!tc.tensor<[2, 3, 7, 16], f32> {tc.name = "y"}, !tc.tensor<[2, 3, 7], f32> {tc.name = "lse"},
        !tc.tensor<[2, 3, 7, 16], f32> {tc.name = "dq"}, !tc.tensor<[2, 3, 5, 16], f32> {tc.name = "dk"},
        !tc.tensor<[2, 3, 5, 16], f32> {tc.name = "dv"}) {
  %qf = tc.cast %q {to = f32} : (!tc.tensor<[2, 3, 7, 16], bf16>) -> !tc.tensor<[2, 3, 7, 16], f32>
  %kf = tc.cast %k {to = f32} : (!tc.tensor<[2, 3, 5, 16], bf16>) -> !tc.tensor<[2, 3, 5, 16], f32>
  %vf = tc.cast %v {to = f32} : (!tc.tensor<[2, 3, 5, 16], bf16>) -> !tc.tensor<[2, 3, 5, 16], f32>
  %mf = tc.cast %m {to = f32} : (!tc.tensor<[2, 1, 7, 5], bf16>) -> !tc.tensor<[2, 1, 7, 5], f32>
  %gf = tc.cast %g {to = f32} : (!tc.tensor<[2, 3, 7, 16], bf16>) -> !tc.tensor<[2, 3, 7, 16], f32>
  %c = tc.constant {tc.literal, value = dense<0.5> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %qs = tc.mul %qf, %c : (!tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 3, 7, 16], f32>
  %ks = tc.mul %kf, %c : (!tc.tensor<[2, 3, 5, 16], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 3, 5, 16], f32>
  %y, %lse = tc.scaled_dot_product_attention_with_lse %qs, %ks, %vf, %mf, %seed {dropout_p = 0.1 : f64, dropout_stream = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>, scale = 1.0 : f64} : (!tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>, !tc.tensor<[2, 1, 7, 5], f32>, !tc.tensor<[], i64>) -> (!tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[2, 3, 7], f32>)
  %dq, %dk, %dv = tc.scaled_dot_product_attention_backward %gf, %qs, %ks, %vf, %mf, %y, %lse, %seed {dropout_p = 0.1 : f64, dropout_stream = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1>, scale = 1.0 : f64} : (!tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>, !tc.tensor<[2, 1, 7, 5], f32>, !tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[2, 3, 7], f32>, !tc.tensor<[], i64>) -> (!tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>)
  return %y, %lse, %dq, %dk, %dv : !tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[2, 3, 7], f32>, !tc.tensor<[2, 3, 7, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>, !tc.tensor<[2, 3, 5, 16], f32>
}
