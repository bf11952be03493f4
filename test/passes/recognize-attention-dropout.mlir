// RUN: tensorc-opt %s -split-input-file -tensorc-recognize-attention | FileCheck %s
// RUN: %python -c "import sys; print(open(sys.argv[1]).read().split(chr(47) * 2 + ' ' + '-' * 5)[0])" %s > %t.written.mlir
// RUN: tensorc-opt %t.written.mlir -tensorc-recognize-attention > %t.fused.mlir
// RUN: tensorc run %t.written.mlir --seed 5 --show 1000 > %t.written.txt
// RUN: tensorc run %t.fused.mlir --seed 5 --show 1000 > %t.fused.txt
// RUN: %python -c "import sys, re; a, b = [[float(x) for x in re.search(r'\[(.*)\]', open(f).read()).group(1).split(',')] for f in sys.argv[1:]]; bad = [i for i, (x, y) in enumerate(zip(a, b)) if abs(x - y) > 1e-5 * max(1.0, abs(x))]; sys.exit(f'differ at {bad}' if bad or len(a) != len(b) or len(a) != 144 else 0)" %t.written.txt %t.fused.txt
// Eager attention in a training step (transformers' eager_attention_forward
// with nn.Dropout on the probabilities): the dropout becomes the attention
// op's own (its seed operand, p and stream), whose mask is the dropout op's
// over the probabilities' elements: the interpreter gives the same numbers
// for both programs up to rounding (f32; in bf16 the fused op's
// probabilities are not rounded to bf16 before the product).
// CHECK-LABEL: func.func @eager_dropout_f32
// CHECK:      tc.scaled_dot_product_attention %arg0, %arg1, %arg2, %arg3 {dropout_p = 2.500000e-01 : f64, dropout_stream = 3 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>, scale = 5.000000e-01 : f64}
// CHECK-NOT:  tc.dropout
// CHECK-NOT:  tc.softmax
func.func @eager_dropout_f32(%q: !tc.tensor<[2, 3, 6, 4], f32> {tc.name = "q"}, %k: !tc.tensor<[2, 3, 6, 4], f32> {tc.name = "k"}, %v: !tc.tensor<[2, 3, 6, 4], f32> {tc.name = "v"}, %seed: !tc.tensor<[], i64> {tc.name = "seed"}) -> (!tc.tensor<[2, 3, 6, 4], f32> {tc.name = "o"}) {
  %kt = tc.transpose %k {dim0 = -2 : i64, dim1 = -1 : i64} : (!tc.tensor<[2, 3, 6, 4], f32>) -> !tc.tensor<[2, 3, 4, 6], f32> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[2, 3, 6, 4], f32>, !tc.tensor<[2, 3, 4, 6], f32>) -> !tc.tensor<[2, 3, 6, 6], f32> loc("s")
  %half = tc.constant {tc.literal, value = dense<0.5> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %d = tc.mul %s, %half : (!tc.tensor<[2, 3, 6, 6], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 3, 6, 6], f32> loc("d")
  %p = tc.softmax %d : (!tc.tensor<[2, 3, 6, 6], f32>) -> !tc.tensor<[2, 3, 6, 6], f32> loc("p")
  %dp = tc.dropout %p, %seed {p = 2.500000e-01 : f64, stream = 3 : i64} : (!tc.tensor<[2, 3, 6, 6], f32>, !tc.tensor<[], i64>) -> !tc.tensor<[2, 3, 6, 6], f32> loc("dp")
  %o = tc.matmul %dp, %v : (!tc.tensor<[2, 3, 6, 6], f32>, !tc.tensor<[2, 3, 6, 4], f32>) -> !tc.tensor<[2, 3, 6, 4], f32> loc("o")
  return %o : !tc.tensor<[2, 3, 6, 4], f32>
}

// -----

// 16-bit scores softmaxed in f32 and cast back (the widened form).
// CHECK-LABEL: func.func @eager_dropout
// CHECK:      tc.scaled_dot_product_attention %arg0, %arg1, %arg2, %arg3 {dropout_p = 2.500000e-01 : f64, dropout_stream = 3 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>, scale = 5.000000e-01 : f64}
// CHECK-NOT:  tc.dropout
// CHECK-NOT:  tc.softmax
func.func @eager_dropout(%q: !tc.tensor<[2, 3, 6, 4], bf16> {tc.name = "q"}, %k: !tc.tensor<[2, 3, 6, 4], bf16> {tc.name = "k"}, %v: !tc.tensor<[2, 3, 6, 4], bf16> {tc.name = "v"}, %seed: !tc.tensor<[], i64> {tc.name = "seed"}) -> (!tc.tensor<[2, 3, 6, 4], bf16> {tc.name = "o"}) {
  %kt = tc.transpose %k {dim0 = -2 : i64, dim1 = -1 : i64} : (!tc.tensor<[2, 3, 6, 4], bf16>) -> !tc.tensor<[2, 3, 4, 6], bf16> loc("kt")
  %s = tc.matmul %q, %kt : (!tc.tensor<[2, 3, 6, 4], bf16>, !tc.tensor<[2, 3, 4, 6], bf16>) -> !tc.tensor<[2, 3, 6, 6], bf16> loc("s")
  %half = tc.constant {tc.literal, value = dense<0.5> : tensor<bf16>} : () -> !tc.tensor<[], bf16>
  %d = tc.mul %s, %half : (!tc.tensor<[2, 3, 6, 6], bf16>, !tc.tensor<[], bf16>) -> !tc.tensor<[2, 3, 6, 6], bf16> loc("d")
  %up = tc.cast %d {to = f32} : (!tc.tensor<[2, 3, 6, 6], bf16>) -> !tc.tensor<[2, 3, 6, 6], f32> loc("up")
  %p = tc.softmax %up : (!tc.tensor<[2, 3, 6, 6], f32>) -> !tc.tensor<[2, 3, 6, 6], f32> loc("p")
  %back = tc.cast %p {to = bf16} : (!tc.tensor<[2, 3, 6, 6], f32>) -> !tc.tensor<[2, 3, 6, 6], bf16> loc("back")
  %dp = tc.dropout %back, %seed {p = 2.500000e-01 : f64, stream = 3 : i64} : (!tc.tensor<[2, 3, 6, 6], bf16>, !tc.tensor<[], i64>) -> !tc.tensor<[2, 3, 6, 6], bf16> loc("dp")
  %o = tc.matmul %dp, %v : (!tc.tensor<[2, 3, 6, 6], bf16>, !tc.tensor<[2, 3, 6, 4], bf16>) -> !tc.tensor<[2, 3, 6, 4], bf16> loc("o")
  return %o : !tc.tensor<[2, 3, 6, 4], bf16>
}
