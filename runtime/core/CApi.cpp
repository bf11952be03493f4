// The C API over the C++ runtime: exceptions become statuses at this
// boundary and never cross it.
#include "tensorc/tensorc.h"

#include "tensorc/Runtime.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

using namespace tensorc::runtime;

struct tc_status_s {
  tc_status_code_t code;
  std::string message;
};

struct tc_runtime_s {
  std::atomic<int> refs{1};
  tc_runtime_options_t options;
  std::string kernelCacheDir; // options.kernel_cache_dir, copied
  std::string mode;           // options.mode, copied
  std::string autotune, tuneDb; // tc_runtime_set_autotune, copied
};

struct tc_executable_s {
  std::atomic<int> refs{1};
  tc_runtime_t *runtime;
  std::shared_ptr<Executable> exe;
  // tc_executable_allocate's memory, until tc_executable_free.
  std::mutex mutex;
  std::map<void *, Tensor> allocations;
};

struct tc_weights_s {
  std::shared_ptr<const Weights> weights;
  std::vector<std::vector<int64_t>> shapes; // per tensor, for tc_tensor_t.shape
};

struct tc_session_s {
  tc_executable_t *executable;
  Session session;
  std::vector<std::string> stateNames;
};

namespace {

tc_status_t makeStatus(tc_status_code_t code, std::string message) {
  return new (std::nothrow) tc_status_s{code, std::move(message)};
}

// Runs `f`, turning exceptions into a status with `code`.
template <typename F> tc_status_t guard(tc_status_code_t code, F &&f) {
  try {
    f();
    return nullptr;
  } catch (const std::bad_alloc &) {
    return makeStatus(TC_STATUS_INTERNAL, "out of memory");
  } catch (const std::exception &e) {
    return makeStatus(code, e.what());
  }
}

std::vector<TensorView> views(const tc_tensor_t *ts, int32_t n) {
  if (n < 0 || (n > 0 && !ts))
    throw Error("tensor array is null or has a negative count");
  std::vector<TensorView> v;
  for (int32_t i = 0; i < n; ++i) {
    if (ts[i].rank < 0 || (ts[i].rank > 0 && !ts[i].shape))
      throw Error("tensor " + std::to_string(i) + ": bad rank or null shape");
    if (int(ts[i].dtype) < TC_F64 || int(ts[i].dtype) > TC_I1)
      throw Error("tensor " + std::to_string(i) + ": unknown element type " +
                  std::to_string(int(ts[i].dtype)));
    TensorView view{ElementType(ts[i].dtype),
                    std::vector<int64_t>(ts[i].shape, ts[i].shape + ts[i].rank),
                    static_cast<uint8_t *>(ts[i].data) + ts[i].byte_offset};
    if (!ts[i].data && ts[i].byte_offset)
      throw Error("tensor " + std::to_string(i) + ": a byte offset on null data");
    if (ts[i].device_type != 0 && ts[i].device_type != TC_DEVICE_HOST &&
        ts[i].device_type != TC_DEVICE_CUDA)
      throw Error("tensor " + std::to_string(i) + ": unknown device type " +
                  std::to_string(ts[i].device_type));
    if (ts[i].device_id < 0)
      throw Error("tensor " + std::to_string(i) + ": negative device id");
    view.device = {ts[i].device_type == TC_DEVICE_CUDA ? DeviceType::Cuda : DeviceType::Host,
                   ts[i].device_type == TC_DEVICE_CUDA ? ts[i].device_id : 0};
    if (ts[i].strides)
      view.strides.assign(ts[i].strides, ts[i].strides + ts[i].rank);
    v.push_back(std::move(view));
  }
  return v;
}

tc_status_t nullArgument(const char *what) {
  return makeStatus(TC_STATUS_INVALID_ARGUMENT, std::string(what) + " is null");
}

tc_status_t info(const std::vector<TensorInfo> &list, int32_t index, const char **out_name,
                 tc_element_type_t *out_dtype, int32_t *out_rank) {
  if (index < 0 || index >= int32_t(list.size()))
    return makeStatus(TC_STATUS_INVALID_ARGUMENT, "index " + std::to_string(index) +
                                                      " out of range (" +
                                                      std::to_string(list.size()) + ")");
  if (out_name)
    *out_name = list[index].name.c_str();
  if (out_dtype)
    *out_dtype = tc_element_type_t(list[index].dtype);
  if (out_rank)
    *out_rank = int32_t(list[index].shape.size());
  return nullptr;
}

} // namespace

extern "C" {

tc_status_code_t tc_status_code(tc_status_t s) { return s ? s->code : TC_STATUS_OK; }
const char *tc_status_message(tc_status_t s) { return s ? s->message.c_str() : ""; }
void tc_status_free(tc_status_t s) { delete s; }

void tc_runtime_options_initialize(tc_runtime_options_t *o) {
  if (o) {
    o->threads = 0;
    o->kernel_cache_dir = nullptr;
    o->mode = nullptr;
  }
}

tc_status_t tc_runtime_create(const tc_runtime_options_t *options, tc_runtime_t **out_runtime) {
  if (!out_runtime)
    return nullArgument("out_runtime");
  *out_runtime = nullptr;
  return guard(TC_STATUS_INTERNAL, [&] {
    auto *r = new tc_runtime_s;
    tc_runtime_options_initialize(&r->options);
    if (options) {
      r->options = *options;
      r->kernelCacheDir = options->kernel_cache_dir ? options->kernel_cache_dir : "";
      r->mode = options->mode ? options->mode : "";
      r->options.kernel_cache_dir = nullptr; // the copies above are what is used
      r->options.mode = nullptr;
    }
    *out_runtime = r;
  });
}

tc_status_t tc_runtime_set_autotune(tc_runtime_t *runtime, const char *mode, const char *tune_db) {
  if (!runtime)
    return nullArgument("runtime");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] {
    std::string m = mode ? mode : "";
    if (!(m.empty() || m == "default" || m == "max-autotune" || m == "strict" || m == "verify" ||
          m == "verify-delete"))
      throw Error("unknown autotune mode '" + m + "' (default, max-autotune, strict, verify, verify-delete)");
    runtime->autotune = m;
    runtime->tuneDb = tune_db ? tune_db : "";
  });
}

void tc_runtime_retain(tc_runtime_t *r) {
  if (r)
    ++r->refs;
}
void tc_runtime_release(tc_runtime_t *r) {
  if (r && --r->refs == 0)
    delete r;
}

static tc_status_t loadWith(tc_runtime_t *runtime, tc_executable_t **out,
                            const std::function<std::shared_ptr<Executable>(const LoadOptions &)> &load) {
  if (!runtime)
    return nullArgument("runtime");
  if (!out)
    return nullArgument("out_executable");
  *out = nullptr;
  LoadOptions options;
  options.threads = runtime->options.threads;
  options.kernelCacheDir = runtime->kernelCacheDir;
  options.mode = runtime->mode;
  options.autotune = runtime->autotune;
  options.tuneDb = runtime->tuneDb;
  std::shared_ptr<Executable> exe;
  tc_status_t s = guard(TC_STATUS_INVALID_ARTIFACT, [&] { exe = load(options); });
  if (s)
    return s;
  tc_runtime_retain(runtime);
  *out = new tc_executable_s{{1}, runtime, std::move(exe), {}, {}};
  return nullptr;
}

tc_status_t tc_executable_load(tc_runtime_t *runtime, const char *path, tc_executable_t **out) {
  if (!path)
    return nullArgument("path");
  // stat, not open: opening a FIFO waits for a writer (Executable::load
  // refuses what is not a regular file, naming what it is).
  struct stat st;
  if (::stat(path, &st) != 0)
    return makeStatus(TC_STATUS_NOT_FOUND,
                      std::string(path) + ": cannot open artifact: " + std::strerror(errno));
  return loadWith(runtime, out, [&](const LoadOptions &o) { return Executable::load(path, o); });
}

tc_status_t tc_executable_load_from_memory(tc_runtime_t *runtime, const void *data, size_t size,
                                           tc_executable_t **out) {
  if (!data && size)
    return nullArgument("data");
  std::string bytes(static_cast<const char *>(data), size);
  return loadWith(runtime, out, [&](const LoadOptions &o) {
    return Executable::loadFromMemory(bytes, "<memory>", o);
  });
}

void tc_executable_retain(tc_executable_t *e) {
  if (e)
    ++e->refs;
}
void tc_executable_release(tc_executable_t *e) {
  if (e && --e->refs == 0) {
    tc_runtime_release(e->runtime);
    delete e;
  }
}

int32_t tc_executable_input_count(const tc_executable_t *e) {
  return e ? int32_t(e->exe->inputs().size()) : 0;
}
int32_t tc_executable_output_count(const tc_executable_t *e) {
  return e ? int32_t(e->exe->outputs().size()) : 0;
}
tc_status_t tc_executable_input_info(const tc_executable_t *e, int32_t index, const char **out_name,
                                     tc_element_type_t *out_dtype, int32_t *out_rank) {
  if (!e)
    return nullArgument("executable");
  return info(e->exe->inputs(), index, out_name, out_dtype, out_rank);
}
tc_status_t tc_executable_output_info(const tc_executable_t *e, int32_t index,
                                      const char **out_name, tc_element_type_t *out_dtype,
                                      int32_t *out_rank) {
  if (!e)
    return nullArgument("executable");
  return info(e->exe->outputs(), index, out_name, out_dtype, out_rank);
}

tc_status_t tc_executable_input_dims(const tc_executable_t *e, int32_t index, int64_t *out_dims) {
  if (!e)
    return nullArgument("executable");
  if (!out_dims)
    return nullArgument("out_dims");
  const std::vector<TensorInfo> &in = e->exe->inputs();
  if (index < 0 || index >= int32_t(in.size()))
    return makeStatus(TC_STATUS_INVALID_ARGUMENT, "input index " + std::to_string(index) +
                                                      " out of range (" + std::to_string(in.size()) +
                                                      ")");
  for (size_t d = 0; d < in[index].shape.size(); ++d) {
    const std::string &s = in[index].shape[d];
    bool number = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
    out_dims[d] = number ? std::stoll(s) : -1;
  }
  return nullptr;
}

tc_status_t tc_executable_device(const tc_executable_t *e, int32_t *out_device_type,
                                 int32_t *out_device_id) {
  if (!e)
    return nullArgument("executable");
  Device d = e->exe->device();
  if (out_device_type)
    *out_device_type = d.type == DeviceType::Cuda ? TC_DEVICE_CUDA : TC_DEVICE_HOST;
  if (out_device_id)
    *out_device_id = d.ordinal;
  return nullptr;
}

tc_status_t tc_executable_allocate(tc_executable_t *e, size_t bytes, void **out_data) {
  if (!e)
    return nullArgument("executable");
  if (!out_data)
    return nullArgument("out_data");
  *out_data = nullptr;
  return guard(TC_STATUS_INTERNAL, [&] {
    Tensor t = e->exe->newTensor(ElementType::I1, {int64_t(bytes)});
    std::lock_guard<std::mutex> lock(e->mutex);
    *out_data = t.data();
    e->allocations.emplace(t.data(), std::move(t));
  });
}

void tc_executable_free(tc_executable_t *e, void *data) {
  if (!e || !data)
    return;
  std::lock_guard<std::mutex> lock(e->mutex);
  e->allocations.erase(data);
}

tc_status_t tc_session_create(tc_executable_t *e, tc_session_t **out) {
  if (!e)
    return nullArgument("executable");
  if (!out)
    return nullArgument("out_session");
  *out = nullptr;
  return guard(TC_STATUS_INTERNAL, [&] {
    *out = new tc_session_s{e, Session(e->exe), {}};
    (*out)->stateNames = (*out)->session.stateNames();
    tc_executable_retain(e);
  });
}

void tc_session_release(tc_session_t *s) {
  if (!s)
    return;
  tc_executable_t *e = s->executable;
  delete s;
  tc_executable_release(e);
}

tc_status_t tc_session_output_shape(tc_session_t *s, const tc_tensor_t *inputs, int32_t input_count,
                                    int32_t index, int64_t *out_shape) {
  if (!s)
    return nullArgument("session");
  if (!out_shape)
    return nullArgument("out_shape");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] {
    std::vector<std::vector<int64_t>> shapes = s->session.outputShapes(views(inputs, input_count));
    if (index < 0 || index >= int32_t(shapes.size()))
      throw Error("output index " + std::to_string(index) + " out of range");
    std::copy(shapes[index].begin(), shapes[index].end(), out_shape);
  });
}

tc_status_t tc_session_run(tc_session_t *s, const tc_tensor_t *outputs, int32_t output_count,
                           const tc_tensor_t *inputs, int32_t input_count) {
  if (!s)
    return nullArgument("session");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] {
    s->session.run(views(inputs, input_count), views(outputs, output_count));
  });
}

tc_status_t tc_session_enqueue(tc_session_t *s, const tc_tensor_t *outputs, int32_t output_count,
                               const tc_tensor_t *inputs, int32_t input_count) {
  if (!s)
    return nullArgument("session");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] {
    s->session.enqueue(views(inputs, input_count), views(outputs, output_count));
  });
}

tc_status_t tc_session_synchronize(tc_session_t *s) {
  if (!s)
    return nullArgument("session");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] { s->session.synchronize(); });
}

tc_status_t tc_session_set_stream(tc_session_t *s, void *stream) {
  if (!s)
    return nullArgument("session");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] { s->session.setStream(stream); });
}

tc_status_t tc_session_set_cuda_graphs(tc_session_t *s, int32_t on) {
  if (!s)
    return nullArgument("session");
  using tensorc::runtime::CudaGraphs;
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] {
    s->session.setCudaGraphs(on == TC_CUDA_GRAPHS_OFF        ? CudaGraphs::Off
                             : on == TC_CUDA_GRAPHS_REPEATED ? CudaGraphs::Repeated
                                                             : CudaGraphs::Always);
  });
}

tc_status_t tc_session_use_own_stream(tc_session_t *s) {
  if (!s)
    return nullArgument("session");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] { s->session.useOwnStream(); });
}

int32_t tc_session_state_count(const tc_session_t *s) { return s ? int32_t(s->stateNames.size()) : 0; }

const char *tc_session_state_name(const tc_session_t *s, int32_t index) {
  if (!s || index < 0 || index >= int32_t(s->stateNames.size()))
    return nullptr;
  return s->stateNames[size_t(index)].c_str();
}

tc_status_t tc_session_set_state(tc_session_t *s, const char *name, const tc_tensor_t *value) {
  if (!s)
    return nullArgument("session");
  if (!name)
    return nullArgument("name");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] { s->session.setState(name, views(value, 1).at(0)); });
}

tc_status_t tc_session_read_state(tc_session_t *s, const char *name, const tc_tensor_t *out) {
  if (!s)
    return nullArgument("session");
  if (!name)
    return nullArgument("name");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] { s->session.readState(name, views(out, 1).at(0)); });
}

tc_status_t tc_session_enqueue_step(tc_session_t *s, const char *const *input_names,
                                    const tc_tensor_t *inputs, int32_t input_count,
                                    const char *const *output_names, const tc_tensor_t *outputs,
                                    int32_t output_count) {
  if (!s)
    return nullArgument("session");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] {
    auto named = [](const char *const *names, const tc_tensor_t *ts, int32_t n) {
      std::vector<TensorView> v = views(ts, n);
      if (n > 0 && !names)
        throw Error("tensor names are null");
      std::map<std::string, TensorView> m;
      for (int32_t i = 0; i < n; ++i) {
        if (!names[i])
          throw Error("tensor " + std::to_string(i) + ": null name");
        if (!m.emplace(names[i], v[size_t(i)]).second)
          throw Error(std::string("tensor '") + names[i] + "' given twice");
      }
      return m;
    };
    s->session.enqueueStep(named(input_names, inputs, input_count),
                           named(output_names, outputs, output_count));
  });
}

tc_status_t tc_weights_open(const char *path, tc_weights_t **out) {
  if (!out)
    return nullArgument("out_weights");
  *out = nullptr;
  if (!path)
    return nullArgument("path");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] {
    auto w = std::make_unique<tc_weights_s>();
    w->weights = Weights::open(path);
    for (const TensorInfo &t : w->weights->tensors())
      w->shapes.push_back(w->weights->view(t.name).shape);
    *out = w.release();
  });
}

void tc_weights_release(tc_weights_t *w) { delete w; }

int32_t tc_weights_count(const tc_weights_t *w) { return w ? int32_t(w->shapes.size()) : 0; }

tc_status_t tc_weights_tensor(const tc_weights_t *w, int32_t index, const char **out_name,
                              tc_tensor_t *out_tensor) {
  if (!w)
    return nullArgument("weights");
  if (index < 0 || index >= int32_t(w->shapes.size()))
    return makeStatus(TC_STATUS_INVALID_ARGUMENT, "weights: no tensor " + std::to_string(index));
  const TensorInfo &t = w->weights->tensors()[size_t(index)];
  if (out_name)
    *out_name = t.name.c_str();
  if (out_tensor) {
    TensorView v = w->weights->view(t.name);
    const std::vector<int64_t> &shape = w->shapes[size_t(index)];
    *out_tensor = tc_tensor_t{tc_element_type_t(int(v.dtype)), int32_t(shape.size()), shape.data(), v.data,
                              TC_DEVICE_HOST, 0, nullptr, 0};
  }
  return nullptr;
}

tc_status_t tc_session_bind_input(tc_session_t *s, const char *name, const tc_tensor_t *value) {
  if (!s)
    return nullArgument("session");
  if (!name)
    return nullArgument("name");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] { s->session.bindInput(name, views(value, 1).at(0)); });
}

tc_status_t tc_session_bind_weights(tc_session_t *s, const tc_weights_t *w, int32_t *out_bound) {
  if (out_bound)
    *out_bound = 0;
  if (!s)
    return nullArgument("session");
  if (!w)
    return nullArgument("weights");
  return guard(TC_STATUS_INVALID_ARGUMENT, [&] {
    size_t n = s->session.bindWeights(*w->weights).size();
    if (out_bound)
      *out_bound = int32_t(n);
  });
}

int64_t tc_session_arena_bytes(const tc_session_t *s) { return s ? s->session.arenaBytes() : 0; }

double tc_session_last_device_ms(const tc_session_t *s) { return s ? s->session.lastDeviceMs() : -1; }

} // extern "C"
