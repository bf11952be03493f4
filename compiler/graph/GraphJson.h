// Graph files: the versioned JSON format of docs/graph-format.md.
#pragma once

#include "compiler/graph/Graph.h"

#include <string>

namespace tensorc {

// Parses graph-file text. `where` (the file name) starts every error. Throws
// Error for malformed JSON, a wrong structure, or an unsupported version; the
// graph's semantics are checked by analyzeGraph.
Graph parseGraphJson(const std::string &text, const std::string &where);
// Reads a file (at most 1 GiB) and parses it.
Graph readGraphFile(const std::string &path);
// Canonical text: default-valued attributes omitted, two-space indent.
std::string writeGraphJson(const Graph &graph);

} // namespace tensorc
