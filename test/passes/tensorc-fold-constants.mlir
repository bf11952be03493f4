// RUN: tensorc-opt %s -split-input-file -tensorc-fold-constants | FileCheck %s

// Chains over constants fold to one constant, computed by the interpreter.
// CHECK-LABEL: func.func @fold
// CHECK:      %[[C:.*]] = tc.constant {value = dense<[3.000000e+00, 5.000000e+00]> : tensor<2xf32>}
// CHECK:      tc.constant {value = dense<[0, 1, 2, 3, 4]> : tensor<5xi64>}
// CHECK:      tc.constant {value = dense<3.1622777> : tensor<f32>}
// CHECK-NEXT: %[[S:.*]] = tc.constant {value = dense<1.000000e+01> : tensor<f32>}
// CHECK-NEXT: tc.add %arg0, %[[C]]
// CHECK-NEXT: tc.mul {{.*}}, %[[S]]
func.func @fold(%x: !tc.tensor<[2], f32> {tc.name = "x"}) -> (!tc.tensor<[2], f32> {tc.name = "y"}) {
  %a = tc.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> !tc.tensor<[2], f32> loc("a")
  %two = tc.constant {tc.literal, value = dense<2.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %b = tc.mul %a, %two : (!tc.tensor<[2], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2], f32> loc("b")
  %one = tc.constant {tc.literal, value = dense<1.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %c = tc.add %b, %one : (!tc.tensor<[2], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2], f32> loc("c")
  %i = tc.iota {end = 5 : i64} : () -> !tc.tensor<[5], i64> loc("i")
  %s = tc.sum %i : (!tc.tensor<[5], i64>) -> !tc.tensor<[], i64> loc("s")
  %sf = tc.cast %s {to = f32} : (!tc.tensor<[], i64>) -> !tc.tensor<[], f32> loc("sf")
  %q = tc.sqrt %sf : (!tc.tensor<[], f32>) -> !tc.tensor<[], f32> loc("q")
  %h = tc.mul %q, %q : (!tc.tensor<[], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[], f32> loc("h")
  %y = tc.add %x, %c : (!tc.tensor<[2], f32>, !tc.tensor<[2], f32>) -> !tc.tensor<[2], f32> loc("y0")
  %z = tc.mul %y, %h : (!tc.tensor<[2], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2], f32> loc("z")
  return %z : !tc.tensor<[2], f32>
}

// -----

// Large results stay computations; an index out of range is left to fail at run time.
// CHECK-LABEL: func.func @kept
// CHECK: tc.full {shape = [100, 100]
// CHECK: tc.embedding
func.func @kept() -> (!tc.tensor<[100, 100], f32> {tc.name = "big"}, !tc.tensor<[1, 2], f32> {tc.name = "e"}) {
  %f = tc.full {shape = [100, 100], value = 1.0 : f64} : () -> !tc.tensor<[100, 100], f32> loc("big")
  %i = tc.constant {value = dense<[7]> : tensor<1xi64>} : () -> !tc.tensor<[1], i64> loc("i")
  %w = tc.constant {value = dense<0.5> : tensor<3x2xf32>} : () -> !tc.tensor<[3, 2], f32> loc("w")
  %e = tc.embedding %i, %w : (!tc.tensor<[1], i64>, !tc.tensor<[3, 2], f32>) -> !tc.tensor<[1, 2], f32> loc("e")
  return %f, %e : !tc.tensor<[100, 100], f32>, !tc.tensor<[1, 2], f32>
}
