// What an Executable holds, shared by Executable.cpp (loading) and
// Session.cpp (running); not installed.
#pragma once

#include "tensorc/Runtime.h"

#include "ir/core/DType.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/core/Backend.h"

#include <memory>
#include <string>
#include <vector>

namespace tensorc::runtime {

struct Executable::Impl {
  std::string where;
  artifact::Artifact art;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<SymbolInfo> symbols;
  std::unique_ptr<Backend> backend;
  std::string mode = "default"; // or "reduce-overhead"
};

inline ElementType toElementType(DType d) { return ElementType(int(d)); }
inline DType toDType(ElementType t) { return DType(int(t)); }
static_assert(int(DType::F64) == int(ElementType::F64) && int(DType::I1) == int(ElementType::I1),
              "public element types mirror ir/core DType");

// Runs `f`, turning internal errors into the public runtime::Error.
template <typename F> auto rethrow(F &&f) -> decltype(f()) {
  try {
    return f();
  } catch (const runtime::Error &) {
    throw;
  } catch (const std::exception &e) {
    throw runtime::Error(e.what());
  }
}

} // namespace tensorc::runtime
