// Recognizes attention written out by hand,
//   matmul(softmax(where(mask, q @ transpose(k) * s, -inf) or (... + mask)), v),
// and replaces it by one scaled_dot_product_attention op, so fusion makes it
// one attention kernel and autodiff uses attention's backward. A mask built
// as rows >= columns from iota is recognized as is_causal. Matches whose
// intermediate values are used elsewhere are left alone (nothing is
// recomputed).
#pragma once

#include "compiler/graph/Graph.h"

namespace tensorc::transforms {

Graph recognizeAttention(const Graph &graph, int *matches = nullptr);

} // namespace tensorc::transforms
