// RUN: tensorc-opt %s -tensorc-pad-matmuls=minimum-work=0 | FileCheck %s
// RUN: tensorc-opt %s -tensorc-pad-matmuls=minimum-work=0 > %t.mlir
// RUN: tensorc run %s --seed 5 --show 1000 > %t.plain.txt
// RUN: tensorc run %t.mlir --seed 5 --show 1000 > %t.padded.txt
// RUN: diff %t.plain.txt %t.padded.txt
// A product that is only a model output (through a bias add and a
// reshape) keeps an even 16-bit N (rows 4-byte aligned: no slice to copy
// into the output); an odd N is still padded.
// CHECK-LABEL: func.func @logits(
// CHECK:      tc.matmul {{.*}} -> !tc.tensor<[96, 66], bf16>
// CHECK-NOT:  tc.slice
// CHECK:      tc.matmul {{.*}} -> !tc.tensor<[96, 72], bf16>
// CHECK:      tc.slice
func.func @logits(%x: !tc.tensor<[96, 64], bf16> {tc.name = "x"}, %w: !tc.tensor<[64, 66], bf16> {tc.name = "w"},
                  %b: !tc.tensor<[66], bf16> {tc.name = "b"}, %w2: !tc.tensor<[64, 65], bf16> {tc.name = "w2"})
    -> (!tc.tensor<[2, 48, 66], bf16> {tc.name = "l"}, !tc.tensor<[96, 65], bf16> {tc.name = "l2"}) {
  %p = tc.matmul %x, %w : (!tc.tensor<[96, 64], bf16>, !tc.tensor<[64, 66], bf16>) -> !tc.tensor<[96, 66], bf16> loc("p")
  %pb = tc.add %p, %b : (!tc.tensor<[96, 66], bf16>, !tc.tensor<[66], bf16>) -> !tc.tensor<[96, 66], bf16> loc("pb")
  %l = tc.reshape %pb {shape = [2, 48, 66]} : (!tc.tensor<[96, 66], bf16>) -> !tc.tensor<[2, 48, 66], bf16> loc("l")
  %l2 = tc.matmul %x, %w2 : (!tc.tensor<[96, 64], bf16>, !tc.tensor<[64, 65], bf16>) -> !tc.tensor<[96, 65], bf16> loc("l2")
  return %l, %l2 : !tc.tensor<[2, 48, 66], bf16>, !tc.tensor<[96, 65], bf16>
}
