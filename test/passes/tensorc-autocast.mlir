// RUN: tensorc-opt %s -split-input-file -tensorc-autocast -verify-diagnostics | FileCheck %s
// RUN: tensorc-opt %s -split-input-file -tensorc-autocast=dtype=f16 -verify-diagnostics | FileCheck %s --check-prefix=F16

// matmul runs in bf16; the bias add promotes back to f32; softmax stays f32;
// the signature is unchanged, output names included (the returned value's
// node is "s", the output is "y").
// CHECK-LABEL: func.func @dense(
// CHECK-SAME: -> (!tc.tensor<[B, 4], f32> {tc.name = "y"})
// CHECK:      %[[X:.*]] = tc.cast %arg0 {to = bf16}
// CHECK-NEXT: %[[W:.*]] = tc.cast %arg1 {to = bf16}
// CHECK-NEXT: %[[M:.*]] = tc.matmul %[[X]], %[[W]] : {{.*}} -> !tc.tensor<[B, 4], bf16>
// CHECK-NEXT: %[[MF:.*]] = tc.cast %[[M]] {to = f32}
// CHECK-NEXT: %[[A:.*]] = tc.add %[[MF]], %arg2 : {{.*}} -> !tc.tensor<[B, 4], f32>
// CHECK-NEXT: %[[S:.*]] = tc.softmax %[[A]] {{.*}} -> !tc.tensor<[B, 4], f32>
// CHECK-NEXT: return %[[S]]
// F16:        tc.matmul {{.*}} -> !tc.tensor<[B, 4], f16>
func.func @dense(%x: !tc.tensor<[B, 3], f32> {tc.name = "x"}, %w: !tc.tensor<[3, 4], f32> {tc.name = "w"},
                 %b: !tc.tensor<[4], f32> {tc.name = "b"}) -> (!tc.tensor<[B, 4], f32> {tc.name = "y"}) {
  %m = tc.matmul %x, %w : (!tc.tensor<[B, 3], f32>, !tc.tensor<[3, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("m")
  %a = tc.add %m, %b : (!tc.tensor<[B, 4], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[B, 4], f32> loc("a")
  %s = tc.softmax %a {axis = 1 : i64} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32> loc("s")
  return %s : !tc.tensor<[B, 4], f32>
}

// -----

// A bf16 input to a reduction is widened to f32; f64 and integers are left alone.
// CHECK-LABEL: func.func @widen(
// CHECK:      %[[H:.*]] = tc.cast %arg0 {to = f32}
// CHECK-NEXT: tc.sum %[[H]] {{.*}} -> !tc.tensor<[], f32>
// CHECK-NEXT: tc.matmul %arg1, %arg1 : {{.*}} -> !tc.tensor<[2, 2], f64>
// CHECK-NEXT: tc.neg %arg2
// CHECK:      tc.cast {{.*}} {to = bf16}
// CHECK-NEXT: return
func.func @widen(%h: !tc.tensor<[2], bf16> {tc.name = "h"}, %d: !tc.tensor<[2, 2], f64> {tc.name = "d"},
                 %i: !tc.tensor<[2], i32> {tc.name = "i"}) -> (!tc.tensor<[], bf16> {tc.name = "s"}, !tc.tensor<[2, 2], f64> {tc.name = "m"}, !tc.tensor<[2], i32> {tc.name = "n"}) {
  %s = tc.sum %h : (!tc.tensor<[2], bf16>) -> !tc.tensor<[], bf16> loc("s")
  %m = tc.matmul %d, %d : (!tc.tensor<[2, 2], f64>, !tc.tensor<[2, 2], f64>) -> !tc.tensor<[2, 2], f64> loc("m")
  %n = tc.neg %i : (!tc.tensor<[2], i32>) -> !tc.tensor<[2], i32> loc("n")
  return %s, %m, %n : !tc.tensor<[], bf16>, !tc.tensor<[2, 2], f64>, !tc.tensor<[2], i32>
}
