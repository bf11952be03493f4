// Errors raised by the MLIR-free parts of tensorc (shape inference, graph
// files, the interpreter). Each carries one line a CLI user can act on; the
// caller prefixes where it happened (file, node, op).
#pragma once

#include <stdexcept>
#include <string>

namespace tensorc {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

[[noreturn]] inline void fail(const std::string &message) { throw Error(message); }

inline void check(bool condition, const std::string &message) {
  if (!condition)
    fail(message);
}

} // namespace tensorc
