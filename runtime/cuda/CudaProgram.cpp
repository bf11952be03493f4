#include "runtime/cuda/CudaProgram.h"

#include "ir/core/Error.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/Nvrtc.h"

namespace tensorc::cuda {

using artifact::Step;
using artifact::Storage;

CudaProgram::CudaProgram(const artifact::Artifact &a, const std::string &where,
                         const std::string &kernelCacheDir)
    : driver_(Driver::get()), arch_("sm_" + std::to_string(driver_.computeCapability())) {
  for (const Step &s : a.steps)
    if (s.kind == Step::Kind::Matmul) {
      DType d = a.values[size_t(s.operands[1])].dtype;
      check(isFloat(d), where + ": step '" + s.label + "': integer matmul on the GPU is not implemented yet");
      CublasLt::get(); // fails here, naming the library, if cuBLASLt is missing
    }
  const Nvrtc &nvrtc = Nvrtc::get();
  KernelCache cache(kernelCacheDir);
  KernelKey key{a.code, arch_, nvrtc.version(), "--std=c++17", a.tensorcVersion};
  std::string cubin = cache.getOrBuild(key, [&] { return nvrtc.compile(a.code, where, arch_).cubin; });
  module_ = driver_.loadModule(cubin);
  // The default variant: the first recorded (b256_i1).
  std::string variant = "b256_i1";
  if (auto it = a.options.find("kernel_variants"); it != a.options.end())
    variant = it->second.substr(0, it->second.find(','));
  int block = std::stoi(variant.substr(1, variant.find('_') - 1));
  int items = std::stoi(variant.substr(variant.find("_i") + 2));
  for (const Step &s : a.steps) {
    kernels_.push_back(s.kind == Step::Kind::Loop ? driver_.function(module_, s.symbol + "_" + variant)
                                                  : nullptr);
    blocks_.push_back(block);
    items_.push_back(items);
  }
  constants_ = driver_.allocate(a.data.size());
  driver_.copyToDevice(constants_, a.data.data(), a.data.size());
}

CudaProgram::~CudaProgram() {
  if (constants_)
    driver_.free(constants_);
}

CudaProgram::Buffers::~Buffers() {
  if (!Driver::available())
    return;
  Driver &d = Driver::get();
  d.free(arena);
  for (DevicePtr p : io)
    d.free(p);
}

void CudaProgram::run(const artifact::Artifact &a, const std::vector<int64_t> &symbolValues,
                      const std::vector<std::vector<int64_t>> &shapes,
                      const std::vector<int64_t> &offsets, int64_t arenaBytes,
                      const std::vector<const void *> &inputs, const std::vector<void *> &outputs,
                      Buffers &buf) const {
  driver_.makeCurrent();
  auto bytesOf = [&](int v) {
    size_t n = dtypeSize(a.values[v].dtype);
    for (int64_t d : shapes[v])
      n *= size_t(d);
    return n;
  };
  if (size_t(arenaBytes) > buf.arenaBytes) {
    driver_.free(buf.arena);
    buf.arena = driver_.allocate(size_t(arenaBytes));
    buf.arenaBytes = size_t(arenaBytes);
  }
  // Device memory for inputs and outputs, reused while large enough.
  size_t nio = a.inputs.size() + a.outputs.size();
  buf.io.resize(nio, 0);
  buf.ioBytes.resize(nio, 0);
  for (size_t i = 0; i < nio; ++i) {
    int v = i < a.inputs.size() ? a.inputs[i].value : a.outputs[i - a.inputs.size()].value;
    size_t need = std::max<size_t>(bytesOf(v), 1);
    if (need > buf.ioBytes[i]) {
      driver_.free(buf.io[i]);
      buf.io[i] = driver_.allocate(need);
      buf.ioBytes[i] = need;
    }
  }
  for (size_t i = 0; i < a.inputs.size(); ++i)
    driver_.copyToDevice(buf.io[i], inputs[i], bytesOf(a.inputs[i].value));
  std::vector<DevicePtr> ptr(a.values.size(), 0);
  for (size_t v = 0; v < a.values.size(); ++v) {
    const Storage &s = a.values[v].storage;
    switch (s.kind) {
    case Storage::Kind::Input:
      ptr[v] = buf.io[size_t(s.index)];
      break;
    case Storage::Kind::Output:
      ptr[v] = buf.io[a.inputs.size() + size_t(s.index)];
      break;
    case Storage::Kind::Buffer:
      ptr[v] = buf.arena + DevicePtr(offsets[size_t(s.index)]);
      break;
    case Storage::Kind::Constant:
      ptr[v] = constants_ + DevicePtr(a.constants[size_t(s.index)].offset);
      break;
    case Storage::Kind::Alias:
      ptr[v] = ptr[size_t(s.index)];
      break;
    }
  }
  std::map<std::string, int64_t> bindings;
  for (size_t k = 0; k < a.symbols.size(); ++k)
    bindings[a.symbols[k].name] = symbolValues[k];
  for (size_t si = 0; si < a.steps.size(); ++si) {
    const Step &s = a.steps[si];
    if (s.kind == Step::Kind::Matmul) {
      int c = s.operands[0], l = s.operands[1], r = s.operands[2];
      std::vector<int64_t> as = shapes[size_t(l)], bs = shapes[size_t(r)];
      if (s.transposeA && as.size() >= 2)
        std::swap(as[as.size() - 1], as[as.size() - 2]);
      if (s.transposeB && bs.size() >= 2)
        std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
      CublasLt::get().matmul(ptr[size_t(l)], s.transposeA, ptr[size_t(r)], s.transposeB, ptr[size_t(c)],
                             a.values[size_t(l)].dtype, matmulDims(as, bs, shapes[size_t(c)]));
      continue;
    }
    if (s.kind == Step::Kind::Copy) {
      driver_.copyOnDevice(ptr[size_t(s.operands[0])], ptr[size_t(s.operands[1])],
                           bytesOf(s.operands[1]));
      continue;
    }
    int64_t threads = *s.threads.evaluate(bindings);
    if (threads == 0)
      continue;
    // Kernel parameters: operand pointers, then symbol sizes (long long).
    std::vector<DevicePtr> pointers;
    for (int o : s.operands)
      pointers.push_back(ptr[size_t(o)]);
    std::vector<long long> syms(symbolValues.begin(), symbolValues.end());
    std::vector<void *> params;
    for (DevicePtr &p : pointers)
      params.push_back(&p);
    for (long long &v : syms)
      params.push_back(&v);
    int64_t perBlock = int64_t(blocks_[si]) * items_[si];
    int64_t grid = (threads + perBlock - 1) / perBlock;
    check(grid <= 0x7fffffff, "cuda: too many threads for one launch");
    driver_.launch(kernels_[si], unsigned(grid), unsigned(blocks_[si]), params.data());
  }
  driver_.synchronize();
  for (size_t i = 0; i < a.outputs.size(); ++i)
    driver_.copyToHost(outputs[i], buf.io[a.inputs.size() + i], bytesOf(a.outputs[i].value));
}

} // namespace tensorc::cuda
