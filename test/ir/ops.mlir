// RUN: tensorc-opt %s | tensorc-opt | FileCheck %s
// Every op prints in a form that parses back to the same IR.

// CHECK: tc.mesh @mesh axes = ["data", "model"] sizes = [4, 2]
tc.mesh @mesh axes = ["data", "model"] sizes = [4, 2]

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: tc.sharding = #tc.sharding<@mesh, {{\[\["data"\], \[\]\]}}>
func.func @elementwise(%x: !tc.tensor<[B, 4], f32> {tc.name = "x", tc.sharding = #tc.sharding<@mesh, [["data"], []]>},
                       %y: !tc.tensor<[4], f32>, %c: !tc.tensor<[B, 4], i1>) -> !tc.tensor<[B, 4], f32>
    attributes {tc.dim_bounds = {B = array<i64: 1, 64>}} {
  // CHECK: tc.exp %{{.*}} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>
  %0 = tc.exp %x : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>
  // CHECK: tc.gelu %{{.*}} {approximate = "tanh"}
  %1 = tc.gelu %0 {approximate = "tanh"} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>
  // CHECK: tc.add %{{.*}}, %{{.*}} : (!tc.tensor<[B, 4], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[B, 4], f32>
  %2 = tc.add %1, %y : (!tc.tensor<[B, 4], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[B, 4], f32>
  // CHECK: tc.lt {{.*}} -> !tc.tensor<[B, 4], i1>
  %3 = tc.lt %2, %y : (!tc.tensor<[B, 4], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[B, 4], i1>
  %4 = tc.logical_and %3, %c : (!tc.tensor<[B, 4], i1>, !tc.tensor<[B, 4], i1>) -> !tc.tensor<[B, 4], i1>
  // CHECK: tc.where
  %5 = tc.where %4, %2, %x : (!tc.tensor<[B, 4], i1>, !tc.tensor<[B, 4], f32>, !tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>
  // CHECK: tc.clamp %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64}
  %6 = tc.clamp %5 {min = 0.0 : f64, max = 6.0 : f64} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>
  // CHECK: tc.cast %{{.*}} {to = bf16} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], bf16>
  %7 = tc.cast %6 {to = bf16} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], bf16>
  %8 = tc.cast %7 {to = f32} : (!tc.tensor<[B, 4], bf16>) -> !tc.tensor<[B, 4], f32>
  return %8 : !tc.tensor<[B, 4], f32>
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: !tc.tensor<[B, 7, 3], f32>) -> (!tc.tensor<[B, 1, 3], f32>, !tc.tensor<[], f32>, !tc.tensor<[B, 3], i64>, !tc.tensor<[7], f32>) {
  // CHECK: tc.sum %{{.*}} {axes = array<i64: 1>, keepdim = true}
  %0 = tc.sum %x {axes = array<i64: 1>, keepdim = true} : (!tc.tensor<[B, 7, 3], f32>) -> !tc.tensor<[B, 1, 3], f32>
  %1 = tc.mean %x : (!tc.tensor<[B, 7, 3], f32>) -> !tc.tensor<[], f32>
  // CHECK: tc.argmax %{{.*}} {axis = -2 : i64} : (!tc.tensor<[B, 7, 3], f32>) -> !tc.tensor<[B, 3], i64>
  %2 = tc.argmax %x {axis = -2 : i64} : (!tc.tensor<[B, 7, 3], f32>) -> !tc.tensor<[B, 3], i64>
  // CHECK: tc.var %{{.*}} {axes = array<i64: 0, 2>, correction = 0 : i64}
  %3 = tc.var %x {axes = array<i64: 0, 2>, correction = 0 : i64} : (!tc.tensor<[B, 7, 3], f32>) -> !tc.tensor<[7], f32>
  return %0, %1, %2, %3 : !tc.tensor<[B, 1, 3], f32>, !tc.tensor<[], f32>, !tc.tensor<[B, 3], i64>, !tc.tensor<[7], f32>
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: !tc.tensor<[B, T, 64], f32>, %w: !tc.tensor<[64], f32>, %labels: !tc.tensor<[B], i64>,
              %q: !tc.tensor<[B, 4, T, 16], f32>, %img: !tc.tensor<[N, 3, 9, 9], f32>, %k: !tc.tensor<[8, 3, 3, 3], f32>,
              %seed: !tc.tensor<[], i64>, %ids: !tc.tensor<[B, T], i64>, %table: !tc.tensor<[100, 64], f32>) -> !tc.tensor<[], f32> {
  // CHECK: tc.layer_norm %{{.*}}, %{{.*}} {operandSegmentSizes = array<i32: 1, 1, 0>}
  %0 = tc.layer_norm %x, %w {operandSegmentSizes = array<i32: 1, 1, 0>} : (!tc.tensor<[B, T, 64], f32>, !tc.tensor<[64], f32>) -> !tc.tensor<[B, T, 64], f32>
  %1 = tc.rms_norm %0, %w : (!tc.tensor<[B, T, 64], f32>, !tc.tensor<[64], f32>) -> !tc.tensor<[B, T, 64], f32>
  %2 = tc.softmax %1 : (!tc.tensor<[B, T, 64], f32>) -> !tc.tensor<[B, T, 64], f32>
  %3 = tc.dropout %2, %seed {p = 1.000000e-01 : f64} : (!tc.tensor<[B, T, 64], f32>, !tc.tensor<[], i64>) -> !tc.tensor<[B, T, 64], f32>
  // CHECK: tc.scaled_dot_product_attention {{.*}} {is_causal = true}
  %4 = tc.scaled_dot_product_attention %q, %q, %q {is_causal = true} : (!tc.tensor<[B, 4, T, 16], f32>, !tc.tensor<[B, 4, T, 16], f32>, !tc.tensor<[B, 4, T, 16], f32>) -> !tc.tensor<[B, 4, T, 16], f32>
  // CHECK: tc.conv2d {{.*}} -> !tc.tensor<[N, 8, 5, 5], f32>
  %5 = tc.conv2d %img, %k {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>} : (!tc.tensor<[N, 3, 9, 9], f32>, !tc.tensor<[8, 3, 3, 3], f32>) -> !tc.tensor<[N, 8, 5, 5], f32>
  // CHECK: tc.max_pool2d {{.*}} -> !tc.tensor<[N, 8, 3, 3], f32>
  %6 = tc.max_pool2d %5 {kernel_size = array<i64: 2, 2>, ceil_mode = true} : (!tc.tensor<[N, 8, 5, 5], f32>) -> !tc.tensor<[N, 8, 3, 3], f32>
  %7 = tc.avg_pool2d %5 {kernel_size = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>} : (!tc.tensor<[N, 8, 5, 5], f32>) -> !tc.tensor<[N, 8, 5, 5], f32>
  %m = tc.zeros {shape = [8]} : () -> !tc.tensor<[8], f32>
  %v = tc.ones {shape = [8]} : () -> !tc.tensor<[8], f32>
  // CHECK: tc.batch_norm {{.*}} -> (!tc.tensor<[N, 8, 5, 5], f32>, !tc.tensor<[8], f32>, !tc.tensor<[8], f32>)
  %8:3 = tc.batch_norm %7, %m, %v {training = true, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>} : (!tc.tensor<[N, 8, 5, 5], f32>, !tc.tensor<[8], f32>, !tc.tensor<[8], f32>) -> (!tc.tensor<[N, 8, 5, 5], f32>, !tc.tensor<[8], f32>, !tc.tensor<[8], f32>)
  %9 = tc.embedding %ids, %table : (!tc.tensor<[B, T], i64>, !tc.tensor<[100, 64], f32>) -> !tc.tensor<[B, T, 64], f32>
  // CHECK: tc.embedding_backward {{.*}} {num_weights = 100 : i64} : (!tc.tensor<[B, T, 64], bf16>, !tc.tensor<[B, T], i64>) -> !tc.tensor<[100, 64], f32>
  %emb16 = tc.cast %9 {to = bf16} : (!tc.tensor<[B, T, 64], f32>) -> !tc.tensor<[B, T, 64], bf16>
  %embgrad = tc.embedding_backward %emb16, %ids {num_weights = 100 : i64} : (!tc.tensor<[B, T, 64], bf16>, !tc.tensor<[B, T], i64>) -> !tc.tensor<[100, 64], f32>
  // CHECK: tc.reshape %{{.*}} {shape = ["B*T", 64]} : (!tc.tensor<[B, T, 64], f32>) -> !tc.tensor<[B*T, 64], f32>
  %10 = tc.reshape %9 {shape = ["B*T", 64]} : (!tc.tensor<[B, T, 64], f32>) -> !tc.tensor<[B*T, 64], f32>
  %11 = tc.mean %10 {axes = array<i64: 1>} : (!tc.tensor<[B*T, 64], f32>) -> !tc.tensor<[B*T], f32>
  %12 = tc.reshape %11 {shape = ["B", -1]} : (!tc.tensor<[B*T], f32>) -> !tc.tensor<[B, T], f32>
  %13 = tc.slice %12 {axes = array<i64: 1>, starts = array<i64: 0>, ends = array<i64: 9223372036854775807>} : (!tc.tensor<[B, T], f32>) -> !tc.tensor<[B, T], f32>
  %14 = tc.sum %13 {axes = array<i64: 1>} : (!tc.tensor<[B, T], f32>) -> !tc.tensor<[B], f32>
  %15 = tc.unsqueeze %14 {axis = 1 : i64} : (!tc.tensor<[B], f32>) -> !tc.tensor<[B, 1], f32>
  %16 = tc.concat %15, %15 {axis = 1 : i64} : (!tc.tensor<[B, 1], f32>, !tc.tensor<[B, 1], f32>) -> !tc.tensor<[B, 2], f32>
  // CHECK: tc.cross_entropy {{.*}} {label_smoothing = 1.000000e-01 : f64}
  %17 = tc.cross_entropy %16, %labels {label_smoothing = 0.1 : f64} : (!tc.tensor<[B, 2], f32>, !tc.tensor<[B], i64>) -> !tc.tensor<[], f32>
  return %17 : !tc.tensor<[], f32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: !tc.tensor<[2, 3, 4], f32>, %i: !tc.tensor<[2, 3, 1], i64>, %j: !tc.tensor<[5], i32>) -> (!tc.tensor<[4, 3, 2], f32>, !tc.tensor<[2, 3, 1], f32>, !tc.tensor<[5, 3, 4], f32>) {
  %0 = tc.permute %x {dims = array<i64: 2, 1, 0>} : (!tc.tensor<[2, 3, 4], f32>) -> !tc.tensor<[4, 3, 2], f32>
  %1 = tc.gather %x, %i {axis = 2 : i64} : (!tc.tensor<[2, 3, 4], f32>, !tc.tensor<[2, 3, 1], i64>) -> !tc.tensor<[2, 3, 1], f32>
  %2 = tc.index_select %x, %j {axis = 0 : i64} : (!tc.tensor<[2, 3, 4], f32>, !tc.tensor<[5], i32>) -> !tc.tensor<[5, 3, 4], f32>
  // CHECK: tc.split {{.*}} -> (!tc.tensor<[2, 1, 4], f32>, !tc.tensor<[2, 2, 4], f32>)
  %3:2 = tc.split %x {sizes = array<i64: 1, 2>, axis = 1 : i64} : (!tc.tensor<[2, 3, 4], f32>) -> (!tc.tensor<[2, 1, 4], f32>, !tc.tensor<[2, 2, 4], f32>)
  %4 = tc.pad %3#0 {pads = array<i64: 1, 2, 0, 1>, value = -1.0 : f64} : (!tc.tensor<[2, 1, 4], f32>) -> !tc.tensor<[2, 2, 7], f32>
  %5 = tc.flatten %4 {start_axis = 1 : i64} : (!tc.tensor<[2, 2, 7], f32>) -> !tc.tensor<[2, 14], f32>
  %6 = tc.squeeze %3#0 : (!tc.tensor<[2, 1, 4], f32>) -> !tc.tensor<[2, 4], f32>
  %7 = tc.broadcast_to %6 {shape = [3, 2, 4]} : (!tc.tensor<[2, 4], f32>) -> !tc.tensor<[3, 2, 4], f32>
  %8 = tc.iota {start = 10 : i64, end = 0 : i64, step = -3 : i64} : () -> !tc.tensor<[4], i64>
  // CHECK: tc.constant {value = dense<[1, 2, 3]> : tensor<3xi32>} : () -> !tc.tensor<[3], i32>
  %9 = tc.constant {value = dense<[1, 2, 3]> : tensor<3xi32>} : () -> !tc.tensor<[3], i32>
  %10 = tc.full {shape = [2, 2], value = 3.5 : f64, dtype = f16} : () -> !tc.tensor<[2, 2], f16>
  %t = tc.transpose %x {dim0 = -2 : i64, dim1 = -1 : i64} : (!tc.tensor<[2, 3, 4], f32>) -> !tc.tensor<[2, 4, 3], f32>
  // CHECK: tc.matmul {{.*}} -> !tc.tensor<[2, 3, 3], f32>
  %11 = tc.matmul %x, %t : (!tc.tensor<[2, 3, 4], f32>, !tc.tensor<[2, 4, 3], f32>) -> !tc.tensor<[2, 3, 3], f32>
  return %0, %1, %2 : !tc.tensor<[4, 3, 2], f32>, !tc.tensor<[2, 3, 1], f32>, !tc.tensor<[5, 3, 4], f32>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: !tc.tensor<[8, B], f32>) -> !tc.tensor<[], i64> {
  // CHECK: tc.all_reduce {{.*}} {axes = ["data"], mesh = "mesh", reduction = "mean"}
  %0 = tc.all_reduce %x {mesh = "mesh", axes = ["data"], reduction = "mean"} : (!tc.tensor<[8, B], f32>) -> !tc.tensor<[8, B], f32>
  // CHECK: tc.all_gather {{.*}} -> !tc.tensor<[8, 8*B], f32>
  %1 = tc.all_gather %0 {mesh = "mesh", axes = ["model", "data"], axis = 1 : i64} : (!tc.tensor<[8, B], f32>) -> !tc.tensor<[8, 8*B], f32>
  // CHECK: tc.reduce_scatter {{.*}} -> !tc.tensor<[2, 8*B], f32>
  %2 = tc.reduce_scatter %1 {mesh = "mesh", axes = ["data"], reduction = "max"} : (!tc.tensor<[8, 8*B], f32>) -> !tc.tensor<[2, 8*B], f32>
  // CHECK: tc.all_to_all {{.*}} -> !tc.tensor<[4, 4*B], f32>
  %3 = tc.all_to_all %2 {mesh = "mesh", axes = ["model"], split_axis = 1 : i64, concat_axis = 0 : i64} : (!tc.tensor<[2, 8*B], f32>) -> !tc.tensor<[4, 4*B], f32>
  // CHECK: tc.all_slice {{.*}} -> !tc.tensor<[1, 4*B], f32>
  %4 = tc.all_slice %3 {mesh = "mesh", axes = ["data"]} : (!tc.tensor<[4, 4*B], f32>) -> !tc.tensor<[1, 4*B], f32>
  // CHECK: tc.collective_broadcast {{.*}} {axes = ["data"], mesh = "mesh", root = 3 : i64}
  %5 = tc.collective_broadcast %4 {mesh = "mesh", axes = ["data"], root = 3 : i64} : (!tc.tensor<[1, 4*B], f32>) -> !tc.tensor<[1, 4*B], f32>
  // CHECK: tc.axis_index {axes = ["model", "data"], mesh = "mesh"} : () -> !tc.tensor<[], i64>
  %6 = tc.axis_index {mesh = "mesh", axes = ["model", "data"]} : () -> !tc.tensor<[], i64>
  return %6 : !tc.tensor<[], i64>
}
