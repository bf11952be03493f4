func.func @f(%a: !tc.tensor<[3], f32>) -> !tc.tensor<[4], f32> {
  %0 = tc.exp %a : (!tc.tensor<[3], f32>) -> !tc.tensor<[4], f32>
  return %0 : !tc.tensor<[4], f32>
}
