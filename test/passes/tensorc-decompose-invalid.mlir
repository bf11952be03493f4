// RUN: tensorc-opt %s -tensorc-decompose=ops=matmul -verify-diagnostics

// expected-error @+1 {{decompose: op 'matmul' has no decomposition}}
module {
  func.func @f(%x: !tc.tensor<[2, 2], f32> {tc.name = "x"}) -> (!tc.tensor<[2, 2], f32> {tc.name = "y"}) {
    %y = tc.matmul %x, %x : (!tc.tensor<[2, 2], f32>, !tc.tensor<[2, 2], f32>) -> !tc.tensor<[2, 2], f32>
    return %y : !tc.tensor<[2, 2], f32>
  }
}
