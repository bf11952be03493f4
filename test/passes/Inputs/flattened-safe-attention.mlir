// SDPA's math path as Dynamo hands it for a Hugging Face encoder: q and k^T
// scaled by sqrt(scale) each, [B*H, L, E] @ [B*H, E, S] batched, the scores
// reshaped to [B, H, L, S], an additive mask, PyTorch's safe softmax, and the
// probabilities flattened again for the bmm with v.
func.func @encoder(%q: !tc.tensor<[2, 3, 5, 4], f32> {tc.name = "q"}, %k: !tc.tensor<[2, 3, 5, 4], f32> {tc.name = "k"},
                   %v: !tc.tensor<[2, 3, 5, 4], f32> {tc.name = "v"}, %b: !tc.tensor<[2, 1, 1, 5], f32> {tc.name = "b"})
    -> (!tc.tensor<[6, 5, 4], f32> {tc.name = "o"}) {
  %c = tc.constant {tc.literal, value = dense<0.7071067811865476> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %qs = tc.mul %q, %c : (!tc.tensor<[2, 3, 5, 4], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 3, 5, 4], f32> loc("qs")
  %kt = tc.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : (!tc.tensor<[2, 3, 5, 4], f32>) -> !tc.tensor<[2, 3, 4, 5], f32> loc("kt")
  %ks = tc.mul %kt, %c : (!tc.tensor<[2, 3, 4, 5], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 3, 4, 5], f32> loc("ks")
  %q3 = tc.reshape %qs {shape = [6, 5, 4]} : (!tc.tensor<[2, 3, 5, 4], f32>) -> !tc.tensor<[6, 5, 4], f32> loc("q3")
  %k3 = tc.reshape %ks {shape = [6, 4, 5]} : (!tc.tensor<[2, 3, 4, 5], f32>) -> !tc.tensor<[6, 4, 5], f32> loc("k3")
  %s3 = tc.matmul %q3, %k3 : (!tc.tensor<[6, 5, 4], f32>, !tc.tensor<[6, 4, 5], f32>) -> !tc.tensor<[6, 5, 5], f32> loc("s3")
  %s = tc.reshape %s3 {shape = [2, 3, 5, 5]} : (!tc.tensor<[6, 5, 5], f32>) -> !tc.tensor<[2, 3, 5, 5], f32> loc("s")
  %a = tc.add %s, %b : (!tc.tensor<[2, 3, 5, 5], f32>, !tc.tensor<[2, 1, 1, 5], f32>) -> !tc.tensor<[2, 3, 5, 5], f32> loc("a")
  %p = tc.softmax %a {axis = 3 : i64} : (!tc.tensor<[2, 3, 5, 5], f32>) -> !tc.tensor<[2, 3, 5, 5], f32> loc("p")
  %m = tc.max %a {axes = array<i64: 3>, keepdim = true} : (!tc.tensor<[2, 3, 5, 5], f32>) -> !tc.tensor<[2, 3, 5, 1], f32> loc("m")
  %ninf = tc.constant {tc.literal, value = dense<0xFF800000> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %h = tc.eq %m, %ninf : (!tc.tensor<[2, 3, 5, 1], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[2, 3, 5, 1], i1> loc("h")
  %zero = tc.constant {tc.literal, value = dense<0.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %w = tc.where %h, %zero, %p : (!tc.tensor<[2, 3, 5, 1], i1>, !tc.tensor<[], f32>, !tc.tensor<[2, 3, 5, 5], f32>) -> !tc.tensor<[2, 3, 5, 5], f32> loc("w")
  %p3 = tc.reshape %w {shape = [6, 5, 5]} : (!tc.tensor<[2, 3, 5, 5], f32>) -> !tc.tensor<[6, 5, 5], f32> loc("p3")
  %v3 = tc.reshape %v {shape = [6, 5, 4]} : (!tc.tensor<[2, 3, 5, 4], f32>) -> !tc.tensor<[6, 5, 4], f32> loc("v3")
  %o = tc.matmul %p3, %v3 : (!tc.tensor<[6, 5, 5], f32>, !tc.tensor<[6, 5, 4], f32>) -> !tc.tensor<[6, 5, 4], f32> loc("o")
  return %o : !tc.tensor<[6, 5, 4], f32>
}
