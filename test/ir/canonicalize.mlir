// RUN: tensorc-opt %s -canonicalize | FileCheck %s
// The tc folders: ops that are the identity on their operand disappear.

// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: !tc.tensor<[B, 4], f32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: !tc.tensor<[B, 4], f32>) -> (!tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>) {
  %0 = tc.cast %x {to = f32} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>
  %1 = tc.reshape %x {shape = ["B", 4]} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>
  %2 = tc.transpose %x {dim0 = 1 : i64, dim1 = -1 : i64} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>
  %3 = tc.broadcast_to %x {shape = ["B", 4]} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>
  return %0, %1, %2, %3 : !tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>
}

// CHECK-LABEL: func.func @chains
func.func @chains(%x: !tc.tensor<[2, 3, 4], f32>) -> (!tc.tensor<[24], f32>, !tc.tensor<[2, 3, 4], f32>, !tc.tensor<[5, 2, 3, 4], f32>) {
  // reshape(reshape(x)) becomes one reshape of x.
  // CHECK: %[[R:.*]] = tc.reshape %arg0 {shape = [24]} : (!tc.tensor<[2, 3, 4], f32>) -> !tc.tensor<[24], f32>
  %0 = tc.reshape %x {shape = [6, 4]} : (!tc.tensor<[2, 3, 4], f32>) -> !tc.tensor<[6, 4], f32>
  %1 = tc.reshape %0 {shape = [24]} : (!tc.tensor<[6, 4], f32>) -> !tc.tensor<[24], f32>
  // transpose(transpose(x, 0, 2), 2, 0) is x.
  %2 = tc.transpose %x {dim0 = 0 : i64, dim1 = 2 : i64} : (!tc.tensor<[2, 3, 4], f32>) -> !tc.tensor<[4, 3, 2], f32>
  %3 = tc.transpose %2 {dim0 = 2 : i64, dim1 = 0 : i64} : (!tc.tensor<[4, 3, 2], f32>) -> !tc.tensor<[2, 3, 4], f32>
  // broadcast_to(broadcast_to(x)) becomes one broadcast of x.
  // CHECK: %[[B:.*]] = tc.broadcast_to %arg0 {shape = [5, 2, 3, 4]}
  %4 = tc.broadcast_to %x {shape = [1, 2, 3, 4]} : (!tc.tensor<[2, 3, 4], f32>) -> !tc.tensor<[1, 2, 3, 4], f32>
  %5 = tc.broadcast_to %4 {shape = [5, 2, 3, 4]} : (!tc.tensor<[1, 2, 3, 4], f32>) -> !tc.tensor<[5, 2, 3, 4], f32>
  // CHECK: return %[[R]], %arg0, %[[B]]
  return %1, %3, %5 : !tc.tensor<[24], f32>, !tc.tensor<[2, 3, 4], f32>, !tc.tensor<[5, 2, 3, 4], f32>
}

// CHECK-LABEL: func.func @kept
func.func @kept(%x: !tc.tensor<[2, 3], f32>) -> !tc.tensor<[3, 2], f32> {
  // A real transpose stays.
  // CHECK: tc.transpose
  %0 = tc.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[2, 3], f32>) -> !tc.tensor<[3, 2], f32>
  return %0 : !tc.tensor<[3, 2], f32>
}
