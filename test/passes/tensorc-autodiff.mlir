// RUN: tensorc-opt %s -split-input-file -tensorc-autodiff -verify-diagnostics | FileCheck %s

// loss = sum(relu(x @ w)): the joint function returns the loss and grad_w.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: %[[X:[^:]+]]: !tc.tensor<[B, 3], f32> {tc.name = "x"}
// CHECK-SAME: %[[W:[^:]+]]: !tc.tensor<[3, 2], f32> {tc.name = "w", tc.trainable}
// CHECK-SAME: -> (!tc.tensor<[], f32> {tc.name = "loss"}, !tc.tensor<[3, 2], f32> {tc.name = "grad_w"})
// CHECK:      %[[H:.*]] = tc.matmul %[[X]], %[[W]]
// CHECK:      %[[A:.*]] = tc.relu %[[H]]
// CHECK:      %[[LOSS:.*]] = tc.sum %[[A]]
// The seed is 1, broadcast over relu's shape, 0 where h <= 0 (nan passes, as
// PyTorch's threshold_backward).
// CHECK:      tc.full {shape = [], value = 1.000000e+00 : f64}
// CHECK:      tc.broadcast_to
// CHECK:      tc.le %[[H]]
// CHECK:      %[[G:.*]] = tc.where
// CHECK:      %[[XT:.*]] = tc.transpose %[[X]]
// CHECK:      %[[GW:.*]] = tc.matmul %[[XT]], %[[G]]
// CHECK:      return %[[LOSS]], %[[GW]]
func.func @f(%x: !tc.tensor<[B, 3], f32> {tc.name = "x"}, %w: !tc.tensor<[3, 2], f32> {tc.name = "w", tc.trainable})
    -> (!tc.tensor<[], f32> {tc.name = "loss"}) {
  %h = tc.matmul %x, %w : (!tc.tensor<[B, 3], f32>, !tc.tensor<[3, 2], f32>) -> !tc.tensor<[B, 2], f32> loc("h")
  %a = tc.relu %h : (!tc.tensor<[B, 2], f32>) -> !tc.tensor<[B, 2], f32> loc("a")
  %l = tc.sum %a : (!tc.tensor<[B, 2], f32>) -> !tc.tensor<[], f32> loc("loss")
  return %l : !tc.tensor<[], f32>
}

// -----

// A non-scalar output gets a cotangent argument; the output that does not
// depend on x (c) gets none, and nothing differentiates exp.
// CHECK-LABEL: func.func @g(
// CHECK-SAME: {tc.name = "cotangent_y"}
// CHECK-NOT:  cotangent_c
// CHECK-SAME: {tc.name = "grad_x"}
// CHECK:      %[[COS:.*]] = tc.cos %arg0
// CHECK-NEXT: tc.mul %arg2, %[[COS]]
// CHECK-NEXT: return
func.func @g(%x: !tc.tensor<[4], f32> {tc.name = "x", tc.trainable}, %z: !tc.tensor<[4], f32> {tc.name = "z"})
    -> (!tc.tensor<[4], f32> {tc.name = "y"}, !tc.tensor<[4], f32> {tc.name = "c"}) {
  %y = tc.sin %x : (!tc.tensor<[4], f32>) -> !tc.tensor<[4], f32> loc("y")
  %c = tc.exp %z : (!tc.tensor<[4], f32>) -> !tc.tensor<[4], f32> loc("c")
  return %y, %c : !tc.tensor<[4], f32>, !tc.tensor<[4], f32>
}

// -----

// expected-error @+1 {{autodiff h: no inputs to differentiate}}
module {
  func.func @h(%x: !tc.tensor<[4], f32> {tc.name = "x"}) -> (!tc.tensor<[], f32> {tc.name = "s"}) {
    %s = tc.sum %x : (!tc.tensor<[4], f32>) -> !tc.tensor<[], f32>
    return %s : !tc.tensor<[], f32>
  }
}
