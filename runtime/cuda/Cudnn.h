// cuDNN's graph (backend) API, loaded at run time (libcudnn.so.9, also from a
// pip wheel's nvidia/cudnn/lib): tensors and operations described once, an
// execution plan from cuDNN's heuristics, run on a stream. No cuDNN headers:
// the runtime builds without CUDA; the enum values below are cuDNN 9's
// (cudnn_graph.h), a stable ABI across 9.x.
#pragma once

#include "ir/core/Error.h"
#include "runtime/cuda/CudaDriver.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tensorc::cuda::cudnn {

// cudnnDataType_t
enum DataType : int { kFloat = 0, kHalf = 2, kInt32 = 4, kBfloat16 = 9, kBoolean = 11 };
// cudnnPointwiseMode_t
enum PointwiseMode : int {
  kAdd = 0, kMul = 1, kDiv = 6, kSub = 9, kExp = 13, kLog = 15, kIdentity = 21, kCmpGe = 303,
  kGenIndex = 501, kBinarySelect = 601
};
// cudnnReduceTensorOp_t
enum ReduceOp : int { kReduceAdd = 0, kReduceMax = 3 };

// cudnnBackendHeurMode_t: A ranks engines quickly; B is slower to query
// (once per problem here) and may rank better.
enum class Heuristic : int { B = 1, A = 3 };

// cudnnBackendNumericalNote_t values an engine may carry.
enum NumericalNote : int { kNoteTensorCore = 0, kNoteDownConvertInputs = 1 };

// A 2-D cross-correlation (PyTorch's conv2d) over NCHW tensors: x [N, C, H, W],
// w [K, C / groups, R, S] (cuDNN infers the groups from C), y [N, K, P, Q].
struct ConvolutionGeometry {
  int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
};
// Which of x, w, y a convolution operation writes: y (forward), x (the
// data gradient dx from dy and w) or w (the filter gradient dw from x, dy).
enum class ConvolutionDirection { Forward, BackwardData, BackwardFilter };

// The loaded library and one handle per CUDA context (the driver's primary
// context). Throws Error naming what was tried when cuDNN is missing.
class Library {
public:
  static Library &get();
  int version() const { return version_; } // 91900 for 9.19.0
  void *handle() const { return handle_; }
  // Throws Error with cuDNN's message when `status` is not success.
  void check(int status, const std::string &what) const;
  struct Api;
  const Api &api() const { return *api_; }

private:
  Library();
  const Api *api_ = nullptr;
  void *handle_ = nullptr;
  int version_ = 0;
};

struct Tensor {
  int64_t uid = 0;
  std::vector<int64_t> dims, strides;
  int type = kFloat;
};

// cuDNN descriptors released together (a graph's, shared by its plans).
struct Descriptors {
  std::vector<void *> owned;
  Descriptors() = default;
  Descriptors(const Descriptors &) = delete;
  Descriptors &operator=(const Descriptors &) = delete;
  ~Descriptors();
};

// An execution plan with the tensors it reads and writes by uid; scalars
// passed by value are kept here (their host addresses go to cuDNN).
class Plan {
public:
  ~Plan();
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;
  int64_t workspaceBytes() const { return workspaceBytes_; }
  // Queues the plan on `stream`: `pointers` maps every non-virtual,
  // non-scalar uid to device memory; `workspace` has workspaceBytes().
  void execute(const std::map<int64_t, DevicePtr> &pointers, DevicePtr workspace, Stream stream) const;

private:
  friend class Graph;
  Plan() = default;
  void *plan_ = nullptr;
  int64_t workspaceBytes_ = 0;
  std::map<int64_t, float> scalars_;
  std::shared_ptr<Descriptors> owned_; // the descriptors the plan was made from
};

// An operation graph under construction. Tensors get uids in order from
// `firstUid`; an operation's output is a virtual tensor (f32 unless said)
// unless one is given.
class Graph {
public:
  explicit Graph(int64_t firstUid = 1000) : next_(firstUid) {}
  ~Graph();
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  // A tensor in memory (uid given) or virtual (uid assigned), 16-byte aligned.
  Tensor tensor(int type, std::vector<int64_t> dims, std::vector<int64_t> strides, int64_t uid = 0);
  Tensor virtualTensor(int type, std::vector<int64_t> dims, std::vector<int64_t> strides = {});
  // An f32 scalar passed by value.
  Tensor scalar(float value);

  // y = op(x[, b][, t]); `out` (a tensor made above) or a virtual tensor
  // of x and b's broadcast shape and `outType`.
  Tensor pointwise(int mode, const Tensor &x, const Tensor *b = nullptr, const Tensor *t = nullptr,
                   const Tensor *out = nullptr, int outType = kFloat, int mathType = kFloat, int64_t axis = -1);
  void reduction(int op, const Tensor &x, const Tensor &out);
  void matmul(const Tensor &a, const Tensor &b, const Tensor &out);
  void reshape(const Tensor &x, const Tensor &out);
  // One convolution (f32 accumulation) writing x, w or y by `direction`.
  void convolution(ConvolutionDirection direction, const ConvolutionGeometry &geometry, const Tensor &x,
                   const Tensor &w, const Tensor &y);

  // The first of cuDNN's heuristic engine configurations (`heuristic`'s
  // ranking) that makes a plan and carries none of `rejectedNotes`
  // (NumericalNote); null and `why` when none does (not supported here).
  std::unique_ptr<Plan> build(std::string &why, const std::vector<int> &rejectedNotes = {},
                              Heuristic heuristic = Heuristic::A);
  // The first `most` such plans, in the heuristic's order (candidates an
  // autotuner may time); empty and `why` when none.
  std::vector<std::unique_ptr<Plan>> buildAll(std::string &why, const std::vector<int> &rejectedNotes,
                                              Heuristic heuristic, size_t most);

private:
  void *describe(const Tensor &t);
  void addOperation(void *op) { ops_.push_back(op); }
  int64_t next_;
  std::map<int64_t, void *> tensors_; // uid -> descriptor
  std::map<int64_t, float> scalars_;
  std::vector<void *> ops_, owned_;
};

// Plans by problem, each built once by the caller's `build(why)`; a problem
// cuDNN declines (null, or an Error) is remembered with the reason, so the
// caller's fallback runs without asking again. Thread-safe.
template <typename Key, typename Value = Plan> class PlanCache {
public:
  template <typename Build> const Value *get(const Key &key, std::string &why, Build build) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = plans_.find(key); it != plans_.end())
      return it->second.get();
    if (auto it = declined_.find(key); it != declined_.end()) {
      why = it->second;
      return nullptr;
    }
    std::unique_ptr<Value> p;
    try {
      p = build(why);
    } catch (const Error &e) {
      why = e.what();
    }
    if (!p) {
      declined_[key] = why;
      return nullptr;
    }
    return (plans_[key] = std::move(p)).get();
  }

private:
  std::mutex mutex_;
  std::map<Key, std::unique_ptr<Value>> plans_;
  std::map<Key, std::string> declined_;
};

// Contiguous strides of `dims`.
std::vector<int64_t> contiguous(const std::vector<int64_t> &dims);

} // namespace tensorc::cuda::cudnn
