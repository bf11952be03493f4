// RUN: tensorc-opt %s -tensorc-schedule -tensorc-plan-memory=report=true | FileCheck %s
// RUN: tensorc-opt %s -tensorc-plan-memory=report=true -o /dev/null | FileCheck %s --check-prefix=BEFORE

// Written order keeps both big intermediates live at once; reordered, each is
// reduced before the next is made.
// BEFORE: memory plan of @branches: arena 8448 bytes
// CHECK: memory plan of @branches: arena 4608 bytes
// CHECK-LABEL: func.func @branches
// CHECK:      %[[A:.*]] = tc.exp %arg0
// CHECK-NEXT: tc.sum %[[A]]
// CHECK-NEXT: %[[B:.*]] = tc.exp %arg1
// CHECK-NEXT: tc.sum %[[B]]
func.func @branches(%x: !tc.tensor<[1024], f32>, %y: !tc.tensor<[1024], f32>) -> (!tc.tensor<[], f32>, !tc.tensor<[], f32>) {
  %a = tc.exp %x : (!tc.tensor<[1024], f32>) -> !tc.tensor<[1024], f32>
  %b = tc.exp %y : (!tc.tensor<[1024], f32>) -> !tc.tensor<[1024], f32>
  %sa = tc.sum %a : (!tc.tensor<[1024], f32>) -> !tc.tensor<[], f32>
  %sb = tc.sum %b : (!tc.tensor<[1024], f32>) -> !tc.tensor<[], f32>
  %t = tc.add %sa, %sb : (!tc.tensor<[], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[], f32>
  %u = tc.mul %sa, %sb : (!tc.tensor<[], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[], f32>
  return %t, %u : !tc.tensor<[], f32>, !tc.tensor<[], f32>
}

// A collective of a computed value is issued right after its producer (the
// CUDA runtime overlaps it with the ops after it); one of an argument (an
// FSDP parameter's all_gather) stays where it was written. (1 MiB each: a
// smaller one would wait for the next, below.)
tc.mesh @mesh axes = ["data"] sizes = [2]
// CHECK-LABEL: func.func @early_collectives
// CHECK:      %[[G1:.*]] = tc.exp %arg0
// CHECK-NEXT: tc.all_reduce %[[G1]]
// CHECK-NEXT: %[[G2:.*]] = tc.exp %arg1
// CHECK-NEXT: tc.all_reduce %[[G2]]
// CHECK-NEXT: tc.mul
// CHECK-NEXT: tc.all_gather %arg2
func.func @early_collectives(%x: !tc.tensor<[262144], f32>, %y: !tc.tensor<[262144], f32>, %w: !tc.tensor<[131072], f32>) -> (!tc.tensor<[262144], f32>, !tc.tensor<[262144], f32>, !tc.tensor<[262144], f32>, !tc.tensor<[262144], f32>) {
  %g1 = tc.exp %x : (!tc.tensor<[262144], f32>) -> !tc.tensor<[262144], f32>
  %g2 = tc.exp %y : (!tc.tensor<[262144], f32>) -> !tc.tensor<[262144], f32>
  %m = tc.mul %g1, %g2 : (!tc.tensor<[262144], f32>, !tc.tensor<[262144], f32>) -> !tc.tensor<[262144], f32>
  %w1 = tc.all_gather %w {mesh = "mesh", axes = ["data"], axis = 0 : i64} : (!tc.tensor<[131072], f32>) -> !tc.tensor<[262144], f32>
  %r1 = tc.all_reduce %g1 {mesh = "mesh", axes = ["data"]} : (!tc.tensor<[262144], f32>) -> !tc.tensor<[262144], f32>
  %r2 = tc.all_reduce %g2 {mesh = "mesh", axes = ["data"]} : (!tc.tensor<[262144], f32>) -> !tc.tensor<[262144], f32>
  return %r1, %r2, %m, %w1 : !tc.tensor<[262144], f32>, !tc.tensor<[262144], f32>, !tc.tensor<[262144], f32>, !tc.tensor<[262144], f32>
}

// A small collective (under 1 MiB: a bias gradient's sum) then waits for the
// next collective, so that NCCL runs the two as one group; a big one (1 MiB)
// does not wait.
// CHECK-LABEL: func.func @small_collectives_wait
// CHECK:      %[[G1:.*]] = tc.exp %arg0
// CHECK-NEXT: tc.all_reduce %[[G1]]
// CHECK-NEXT: %[[S:.*]] = tc.sum %[[G1]]
// CHECK-NEXT: %[[G2:.*]] = tc.exp %arg1
// CHECK-NEXT: tc.all_reduce %[[S]]
// CHECK-NEXT: tc.all_reduce %[[G2]]
func.func @small_collectives_wait(%x: !tc.tensor<[262144], f32>, %y: !tc.tensor<[262144], f32>) -> (!tc.tensor<[262144], f32>, !tc.tensor<[], f32>, !tc.tensor<[262144], f32>) {
  %g1 = tc.exp %x : (!tc.tensor<[262144], f32>) -> !tc.tensor<[262144], f32>
  %s = tc.sum %g1 : (!tc.tensor<[262144], f32>) -> !tc.tensor<[], f32>
  %g2 = tc.exp %y : (!tc.tensor<[262144], f32>) -> !tc.tensor<[262144], f32>
  %r1 = tc.all_reduce %g1 {mesh = "mesh", axes = ["data"]} : (!tc.tensor<[262144], f32>) -> !tc.tensor<[262144], f32>
  %rs = tc.all_reduce %s {mesh = "mesh", axes = ["data"]} : (!tc.tensor<[], f32>) -> !tc.tensor<[], f32>
  %r2 = tc.all_reduce %g2 {mesh = "mesh", axes = ["data"]} : (!tc.tensor<[262144], f32>) -> !tc.tensor<[262144], f32>
  return %r1, %rs, %r2 : !tc.tensor<[262144], f32>, !tc.tensor<[], f32>, !tc.tensor<[262144], f32>
}
