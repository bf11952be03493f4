// The layout of a CUDA artifact's source (Artifact::code) that the code
// generator writes and the runtime's compile relies on.
#pragma once

namespace tensorc::artifact {

// A CUDA artifact's source: this line comes before the generated kernels'
// functions, which follow as "__device__" definitions (each after a
// "template <...>" line or not, closed on its line or by a "}" line),
// one-line `extern "C"` kernels and TC_* macro calls. The runtime compiles
// each part of the source with only the functions its kernels use
// (runtime/cuda/TranslationUnits.h); before the line, everything is shared.
constexpr const char *kGeneratedKernelsMarker = "// tensorc: generated kernels";

} // namespace tensorc::artifact
