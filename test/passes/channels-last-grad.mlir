// RUN: rm -rf %t && mkdir -p %t/first %t/last
// RUN: tensorc grad %s --wrt x w b --emit mlir -o %t/last.mlir
// RUN: tensorc grad %S/Inputs/conv-grad-nchw.mlir --wrt x w b --emit mlir -o %t/first.mlir
// RUN: FileCheck %s --check-prefix=JOINT < %t/last.mlir
// RUN: tensorc run %t/last.mlir --seed 5 --output-dir %t/last > /dev/null
// RUN: tensorc run %t/first.mlir --seed 5 --output-dir %t/first > /dev/null
// RUN: %numpy_python -c "import numpy as np, sys; d = sys.argv[1]; [print(n, np.allclose(np.load(d + '/last/' + n + '.npy'), np.load(d + '/first/' + n + '.npy'), rtol=1e-5, atol=1e-5)) for n in ('loss', 'grad_x', 'grad_w', 'grad_b')]" %t | FileCheck %s

// The gradients of a channels_last conv2d (autodiff's rule: both
// gradients channels_last too, the bias gradient summed over N, H, W) equal
// the NCHW convolution's (Inputs/conv-grad-nchw.mlir): the same NCHW inputs,
// permuted here, give the same loss and gradients.
// JOINT-DAG: tc.conv2d_backward_input {{.*}}channels_last = true
// JOINT-DAG: tc.conv2d_backward_weight {{.*}}channels_last = true
// CHECK: loss True
// CHECK: grad_x True
// CHECK: grad_w True
// CHECK: grad_b True
func.func @step(%x: !tc.tensor<[2, 6, 7, 6], f32> {tc.name = "x"}, %w: !tc.tensor<[4, 3, 3, 3], f32> {tc.name = "w"},
                %b: !tc.tensor<[4], f32> {tc.name = "b"}) -> (!tc.tensor<[], f32> {tc.name = "loss"}) {
  %xl = tc.permute %x {dims = array<i64: 0, 2, 3, 1>} : (!tc.tensor<[2, 6, 7, 6], f32>) -> !tc.tensor<[2, 7, 6, 6], f32>
  %wl = tc.permute %w {dims = array<i64: 0, 2, 3, 1>} : (!tc.tensor<[4, 3, 3, 3], f32>) -> !tc.tensor<[4, 3, 3, 3], f32>
  %y = tc.conv2d %xl, %wl, %b {channels_last = true, groups = 2 : i64, padding = array<i64: 1, 0>, stride = array<i64: 2, 2>} : (!tc.tensor<[2, 7, 6, 6], f32>, !tc.tensor<[4, 3, 3, 3], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[2, 4, 2, 4], f32>
  %sq = tc.mul %y, %y : (!tc.tensor<[2, 4, 2, 4], f32>, !tc.tensor<[2, 4, 2, 4], f32>) -> !tc.tensor<[2, 4, 2, 4], f32>
  %loss = tc.sum %sq : (!tc.tensor<[2, 4, 2, 4], f32>) -> !tc.tensor<[], f32>
  return %loss : !tc.tensor<[], f32>
}
