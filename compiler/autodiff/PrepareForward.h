// What autodiff changes in a forward graph before differentiating it: forms
// that compute the same function but expose, as forward values, what the
// gradient rules want to read (so the partition can save it instead of the
// backward recomputing it).
#pragma once

#include "compiler/graph/Graph.h"

namespace tensorc::autodiff {

// cross_entropy with a mean or sum reduction and no label smoothing becomes
// its per-row form (reduction "none", in f32 for lower-precision logits)
// followed by the reduction: the per-row loss lse - x[target] is then a
// forward value, and cross_entropy's gradient rebuilds softmax from it as
// exp(x - x[target] - loss), in one pass over the logits, instead of
// recomputing the row's log-sum-exp (a second pass over each row). The
// reduced loss keeps the node's name and type.
//
// scaled_dot_product_attention becomes scaled_dot_product_attention_with_lse
// (result 0 takes the node's name): its backward reads the saved output and
// log-sum-exp instead of running the forward pass again.
Graph prepareForAutodiff(const Graph &forward);

} // namespace tensorc::autodiff
