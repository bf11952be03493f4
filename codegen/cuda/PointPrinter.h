// The point-function printer of the CUDA backend: a nest's point function
// (and epilogue), built in MLIR by the backend-neutral program builder, is
// printed as a straight-line __device__ function; and the C spellings of
// storage types, computed types and symbolic sizes every kernel shares.
#pragma once

#include "codegen/cpu/LoopNest.h"
#include "ir/core/Dim.h"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tensorc::codegen::cuda {

// The C type a dtype is stored as in device memory (bool: unsigned char).
std::string storageCType(DType d);
// The C type of an MLIR scalar type (index: long long). Throws Error.
std::string cType(mlir::Type t);
// A size as C: its coefficient times the symbol parameters s0, s1, ...
std::string dimExpr(const Dim &d, const std::vector<std::string> &symbols);

// Builds a scalar MLIR function (ivs, symbols, operand memrefs[, an
// accumulator of `accumulator`'s computed type]) whose body is `body`, and
// prints it as `__device__ T name(long long i0.., long long s0.., m0..
// kElsewhereParams[, acc])`. A load away from the point's own indices
// (cpu::kElsewhereLoad) reads operand k through `e<k>` instead of `m<k>`:
// such k are added to `elsewhere`, and the caller replaces the marker with
// elsewhereParams of every function of the nest (they share one parameter
// list). Throws Error on an op it cannot print.
inline constexpr const char *kElsewhereParams = "/*elsewhere*/";
std::string deviceFunction(mlir::MLIRContext &ctx, const cpu::NestSpec &spec, const std::string &name,
                           std::optional<DType> accumulator,
                           const std::function<mlir::Value(cpu::NestContext &, std::optional<mlir::Value>)> &body,
                           std::set<size_t> &elsewhere);
// `, const T *e<k>` for each k of `elsewhere`.
std::string elsewhereParams(const cpu::NestSpec &spec, const std::set<size_t> &elsewhere);

// The same function at four consecutive values of the innermost index
// (i{rank-1}, a multiple of 4, the other indices fixed), printed as
// `__device__ void name(long long i0.., long long s0.., m0.., T (&r)[4])`:
// what depends on that index is computed per lane; a load whose last index
// is that index, from an operand with a static last dim that is a multiple
// of 4, is one aligned vector load (tc_load4). Those operands are returned
// in `operands` (read through m<k>) and `elsewhereOperands` (through e<k>,
// kElsewhereLoad): the caller runs the function only where those pointers
// are aligned to 4 elements. Throws Error.
struct VectorFunction {
  std::string text;
  std::set<size_t> operands;          // read as vectors through m<k>
  std::set<size_t> elsewhereOperands; // read as vectors through e<k>
  std::string resultType;             // T
};
VectorFunction vectorDeviceFunction(mlir::MLIRContext &ctx, const cpu::NestSpec &spec, const std::string &name,
                                    const std::function<mlir::Value(cpu::NestContext &, std::optional<mlir::Value>)> &body,
                                    std::set<size_t> &elsewhere);

} // namespace tensorc::codegen::cuda
