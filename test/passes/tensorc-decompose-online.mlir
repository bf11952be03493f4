// RUN: tensorc-opt %s -split-input-file -tensorc-decompose=ops=softmax,cross_entropy -verify-diagnostics | FileCheck %s
// RUN: tensorc-opt %s -split-input-file -tensorc-decompose -verify-diagnostics | FileCheck %s --check-prefix=CLASSIC

// Where the backend keeps logsumexp (the CUDA codegen pipeline), softmax and
// cross_entropy decompose into it around the row's max (made 0 where it is
// not finite: not the row's first element, whose x - shift loses the
// digits of x where it is a masked position's finfo.min); the lse is made
// nan where it is infinite (lse - lse), as x - max is in the classic form.
// The cross-entropy's target logit is gathered from the stored logits,
// minus the same shift.
// CHECK-LABEL: func.func @online
// CHECK:      %[[X0:.*]] = tc.max %arg0 {axes = array<i64: 1>, keepdim = true}
// CHECK-NEXT: %[[A:.*]] = tc.abs %[[X0]]
// CHECK-NEXT: %[[INF:.*]] = tc.constant {{.*}}0x7F800000
// CHECK-NEXT: %[[FIN:.*]] = tc.lt %[[A]], %[[INF]]
// CHECK-NEXT: %[[ZERO:.*]] = tc.constant
// CHECK-NEXT: %[[SHIFT:.*]] = tc.where %[[FIN]], %[[X0]], %[[ZERO]]
// CHECK-NEXT: %[[Z:.*]] = tc.sub %arg0, %[[SHIFT]]
// CHECK-NEXT: %[[LSE:.*]] = tc.logsumexp %[[Z]] {axes = array<i64: 1>, keepdim = true}
// CHECK-NEXT: %[[D:.*]] = tc.sub %[[LSE]], %[[LSE]]
// CHECK-NEXT: %[[L:.*]] = tc.add %[[LSE]], %[[D]]
// CHECK-NEXT: %[[LOGP:.*]] = tc.sub %[[Z]], %[[L]]
// CHECK-NEXT: %[[Y:.*]] = tc.exp %[[LOGP]]
// CHECK:      %[[LSE2:.*]] = tc.logsumexp
// CHECK:      %[[L2:.*]] = tc.add %[[LSE2]]
// CHECK:      %[[PICK:.*]] = tc.gather %arg0
// CHECK-NEXT: %[[PZ:.*]] = tc.sub %[[PICK]], %[[SHIFT2:.*]] :
// CHECK-NEXT: tc.sub %[[L2]], %[[PZ]]
// CHECK:      return %[[Y]]
// The classic form (every op decomposed, logsumexp too: the CPU).
// CLASSIC-LABEL: func.func @online
// CLASSIC:       tc.max %arg0 {axes = array<i64: 1>, keepdim = true}
// CLASSIC-NOT:   tc.logsumexp
// CLASSIC-NOT:   tc.softmax
// CLASSIC-NOT:   tc.cross_entropy
func.func @online(%x: !tc.tensor<[B, 5], f32> {tc.name = "x"}, %t: !tc.tensor<[B], i64> {tc.name = "t"}) -> (!tc.tensor<[B, 5], f32> {tc.name = "y"}, !tc.tensor<[], f32> {tc.name = "l"}) {
  %y = tc.softmax %x {axis = 1 : i64} : (!tc.tensor<[B, 5], f32>) -> !tc.tensor<[B, 5], f32> loc("y")
  %l = tc.cross_entropy %x, %t : (!tc.tensor<[B, 5], f32>, !tc.tensor<[B], i64>) -> !tc.tensor<[], f32> loc("l")
  return %y, %l : !tc.tensor<[B, 5], f32>, !tc.tensor<[], f32>
}

// -----

// A symbolic class axis has no first element to take: the classic form.
// CHECK-LABEL: func.func @symbolic_axis
// CHECK:       tc.max %arg0 {axes = array<i64: 1>, keepdim = true}
// CHECK-NOT:   tc.logsumexp
func.func @symbolic_axis(%x: !tc.tensor<[2, C], f32> {tc.name = "x"}) -> (!tc.tensor<[2, C], f32> {tc.name = "y"}) {
  %y = tc.softmax %x {axis = 1 : i64} : (!tc.tensor<[2, C], f32>) -> !tc.tensor<[2, C], f32> loc("y")
  return %y : !tc.tensor<[2, C], f32>
}

// -----

// logsumexp itself, where decomposed: around the maximum where it is finite
// (else 0), the reduced axes squeezed without keepdim.
// CLASSIC-LABEL: func.func @lse
// CLASSIC:       %[[M:.*]] = tc.max %arg0 {axes = array<i64: 0>, keepdim = true}
// CLASSIC-NEXT:  %[[A:.*]] = tc.abs %[[M]]
// CLASSIC:       %[[S:.*]] = tc.where {{.*}}, %[[M]],
// CLASSIC-NEXT:  %[[Z:.*]] = tc.sub %arg0, %[[S]]
// CLASSIC-NEXT:  %[[E:.*]] = tc.exp %[[Z]]
// CLASSIC-NEXT:  %[[SUM:.*]] = tc.sum %[[E]] {axes = array<i64: 0>, keepdim = true}
// CLASSIC-NEXT:  %[[LOG:.*]] = tc.log %[[SUM]]
// CLASSIC-NEXT:  %[[R:.*]] = tc.add %[[S]], %[[LOG]]
// CLASSIC-NEXT:  %[[Q:.*]] = tc.squeeze %[[R]] {axes = array<i64: 0>}
// CLASSIC-NEXT:  return %[[Q]]
// CHECK-LABEL: func.func @lse
// CHECK:       tc.logsumexp %arg0
func.func @lse(%x: !tc.tensor<[4, 3], f32> {tc.name = "x"}) -> (!tc.tensor<[3], f32> {tc.name = "y"}) {
  %y = tc.logsumexp %x {axes = array<i64: 0>} : (!tc.tensor<[4, 3], f32>) -> !tc.tensor<[3], f32> loc("y")
  return %y : !tc.tensor<[3], f32>
}
