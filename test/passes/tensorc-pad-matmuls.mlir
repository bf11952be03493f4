// RUN: tensorc-opt %s -tensorc-pad-matmuls=minimum-work=0 | FileCheck %s
// RUN: tensorc-opt %s -tensorc-pad-matmuls=minimum-work=0 > %t.mlir
// RUN: tensorc run %s --seed 5 --show 1000 > %t.plain.txt
// RUN: tensorc run %t.mlir --seed 5 --show 1000 > %t.padded.txt
// RUN: diff %t.plain.txt %t.padded.txt
// RUN: tensorc-opt %s -tensorc-pad-matmuls | FileCheck %s --check-prefix=SMALL

// A vocabulary-sized N (66 bf16 columns: off 16 bytes) and K (70): the
// weight is padded along both, the activations along K, the product sliced
// back; the dW GEMM reads its stored transpose of dy, padded along the dim
// it transposes, and x padded along K once serves both GEMMs. The values are the same (the
// interpreter's outputs are identical); by default GEMMs this small stay.
// CHECK-LABEL: func.func @head(
// CHECK:      %[[XP:.*]] = tc.pad %arg0 {pads = array<i64: 0, 2>} {{.*}} -> !tc.tensor<[96, 72], bf16>
// CHECK-NEXT: %[[WP:.*]] = tc.pad %arg1 {pads = array<i64: 0, 0, 0, 2>} {{.*}} -> !tc.tensor<[72, 66], bf16>
// CHECK-NEXT: %[[WPP:.*]] = tc.pad %[[WP]] {pads = array<i64: 0, 6>} {{.*}} -> !tc.tensor<[72, 72], bf16>
// CHECK-NEXT: %[[P:.*]] = tc.matmul %[[XP]], %[[WPP]] {{.*}} -> !tc.tensor<[96, 72], bf16>
// CHECK-NEXT: %[[Y:.*]] = tc.slice %[[P]] {axes = array<i64: 1>, ends = array<i64: 66>, starts = array<i64: 0>} {{.*}} -> !tc.tensor<[96, 66], bf16>
// CHECK:      %[[DYP:.*]] = tc.pad %arg2 {pads = array<i64: 0, 6>} {{.*}} -> !tc.tensor<[96, 72], bf16>
// CHECK-NEXT: %[[DYT:.*]] = tc.transpose %[[DYP]] {{.*}} -> !tc.tensor<[72, 96], bf16>
// CHECK-NEXT: %[[G:.*]] = tc.matmul %[[DYT]], %[[XP]] {{.*}} -> !tc.tensor<[72, 72], bf16>
// CHECK-NEXT: tc.slice %[[G]] {axes = array<i64: 0, 1>, ends = array<i64: 66, 70>, starts = array<i64: 0, 0>} {{.*}} -> !tc.tensor<[66, 70], bf16>
// The logits as [2, 48, 66]: the padded product reshaped, then sliced (the
// output is the slice, which its kernel writes, not a copy of a view).
// CHECK-NEXT: %[[PR:.*]] = tc.reshape %[[P]] {shape = [2, 48, 72]}
// CHECK-NEXT: %[[Y3:.*]] = tc.slice %[[PR]] {axes = array<i64: 2>, ends = array<i64: 66>, starts = array<i64: 0>} {{.*}} -> !tc.tensor<[2, 48, 66], bf16>
// SMALL-NOT: tc.pad
func.func @head(%x: !tc.tensor<[96, 70], bf16> {tc.name = "x"}, %w: !tc.tensor<[70, 66], bf16> {tc.name = "w"},
                %dy: !tc.tensor<[96, 66], bf16> {tc.name = "dy"})
    -> (!tc.tensor<[96, 66], bf16> {tc.name = "y"}, !tc.tensor<[66, 70], bf16> {tc.name = "dw"},
        !tc.tensor<[2, 48, 66], bf16> {tc.name = "y3"}, !tc.tensor<[96, 66], bf16> {tc.name = "e"},
        !tc.tensor<[66, 70], bf16> {tc.name = "eg"}) {
  %y = tc.matmul %x, %w : (!tc.tensor<[96, 70], bf16>, !tc.tensor<[70, 66], bf16>) -> !tc.tensor<[96, 66], bf16> loc("y")
  %t = tc.transpose %dy {dim0 = 0, dim1 = 1} : (!tc.tensor<[96, 66], bf16>) -> !tc.tensor<[66, 96], bf16> loc("t")
  %g = tc.matmul %t, %x : (!tc.tensor<[66, 96], bf16>, !tc.tensor<[96, 70], bf16>) -> !tc.tensor<[66, 70], bf16> loc("g")
  %y3 = tc.reshape %y {shape = [2, 48, 66]} : (!tc.tensor<[96, 66], bf16>) -> !tc.tensor<[2, 48, 66], bf16> loc("y3")
  %e = tc.exp %y : (!tc.tensor<[96, 66], bf16>) -> !tc.tensor<[96, 66], bf16> loc("e")
  %eg = tc.exp %g : (!tc.tensor<[66, 70], bf16>) -> !tc.tensor<[66, 70], bf16> loc("eg")
  return %y, %g, %y3, %e, %eg : !tc.tensor<[96, 66], bf16>, !tc.tensor<[66, 70], bf16>, !tc.tensor<[2, 48, 66], bf16>, !tc.tensor<[96, 66], bf16>, !tc.tensor<[66, 70], bf16>
}

