func.func @stacked(%x: !tc.tensor<[3, 5, 8], f32> {tc.name = "x"}, %w: !tc.tensor<[8, 6], f32> {tc.name = "w"},
                   %xb: !tc.tensor<[3, 5, 8], bf16> {tc.name = "xb"}, %wb: !tc.tensor<[6, 8], bf16> {tc.name = "wb"})
    -> (!tc.tensor<[3, 5, 6], f32> {tc.name = "y"}, !tc.tensor<[3, 5, 6], bf16> {tc.name = "yb"}) {
  %y = tc.matmul %x, %w : (!tc.tensor<[3, 5, 8], f32>, !tc.tensor<[8, 6], f32>) -> !tc.tensor<[3, 5, 6], f32>
  %t = tc.transpose %wb {dim0 = 0 : i64, dim1 = 1 : i64} : (!tc.tensor<[6, 8], bf16>) -> !tc.tensor<[8, 6], bf16>
  %yb = tc.matmul %xb, %t : (!tc.tensor<[3, 5, 8], bf16>, !tc.tensor<[8, 6], bf16>) -> !tc.tensor<[3, 5, 6], bf16>
  return %y, %yb : !tc.tensor<[3, 5, 6], f32>, !tc.tensor<[3, 5, 6], bf16>
}
