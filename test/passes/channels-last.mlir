// RUN: tensorc-opt %s -tensorc-channels-last -cse | FileCheck %s
// RUN: tensorc-opt %s -tensorc-channels-last > %t.mlir
// RUN: rm -rf %t && mkdir -p %t/plain %t/last
// RUN: tensorc run %s --seed 3 --output-dir %t/plain > /dev/null
// RUN: tensorc run %t.mlir --seed 3 --output-dir %t/last > /dev/null
// RUN: %numpy_python -c "import numpy as np, sys; d = sys.argv[1]; [print(n, np.array_equal(np.load(d + '/last/' + n + '.npy'), np.load(d + '/plain/' + n + '.npy'))) for n in ('pooled', 'maxed')]" %t | FileCheck %s --check-prefix=SAME

// bf16 inference convolutions on NHWC storage (tensorc-channels-last): the
// input image and the weights are permuted once; the NHWC -> NCHW permute
// after each convolution moves through the per-channel scale and shift
// (reshaped to [1, 1, 1, C]), relu, a residual add with the NCHW input
// (its NHWC copy, shared with the first convolution's), the concat (axis 1
// -> 3), the square and the global mean (axes [2, 3] -> [1, 2], no permute
// after: the kept dims stay in order) and cancels against the next
// convolution's; max pooling (NCHW) reads one permuted copy. The interpreter
// gives bit-identical results (the same arithmetic, stored differently).
// CHECK-LABEL: func.func @cnn(
// CHECK:      %[[X:[0-9]+]] = tc.permute %arg0 {dims = array<i64: 0, 2, 3, 1>}
// CHECK:      %[[Y1:[0-9]+]] = tc.conv2d %[[X]], %{{[0-9]+}} {channels_last = true, padding = array<i64: 1, 1>} : {{.*}} -> !tc.tensor<[2, 6, 6, 8], bf16>
// CHECK:      %[[S:[0-9]+]] = tc.reshape %arg2 {shape = [1, 1, 1, 8]}
// CHECK:      tc.mul %[[Y1]], %[[S]]
// CHECK:      %[[R:[0-9]+]] = tc.relu
// CHECK:      %[[RES:[0-9]+]] = tc.add %[[R]], %[[X]]
// CHECK:      %[[Y2:[0-9]+]] = tc.conv2d %[[RES]], %{{[0-9]+}}, %arg5 {channels_last = true}
// CHECK:      %[[Y3:[0-9]+]] = tc.conv2d %[[R]], %{{[0-9]+}} {channels_last = true, stride = array<i64: 2, 2>}
// CHECK:      %[[Y3F:[0-9]+]] = tc.permute %[[Y3]] {dims = array<i64: 0, 3, 1, 2>}
// CHECK:      %[[CAT:[0-9]+]] = tc.concat %[[Y2]], %[[Y2]] {axis = 3 : i64}
// CHECK:      tc.mean %{{[0-9]+}} {axes = array<i64: 1, 2>} : (!tc.tensor<[2, 6, 6, 32], bf16>) -> !tc.tensor<[2, 32], bf16>
// CHECK:      tc.max_pool2d %[[Y3F]]
// CHECK-NOT:  tc.permute
// CHECK:      return
// SAME: pooled True
// SAME: maxed True
func.func @cnn(%x: !tc.tensor<[2, 8, 6, 6], bf16> {tc.name = "x"}, %w1: !tc.tensor<[8, 8, 3, 3], bf16> {tc.name = "w1"},
               %scale: !tc.tensor<[8, 1, 1], bf16> {tc.name = "scale"}, %shift: !tc.tensor<[8, 1, 1], bf16> {tc.name = "shift"},
               %w2: !tc.tensor<[16, 8, 1, 1], bf16> {tc.name = "w2"}, %b2: !tc.tensor<[16], bf16> {tc.name = "b2"},
               %w3: !tc.tensor<[16, 8, 1, 1], bf16> {tc.name = "w3"})
    -> (!tc.tensor<[2, 16], bf16> {tc.name = "pooled"}, !tc.tensor<[2, 16, 3, 3], bf16> {tc.name = "maxed"}) {
  %y1 = tc.conv2d %x, %w1 {padding = array<i64: 1, 1>} : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[8, 8, 3, 3], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  %s = tc.mul %y1, %scale : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[8, 1, 1], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  %t = tc.add %s, %shift : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[8, 1, 1], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  %r = tc.relu %t : (!tc.tensor<[2, 8, 6, 6], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  %res = tc.add %r, %x : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[2, 8, 6, 6], bf16>) -> !tc.tensor<[2, 8, 6, 6], bf16>
  %y2 = tc.conv2d %res, %w2, %b2 : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[16, 8, 1, 1], bf16>, !tc.tensor<[16], bf16>) -> !tc.tensor<[2, 16, 6, 6], bf16>
  %y3 = tc.conv2d %r, %w3 {stride = array<i64: 2, 2>} : (!tc.tensor<[2, 8, 6, 6], bf16>, !tc.tensor<[16, 8, 1, 1], bf16>) -> !tc.tensor<[2, 16, 3, 3], bf16>
  %cat = tc.concat %y2, %y2 {axis = 1 : i64} : (!tc.tensor<[2, 16, 6, 6], bf16>, !tc.tensor<[2, 16, 6, 6], bf16>) -> !tc.tensor<[2, 32, 6, 6], bf16>
  %sq = tc.mul %cat, %cat : (!tc.tensor<[2, 32, 6, 6], bf16>, !tc.tensor<[2, 32, 6, 6], bf16>) -> !tc.tensor<[2, 32, 6, 6], bf16>
  %m = tc.mean %sq {axes = array<i64: 2, 3>} : (!tc.tensor<[2, 32, 6, 6], bf16>) -> !tc.tensor<[2, 32], bf16>
  %half = tc.reshape %m {shape = [2, 2, 16]} : (!tc.tensor<[2, 32], bf16>) -> !tc.tensor<[2, 2, 16], bf16>
  %pooled = tc.sum %half {axes = array<i64: 1>} : (!tc.tensor<[2, 2, 16], bf16>) -> !tc.tensor<[2, 16], bf16>
  %maxed = tc.max_pool2d %y3 {kernel_size = array<i64: 1, 1>} : (!tc.tensor<[2, 16, 3, 3], bf16>) -> !tc.tensor<[2, 16, 3, 3], bf16>
  return %pooled, %maxed : !tc.tensor<[2, 16], bf16>, !tc.tensor<[2, 16, 3, 3], bf16>
}
