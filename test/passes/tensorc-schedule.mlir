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
