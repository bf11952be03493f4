// The nest kernels of the CUDA backend: every loop nest becomes kernel
// templates over its point function (PointPrinter): elementwise (BLOCK
// threads, ITEMS outputs each), cooperative reductions (LANES threads per
// output) and the row template chain kernels call (ChainKernel.cpp).
#include "codegen/cuda/CudaKernel.h"
#include "codegen/cuda/PointPrinter.h"

#include "codegen/cpu/ScalarOps.h"

#include <sstream>

using namespace mlir;

namespace tensorc::codegen::cuda {

using cpu::NestContext;
using cpu::NestSpec;

namespace {

bool multipleOf4(const Dim &d) { return d.isStatic() && d.value() % 4 == 0 && d.value() > 0; }

// Whether an elementwise nest can compute four consecutive outputs per item:
// its innermost dim (the output's too, at no offset) a static multiple of 4.
bool vectorizable(const NestSpec &spec) {
  if (spec.space.empty() || !spec.reduction.empty() || !multipleOf4(spec.space.back()))
    return false;
  for (bool r : spec.reduced)
    if (r)
      return false;
  const Shape &out = spec.operands[0].shape;
  if (out.size() != spec.space.size() || !multipleOf4(out.back()))
    return false;
  return spec.outputOffset.empty() || spec.outputOffset.back() == Dim::of(0) ||
         (spec.outputOffset.back().isStatic() && spec.outputOffset.back().value() % 4 == 0);
}

// Whether a reduction's threads can read four consecutive reduced positions
// at once: it reduces only its innermost dim, a static multiple of 4, and
// keeps no position (argmax/argmin combine positions in order, one
// accumulator).
bool reducesRowsBy4(const NestSpec &spec) {
  if (spec.space.empty() || spec.reduction.empty() || spec.reduction == "argmax" || spec.reduction == "argmin" ||
      !multipleOf4(spec.space.back()) || !spec.reduced.back())
    return false;
  for (size_t d = 0; d + 1 < spec.reduced.size(); ++d)
    if (spec.reduced[d])
      return false;
  return true;
}

} // namespace

std::vector<KernelVariant> CudaSourceBuilder::addNest(const NestSpec &spec, const cpu::PointFn &point) {
  std::ostringstream os;
  const std::string &sym = spec.symbol;
  os << "// " << sym << ": space (";
  for (size_t d = 0; d < spec.space.size(); ++d)
    os << (d ? ", " : "") << spec.space[d].str() << (spec.reduced[d] ? " reduced" : "");
  os << ")" << (spec.reduction.empty() ? "" : " " + spec.reduction) << "\n";
  // Operands some function reads away from the point (through e<k>): every
  // function of the nest takes their second pointers.
  std::set<size_t> elsewhere;
  std::string pointText = deviceFunction(ctx_, spec, sym + "_point", std::nullopt,
                                         [&](NestContext &n, std::optional<Value>) { return point(n); }, elsewhere);
  // Elementwise nests whose innermost dim (in the space and the output) is
  // a static multiple of 4 also get a vector point function.
  std::optional<VectorFunction> vector;
  bool elementwiseVectors = vectorizable(spec), reductionVectors = reducesRowsBy4(spec);
  if (elementwiseVectors || reductionVectors)
    vector = vectorDeviceFunction(ctx_, spec, sym + "_point4",
                                  [&](NestContext &n, std::optional<Value>) { return point(n); }, elsewhere);
  std::string epilogueText;
  if (spec.epilogue)
    epilogueText = deviceFunction(ctx_, spec, sym + "_epilogue", spec.valueDtype,
                                  [&](NestContext &n, std::optional<Value> acc) { return spec.epilogue(n, *acc); },
                                  elsewhere);
  const std::string extraParams = elsewhereParams(spec, elsewhere);
  auto withExtraParams = [&](std::string text) {
    for (size_t at; (at = text.find(kElsewhereParams)) != std::string::npos;)
      text.replace(at, std::string(kElsewhereParams).size(), extraParams);
    return text;
  };
  os << withExtraParams(pointText) << withExtraParams(epilogueText);
  if (vector)
    vector->text = withExtraParams(vector->text);
  rowElsewhere_[sym] = std::vector<size_t>(elsewhere.begin(), elsewhere.end());
  size_t rank = spec.space.size(), nsym = spec.symbols.size();
  // kernelArgs: the kernel's operand pointers; memList: those the functions
  // take, in a kernel (the second pointers are the same) and in a chain's
  // row template (rowMemList: e<k>).
  std::string params, symList, kernelArgs, memList, rowMemList;
  for (size_t k = 0; k < spec.operands.size(); ++k) {
    params += std::string(k ? ", const " : "") + storageCType(spec.operands[k].dtype) + " *__restrict__ m" + std::to_string(k);
    kernelArgs += ", m" + std::to_string(k);
  }
  memList = rowMemList = kernelArgs;
  for (size_t k : elsewhere) {
    memList += ", m" + std::to_string(k);
    rowMemList += ", e" + std::to_string(k);
  }
  for (size_t k = 0; k < nsym; ++k) {
    params += ", long long s" + std::to_string(k);
    symList += ", s" + std::to_string(k);
  }
  // Arguments of the point/epilogue functions: ivs, symbols, operands
  // (`mems`: memList, or rowMemList in a row template).
  std::string callArgs, pointCall, epilogueArgs;
  auto setCallArgs = [&](const std::string &mems) {
    callArgs.clear();
    for (size_t d = 0; d < rank; ++d)
      callArgs += ", i" + std::to_string(d);
    callArgs = (callArgs + symList + mems).substr(2);
    pointCall = sym + "_point(" + callArgs + ")";
    // The epilogue runs after the reduction loops: reduced indices are 0.
    epilogueArgs.clear();
    for (size_t d = 0; d < rank; ++d)
      epilogueArgs += spec.reduced[d] ? ", 0LL" : ", i" + std::to_string(d);
    epilogueArgs = (epilogueArgs + symList + mems).substr(2);
  };
  setCallArgs(memList);
  std::string acct = cType(cpu::computeType(&ctx_, spec.valueDtype));
  DType out = spec.operands[0].dtype;
  std::string outT = storageCType(out);
  auto dims = [&](size_t d) { return dimExpr(spec.space[d], spec.symbols); };
  std::vector<size_t> reducedDims;
  for (size_t d = 0; d < rank; ++d)
    if (spec.reduced[d])
      reducedDims.push_back(d);
  bool arg = spec.reduction == "argmax" || spec.reduction == "argmin";
  bool isF = isFloat(spec.valueDtype);
  std::string total = "1LL", reducedTotal = "1LL";
  for (size_t d = 0; d < rank; ++d)
    (spec.reduced[d] ? reducedTotal : total) += " * " + dims(d);

  // Pieces both templates share.
  auto parallelIndices = [&](const std::string &linear, const std::string &indent) {
    std::string c;
    if (reducedDims.size() < rank)
      c += indent + "long long rest = " + linear + ";\n";
    // The outermost parallel dim takes what is left (linear < total): no modulo.
    size_t outermost = rank;
    for (size_t d = 0; d < rank && outermost == rank; ++d)
      if (!spec.reduced[d])
        outermost = d;
    for (size_t d = rank; d-- > 0;)
      if (!spec.reduced[d])
        c += indent + "const long long i" + std::to_string(d) +
             (d == outermost ? " = rest;\n" : " = rest % " + dims(d) + "; rest /= " + dims(d) + ";\n");
    return c;
  };
  // The accumulator: one value, (best, bestIndex) for argmax/argmin, or
  // (max, rescaled sum) for logsumexp; each field with its identity.
  struct Field {
    std::string type, name, identity;
  };
  bool lse = spec.reduction == "logsumexp";
  std::vector<Field> fields;
  if (arg) {
    fields = {{acct, "best", "0"}, {"long long", "bestIndex", "-1LL"}};
  } else if (lse) {
    fields = {{acct, "acc", "-TC_INFINITY"}, {acct, "accS", "0"}};
  } else {
    std::string identity;
    if (spec.reduction == "sum" || spec.reduction == "mean")
      identity = "0";
    else if (spec.reduction == "prod")
      identity = "1";
    else if (spec.reduction == "max")
      identity = isF ? "-TC_INFINITY" : "tc_lowest<" + acct + ">()";
    else
      identity = isF ? "TC_INFINITY" : "tc_highest<" + acct + ">()";
    fields = {{acct, "acc", identity}};
  }
  auto accInit = [&](const std::string &indent) {
    std::string c;
    for (const Field &f : fields)
      c += indent + f.type + " " + f.name + " = (" + f.type + ")(" + f.identity + ");\n";
    return c;
  };
  // Combines (x, position) into the accumulator (its fields' names + `sfx`:
  // the loops below keep several); positions arrive in increasing order per
  // accumulator (the first max/min wins, nan counts as the largest, as in
  // the interpreter).
  auto combine = [&](const std::string &x, const std::string &position, const std::string &sfx = "") {
    std::string a = "acc" + sfx;
    if (arg)
      return std::string("tc_arg_combine<") + (spec.reduction == "argmax" ? "true" : "false") +
             ">(best, bestIndex, " + x + ", " + position + ");";
    if (lse)
      return "tc_lse_combine(" + a + ", accS" + sfx + ", " + x + ");";
    if (spec.reduction == "sum" || spec.reduction == "mean")
      return a + " = " + a + " + " + x + ";";
    if (spec.reduction == "prod")
      return a + " = " + a + " * " + x + ";";
    return a + " = " + std::string(spec.reduction == "max" ? "tc_maximum" : "tc_minimum") + "(" + a + ", " + x + ");";
  };
  // Merges another accumulator (its fields named o0, o1: `o` + index).
  auto merge = [&](const std::string &o) {
    if (arg)
      return combine(o + "0", o + "1");
    if (lse)
      return "tc_lse_merge(acc, accS, " + o + "0, " + o + "1);";
    return combine(o + "0", "");
  };
  auto finish = [&](const std::string &indent) {
    std::string c;
    if (spec.reduction == "mean")
      c += indent + "acc = acc / (" + acct + ")(" + reducedTotal + ");\n";
    if (lse)
      c += indent + "acc = tc_lse_finish(acc, accS);\n";
    if (spec.epilogue)
      c += indent + "acc = " + sym + "_epilogue(" + epilogueArgs + ", acc);\n";
    return c;
  };
  auto storedValue = [&] {
    return reducedDims.empty() ? "tc_store<" + outT + ">(" + pointCall + ")"
           : arg               ? "(long long)bestIndex"
                               : "tc_store<" + outT + ">(acc)";
  };
  std::string value = storedValue();
  // Output index: parallel dims (reduced ones as 0 with keepdim), plus offsets.
  std::string index = "0LL";
  size_t od = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (spec.reduced[d] && !spec.keepdim)
      continue;
    std::string i = spec.reduced[d] ? "0LL" : "i" + std::to_string(d);
    if (od < spec.outputOffset.size() && spec.outputOffset[od] != Dim::of(0))
      i = "(" + i + " + " + dimExpr(spec.outputOffset[od], spec.symbols) + ")";
    index = "(" + index + " * " + dimExpr(spec.operands[0].shape[od], spec.symbols) + " + " + i + ")";
    ++od;
  }
  std::string store = "m0[" + index + "] = " + value + ";\n";
  // Vector paths: the run-time check that every pointer read (and, with
  // `output`, written) as a vector is aligned; the point function's four
  // lanes at the current indices, rounded into `dest` (a tc_vec4 of the
  // output type).
  // In a row template (secondPointers) an operand's reads away from the
  // point go through e<k>, which a split chain points at device memory
  // while m<k> is its row cache: both are checked. Elsewhere e<k> is m<k>.
  bool secondPointers = false;
  auto vectorsAligned = [&](bool output) {
    std::string c = output ? "tc_aligned4(m0)" : "true";
    for (size_t k : vector->operands)
      if (k != 0 || !output)
        c += " && tc_aligned4(m" + std::to_string(k) + ")";
    for (size_t k : vector->elsewhereOperands)
      if (secondPointers || !vector->operands.count(k))
        c += std::string(" && tc_aligned4(") + (secondPointers ? "e" : "m") + std::to_string(k) + ")";
    return c;
  };
  auto vectorOutputs = [&](const std::string &dest, const std::string &indent) {
    return indent + vector->resultType + " r[4];\n" + indent + sym + "_point4(" + callArgs + ", r);\n" +
           "#pragma unroll\n" + indent + "for (int j = 0; j < 4; ++j) " + dest + ".v[j] = tc_store<" + outT +
           ">(r[j]);\n";
  };

  // Cooperative reductions: one thread's share of the reduced iterations
  // (from `first`, every `stride`), and one xor-butterfly exchange step.
  // Static extents whose product fits 32 bits are split with 32-bit
  // arithmetic: a 64-bit division by a constant is ~5x the instructions, and
  // a one-block sum of 98304 values (attention's loss) spent 0.025 ms on it.
  bool reducedFits32 = true;
  int64_t reducedStatic = 1;
  for (size_t d : reducedDims) {
    const Dim &extent = spec.space[d];
    reducedFits32 = reducedFits32 && extent.isStatic() && extent.value() > 0 &&
                    reducedStatic <= (int64_t(1) << 31) / extent.value();
    if (reducedFits32)
      reducedStatic *= extent.value();
  }
  auto indices = [&](const std::string &r, const std::string &in) {
    if (reducedDims.size() == 1)
      return in + "const long long i" + std::to_string(reducedDims[0]) + " = " + r + ";\n";
    const std::string word = reducedFits32 ? "unsigned" : "long long";
    std::string c = in + word + " rr = (" + word + ")(" + r + ");\n";
    for (size_t k = reducedDims.size(); k-- > 0;) {
      std::string d = std::to_string(reducedDims[k]);
      const std::string extent =
          reducedFits32 ? std::to_string(spec.space[reducedDims[k]].value()) + "u" : dims(reducedDims[k]);
      c += in + "const long long i" + d + " = rr % " + extent + "; rr /= " + extent + ";\n";
    }
    return c;
  };
  // Accumulators 1-3 beside the caller's (fields + "_k"), and their merge
  // into it.
  // (Not for the log-sum-exp: tc_lse_combine_n folds each chunk of loads
  // into the one accumulator.)
  auto extraAccumulators = [&](const std::string &in) {
    std::string c;
    if (lse)
      return c;
    for (int k = 1; k < 4; ++k)
      for (const Field &f : fields)
        c += in + f.type + " " + f.name + "_" + std::to_string(k) + " = (" + f.type + ")(" + f.identity + ");\n";
    return c;
  };
  auto mergeExtraAccumulators = [&](const std::string &in) {
    std::string c;
    if (lse)
      return c;
    for (int k = 1; k < 4; ++k) {
      std::string o = "o" + std::to_string(k) + "_";
      c += in + "{ ";
      for (size_t f = 0; f < fields.size(); ++f)
        c += "const " + fields[f].type + " " + o + std::to_string(f) + " = " + fields[f].name + "_" + std::to_string(k) + "; ";
      c += merge(o) + " }\n";
    }
    return c;
  };
  // `base`: where this thread's share starts besides `first` (a row split
  // across a cluster: the block's part of the reduced iterations).
  auto scalarIterations = [&](const std::string &first, const std::string &stride, const std::string &indent,
                              const std::string &base) {
    if (arg) { // one accumulator: positions in order
      std::string c = indent + "#pragma unroll 4\n" + indent + "for (long long r = " + base + first +
                      "; r < reduced; r += " + stride + ") {\n";
      c += indices("r", indent + "  ");
      c += indent + "  const " + acct + " x = " + pointCall + ";\n";
      return c + indent + "  " + combine("x", "r") + "\n" + indent + "}\n";
    }
    // Four accumulators, four iterations' loads issued before any combine:
    // one accumulator made every combine wait for the previous one (an
    // online log-sum-exp's exp and branch per element: the row pass ran at
    // half the bandwidth), and a dependent chain leaves few loads in flight.
    std::string c = indent + "{\n";
    std::string in = indent + "  ";
    c += extraAccumulators(in);
    c += in + "long long r = " + base + first + ";\n";
    c += in + "for (; r + 3 * (" + stride + ") < reduced; r += 4 * (" + stride + ")) {\n";
    c += in + "  " + acct + " x[4];\n";
    c += in + "#pragma unroll\n" + in + "  for (int u = 0; u < 4; ++u) {\n";
    c += indices("r + u * (" + stride + ")", in + "    ");
    c += in + "    x[u] = " + pointCall + ";\n" + in + "  }\n";
    c += in + "  " + (lse ? std::string("tc_lse_combine_n(acc, accS, x);")
                          : combine("x[0]", "") + " " + combine("x[1]", "", "_1") + " " +
                                combine("x[2]", "", "_2") + " " + combine("x[3]", "", "_3")) +
         "\n";
    c += in + "}\n";
    c += in + "for (; r < reduced; r += " + stride + ") {\n";
    c += indices("r", in + "  ");
    c += in + "  const " + acct + " x = " + pointCall + ";\n";
    c += in + "  " + combine("x", "") + "\n" + in + "}\n";
    c += mergeExtraAccumulators(in);
    return c + indent + "}\n";
  };
  auto reducedIterations = [&](const std::string &first, const std::string &stride, const std::string &indent,
                               const std::string &base = "") {
    if (reductionVectors) {
      // Four consecutive positions per load (a vector), two loads before
      // the combines, one accumulator per lane; where an operand's pointer
      // is not aligned, the loop below.
      std::string last = "i" + std::to_string(rank - 1), in = indent + "  ";
      std::string c = indent + "if (" + vectorsAligned(false) + ") {\n";
      c += extraAccumulators(in);
      auto lanesOf = [&](const std::string &x) {
        if (lse) // the chunk at once (tc_lse_combine_n)
          return in + "  tc_lse_combine_n(acc, accS, " + x + ");\n";
        return in + "  " + combine(x + "[0]", "") + " " + combine(x + "[1]", "", "_1") + " " +
               combine(x + "[2]", "", "_2") + " " + combine(x + "[3]", "", "_3") + "\n";
      };
      auto pointAt = [&](const std::string &r, const std::string &x) {
        return in + "  " + vector->resultType + " " + x + "[4];\n" + in + "  { const long long " + last + " = " + r + "; " + sym +
               "_point4(" + callArgs + ", " + x + "); }\n";
      };
      c += in + "long long r = " + base + "4 * (" + first + ");\n";
      c += in + "for (; r + 4 * (" + stride + ") < reduced; r += 8 * (" + stride + ")) {\n";
      c += pointAt("r", "xa") + pointAt("r + 4 * (" + stride + ")", "xb") +
           (lse ? in + "  tc_lse_combine_n(acc, accS, xa, xb);\n" : lanesOf("xa") + lanesOf("xb"));
      c += in + "}\n";
      c += in + "if (r < reduced) {\n" + pointAt("r", "xa") + lanesOf("xa") + in + "}\n";
      c += mergeExtraAccumulators(in);
      return c + indent + "} else\n" + scalarIterations(first, stride, indent, base);
    }
    return scalarIterations(first, stride, indent, base);
  };
  std::string shuffleStep = "{ ";
  for (size_t f = 0; f < fields.size(); ++f)
    shuffleStep += "const " + fields[f].type + " other" + std::to_string(f) + " = tc_shfl_xor(" +
                   fields[f].name + ", o); ";
  shuffleStep += merge("other") + " }";
  // A full-warp xor butterfly, and the combine across the warps of a block
  // (each warp's lane 0 leaves its result in shared memory; after a barrier
  // warp 0 reloads and combines them). Uses threadIdx only, so any caller's
  // local names are free.
  auto warpCombine = [&](const std::string &indent) {
    return indent + "#pragma unroll\n" + indent + "for (int o = 16; o > 0; o >>= 1) " + shuffleStep + "\n";
  };
  auto declarePartials = [&](const std::string &indent) {
    std::string c;
    for (size_t f = 0; f < fields.size(); ++f)
      c += indent + "__shared__ " + fields[f].type + " partial" + std::to_string(f) + "[BLOCK / 32];\n";
    return c;
  };
  auto storePartial = [&](const std::string &indent) {
    std::string c = indent + "if (threadIdx.x % 32 == 0) {";
    for (size_t f = 0; f < fields.size(); ++f)
      c += " partial" + std::to_string(f) + "[threadIdx.x / 32] = " + fields[f].name + ";";
    return c + " }\n" + indent + "__syncthreads();\n";
  };
  auto reloadPartials = [&](const std::string &indent) { // in warp 0
    std::string c;
    for (size_t f = 0; f < fields.size(); ++f)
      c += indent + fields[f].name + " = threadIdx.x < BLOCK / 32 ? partial" + std::to_string(f) +
           "[threadIdx.x] : (" + fields[f].type + ")(" + fields[f].identity + ");\n";
    return c + warpCombine(indent);
  };

  // Elementwise (and sequential reduction) template: each thread computes
  // ITEMS outputs, BLOCK apart; reductions loop over the reduced dims.
  os << "template <int BLOCK, int ITEMS>\n__device__ __forceinline__ void " << sym << "_body(" << params << ") {\n";
  os << "  const long long total = " << total << ";\n";
  os << "  const long long base = (long long)blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;\n";
  os << "#pragma unroll\n  for (int item = 0; item < ITEMS; ++item) {\n";
  os << "    const long long linear = base + (long long)item * BLOCK;\n";
  os << "    if (linear >= total) return;\n";
  os << parallelIndices("linear", "    ");
  if (!reducedDims.empty()) {
    os << accInit("    ");
    if (arg)
      os << "    long long position = 0;\n";
    std::string indent = "    ";
    for (size_t d : reducedDims) {
      os << indent << "for (long long i" << d << " = 0; i" << d << " < " << dims(d) << "; ++i" << d << ") {\n";
      indent += "  ";
    }
    os << indent << "const " << acct << " x = " << pointCall << ";\n";
    os << indent << combine("x", "position") << "\n";
    if (arg)
      os << indent << "++position;\n";
    for (size_t k = 0; k < reducedDims.size(); ++k) {
      indent = indent.substr(2);
      os << indent << "}\n";
    }
    os << finish("    ");
  }
  os << "    " << store << "  }\n}\n";
  std::vector<KernelVariant> variants;
  for (const KernelVariant &v : kernelVariants()) {
    // Where vectors are possible they replace several items per thread
    // (b256_i1_v4 0.210 ms vs b256_i4 0.263, b512_i2 0.285 on pointwise_f32):
    // fewer kernels for NVRTC to compile at load.
    if (elementwiseVectors && v.items > 1)
      continue;
    os << "extern \"C\" __global__ void __launch_bounds__(" << v.block << ") " << sym << "_" << v.name()
       << "(" << params << ") { " << sym << "_body<" << v.block << ", " << v.items << ">("
       << kernelArgs.substr(2) << symList << "); }\n";
    variants.push_back(v);
  }
  // Vector template: each item is four consecutive outputs along the
  // innermost dim, its loads and its store one aligned vector each where the
  // pointers allow (fewer instructions per element: the index arithmetic
  // and the load/store issue are shared by four; measured on an H100,
  // pointwise_f32 8192 x 8192: 0.210 ms vs 0.262 for b256_i4).
  if (vector)
    os << vector->text;
  if (elementwiseVectors && rank >= 2) {
    std::string plain = params;
    for (size_t at; (at = plain.find("__restrict__ ")) != std::string::npos;)
      plain.erase(at, 13);
    vectorElementwise_[sym] = {plain,
                               vectorsAligned(true),
                               parallelIndices("linear", "  ") + vectorOutputs("o", "  "),
                               index,
                               outT,
                               total};
  }
  if (elementwiseVectors) {
    os << "template <int BLOCK, int ITEMS>\n__device__ __forceinline__ void " << sym << "_vbody(" << params << ") {\n";
    os << "  const long long total = " << total << ";\n";
    os << "  const long long base = ((long long)blockIdx.x * (BLOCK * ITEMS) + threadIdx.x) * 4;\n";
    os << "  if (" << vectorsAligned(true) << ") {\n";
    os << "#pragma unroll\n    for (int item = 0; item < ITEMS; ++item) {\n";
    os << "      const long long linear = base + (long long)item * BLOCK * 4;\n";
    os << "      if (linear >= total) return;\n";
    os << parallelIndices("linear", "      ");
    os << "      tc_vec4<" << outT << "> o;\n" << vectorOutputs("o", "      ");
    os << "      tc_store4(m0 + " << index << ", o);\n";
    os << "    }\n  } else {\n";
    os << "    for (int e = 0; e < ITEMS * 4; ++e) {\n";
    os << "      const long long linear = base + (long long)(e / 4) * BLOCK * 4 + e % 4;\n";
    os << "      if (linear >= total) return;\n";
    os << parallelIndices("linear", "      ");
    os << "      " << store << "    }\n  }\n}\n";
    for (const KernelVariant &v : vectorVariants()) {
      os << "extern \"C\" __global__ void __launch_bounds__(" << v.block << ") " << sym << "_" << v.name()
         << "(" << params << ") { " << sym << "_vbody<" << v.block << ", " << v.items << ">("
         << kernelArgs.substr(2) << symList << "); }\n";
      variants.push_back(v);
    }
  }

  // Cooperative reduction template: LANES threads share each output (a
  // warp-part or the whole block), striding over the reduced iterations,
  // then combine through warp shuffles (and shared memory across warps).
  // Not where the innermost dim is kept and outputs are many (a split
  // column reduction's first stage): there a warp's lanes would read rows
  // a whole row apart, where one thread per output reads along the row with
  // its neighbours (coalesced) and there are threads enough.
  bool stridedWithManyOutputs = !reducedDims.empty() && rank >= 2 && !spec.reduced[rank - 1];
  int64_t keptElements = 1;
  for (size_t d = 0; d < rank && stridedWithManyOutputs; ++d)
    if (!spec.reduced[d]) {
      if (spec.space[d].isStatic())
        keptElements *= spec.space[d].value();
      else
        stridedWithManyOutputs = false;
    }
  stridedWithManyOutputs = stridedWithManyOutputs && keptElements >= (int64_t(1) << 15);
  if (!reducedDims.empty() && !stridedWithManyOutputs) {
    os << "template <int BLOCK, int LANES>\n__device__ __forceinline__ void " << sym << "_rows(" << params << ") {\n";
    os << "  static_assert(LANES <= 32 || LANES == BLOCK, \"lanes: part of a warp or the whole block\");\n";
    os << "  const long long total = " << total << ";\n";
    os << "  const long long reduced = " << reducedTotal << ";\n";
    os << "  const int lane = threadIdx.x % LANES;\n";
    os << "  const long long linear = (long long)blockIdx.x * (BLOCK / LANES) + threadIdx.x / LANES;\n";
    os << "  const bool active = linear < total;\n";
    os << parallelIndices("active ? linear : 0LL", "  ");
    os << accInit("  ");
    os << "  if (active) {\n";
    os << reducedIterations("lane", "LANES", "    ");
    os << "  }\n";
    // Lanes combine pairwise (xor butterfly inside each group of LANES).
    os << "#pragma unroll\n  for (int o = (LANES < 32 ? LANES : 32) / 2; o > 0; o >>= 1) " << shuffleStep << "\n";
    os << "  if constexpr (LANES > 32) {\n";
    os << declarePartials("    ") << storePartial("    ");
    os << "    if (threadIdx.x / 32 != 0) return;\n";
    os << reloadPartials("    ");
    os << "  }\n";
    os << "  if (!active || lane != 0) return;\n";
    os << finish("  ");
    os << "  " << store << "}\n";
    for (const KernelVariant &v : rowVariants()) {
      os << "extern \"C\" __global__ void __launch_bounds__(" << v.block << ") " << sym << "_" << v.name()
         << "(" << params << ") { " << sym << "_rows<" << v.block << ", " << v.lanes << ">("
         << kernelArgs.substr(2) << symList << "); }\n";
      variants.push_back(v);
    }
  }
  // Row template: the whole block computes row i0 of the nest (every
  // output whose first index is i0), so a chain of nests over the same rows
  // (softmax's max, sum and normalize; layer norm's passes) runs as one
  // kernel, one row per block, __syncthreads between nests (chainKernel).
  // With CLUSTER > 1 the row is split across the blocks of a thread-block
  // cluster, block `rank` computing its contiguous part (tc_split_range,
  // multiples of 4): an elementwise nest's outputs; a reduction's reduced
  // iterations where a row has few outputs (each block's partial result is
  // combined by rank 0 through distributed shared memory, in rank order),
  // else its outputs.
  if (!spec.space.empty() && !spec.reduced[0]) {
    std::string inner = "1LL";
    for (size_t d = 1; d < rank; ++d)
      if (!spec.reduced[d])
        inner += " * " + dims(d);
    // The columns a row's split divides where its parts are column ranges
    // (static): an elementwise nest's outputs per row, or the elements a
    // row reduction with one output per row reduces; else -1. A cluster
    // block finds what it reads at its own point in its part of a row
    // cache of as many columns (not of more: a nest over a row's first 8
    // columns reading a 50304-column operand at its point).
    int64_t columns = reducedDims.empty() || inner == "1LL" ? 1 : -1;
    for (size_t d = 1; d < rank; ++d)
      columns = spec.space[d].isStatic() && columns > 0 ? columns * spec.space[d].value() : -1;
    rowColumns_[sym] = columns;
    auto innerIndices = [&](const std::string &linear, const std::string &indent) {
      std::string c;
      bool any = false;
      for (size_t d = 1; d < rank; ++d)
        any = any || !spec.reduced[d];
      if (any)
        c += indent + "long long rest = " + linear + ";\n";
      size_t outermost = rank;
      for (size_t d = 1; d < rank && outermost == rank; ++d)
        if (!spec.reduced[d])
          outermost = d;
      for (size_t d = rank; d-- > 1;)
        if (!spec.reduced[d])
          c += indent + "const long long i" + std::to_string(d) +
               (d == outermost ? " = rest;\n" : " = rest % " + dims(d) + "; rest /= " + dims(d) + ";\n");
      return c;
    };
    // No __restrict__ here: in a chain kernel a nest reads what an earlier
    // nest of the same kernel wrote, which the read-only (non-coherent)
    // load path that restrict-qualified const pointers allow would miss.
    std::string plain = params + extraParams;
    for (size_t at; (at = plain.find("__restrict__ ")) != std::string::npos;)
      plain.erase(at, 13);
    // The row template's functions read away from the point through its
    // own second pointers (a chain's split row cache holds only part of
    // the row: those point at device memory).
    setCallArgs(rowMemList);
    secondPointers = true;
    value = storedValue();
    store = "m0[" + index + "] = " + value + ";\n";
    // SYNC_LATER: the chain waits for the whole cluster after this nest
    // (before a later one), so a block's partial results stay alive until
    // rank 0 has read them without a barrier of their own. ALL (a row
    // reduction with one output per row, split across a cluster): every
    // block finishes the row from all the partials (exchanged through
    // distributed shared memory, no cluster-wide fence) and stores the same
    // result, so the chain's later nests need no cluster barrier.
    os << "template <int BLOCK, int CLUSTER, bool SYNC_LATER = false, bool ALL = false>\n__device__ __forceinline__ void " << sym
       << "_row(long long i0, unsigned rank, " << plain << ") {\n";
    os << "  const long long inner = " << inner << ";\n";
    if (reducedDims.empty()) {
      // Four rounds per thread, every load before any store: the operands
      // may alias (no __restrict__), so a load after a store could not be
      // issued early, and one load in flight per thread leaves HBM underused
      // (1.9 of 2.9 TB/s on an H100 for a read + write chain). A round is
      // one output, or four consecutive ones (vectors) where the nest has
      // them and the pointers are aligned.
      os << "  long long lo = 0, hi = inner;\n";
      os << "  if constexpr (CLUSTER > 1) tc_split_range(inner, rank, CLUSTER, lo, hi);\n";
      auto rounds = [&](bool vectors, const std::string &in) {
        std::string w = vectors ? "4LL * " : "";
        std::string c = in + "for (long long p0 = lo + " + w + "threadIdx.x; p0 < hi; p0 += " + w + "4LL * BLOCK) {\n";
        c += in + "  " + (vectors ? "tc_vec4<" + outT + ">" : outT) + " v[4];\n" + in + "  long long at[4];\n";
        c += "#pragma unroll\n" + in + "  for (int u = 0; u < 4; ++u) {\n";
        c += in + "    const long long p = p0 + " + w + "(long long)u * BLOCK;\n";
        c += in + "    at[u] = -1;\n" + in + "    if (p >= hi) continue;\n";
        c += innerIndices("p", in + "    ");
        c += vectors ? vectorOutputs("v[u]", in + "    ") : in + "    v[u] = " + value + ";\n";
        c += in + "    at[u] = " + index + ";\n" + in + "  }\n";
        c += "#pragma unroll\n" + in + "  for (int u = 0; u < 4; ++u)\n";
        c += in + "    if (at[u] >= 0) " + (vectors ? "tc_store4(m0 + at[u], v[u]);\n" : "m0[at[u]] = v[u];\n");
        return c + in + "}\n";
      };
      if (elementwiseVectors && rank >= 2)
        os << "  if (" << vectorsAligned(true) << ") {\n" << rounds(true, "    ") << "    return;\n  }\n";
      os << rounds(false, "  ") << "}\n";
    } else {
      std::string reducedLoop = reducedIterations("first", "stride", "      ", "rlo + ");
      os << "  long long rlo = 0, reduced = " << reducedTotal << ";\n";
      os << "  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n";
      // Few outputs per row (a row max/sum): the whole block reduces each,
      // over its part of the reduced iterations in a cluster.
      os << "  if (inner < BLOCK / 32) {\n";
      os << "    if constexpr (CLUSTER > 1) tc_split_range(reduced, rank, CLUSTER, rlo, reduced);\n";
      os << declarePartials("    ");
      std::string clusterSlots, clusterStore, clusterMerge, exchangeBytes = "0u", exchangeKeep, exchangeSend,
                                                                exchangeFirst, exchangeMerge;
      for (size_t f = 0; f < fields.size(); ++f) {
        std::string k = std::to_string(f), slot = "exchange" + k;
        clusterSlots += "    __shared__ " + fields[f].type + " clusterPartial" + k + ";\n";
        clusterStore += " clusterPartial" + k + " = " + fields[f].name + ";";
        clusterMerge += "const " + fields[f].type + " c" + k + " = tc_cluster_load(&clusterPartial" + k + ", c); ";
        clusterSlots += "    __shared__ " + fields[f].type + " " + slot + "[CLUSTER];\n";
        exchangeBytes += " + sizeof(" + fields[f].type + ")";
        exchangeKeep += " " + slot + "[rank] = " + fields[f].name + ";";
        exchangeSend += " tc_exchange_send(&" + slot + "[rank], " + fields[f].name + ", &exchangeBarrier, c);";
        exchangeFirst += " " + fields[f].name + " = " + slot + "[0];";
        exchangeMerge += "const " + fields[f].type + " c" + k + " = " + slot + "[c]; ";
      }
      clusterMerge += merge("c");
      exchangeMerge += merge("c");
      os << clusterSlots;
      os << "    __shared__ __align__(8) unsigned long long exchangeBarrier;\n";
      // ALL: the chain asks only for one output per row (a single exchange).
      os << "    if constexpr (CLUSTER > 1 && ALL) tc_exchange_open(&exchangeBarrier, (CLUSTER - 1) * (" << exchangeBytes
         << "));\n";
      os << "    for (long long p = 0; p < inner; ++p) {\n";
      os << innerIndices("p", "      ");
      os << accInit("      ");
      os << "      const long long first = threadIdx.x, stride = BLOCK;\n";
      os << reducedLoop;
      os << warpCombine("      ") << storePartial("      ");
      os << "      if (warp == 0) {\n";
      os << reloadPartials("        ");
      os << "        if (lane == 0) {\n";
      os << "          if constexpr (CLUSTER > 1 && ALL) {" << exchangeKeep << " } else if constexpr (CLUSTER > 1) {"
         << clusterStore << " } else {\n";
      os << finish("            ") << "            " << store << "          }\n";
      os << "        }\n";
      os << "      }\n";
      // In rank order in every block: the same result everywhere.
      os << "      if constexpr (CLUSTER > 1 && ALL) {\n";
      os << "        tc_exchange_ready();\n";
      os << "        if (threadIdx.x == 0) {\n";
      os << "          for (unsigned c = 0; c < CLUSTER; ++c) if (c != rank) {" << exchangeSend << " }\n";
      os << "          tc_exchange_wait(&exchangeBarrier);\n";
      os << "         " << exchangeFirst << "\n";
      os << "          for (unsigned c = 1; c < CLUSTER; ++c) { " << exchangeMerge << " }\n";
      os << finish("          ") << "          " << store << "        }\n";
      os << "      } else if constexpr (CLUSTER > 1) {\n";
      os << "        tc_cluster_sync(); // every block's partial is in its shared memory\n";
      os << "        if (rank == 0 && threadIdx.x == 0) {\n";
      os << "          for (unsigned c = 1; c < CLUSTER; ++c) { " << clusterMerge << " }\n";
      os << finish("          ") << "          " << store << "        }\n";
      os << "        // read before the next output reuses them, or the block leaves\n";
      os << "        if (!SYNC_LATER || p + 1 < inner) tc_cluster_sync();\n";
      os << "      }\n";
      os << "      __syncthreads(); // partial is reused by the next output\n";
      os << "    }\n";
      // Many outputs per row: a warp per output (a cluster's blocks share
      // the outputs).
      os << "  } else {\n";
      os << "    long long plo = 0, phi = inner;\n";
      os << "    if constexpr (CLUSTER > 1) tc_split_range(inner, rank, CLUSTER, plo, phi);\n";
      os << "    for (long long p = plo + warp; p < phi; p += BLOCK / 32) {\n";
      os << innerIndices("p", "      ");
      os << accInit("      ");
      os << "      const long long first = lane, stride = 32;\n";
      os << reducedIterations("first", "stride", "      ");
      os << warpCombine("      ");
      os << "      if (lane == 0) {\n" << finish("        ") << "        " << store << "      }\n";
      os << "    }\n  }\n}\n";
    }
  }
  os << "\n";
  appendOnce(os.str(), sym, nestByContent_, nestCanonical_);
  return variants;
}

} // namespace tensorc::codegen::cuda
