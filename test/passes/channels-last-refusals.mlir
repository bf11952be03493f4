// RUN: tensorc-opt %s -split-input-file -tensorc-channels-last | FileCheck %s

// Left as they are (tensorc-channels-last): a program with convolution
// gradients (a training step: its saved activations would cross between
// forward and backward programs in NCHW and be transposed twice), one
// whose results would be more than two transposed 4-D values (a training
// forward saving its activations), and f32 convolutions.
// CHECK-LABEL: func.func @gradients(
// CHECK-NOT:   channels_last
// CHECK-NOT:   tc.permute
// CHECK:       return
func.func @gradients(%x: !tc.tensor<[2, 8, 6, 6], bf16>, %w: !tc.tensor<[8, 8, 3, 3], bf16>, %g: !tc.tensor<[2, 8, 6, 6], bf16>)
    -> (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[2, 8, 6, 6], bf16>) {
  %y = tc.conv2d %x, %w {padding = array<i64: 1, 1>} : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[8, 8, 3, 3], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  %dx = tc.conv2d_backward_input %g, %w {input_size = array<i64: 6, 6>, padding = array<i64: 1, 1>} : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[8, 8, 3, 3], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  return %y, %dx : !tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[2, 8, 6, 6], bf16>
}

// -----

// CHECK-LABEL: func.func @saves(
// CHECK-NOT:   channels_last
// CHECK:       return
func.func @saves(%x: !tc.tensor<[2, 8, 6, 6], bf16>, %w: !tc.tensor<[8, 8, 3, 3], bf16>)
    -> (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[2, 8, 6, 6], bf16>) {
  %a = tc.conv2d %x, %w {padding = array<i64: 1, 1>} : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[8, 8, 3, 3], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  %r = tc.relu %a : (!tc.tensor<[2, 8, 6, 6], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  %b = tc.conv2d %r, %w {padding = array<i64: 1, 1>} : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[8, 8, 3, 3], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  return %a, %r, %b : !tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[2, 8, 6, 6], bf16>
}

// -----

// CHECK-LABEL: func.func @wide(
// CHECK-NOT:   channels_last
// CHECK:       return
func.func @wide(%x: !tc.tensor<[2, 8, 6, 6], f32>, %w: !tc.tensor<[8, 8, 3, 3], f32>) -> !tc.tensor<[2, 8, 6, 6], f32> {
  %y = tc.conv2d %x, %w {padding = array<i64: 1, 1>} : (!tc.tensor<[2, 8, 6, 6], f32>, !tc.tensor<[8, 8, 3, 3], f32>) -> !tc.tensor<[2, 8, 6, 6], f32>
  return %y : !tc.tensor<[2, 8, 6, 6], f32>
}
