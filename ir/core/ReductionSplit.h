// How a reduction over every axis runs: the program builder
// (codegen/Program.cpp) reduces each slice of the leading dims first (enough
// partial results, >= 1024 where the shape allows, to fill a GPU), then the
// partials; fusion (passes/Fusion.cpp) asks the same question to put the
// first stage in the kernel of the row-wise reductions over the same rows
// (a summed loss of a layer norm's output: never stored).
#pragma once

#include "ir/core/Dim.h"

#include <cstddef>

namespace tensorc {

// The number of leading dims a full reduction of `shape` keeps in its first
// stage, or 0 when it runs in one stage (rank < 2, or a leading unit dim).
size_t fullReductionKeptDims(const Shape &shape);

} // namespace tensorc
