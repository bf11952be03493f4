// RUN: tensorc-opt %s -split-input-file -tensorc-simplify | FileCheck %s

// Exact identities disappear.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:[^:]*]]: !tc.tensor<[B, 3], f32>, %[[I:[^:]*]]: !tc.tensor<[3], i32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[I]], %[[X]]
func.func @identities(%x: !tc.tensor<[B, 3], f32>, %i: !tc.tensor<[3], i32>) -> (!tc.tensor<[B, 3], f32>, !tc.tensor<[B, 3], f32>, !tc.tensor<[B, 3], f32>, !tc.tensor<[B, 3], f32>, !tc.tensor<[B, 3], f32>, !tc.tensor<[3], i32>, !tc.tensor<[B, 3], f32>) {
  %one = tc.constant {value = dense<1.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %zero = tc.constant {value = dense<0.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %negzero = tc.constant {value = dense<-0.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %izero = tc.constant {value = dense<0> : tensor<i32>} : () -> !tc.tensor<[], i32>
  %0 = tc.mul %one, %x : (!tc.tensor<[], f32>, !tc.tensor<[B, 3], f32>) -> !tc.tensor<[B, 3], f32>
  %1 = tc.div %x, %one : (!tc.tensor<[B, 3], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[B, 3], f32>
  %2 = tc.sub %x, %zero : (!tc.tensor<[B, 3], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[B, 3], f32>
  %3 = tc.add %x, %negzero : (!tc.tensor<[B, 3], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[B, 3], f32>
  %n = tc.neg %x : (!tc.tensor<[B, 3], f32>) -> !tc.tensor<[B, 3], f32>
  %4 = tc.neg %n : (!tc.tensor<[B, 3], f32>) -> !tc.tensor<[B, 3], f32>
  %5 = tc.add %izero, %i : (!tc.tensor<[], i32>, !tc.tensor<[3], i32>) -> !tc.tensor<[3], i32>
  %w = tc.cast %x {to = f64} : (!tc.tensor<[B, 3], f32>) -> !tc.tensor<[B, 3], f64>
  %6 = tc.cast %w {to = f32} : (!tc.tensor<[B, 3], f64>) -> !tc.tensor<[B, 3], f32>
  return %0, %1, %2, %3, %4, %5, %6 : !tc.tensor<[B, 3], f32>, !tc.tensor<[B, 3], f32>, !tc.tensor<[B, 3], f32>, !tc.tensor<[B, 3], f32>, !tc.tensor<[B, 3], f32>, !tc.tensor<[3], i32>, !tc.tensor<[B, 3], f32>
}

// -----

// Inexact rewrites are not made: x + 0.0 (signed zero), a narrowing round trip,
// a multiply by 1 that broadcasts.
// CHECK-LABEL: func.func @kept
// CHECK: tc.add
// CHECK: tc.cast {{.*}} {to = bf16}
// CHECK: tc.cast {{.*}} {to = f32}
// CHECK: tc.mul
func.func @kept(%x: !tc.tensor<[3], f32>) -> (!tc.tensor<[3], f32>, !tc.tensor<[3], f32>, !tc.tensor<[2, 3], f32>) {
  %zero = tc.constant {value = dense<0.0> : tensor<f32>} : () -> !tc.tensor<[], f32>
  %ones = tc.constant {value = dense<1.0> : tensor<2x1xf32>} : () -> !tc.tensor<[2, 1], f32>
  %0 = tc.add %x, %zero : (!tc.tensor<[3], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[3], f32>
  %b = tc.cast %x {to = bf16} : (!tc.tensor<[3], f32>) -> !tc.tensor<[3], bf16>
  %1 = tc.cast %b {to = f32} : (!tc.tensor<[3], bf16>) -> !tc.tensor<[3], f32>
  %2 = tc.mul %x, %ones : (!tc.tensor<[3], f32>, !tc.tensor<[2, 1], f32>) -> !tc.tensor<[2, 3], f32>
  return %0, %1, %2 : !tc.tensor<[3], f32>, !tc.tensor<[3], f32>, !tc.tensor<[2, 3], f32>
}

// -----

// Views become reshapes and chains collapse; permutes compose.
// CHECK-LABEL: func.func @views
// CHECK-NEXT: %[[R:.*]] = tc.reshape %arg0 {shape = [6]} : (!tc.tensor<[2, 1, 3], f32>) -> !tc.tensor<[6], f32>
// CHECK-NEXT: %[[P:.*]] = tc.permute %arg1 {dims = array<i64: 2, 0, 1>}
// CHECK-NEXT: return %[[R]], %[[P]], %arg1
func.func @views(%x: !tc.tensor<[2, 1, 3], f32>, %y: !tc.tensor<[2, 3, 4], f32>) -> (!tc.tensor<[6], f32>, !tc.tensor<[4, 2, 3], f32>, !tc.tensor<[2, 3, 4], f32>) {
  %s = tc.squeeze %x : (!tc.tensor<[2, 1, 3], f32>) -> !tc.tensor<[2, 3], f32>
  %u = tc.unsqueeze %s {axis = 0 : i64} : (!tc.tensor<[2, 3], f32>) -> !tc.tensor<[1, 2, 3], f32>
  %f = tc.flatten %u : (!tc.tensor<[1, 2, 3], f32>) -> !tc.tensor<[6], f32>
  %p = tc.permute %y {dims = array<i64: 1, 2, 0>} : (!tc.tensor<[2, 3, 4], f32>) -> !tc.tensor<[3, 4, 2], f32>
  %q = tc.permute %p {dims = array<i64: 1, 2, 0>} : (!tc.tensor<[3, 4, 2], f32>) -> !tc.tensor<[4, 2, 3], f32>
  %i = tc.permute %y {dims = array<i64: 0, 1, 2>} : (!tc.tensor<[2, 3, 4], f32>) -> !tc.tensor<[2, 3, 4], f32>
  return %f, %q, %i : !tc.tensor<[6], f32>, !tc.tensor<[4, 2, 3], f32>, !tc.tensor<[2, 3, 4], f32>
}

// -----

// Dead ops are erased; where with equal branches is its branch.
// CHECK-LABEL: func.func @dead
// CHECK-NEXT: return %arg1
func.func @dead(%c: !tc.tensor<[3], i1>, %x: !tc.tensor<[3], f32>) -> !tc.tensor<[3], f32> {
  %e = tc.exp %x : (!tc.tensor<[3], f32>) -> !tc.tensor<[3], f32>
  %w = tc.where %c, %x, %x : (!tc.tensor<[3], i1>, !tc.tensor<[3], f32>, !tc.tensor<[3], f32>) -> !tc.tensor<[3], f32>
  return %w : !tc.tensor<[3], f32>
}

// -----

// A reduction along axes where its operand is a broadcast reduces the small
// operand: a sum multiplies by the count (a bias gradient of a summed loss
// summed a [16, 3] tensor of ones), a mean is the value; a reduction along
// an axis that is not broadcast, or of a symbolic extent, stays.
// CHECK-LABEL: func.func @reduce_of_broadcast
// CHECK-SAME: (%[[B:[^:]*]]: !tc.tensor<[3], f32>, %[[C:[^:]*]]: !tc.tensor<[1], f32>)
// CHECK-DAG: %[[N:.*]] = tc.constant {value = dense<1.600000e+01> : tensor<f32>}
// CHECK-DAG: %[[WIDE:.*]] = tc.broadcast_to %{{.*}} {shape = [1, 3]}
// CHECK: %[[SUM:.*]] = tc.mul %[[WIDE]], %[[N]]
// CHECK: %[[S:.*]] = tc.reshape %[[SUM]] {shape = [3]}
// CHECK: %[[M:.*]] = tc.reshape %[[B]] {shape = [1, 1, 3]}
// CHECK: %[[MX:.*]] = tc.max
// CHECK: %[[SYM:.*]] = tc.sum
// CHECK: return %[[S]], %[[M]], %[[MX]], %[[SYM]]
func.func @reduce_of_broadcast(%b: !tc.tensor<[3], f32>, %c: !tc.tensor<[1], f32>) -> (!tc.tensor<[3], f32>, !tc.tensor<[1, 1, 3], f32>, !tc.tensor<[4, 5], f32>, !tc.tensor<[], f32>) {
  %ones = tc.constant {value = dense<1.0> : tensor<1x1xf32>} : () -> !tc.tensor<[1, 1], f32>
  %bo = tc.broadcast_to %ones {shape = [16, 3]} : (!tc.tensor<[1, 1], f32>) -> !tc.tensor<[16, 3], f32>
  %s = tc.sum %bo {axes = array<i64: 0>} : (!tc.tensor<[16, 3], f32>) -> !tc.tensor<[3], f32>
  %x = tc.broadcast_to %b {shape = [4, 5, 3]} : (!tc.tensor<[3], f32>) -> !tc.tensor<[4, 5, 3], f32>
  %m = tc.mean %x {axes = array<i64: 0, 1>, keepdim = true} : (!tc.tensor<[4, 5, 3], f32>) -> !tc.tensor<[1, 1, 3], f32>
  %mx = tc.max %x {axes = array<i64: 2>} : (!tc.tensor<[4, 5, 3], f32>) -> !tc.tensor<[4, 5], f32>
  %y = tc.broadcast_to %c {shape = ["N"]} : (!tc.tensor<[1], f32>) -> !tc.tensor<[N], f32>
  %sym = tc.sum %y : (!tc.tensor<[N], f32>) -> !tc.tensor<[], f32>
  return %s, %m, %mx, %sym : !tc.tensor<[3], f32>, !tc.tensor<[1, 1, 3], f32>, !tc.tensor<[4, 5], f32>, !tc.tensor<[], f32>
}

// -----

// A transposed product is the product of the transposed operands, swapped:
// the GEMM writes it (its operands' transposes are GEMM flags); batched
// too. A product with a weight shared across the batch (one GEMM over the
// flattened rows), or a transpose of other dims, stays.
// CHECK-LABEL: func.func @transposed_product
// CHECK-SAME: (%[[A:[^:]*]]: !tc.tensor<[B, 3, 4], f32>, %[[W:[^:]*]]: !tc.tensor<[B, 4, 5], f32>, %[[V:[^:]*]]: !tc.tensor<[4, 5], f32>
// CHECK-DAG: %[[WT:.*]] = tc.transpose %[[W]] {dim0 = -2 : i64, dim1 = -1 : i64} : (!tc.tensor<[B, 4, 5], f32>) -> !tc.tensor<[B, 5, 4], f32>
// CHECK-DAG: %[[AT:.*]] = tc.transpose %[[A]] {dim0 = -2 : i64, dim1 = -1 : i64} : (!tc.tensor<[B, 3, 4], f32>) -> !tc.tensor<[B, 4, 3], f32>
// CHECK: %[[P:.*]] = tc.matmul %[[WT]], %[[AT]] : (!tc.tensor<[B, 5, 4], f32>, !tc.tensor<[B, 4, 3], f32>) -> !tc.tensor<[B, 5, 3], f32>
// CHECK: %[[M:.*]] = tc.matmul %[[A]], %[[V]]
// CHECK: %[[T:.*]] = tc.transpose %[[M]] {dim0 = -1 : i64, dim1 = -2 : i64}
// CHECK: %[[M2:.*]] = tc.matmul %[[A]], %[[V]]
// CHECK: %[[T2:.*]] = tc.transpose %[[M2]] {dim0 = 0 : i64, dim1 = 2 : i64}
// CHECK: return %[[P]], %[[T]], %[[T2]]
func.func @transposed_product(%a: !tc.tensor<[B, 3, 4], f32>, %w: !tc.tensor<[B, 4, 5], f32>, %v: !tc.tensor<[4, 5], f32>) -> (!tc.tensor<[B, 5, 3], f32>, !tc.tensor<[B, 5, 3], f32>, !tc.tensor<[5, 3, B], f32>) {
  %m = tc.matmul %a, %w : (!tc.tensor<[B, 3, 4], f32>, !tc.tensor<[B, 4, 5], f32>) -> !tc.tensor<[B, 3, 5], f32>
  %t = tc.transpose %m {dim0 = -1 : i64, dim1 = -2 : i64} : (!tc.tensor<[B, 3, 5], f32>) -> !tc.tensor<[B, 5, 3], f32>
  %m1 = tc.matmul %a, %v : (!tc.tensor<[B, 3, 4], f32>, !tc.tensor<[4, 5], f32>) -> !tc.tensor<[B, 3, 5], f32>
  %t1 = tc.transpose %m1 {dim0 = -1 : i64, dim1 = -2 : i64} : (!tc.tensor<[B, 3, 5], f32>) -> !tc.tensor<[B, 5, 3], f32>
  %m2 = tc.matmul %a, %v : (!tc.tensor<[B, 3, 4], f32>, !tc.tensor<[4, 5], f32>) -> !tc.tensor<[B, 3, 5], f32>
  %t2 = tc.transpose %m2 {dim0 = 0 : i64, dim1 = 2 : i64} : (!tc.tensor<[B, 3, 5], f32>) -> !tc.tensor<[5, 3, B], f32>
  return %t, %t1, %t2 : !tc.tensor<[B, 5, 3], f32>, !tc.tensor<[B, 5, 3], f32>, !tc.tensor<[5, 3, B], f32>
}

// -----

// Reshapes move to memory or to the chain's end, gathers and slices before
// one-operand elementwise ops: inside a kernel none of them is an affine
// re-indexing of a value computed on the fly (code generation materialized
// it). Up: a reshape of a cast of a graph input reshapes the input (a view).
// Down: a cast of a reshape of a computed value casts first, then reshapes.
// A gather or slice of an exp picks first, then takes the exp of the few.
// CHECK-LABEL: func.func @views_out_of_kernels
// CHECK-SAME: (%[[X:[^:]*]]: !tc.tensor<[2, 4, 8], bf16>, %[[Y:[^:]*]]: !tc.tensor<[8, 8], f32>, %[[I:[^:]*]]: !tc.tensor<[8, 1], i64>
// CHECK-DAG: %[[XR:.*]] = tc.reshape %[[X]] {shape = [8, 8]} : (!tc.tensor<[2, 4, 8], bf16>) -> !tc.tensor<[8, 8], bf16>
// CHECK-DAG: %[[XC:.*]] = tc.cast %[[XR]] {to = f32} : (!tc.tensor<[8, 8], bf16>) -> !tc.tensor<[8, 8], f32>
// CHECK-DAG: %[[S:.*]] = tc.mul %[[XC]], %[[Y]]
// CHECK-DAG: %[[SC:.*]] = tc.cast %[[S]] {to = bf16} : (!tc.tensor<[8, 8], f32>) -> !tc.tensor<[8, 8], bf16>
// CHECK-DAG: %[[SR:.*]] = tc.reshape %[[SC]] {shape = [2, 4, 8]} : (!tc.tensor<[8, 8], bf16>) -> !tc.tensor<[2, 4, 8], bf16>
// CHECK-DAG: %[[G:.*]] = tc.gather %[[Y]], %[[I]] {axis = 1 : i64} : (!tc.tensor<[8, 8], f32>, !tc.tensor<[8, 1], i64>) -> !tc.tensor<[8, 1], f32>
// CHECK-DAG: %[[GE:.*]] = tc.exp %[[G]] : (!tc.tensor<[8, 1], f32>) -> !tc.tensor<[8, 1], f32>
// CHECK-DAG: %[[L:.*]] = tc.slice %[[Y]] {{.*}} : (!tc.tensor<[8, 8], f32>) -> !tc.tensor<[8, 1], f32>
// CHECK-DAG: %[[LE:.*]] = tc.exp %[[L]] : (!tc.tensor<[8, 1], f32>) -> !tc.tensor<[8, 1], f32>
// CHECK: return %[[SR]], %[[GE]], %[[LE]]
func.func @views_out_of_kernels(%x: !tc.tensor<[2, 4, 8], bf16>, %y: !tc.tensor<[8, 8], f32>, %i: !tc.tensor<[8, 1], i64>) -> (!tc.tensor<[2, 4, 8], bf16>, !tc.tensor<[8, 1], f32>, !tc.tensor<[8, 1], f32>) {
  %c = tc.cast %x {to = f32} : (!tc.tensor<[2, 4, 8], bf16>) -> !tc.tensor<[2, 4, 8], f32>
  %r = tc.reshape %c {shape = [8, 8]} : (!tc.tensor<[2, 4, 8], f32>) -> !tc.tensor<[8, 8], f32>
  %s = tc.mul %r, %y : (!tc.tensor<[8, 8], f32>, !tc.tensor<[8, 8], f32>) -> !tc.tensor<[8, 8], f32>
  %sr = tc.reshape %s {shape = [2, 4, 8]} : (!tc.tensor<[8, 8], f32>) -> !tc.tensor<[2, 4, 8], f32>
  %sc = tc.cast %sr {to = bf16} : (!tc.tensor<[2, 4, 8], f32>) -> !tc.tensor<[2, 4, 8], bf16>
  %e = tc.exp %y : (!tc.tensor<[8, 8], f32>) -> !tc.tensor<[8, 8], f32>
  %g = tc.gather %e, %i {axis = 1 : i64} : (!tc.tensor<[8, 8], f32>, !tc.tensor<[8, 1], i64>) -> !tc.tensor<[8, 1], f32>
  %l = tc.slice %e {axes = array<i64: 1>, starts = array<i64: 0>, ends = array<i64: 1>} : (!tc.tensor<[8, 8], f32>) -> !tc.tensor<[8, 1], f32>
  return %sc, %g, %l : !tc.tensor<[2, 4, 8], bf16>, !tc.tensor<[8, 1], f32>, !tc.tensor<[8, 1], f32>
}

// -----

// A reshape of two unary ops of an input moves up to the input; the op it
// moved past is erased at once (left a moment with no use, the input read as
// used twice and Down moved the reshape back: the rewrites never converged).
// CHECK-LABEL: func.func @reshape_up_two_unary_ops
// CHECK-SAME: (%[[X:[^:]*]]: !tc.tensor<[7, 5], f32>)
// CHECK-NEXT: %[[R:.*]] = tc.reshape %[[X]] {shape = [7, 1, 5]}
// CHECK-NEXT: %[[E:.*]] = tc.exp %[[R]]
// CHECK-NEXT: %[[F:.*]] = tc.exp %[[E]]
// CHECK-NEXT: return %[[F]]
func.func @reshape_up_two_unary_ops(%x: !tc.tensor<[7, 5], f32>) -> !tc.tensor<[7, 1, 5], f32> {
  %e = tc.exp %x : (!tc.tensor<[7, 5], f32>) -> !tc.tensor<[7, 5], f32>
  %f = tc.exp %e : (!tc.tensor<[7, 5], f32>) -> !tc.tensor<[7, 5], f32>
  %u = tc.unsqueeze %f {axis = 1 : i64} : (!tc.tensor<[7, 5], f32>) -> !tc.tensor<[7, 1, 5], f32>
  return %u : !tc.tensor<[7, 1, 5], f32>
}

// -----

// A cast with a sharding moves before a reshape of a computed value: the
// cast's result then has another rank, so it leaves its sharding behind
// (kept, it failed verification: one dim entry per dim).
tc.mesh @m axes = ["x"] sizes = [2]
// CHECK-LABEL: func.func @sharded_cast_sinks_reshape
// CHECK: %[[C:.*]] = tc.cast %{{.*}} {to = bf16} : (!tc.tensor<[8, 8], f32>) -> !tc.tensor<[8, 8], bf16>
// CHECK: tc.reshape %[[C]] {shape = [2, 4, 8]}
func.func @sharded_cast_sinks_reshape(%x: !tc.tensor<[8, 8], f32>, %y: !tc.tensor<[8, 8], f32>) -> !tc.tensor<[2, 4, 8], bf16> {
  %s = tc.mul %x, %y : (!tc.tensor<[8, 8], f32>, !tc.tensor<[8, 8], f32>) -> !tc.tensor<[8, 8], f32>
  %r = tc.reshape %s {shape = [2, 4, 8]} : (!tc.tensor<[8, 8], f32>) -> !tc.tensor<[2, 4, 8], f32>
  %c = tc.cast %r {to = bf16, tc.sharding = #tc.sharding<@m, [["x"], [], []]>} : (!tc.tensor<[2, 4, 8], f32>) -> !tc.tensor<[2, 4, 8], bf16>
  return %c : !tc.tensor<[2, 4, 8], bf16>
}

// -----

// A model output that is a linear layer's product unflattened (PyTorch's
// view, addmm, view) is the matmul of the unflattened input: the GEMM
// writes the output. Not where the product has other users.
// CHECK-LABEL: func.func @output_linear
// CHECK:      %[[P:.*]] = tc.matmul %arg0, %arg1 : (!tc.tensor<[2, 3, 8], bf16>, !tc.tensor<[8, 5], bf16>) -> !tc.tensor<[2, 3, 5], bf16>
// CHECK-NEXT: %[[Y:.*]] = tc.add %[[P]], %arg2 : (!tc.tensor<[2, 3, 5], bf16>, !tc.tensor<[5], bf16>) -> !tc.tensor<[2, 3, 5], bf16>
// CHECK:      tc.matmul {{.*}} -> !tc.tensor<[6, 5], bf16>
// CHECK:      tc.reshape
func.func @output_linear(%x: !tc.tensor<[2, 3, 8], bf16>, %w: !tc.tensor<[8, 5], bf16>, %b: !tc.tensor<[5], bf16>)
    -> (!tc.tensor<[2, 3, 5], bf16>, !tc.tensor<[2, 3, 5], bf16>, !tc.tensor<[6, 5], bf16>) {
  %f = tc.reshape %x {shape = [6, 8]} : (!tc.tensor<[2, 3, 8], bf16>) -> !tc.tensor<[6, 8], bf16>
  %p = tc.matmul %f, %w : (!tc.tensor<[6, 8], bf16>, !tc.tensor<[8, 5], bf16>) -> !tc.tensor<[6, 5], bf16>
  %pb = tc.add %p, %b : (!tc.tensor<[6, 5], bf16>, !tc.tensor<[5], bf16>) -> !tc.tensor<[6, 5], bf16>
  %y = tc.reshape %pb {shape = [2, 3, 5]} : (!tc.tensor<[6, 5], bf16>) -> !tc.tensor<[2, 3, 5], bf16>
  %q = tc.matmul %f, %w : (!tc.tensor<[6, 8], bf16>, !tc.tensor<[8, 5], bf16>) -> !tc.tensor<[6, 5], bf16>
  %z = tc.reshape %q {shape = [2, 3, 5]} : (!tc.tensor<[6, 5], bf16>) -> !tc.tensor<[2, 3, 5], bf16>
  return %y, %z, %q : !tc.tensor<[2, 3, 5], bf16>, !tc.tensor<[2, 3, 5], bf16>, !tc.tensor<[6, 5], bf16>
}
