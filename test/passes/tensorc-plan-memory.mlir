// RUN: tensorc-opt %s -split-input-file -tensorc-plan-memory=report=true | FileCheck %s

// An elementwise op writes over the input that dies there (in place); the
// result returned is outside the arena.
// CHECK: memory plan of @inplace: arena 1024 bytes, lower bound 1024 bytes (1.000x), 2 buffers, 1 in place, 0 aliases
// CHECK-LABEL: func.func @inplace
// CHECK-SAME: tc.memory_plan = {aliases = 0 : i64, arena_bytes = 1024 : i64, buffers = 2 : i64, in_place = 1 : i64, lower_bound_bytes = 1024 : i64}
// CHECK: tc.exp %arg0 {tc.buffer = array<i64: 0, 1024>}
// CHECK: tc.neg %{{.*}} {tc.buffer = array<i64: 0, 1024>}
// CHECK: tc.tanh %{{.*}} :
func.func @inplace(%x: !tc.tensor<[256], f32>) -> !tc.tensor<[256], f32> {
  %a = tc.exp %x : (!tc.tensor<[256], f32>) -> !tc.tensor<[256], f32>
  %b = tc.neg %a : (!tc.tensor<[256], f32>) -> !tc.tensor<[256], f32>
  %c = tc.tanh %b : (!tc.tensor<[256], f32>) -> !tc.tensor<[256], f32>
  return %c : !tc.tensor<[256], f32>
}

// -----

// Buffers with disjoint lifetimes share storage; a reduction cannot work in
// place; a reshape aliases its operand.
// CHECK: memory plan of @reuse: arena 4352 bytes, lower bound 4352 bytes (1.000x), 3 buffers, 0 in place, 1 aliases
// CHECK-LABEL: func.func @reuse
// CHECK: tc.matmul {{.*}} {tc.buffer = array<i64: 0, 4096>}
// CHECK: tc.sum {{.*}}tc.buffer = array<i64: 4096, 128>}
// CHECK: tc.reshape
// CHECK-NOT: tc.buffer
// CHECK: tc.matmul {{.*}} {tc.buffer = array<i64: 0, 4096>}
func.func @reuse(%x: !tc.tensor<[32, 32], f32>) -> (!tc.tensor<[32], f32>, !tc.tensor<[32, 32], f32>) {
  %m = tc.matmul %x, %x : (!tc.tensor<[32, 32], f32>, !tc.tensor<[32, 32], f32>) -> !tc.tensor<[32, 32], f32>
  %s = tc.sum %m {axes = array<i64: 1>} : (!tc.tensor<[32, 32], f32>) -> !tc.tensor<[32], f32>
  %r = tc.reshape %s {shape = [1, 32]} : (!tc.tensor<[32], f32>) -> !tc.tensor<[1, 32], f32>
  %m2 = tc.matmul %x, %x : (!tc.tensor<[32, 32], f32>, !tc.tensor<[32, 32], f32>) -> !tc.tensor<[32, 32], f32>
  %y = tc.add %m2, %r : (!tc.tensor<[32, 32], f32>, !tc.tensor<[1, 32], f32>) -> !tc.tensor<[32, 32], f32>
  %t = tc.tanh %s : (!tc.tensor<[32], f32>) -> !tc.tensor<[32], f32>
  return %t, %y : !tc.tensor<[32], f32>, !tc.tensor<[32, 32], f32>
}

// -----

// Symbolic sizes are measured at the bound (B <= 16 here).
// CHECK: memory plan of @symbolic: arena 512 bytes, lower bound 512 bytes (1.000x), 1 buffers
func.func @symbolic(%x: !tc.tensor<[B, 8], f32>) -> !tc.tensor<[B], f32> attributes {tc.dim_bounds = {B = array<i64: 1, 16>}} {
  %a = tc.exp %x : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[B, 8], f32>
  %s = tc.sum %a {axes = array<i64: 1>} : (!tc.tensor<[B, 8], f32>) -> !tc.tensor<[B], f32>
  return %s : !tc.tensor<[B], f32>
}
