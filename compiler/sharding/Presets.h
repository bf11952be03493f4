// Parallelism strategies as shardings of a graph's inputs (and of the
// gradients a joint graph outputs), for `tensorc shard --preset`:
//
//   ddp   data inputs (not trainable, not optimizer state) split along
//         their first dim over the `data` axis; parameters and optimizer
//         state whole. Gradients become partial sums, all-reduced.
//   fsdp  ddp, and every parameter, its optimizer state (`w.exp_avg`, ...)
//         and its gradient output (`grad_w`) split along the first dim over
//         `data` where it divides (ZeRO-3): parameters all-gathered before
//         use, gradients reduce-scattered.
//   tp    Megatron tensor parallelism over the `model` axis for pairs of
//         linear layers joined by elementwise ops (fc, bias, activation,
//         proj): the first layer's weight (`[in, out]`, or `[out, in]` read
//         through a transpose) and bias split by output features, the
//         second's weight by input features; one all_reduce per pair.
//         Attention with separate q, k and v projections splits by heads;
//         a fused QKV projection (GPT-2's c_attn) stays whole: its columns'
//         order splits by heads in no block.
//   tp-head-blocked  tp, and fused QKV projections split by heads too,
//         their weight and bias (and gradients, optimizer state) taken in
//         head-blocked column order (headBlockFusedProjections in
//         Presets.cpp; docs/sharding.md "Fused projections"): the program
//         then differs from the original for weights in the original order.
//
// Values already annotated keep their sharding.
#pragma once

#include "compiler/graph/Graph.h"

#include <string>
#include <vector>

namespace tensorc::sharding {

// Throws Error for an unknown preset or a mesh without a `data` axis.
// Returns notes the user must read: inputs whose layout the preset changed
// (a fused projection's weight in head-blocked column order).
std::vector<std::string> applyPreset(Graph &graph, const std::string &preset);

} // namespace tensorc::sharding
