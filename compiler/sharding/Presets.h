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
//         Attention's fused QKV weight is not split (its `split` needs the
//         whole vector); with separate q, k, v weights, annotate them.
//
// Values already annotated keep their sharding.
#pragma once

#include "compiler/graph/Graph.h"

#include <string>

namespace tensorc::sharding {

// Throws Error for an unknown preset or a mesh without a `data` axis.
void applyPreset(Graph &graph, const std::string &preset);

} // namespace tensorc::sharding
