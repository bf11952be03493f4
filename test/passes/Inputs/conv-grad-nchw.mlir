// The NCHW twin of channels-last-grad.mlir.
func.func @step(%x: !tc.tensor<[2, 6, 7, 6], f32> {tc.name = "x"}, %w: !tc.tensor<[4, 3, 3, 3], f32> {tc.name = "w"},
                %b: !tc.tensor<[4], f32> {tc.name = "b"}) -> (!tc.tensor<[], f32> {tc.name = "loss"}) {
  %y = tc.conv2d %x, %w, %b {groups = 2 : i64, padding = array<i64: 1, 0>, stride = array<i64: 2, 2>} : (!tc.tensor<[2, 6, 7, 6], f32>, !tc.tensor<[4, 3, 3, 3], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[2, 4, 4, 2], f32>
  %sq = tc.mul %y, %y : (!tc.tensor<[2, 4, 4, 2], f32>, !tc.tensor<[2, 4, 4, 2], f32>) -> !tc.tensor<[2, 4, 4, 2], f32>
  %loss = tc.sum %sq : (!tc.tensor<[2, 4, 4, 2], f32>) -> !tc.tensor<[], f32>
  return %loss : !tc.tensor<[], f32>
}
