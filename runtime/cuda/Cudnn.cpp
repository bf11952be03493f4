#include "runtime/cuda/Cudnn.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <cstdlib>
#include "runtime/host/DynamicLibrary.h"
#include <glob.h>
#include <mutex>

namespace tensorc::cuda::cudnn {

// cudnnBackendDescriptorType_t, cudnnBackendAttributeName_t and
// cudnnBackendAttributeType_t values used here (cudnn_graph.h, cuDNN 9).
namespace {
enum Descriptor : int {
  kConvolutionDesc = 1, kEngineDesc = 2, kConvForwardOpDesc = 10, kConvBackwardFilterOpDesc = 11,
  kConvBackwardDataOpDesc = 12, kPointwiseDesc = 0, kEngineCfgDesc = 3, kEngineHeurDesc = 4, kPlanDesc = 5, kPointwiseOpDesc = 13,
  kOpGraphDesc = 15, kVariantPackDesc = 16, kTensorDesc = 17, kMatmulDesc = 18, kMatmulOpDesc = 19,
  kReductionDesc = 21, kReductionOpDesc = 22, kReshapeOpDesc = 31
};
enum Attribute : int {
  kConvCompType = 100, kConvMode = 101, kConvDilations = 102, kConvFilterStrides = 103, kConvPostPaddings = 104,
  kConvPrePaddings = 105, kConvSpatialDims = 106,
  kEngineCfgEngine = 300, kEngineNumericalNote = 1303,
  // The convolution operations' alpha, beta, descriptor and tensors:
  // forward 700.. (alpha, beta, conv, w, x, y), backward data 706.. (alpha,
  // beta, conv, w, dx, dy), backward filter 712.. (alpha, beta, conv, dw, x, dy).
  kConvForwardAttrs = 700, kConvBackwardDataAttrs = 706, kConvBackwardFilterAttrs = 712,
  kPointwiseMode = 0, kPointwiseMathPrec = 1, kPointwiseAxis = 9,
  kHeurMode = 200, kHeurOpGraph = 201, kHeurResults = 202,
  kPlanHandle = 400, kPlanEngineConfig = 401, kPlanWorkspaceSize = 402,
  kPwOpDesc = 750, kPwOpX = 751, kPwOpB = 752, kPwOpY = 753, kPwOpAlpha1 = 754, kPwOpAlpha2 = 755, kPwOpT = 758,
  kOpGraphHandle = 800, kOpGraphOps = 801,
  kTensorAlignment = 900, kTensorType = 901, kTensorDims = 902, kTensorStrides = 903, kTensorUid = 906,
  kTensorVirtual = 907, kTensorByValue = 908,
  kPackUids = 1000, kPackPointers = 1001, kPackWorkspace = 1003,
  kMatmulCompType = 1500, kMatmulOpA = 1520, kMatmulOpB = 1521, kMatmulOpC = 1522, kMatmulOpDesc2 = 1523,
  kReductionOperator = 1600, kReductionCompType = 1601, kReductionOpX = 1610, kReductionOpY = 1611,
  kReductionOpDesc2 = 1612, kReshapeOpX = 2200, kReshapeOpY = 2201
};
enum AttributeType : int {
  kTypeHandle = 0, kTypeDataType = 1, kTypeBoolean = 2, kTypeInt64 = 3, kTypeFloat = 4, kTypeVoidPtr = 6,
  kTypeConvolutionMode = 7, kTypeHeurMode = 8, kTypeNumericalNote = 11, kTypePointwiseMode = 14,
  kTypeDescriptor = 15, kTypeReduceOp = 18
};
constexpr int kCrossCorrelation = 1;
} // namespace

struct Library::Api {
  size_t (*getVersion)();
  int (*create)(void **);
  int (*setStream)(void *, void *);
  void (*lastError)(char *, size_t);
  int (*createDescriptor)(int, void **);
  int (*destroyDescriptor)(void *);
  int (*finalize)(void *);
  int (*setAttribute)(void *, int, int, int64_t, const void *);
  int (*getAttribute)(const void *, int, int, int64_t, int64_t *, void *);
  int (*execute)(void *, void *, void *);
};

namespace {

// Where pip puts cuDNN (PyTorch's wheels depend on nvidia-cudnn-cu*).
std::vector<std::string> wheelLibraries() {
  std::vector<std::string> patterns = {"/usr/local/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9",
                                       "/usr/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9",
                                       "/usr/local/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9"};
  for (const char *env : {"VIRTUAL_ENV", "CONDA_PREFIX", "HOME"})
    if (const char *root = std::getenv(env); root && *root)
      patterns.push_back(std::string(root) + (std::string(env) == "HOME" ? "/.local" : "") +
                         "/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9");
  std::vector<std::string> found;
  for (const std::string &p : patterns) {
    glob_t g{};
    if (::glob(p.c_str(), 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        found.push_back(g.gl_pathv[i]);
    ::globfree(&g);
  }
  return found;
}

DynamicLibrary openCudnn(std::string &tried) {
  std::vector<std::string> candidates;
  if (const char *lib = std::getenv("TENSORC_CUDNN_LIB"); lib && *lib)
    candidates.push_back(lib);
  candidates.push_back("libcudnn.so.9");
  for (const std::string &w : wheelLibraries())
    candidates.push_back(w);
  for (const std::string &lib : candidates) {
    const size_t slash = lib.rfind('/');
    if (slash != std::string::npos) {
      // libcudnn.so.9 opens its parts by name: load them from its folder
      // first (a wheel's folder is on no search path).
      const std::string dir = lib.substr(0, slash + 1);
      std::string parts;
      for (const char *part : {"libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9",
                               "libcudnn_engines_runtime_compiled.so.9", "libcudnn_heuristic.so.9",
                               "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9"})
        DynamicLibrary::open({dir + part}, true, parts);
    }
    if (DynamicLibrary h = DynamicLibrary::open({lib}, true, tried))
      return h;
  }
  return {};
}

} // namespace

Library &Library::get() {
  static std::once_flag once;
  // Never destroyed: plans held by programs that outlive static destruction
  // (a static session, say) still release their descriptors through it.
  static Library *instance = nullptr;
  static std::string error;
  std::call_once(once, [] {
    try {
      instance = new Library();
    } catch (const Error &e) {
      error = e.what();
    }
  });
  tensorc::check(instance != nullptr, error);
  return *instance;
}

Library::Library() {
  std::string tried;
  DynamicLibrary lib = openCudnn(tried);
  tensorc::check(bool(lib), "cuda: cuDNN 9 is not available (tried " + tried + ")");
  static Api api;
  auto sym = [&](auto &fn, const char *name) { lib.bind(fn, name); };
  sym(api.getVersion, "cudnnGetVersion");
  sym(api.create, "cudnnCreate");
  sym(api.setStream, "cudnnSetStream");
  sym(api.lastError, "cudnnGetLastErrorString");
  sym(api.createDescriptor, "cudnnBackendCreateDescriptor");
  sym(api.destroyDescriptor, "cudnnBackendDestroyDescriptor");
  sym(api.finalize, "cudnnBackendFinalize");
  sym(api.setAttribute, "cudnnBackendSetAttribute");
  sym(api.getAttribute, "cudnnBackendGetAttribute");
  sym(api.execute, "cudnnBackendExecute");
  tensorc::check(lib.missing().empty(), "cuda: cuDNN lacks " + lib.missing());
  api_ = &api;
  version_ = int(api.getVersion());
  tensorc::check(version_ >= 90000 && version_ < 100000,
                 "cuda: cuDNN " + std::to_string(version_) + " found; tensorc needs cuDNN 9");
  Driver::get().makeCurrent();
  check(api.create(&handle_), "cudnnCreate");
}

void Library::check(int status, const std::string &what) const {
  if (status == 0)
    return;
  char message[1024] = {0};
  api_->lastError(message, sizeof message);
  throw Error("cuda: cuDNN " + what + " failed with status " + std::to_string(status) +
              (message[0] ? std::string(": ") + message : std::string()));
}

std::vector<int64_t> contiguous(const std::vector<int64_t> &dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    strides[i - 1] = strides[i] * dims[i];
  return strides;
}

namespace {
void *create(int type) {
  const Library &lib = Library::get();
  void *d = nullptr;
  lib.check(lib.api().createDescriptor(type, &d), "create descriptor " + std::to_string(type));
  return d;
}

void set(void *d, int attribute, int type, int64_t count, const void *value) {
  const Library &lib = Library::get();
  lib.check(lib.api().setAttribute(d, attribute, type, count, value), "set attribute " + std::to_string(attribute));
}

void setDescriptor(void *d, int attribute, void *value) { set(d, attribute, kTypeDescriptor, 1, &value); }

void finalize(void *d, const char *what) {
  const Library &lib = Library::get();
  lib.check(lib.api().finalize(d), std::string("finalize ") + what);
}
} // namespace

Graph::~Graph() {
  const Library &lib = Library::get();
  for (void *d : owned_)
    lib.api().destroyDescriptor(d);
}

Tensor Graph::tensor(int type, std::vector<int64_t> dims, std::vector<int64_t> strides, int64_t uid) {
  Tensor t{uid ? uid : next_++, std::move(dims), std::move(strides), type};
  tensors_[t.uid] = nullptr; // described on first use
  return t;
}

Tensor Graph::virtualTensor(int type, std::vector<int64_t> dims, std::vector<int64_t> strides) {
  if (strides.empty())
    strides = contiguous(dims);
  Tensor t{-(next_++), std::move(dims), std::move(strides), type}; // negative: virtual
  return t;
}

Tensor Graph::scalar(float value) {
  Tensor t{next_++, {1, 1, 1, 1}, {1, 1, 1, 1}, kFloat};
  scalars_[t.uid] = value;
  return t;
}

void *Graph::describe(const Tensor &t) {
  const int64_t uid = t.uid < 0 ? -t.uid : t.uid;
  if (auto it = tensors_.find(uid); it != tensors_.end() && it->second)
    return it->second;
  void *d = create(kTensorDesc);
  owned_.push_back(d);
  const bool isVirtual = t.uid < 0, byValue = scalars_.count(uid) > 0;
  const int64_t alignment = 16;
  set(d, kTensorType, kTypeDataType, 1, &t.type);
  set(d, kTensorDims, kTypeInt64, int64_t(t.dims.size()), t.dims.data());
  set(d, kTensorStrides, kTypeInt64, int64_t(t.strides.size()), t.strides.data());
  set(d, kTensorUid, kTypeInt64, 1, &uid);
  set(d, kTensorAlignment, kTypeInt64, 1, &alignment);
  set(d, kTensorVirtual, kTypeBoolean, 1, &isVirtual);
  if (byValue)
    set(d, kTensorByValue, kTypeBoolean, 1, &byValue);
  finalize(d, "tensor");
  tensors_[uid] = d;
  return d;
}

Tensor Graph::pointwise(int mode, const Tensor &x, const Tensor *b, const Tensor *t, const Tensor *out,
                        int outType, int mathType, int64_t axis) {
  Tensor y;
  if (out) {
    y = *out;
  } else {
    std::vector<int64_t> dims = x.dims;
    if (b && b->dims.size() == dims.size())
      for (size_t i = 0; i < dims.size(); ++i)
        dims[i] = std::max(dims[i], b->dims[i]);
    y = virtualTensor(outType, dims, dims == x.dims ? x.strides : std::vector<int64_t>{});
  }
  void *pw = create(kPointwiseDesc);
  owned_.push_back(pw);
  set(pw, kPointwiseMode, kTypePointwiseMode, 1, &mode);
  set(pw, kPointwiseMathPrec, kTypeDataType, 1, &mathType);
  if (mode == kGenIndex)
    set(pw, kPointwiseAxis, kTypeInt64, 1, &axis);
  finalize(pw, "pointwise");
  void *op = create(kPointwiseOpDesc);
  owned_.push_back(op);
  setDescriptor(op, kPwOpDesc, pw);
  setDescriptor(op, kPwOpX, describe(x));
  if (b)
    setDescriptor(op, kPwOpB, describe(*b));
  if (t)
    setDescriptor(op, kPwOpT, describe(*t));
  setDescriptor(op, kPwOpY, describe(y));
  const float one = 1.0f;
  set(op, kPwOpAlpha1, kTypeFloat, 1, &one);
  set(op, kPwOpAlpha2, kTypeFloat, 1, &one);
  finalize(op, "pointwise operation");
  addOperation(op);
  return y;
}

void Graph::reduction(int reduceOp, const Tensor &x, const Tensor &out) {
  void *r = create(kReductionDesc);
  owned_.push_back(r);
  const int f32 = kFloat;
  set(r, kReductionOperator, kTypeReduceOp, 1, &reduceOp);
  set(r, kReductionCompType, kTypeDataType, 1, &f32);
  finalize(r, "reduction");
  void *op = create(kReductionOpDesc);
  owned_.push_back(op);
  setDescriptor(op, kReductionOpDesc2, r);
  setDescriptor(op, kReductionOpX, describe(x));
  setDescriptor(op, kReductionOpY, describe(out));
  finalize(op, "reduction operation");
  addOperation(op);
}

void Graph::matmul(const Tensor &a, const Tensor &b, const Tensor &out) {
  void *m = create(kMatmulDesc);
  owned_.push_back(m);
  const int f32 = kFloat;
  set(m, kMatmulCompType, kTypeDataType, 1, &f32);
  finalize(m, "matmul");
  void *op = create(kMatmulOpDesc);
  owned_.push_back(op);
  setDescriptor(op, kMatmulOpA, describe(a));
  setDescriptor(op, kMatmulOpB, describe(b));
  setDescriptor(op, kMatmulOpC, describe(out));
  setDescriptor(op, kMatmulOpDesc2, m);
  finalize(op, "matmul operation");
  addOperation(op);
}

void Graph::reshape(const Tensor &x, const Tensor &out) {
  void *op = create(kReshapeOpDesc);
  owned_.push_back(op);
  setDescriptor(op, kReshapeOpX, describe(x));
  setDescriptor(op, kReshapeOpY, describe(out));
  finalize(op, "reshape operation");
  addOperation(op);
}

void Graph::convolution(ConvolutionDirection direction, const ConvolutionGeometry &geometry, const Tensor &x,
                        const Tensor &w, const Tensor &y) {
  void *conv = create(kConvolutionDesc);
  owned_.push_back(conv);
  const int f32 = kFloat, mode = kCrossCorrelation;
  const int64_t spatialDims = 2;
  set(conv, kConvCompType, kTypeDataType, 1, &f32);
  set(conv, kConvMode, kTypeConvolutionMode, 1, &mode);
  set(conv, kConvSpatialDims, kTypeInt64, 1, &spatialDims);
  set(conv, kConvDilations, kTypeInt64, 2, geometry.dilation);
  set(conv, kConvFilterStrides, kTypeInt64, 2, geometry.stride);
  set(conv, kConvPrePaddings, kTypeInt64, 2, geometry.padding);
  set(conv, kConvPostPaddings, kTypeInt64, 2, geometry.padding);
  finalize(conv, "convolution");
  const int type = direction == ConvolutionDirection::Forward        ? kConvForwardOpDesc
                   : direction == ConvolutionDirection::BackwardData ? kConvBackwardDataOpDesc
                                                                     : kConvBackwardFilterOpDesc;
  const int base = direction == ConvolutionDirection::Forward        ? kConvForwardAttrs
                   : direction == ConvolutionDirection::BackwardData ? kConvBackwardDataAttrs
                                                                     : kConvBackwardFilterAttrs;
  void *op = create(type);
  owned_.push_back(op);
  const float one = 1.0f, zero = 0.0f;
  set(op, base + 0, kTypeFloat, 1, &one);
  set(op, base + 1, kTypeFloat, 1, &zero);
  setDescriptor(op, base + 2, conv);
  // Every direction's tensor attributes follow in the order w, x, y.
  const Tensor *order[3] = {&w, &x, &y};
  for (int i = 0; i < 3; ++i)
    setDescriptor(op, base + 3 + i, describe(*order[i]));
  finalize(op, "convolution operation");
  addOperation(op);
}

std::unique_ptr<Plan> Graph::build(std::string &why, const std::vector<int> &rejectedNotes, Heuristic heuristic) {
  std::vector<std::unique_ptr<Plan>> plans = buildAll(why, rejectedNotes, heuristic, 1);
  return plans.empty() ? nullptr : std::move(plans[0]);
}

std::vector<std::unique_ptr<Plan>> Graph::buildAll(std::string &why, const std::vector<int> &rejectedNotes,
                                                   Heuristic heuristic, size_t most) {
  std::vector<std::unique_ptr<Plan>> plans;
  const Library &lib = Library::get();
  void *handle = lib.handle();
  void *graph = create(kOpGraphDesc);
  owned_.push_back(graph);
  set(graph, kOpGraphOps, kTypeDescriptor, int64_t(ops_.size()), ops_.data());
  set(graph, kOpGraphHandle, kTypeHandle, 1, &handle);
  if (int rc = lib.api().finalize(graph)) {
    char message[1024] = {0};
    lib.api().lastError(message, sizeof message);
    why = "operation graph not supported (status " + std::to_string(rc) + (message[0] ? std::string(": ") + message : "") + ")";
    return plans;
  }
  void *heur = create(kEngineHeurDesc);
  owned_.push_back(heur);
  setDescriptor(heur, kHeurOpGraph, graph);
  const int mode = int(heuristic);
  set(heur, kHeurMode, kTypeHeurMode, 1, &mode);
  finalize(heur, "engine heuristics");
  int64_t count = 0;
  lib.check(lib.api().getAttribute(heur, kHeurResults, kTypeDescriptor, 0, &count, nullptr), "heuristic count");
  std::vector<void *> configs(size_t(std::max<int64_t>(count, 0)));
  for (void *&c : configs) {
    c = create(kEngineCfgDesc);
    owned_.push_back(c);
  }
  int64_t returned = 0;
  if (count > 0)
    lib.check(lib.api().getAttribute(heur, kHeurResults, kTypeDescriptor, count, &returned, configs.data()),
              "heuristic results");
  why = returned == 0 ? "no engine configuration (of " + std::to_string(count) + ")" : "";
  for (int64_t i = 0; i < returned; ++i) {
    if (!rejectedNotes.empty()) {
      void *engine = create(kEngineDesc);
      owned_.push_back(engine);
      int64_t n = 0;
      lib.check(lib.api().getAttribute(configs[size_t(i)], kEngineCfgEngine, kTypeDescriptor, 1, &n, &engine),
                "engine of a configuration");
      int notes[32] = {0};
      int64_t noteCount = 0;
      lib.check(lib.api().getAttribute(engine, kEngineNumericalNote, kTypeNumericalNote, 32, &noteCount, notes),
                "engine numerical notes");
      bool rejected = false;
      for (int64_t k = 0; k < std::min<int64_t>(noteCount, 32); ++k)
        rejected = rejected || std::count(rejectedNotes.begin(), rejectedNotes.end(), notes[k]) > 0;
      if (rejected) {
        if (why.empty())
          why = "every engine configuration has a rejected numerical note (TF32 tensor cores or down-converted inputs)";
        continue;
      }
    }
    void *plan = create(kPlanDesc);
    set(plan, kPlanHandle, kTypeHandle, 1, &handle);
    setDescriptor(plan, kPlanEngineConfig, configs[size_t(i)]);
    if (int rc = lib.api().finalize(plan)) {
      char message[1024] = {0};
      lib.api().lastError(message, sizeof message);
      if (why.empty())
        why = "no engine makes a plan (status " + std::to_string(rc) + (message[0] ? std::string(": ") + message : "") + ")";
      lib.api().destroyDescriptor(plan);
      continue;
    }
    std::unique_ptr<Plan> p(new Plan());
    p->plan_ = plan;
    int64_t n = 0;
    lib.check(lib.api().getAttribute(plan, kPlanWorkspaceSize, kTypeInt64, 1, &n, &p->workspaceBytes_),
              "plan workspace size");
    p->scalars_ = scalars_;
    plans.push_back(std::move(p));
    if (plans.size() >= most)
      break;
  }
  if (!plans.empty()) {
    // The plans refer to their engine configurations and the graph: kept
    // with them, released with the last.
    auto shared = std::make_shared<Descriptors>();
    shared->owned = std::move(owned_);
    owned_.clear();
    for (std::unique_ptr<Plan> &p : plans)
      p->owned_ = shared;
  }
  return plans;
}

Plan::~Plan() {
  if (plan_)
    Library::get().api().destroyDescriptor(plan_);
}

Descriptors::~Descriptors() {
  const Library &lib = Library::get();
  for (void *d : owned)
    lib.api().destroyDescriptor(d);
}

void Plan::execute(const std::map<int64_t, DevicePtr> &pointers, DevicePtr workspace, Stream stream) const {
  const Library &lib = Library::get();
  std::vector<int64_t> uids;
  std::vector<void *> data;
  for (const auto &[uid, p] : pointers) {
    uids.push_back(uid);
    data.push_back(reinterpret_cast<void *>(p));
  }
  for (const auto &[uid, value] : scalars_) {
    uids.push_back(uid);
    data.push_back(const_cast<float *>(&value));
  }
  void *pack = create(kVariantPackDesc);
  struct Destroy {
    void *d;
    ~Destroy() { Library::get().api().destroyDescriptor(d); }
  } destroy{pack};
  void *ws = reinterpret_cast<void *>(workspace);
  set(pack, kPackUids, kTypeInt64, int64_t(uids.size()), uids.data());
  set(pack, kPackPointers, kTypeVoidPtr, int64_t(data.size()), data.data());
  set(pack, kPackWorkspace, kTypeVoidPtr, 1, &ws);
  finalize(pack, "variant pack");
  // The handle's stream is shared: one plan at a time sets and uses it.
  static std::mutex streamMutex;
  std::lock_guard<std::mutex> lock(streamMutex);
  lib.check(lib.api().setStream(lib.handle(), stream), "set stream");
  lib.check(lib.api().execute(lib.handle(), plan_, pack), "execute");
}

} // namespace tensorc::cuda::cudnn
