// RUN: tensorc-opt %s -tensorc-narrow-attention | FileCheck %s
// RUN: tensorc-opt %s -tensorc-narrow-attention > %t.mlir
// RUN: rm -rf %t && mkdir -p %t/plain %t/narrow %t/cpu
// RUN: tensorc run %s --seed 3 --output-dir %t/plain > /dev/null
// RUN: tensorc run %t.mlir --seed 3 --output-dir %t/narrow > /dev/null
// RUN: tensorc compile %t.mlir --target cpu -o %t.tcx
// RUN: tensorc run %t.tcx --seed 3 --output-dir %t/cpu > /dev/null
// RUN: %numpy_python -c "import numpy as np, sys; d = sys.argv[1]; [print(o, np.abs(np.load(d + '/narrow/' + o) - np.load(d + '/plain/' + o)).max() < 1e-6, np.abs(np.load(d + '/cpu/' + o) - np.load(d + '/plain/' + o)).max() < 1e-5) for o in ('y.npy', 'z.npy')]" %t | FileCheck %s --check-prefix=SAME

// PyTorch's math SDPA on bf16 tensors (as Dynamo decomposes it): q, k, v
// and the mask upcast to f32, q and k^T scaled by d^-1/4 each. The
// attention reads the bf16 values with an f32 result, the factors folded
// into its scale (0.5 * 0.5 * 1.0), k's views replayed on the bf16 value.
// CHECK-LABEL: func.func @upcast(
// CHECK:      %[[KT:.*]] = tc.transpose %arg1 {dim0 = 2 : i64, dim1 = 3 : i64} {{.*}} -> !tc.tensor<[2, 3, 8, 5], bf16>
// CHECK-NEXT: %[[K:.*]] = tc.transpose %[[KT]] {dim0 = 2 : i64, dim1 = 3 : i64} {{.*}} -> !tc.tensor<[2, 3, 5, 8], bf16>
// CHECK-NEXT: %[[Y:.*]] = tc.scaled_dot_product_attention %arg0, %[[K]], %arg2, %arg3 {out_dtype = f32, scale = 2.500000e-01 : f64}
// CHECK-SAME: -> !tc.tensor<[2, 3, 7, 8], f32>
// An operand computed in f32 (here v * v) keeps the f32 attention.
// CHECK:      tc.scaled_dot_product_attention
// CHECK-NOT:  out_dtype
// CHECK-SAME: -> !tc.tensor<[2, 3, 7, 8], f32>
// SAME: y.npy True True
// SAME: z.npy True True
func.func @upcast(%q: !tc.tensor<[2, 3, 7, 8], bf16> {tc.name = "q"}, %k: !tc.tensor<[2, 3, 5, 8], bf16> {tc.name = "k"},
                  %v: !tc.tensor<[2, 3, 5, 8], bf16> {tc.name = "v"}, %m: !tc.tensor<[2, 1, 7, 5], bf16> {tc.name = "m"})
    -> (!tc.tensor<[2, 3, 7, 8], f32> {tc.name = "y"}, !tc.tensor<[2, 3, 7, 8], f32> {tc.name = "z"}) {
  %qf = tc.cast %q {to = f32} : (!tc.tensor<[2, 3, 7, 8], bf16>) -> !tc.tensor<[2, 3, 7, 8], f32>
  %kf = tc.cast %k {to = f32} : (!tc.tensor<[2, 3, 5, 8], bf16>) -> !tc.tensor<[2, 3, 5, 8], f32>
  %vf = tc.cast %v {to = f32} : (!tc.tensor<[2, 3, 5, 8], bf16>) -> !tc.tensor<[2, 3, 5, 8], f32>
  %mf = tc.cast %m {to = f32} : (!tc.tensor<[2, 1, 7, 5], bf16>) -> !tc.tensor<[2, 1, 7, 5], f32>
  %c = tc.constant {tc.literal, value = dense<0.5> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %qs = tc.mul %qf, %c : (!tc.tensor<[2, 3, 7, 8], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 3, 7, 8], f32>
  %kt = tc.transpose %kf {dim0 = 2 : i64, dim1 = 3 : i64} : (!tc.tensor<[2, 3, 5, 8], f32>) -> !tc.tensor<[2, 3, 8, 5], f32>
  %ks = tc.mul %kt, %c : (!tc.tensor<[2, 3, 8, 5], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 3, 8, 5], f32>
  %kb = tc.transpose %ks {dim0 = 2 : i64, dim1 = 3 : i64} : (!tc.tensor<[2, 3, 8, 5], f32>) -> !tc.tensor<[2, 3, 5, 8], f32>
  %y = tc.scaled_dot_product_attention %qs, %kb, %vf, %mf {scale = 1.0 : f64} : (!tc.tensor<[2, 3, 7, 8], f32>, !tc.tensor<[2, 3, 5, 8], f32>, !tc.tensor<[2, 3, 5, 8], f32>, !tc.tensor<[2, 1, 7, 5], f32>) -> !tc.tensor<[2, 3, 7, 8], f32>
  %vv = tc.mul %vf, %vf : (!tc.tensor<[2, 3, 5, 8], f32>, !tc.tensor<[2, 3, 5, 8], f32>) -> !tc.tensor<[2, 3, 5, 8], f32>
  %z = tc.scaled_dot_product_attention %qs, %kb, %vv, %mf {scale = 1.0 : f64} : (!tc.tensor<[2, 3, 7, 8], f32>, !tc.tensor<[2, 3, 5, 8], f32>, !tc.tensor<[2, 3, 5, 8], f32>, !tc.tensor<[2, 1, 7, 5], f32>) -> !tc.tensor<[2, 3, 7, 8], f32>
  return %y, %z : !tc.tensor<[2, 3, 7, 8], f32>, !tc.tensor<[2, 3, 7, 8], f32>
}
