// RUN: tensorc-opt %s -tensorc-decompose=ops=softmax,cross_entropy > %t.mlir
// RUN: tensorc run %t.mlir --show 8 | FileCheck %s
// RUN: tensorc run %s --show 8 | FileCheck %s
// The CUDA pipeline's softmax and cross-entropy (around the row's max, the
// one-pass logsumexp of x - max) on rows whose first element is a masked
// position: finfo(f32).min, as Hugging Face's masks write it (GPT-Neo's
// local attention, left padding). Taken around the first element, x -
// shift lost every digit of x: each kept probability was 1/n (here 1/3).
// softmax([min, 0, 1, 2]) = [0, 0.0900306, 0.244728, 0.665241]; the
// cross-entropy of target 3 is -log(0.665241) = 0.407606 there and
// log(e^5 + e^1) - 1 = 4.01815 in the second row [min, min, 5, 1]: their
// mean 2.21288.
// CHECK: y: (2, 4) f32 [0, 0.0900306, 0.244728, 0.665241, 0, 0, 0.982014, 0.0179862]
// CHECK: l: () f32 [2.21288]
func.func @masked_first() -> (!tc.tensor<[2, 4], f32> {tc.name = "y"}, !tc.tensor<[], f32> {tc.name = "l"}) {
  %x = tc.constant {value = dense<[[-3.40282347e+38, 0.0, 1.0, 2.0], [-3.40282347e+38, -3.40282347e+38, 5.0, 1.0]]> : tensor<2x4xf32>} : () -> !tc.tensor<[2, 4], f32>
  %target = tc.constant {value = dense<[3, 3]> : tensor<2xi64>} : () -> !tc.tensor<[2], i64>
  %y = tc.softmax %x {axis = 1 : i64} : (!tc.tensor<[2, 4], f32>) -> !tc.tensor<[2, 4], f32> loc("y")
  %l = tc.cross_entropy %x, %target : (!tc.tensor<[2, 4], f32>, !tc.tensor<[2], i64>) -> !tc.tensor<[], f32> loc("l")
  return %y, %l : !tc.tensor<[2, 4], f32>, !tc.tensor<[], f32>
}
