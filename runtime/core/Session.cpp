// Running an executable, the same on every device: bind the symbolic sizes
// from the inputs' shapes, plan the arena (cached per binding), give every
// value its address (a tensor on the executable's device is used in place;
// a host tensor of a device executable is staged through session memory),
// let the backend queue the steps, copy host outputs back, and raise the
// artifact's run-time checks once the run is done.
#include "tensorc/Runtime.h"

#include "ir/core/Error.h"
#include "ir/core/MemoryPlanner.h"
#include "runtime/core/ExecutableImpl.h"

#include <algorithm>
#include <array>
#include <optional>

namespace tensorc::runtime {

using artifact::Storage;

struct Session::State {
  std::unique_ptr<BackendSession> backend;
  // The plan for `bindings`.
  bool planned = false;
  std::map<std::string, int64_t> bindings;
  std::vector<int64_t> symbolValues;        // in the artifact's symbol order
  std::vector<std::vector<int64_t>> shapes; // per value
  std::vector<int64_t> bufferOffsets;
  int64_t arenaBytes = 0;
  // Checks of the last run queued, read by synchronize().
  bool pendingChecks = false;
  // The last run's tensors and every value's address: a loop that runs on
  // the same tensors skips binding, checking and resolving (only host
  // tensors are copied again).
  std::vector<TensorView> lastInputs, lastOutputs;
  std::vector<Address> in, out, values, flags;
  Address arena = 0;
  bool resolved = false;
  // Resident state: two buffers per state input, `current` the one read.
  std::map<std::string, std::array<std::optional<Tensor>, 2>> state;
  int current = 0;
  std::map<std::string, Tensor> scratch; // outputs enqueueStep was not given
  std::map<std::string, Tensor> bound;   // bound inputs (bindInput)
};

Session::Session(std::shared_ptr<const Executable> executable)
    : executable_(std::move(executable)), state_(std::make_unique<State>()) {
  if (!executable_)
    throw Error("Session: no executable");
  rethrow([&] {
    state_->backend = executable_->impl().backend->newSession();
    if (executable_->impl().mode == "reduce-overhead")
      state_->backend->setGraphs(CudaGraphs::Always);
  });
}
Session::~Session() = default;
Session::Session(Session &&) noexcept = default;
Session &Session::operator=(Session &&) noexcept = default;

const std::map<std::string, int64_t> &Session::bindings() const { return state_->bindings; }
int64_t Session::arenaBytes() const { return state_->arenaBytes; }
double Session::lastDeviceMs() const { return state_->backend->lastDeviceMs(); }

namespace {

std::string dimsStr(const std::vector<int64_t> &s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

size_t bytesOf(DType dtype, const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n = checkedMul(n, d, "tensor size");
  return size_t(n) * dtypeSize(dtype);
}

// A tensor's device and layout against what the executable can use.
void checkPlacement(const Executable::Impl &x, const TensorView &v, const std::string &what) {
  Device mine = x.backend->device();
  check(v.device.type == DeviceType::Host || v.device.type == DeviceType::Cuda,
        what + ": unknown device type " + std::to_string(int(v.device.type)));
  check(v.device == mine || v.device.type == DeviceType::Host,
        what + ": is on " + deviceName(v.device) + ", but " + x.where + " runs on " +
            deviceName(mine) + " (pass host memory or memory of " + deviceName(mine) + ")");
  if (!v.strides.empty()) {
    check(v.strides.size() == v.shape.size(),
          what + ": " + std::to_string(v.strides.size()) + " strides for rank " +
              std::to_string(v.shape.size()));
    int64_t expect = 1;
    for (size_t k = v.shape.size(); k-- > 0;) {
      check(v.shape[k] == 1 || v.strides[k] == expect,
            what + ": not contiguous (shape " + dimsStr(v.shape) + ", strides " +
                dimsStr(v.strides) + "); the runtime takes row-major contiguous tensors: copy it first "
                "(torch: .contiguous())");
      expect *= std::max<int64_t>(v.shape[k], 1);
    }
  }
  if (v.device != Device{} && v.data && !x.backend->isDeviceMemory(v.data))
    fail(what + ": the pointer is not memory of " + deviceName(v.device) +
         " (a host pointer passed as a device one?)");
}

// Binds every symbol from the inputs' shapes and checks them; returns the
// bindings. Throws Error naming the input.
std::map<std::string, int64_t> bindInputs(const Executable::Impl &x,
                                          const std::vector<TensorView> &inputs) {
  const artifact::Artifact &a = x.art;
  const std::string &fn = x.where;
  check(inputs.size() == a.inputs.size(), fn + ": expected " + std::to_string(a.inputs.size()) +
                                              " inputs, got " + std::to_string(inputs.size()));
  std::map<std::string, int64_t> b;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const artifact::TensorDecl &d = a.inputs[i];
    const TensorView &v = inputs[i];
    std::string what = fn + ": input '" + d.name + "'";
    check(toDType(v.dtype) == d.dtype, what + ": expected " + std::string(dtypeName(d.dtype)) +
                                           ", got " + elementTypeName(v.dtype));
    check(v.shape.size() == d.shape.size(),
          what + ": expected rank " + std::to_string(d.shape.size()) + " " + shapeStr(d.shape) +
              ", got shape " + dimsStr(v.shape));
    for (size_t k = 0; k < d.shape.size(); ++k) {
      check(v.shape[k] >= 0, what + ": negative size in shape " + dimsStr(v.shape));
      const Dim &dim = d.shape[k];
      if (dim.isStatic())
        check(dim.value() == v.shape[k], what + ": expected shape " + shapeStr(d.shape) +
                                             ", got " + dimsStr(v.shape));
      else if (dim.isPlainSymbol()) {
        auto [it, fresh] = b.emplace(dim.symbols()[0], v.shape[k]);
        check(fresh || it->second == v.shape[k],
              what + ": dim " + std::to_string(k) + " binds " + dim.str() + " = " +
                  std::to_string(v.shape[k]) + ", but an earlier input bound " + dim.str() +
                  " = " + std::to_string(it->second));
      }
    }
  }
  for (const artifact::SymbolDecl &s : a.symbols) {
    auto it = b.find(s.name);
    check(it != b.end(), fn + ": symbol " + s.name + " appears in no input as a plain dim, so " +
                             "its size cannot be bound");
    check(it->second >= s.min && (!s.max || it->second <= *s.max),
          fn + ": " + s.name + " = " + std::to_string(it->second) + " is outside its bounds [" +
              std::to_string(s.min) + ", " + (s.max ? std::to_string(*s.max) : "inf") + "]");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const artifact::TensorDecl &d = a.inputs[i];
    for (size_t k = 0; k < d.shape.size(); ++k)
      check(*d.shape[k].evaluate(b) == inputs[i].shape[k],
            fn + ": input '" + d.name + "': expected shape " + shapeStr(d.shape) + " with " +
                "the bound sizes, got " + dimsStr(inputs[i].shape));
    std::string what = fn + ": input '" + d.name + "'";
    check(bytesOf(d.dtype, inputs[i].shape) == 0 || inputs[i].data != nullptr, what + ": null data");
    checkPlacement(x, inputs[i], what);
  }
  return b;
}

std::vector<int64_t> concrete(const Shape &s, const std::map<std::string, int64_t> &b) {
  std::vector<int64_t> r;
  for (const Dim &d : s)
    r.push_back(*d.evaluate(b));
  return r;
}

void checkOutputs(const Executable::Impl &x, const std::map<std::string, int64_t> &b,
                  const std::vector<TensorView> &outputs) {
  const std::string &fn = x.where;
  check(outputs.size() == x.art.outputs.size(), fn + ": expected " +
                                                    std::to_string(x.art.outputs.size()) +
                                                    " outputs, got " + std::to_string(outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const artifact::TensorDecl &d = x.art.outputs[i];
    std::vector<int64_t> want = concrete(d.shape, b);
    std::string what = fn + ": output '" + d.name + "'";
    check(toDType(outputs[i].dtype) == d.dtype, what + ": expected " +
                                                    std::string(dtypeName(d.dtype)) + ", got " +
                                                    elementTypeName(outputs[i].dtype));
    check(outputs[i].shape == want,
          what + ": expected shape " + dimsStr(want) + ", got " + dimsStr(outputs[i].shape));
    check(bytesOf(d.dtype, want) == 0 || outputs[i].data != nullptr, what + ": null data");
    checkPlacement(x, outputs[i], what);
  }
}

// Shapes of every value and the arena layout for these bindings.
void plan(const Executable::Impl &x, Session::State &st, const std::map<std::string, int64_t> &b) {
  if (st.planned && st.bindings == b)
    return;
  const artifact::Artifact &a = x.art;
  st.bindings = b;
  st.symbolValues.clear();
  for (const artifact::SymbolDecl &s : a.symbols)
    st.symbolValues.push_back(b.at(s.name));
  st.shapes.clear();
  for (const artifact::ValueDecl &v : a.values)
    st.shapes.push_back(concrete(v.shape, b));
  std::vector<BufferRequest> requests;
  for (const artifact::BufferDecl &bd : a.buffers)
    requests.push_back({*bd.bytes.evaluate(b), bd.first, bd.last, -1});
  MemoryPlan p = planMemory(requests, int64_t(x.backend->arenaAlignment()));
  st.bufferOffsets = p.offsets;
  st.arenaBytes = p.arenaBytes;
  st.planned = true;
}

} // namespace

std::vector<std::vector<int64_t>> Session::outputShapes(const std::vector<TensorView> &inputs) {
  return rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    std::map<std::string, int64_t> b = bindInputs(x, inputs);
    std::vector<std::vector<int64_t>> r;
    for (const artifact::TensorDecl &o : x.art.outputs)
      r.push_back(concrete(o.shape, b));
    return r;
  });
}

namespace {

// Equal but for the data pointers.
bool sameLayouts(const std::vector<TensorView> &a, const std::vector<TensorView> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype != b[i].dtype || a[i].device != b[i].device || a[i].shape != b[i].shape ||
        a[i].strides != b[i].strides)
      return false;
  return true;
}

bool sameTensors(const std::vector<TensorView> &a, const std::vector<TensorView> &b) {
  if (!sameLayouts(a, b))
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].data != b[i].data)
      return false;
  return true;
}

} // namespace

void Session::enqueue(const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs) {
  rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    const artifact::Artifact &a = x.art;
    State &st = *state_;
    BackendSession &dev = *st.backend;
    bool onDevice = x.backend->device() != Device{};
    // A tensor on the executable's device is used in place; a host tensor
    // of a device executable goes through staging memory.
    auto place = [&](const TensorView &v, size_t slot, DType dtype) -> Address {
      if (!onDevice || v.device != Device{})
        return Address(v.data);
      return dev.staging(slot, bytesOf(dtype, v.shape));
    };
    // Every value's address from the inputs', outputs' and the arena's.
    auto resolveValues = [&] {
      st.values.assign(a.values.size(), 0);
      for (size_t v = 0; v < a.values.size(); ++v) {
        const Storage &s = a.values[v].storage;
        switch (s.kind) {
        case Storage::Kind::Input:
          st.values[v] = st.in[size_t(s.index)];
          break;
        case Storage::Kind::Output:
          st.values[v] = st.out[size_t(s.index)];
          break;
        case Storage::Kind::Buffer:
          st.values[v] = st.arena + Address(st.bufferOffsets[size_t(s.index)]);
          break;
        case Storage::Kind::Constant:
          st.values[v] = x.backend->constants() + Address(a.constants[size_t(s.index)].offset);
          break;
        case Storage::Kind::Alias:
          st.values[v] = st.values[size_t(s.index)];
          break;
        }
      }
      st.flags.clear();
      for (const artifact::RunCheck &c : a.checks)
        st.flags.push_back(st.values[size_t(c.value)]);
    };
    if (st.resolved && sameLayouts(inputs, st.lastInputs) && sameLayouts(outputs, st.lastOutputs)) {
      // Only addresses changed (PyTorch's fresh outputs each call): the
      // bindings, checks of shapes and the plan stand; new pointers are
      // checked and placed.
      if (!sameTensors(inputs, st.lastInputs) || !sameTensors(outputs, st.lastOutputs)) {
        auto rebind = [&](const std::vector<TensorView> &now, std::vector<TensorView> &last,
                          const std::vector<artifact::TensorDecl> &decls, std::vector<Address> &placed,
                          size_t firstSlot, const char *kind) {
          for (size_t i = 0; i < now.size(); ++i) {
            if (now[i].data == last[i].data)
              continue;
            std::string what = x.where + ": " + kind + " '" + decls[i].name + "'";
            check(bytesOf(decls[i].dtype, now[i].shape) == 0 || now[i].data != nullptr, what + ": null data");
            checkPlacement(x, now[i], what);
            placed[i] = place(now[i], firstSlot + i, decls[i].dtype);
            last[i].data = now[i].data;
          }
        };
        st.resolved = false; // until every new pointer passed its checks
        rebind(inputs, st.lastInputs, a.inputs, st.in, 0, "input");
        rebind(outputs, st.lastOutputs, a.outputs, st.out, inputs.size(), "output");
        resolveValues();
        st.resolved = true;
      }
    } else {
      st.resolved = false;
      std::map<std::string, int64_t> b = bindInputs(x, inputs);
      checkOutputs(x, b, outputs);
      plan(x, st, b);
      st.arena = dev.arena(size_t(st.arenaBytes));
      st.in.clear();
      st.out.clear();
      for (size_t i = 0; i < inputs.size(); ++i)
        st.in.push_back(place(inputs[i], i, a.inputs[i].dtype));
      for (size_t i = 0; i < outputs.size(); ++i)
        st.out.push_back(place(outputs[i], inputs.size() + i, a.outputs[i].dtype));
      resolveValues();
      st.lastInputs = inputs;
      st.lastOutputs = outputs;
      st.resolved = true;
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      if (st.in[i] != Address(inputs[i].data))
        dev.copyIn(st.in[i], inputs[i].data, bytesOf(a.inputs[i].dtype, inputs[i].shape));
    dev.execute(a, RunFrame{st.symbolValues, st.bindings, st.shapes, st.values});
    for (size_t i = 0; i < outputs.size(); ++i)
      if (st.out[i] != Address(outputs[i].data))
        dev.copyOut(outputs[i].data, st.out[i], bytesOf(a.outputs[i].dtype, outputs[i].shape));
    if (!st.flags.empty())
      dev.readFlags(st.flags);
    st.pendingChecks = !st.flags.empty();
  });
}

std::vector<std::string> Session::stateNames() const {
  std::vector<std::string> names;
  const Executable::Impl &x = executable_->impl();
  for (const artifact::TensorDecl &in : x.art.inputs)
    for (const artifact::TensorDecl &out : x.art.outputs)
      if (out.name == in.name + ".next" && out.dtype == in.dtype && out.shape == in.shape)
        names.push_back(in.name);
  return names;
}

namespace {

const artifact::TensorDecl &declaredInput(const Executable::Impl &x, const std::string &name) {
  for (const artifact::TensorDecl &in : x.art.inputs)
    if (in.name == name)
      return in;
  fail(x.where + ": no input named '" + name + "'");
}

// Copies between a caller's tensor and session memory, either direction.
void transfer(BackendSession &dev, Device mine, const TensorView &caller, Address session,
              size_t bytes, bool in) {
  bool sameDevice = caller.device == mine;
  if (mine == Device{} || sameDevice)
    in ? dev.copyWithin(session, Address(caller.data), bytes)
       : dev.copyWithin(Address(caller.data), session, bytes);
  else
    in ? dev.copyIn(session, caller.data, bytes) : dev.copyOut(caller.data, session, bytes);
}

} // namespace

void Session::setState(const std::string &name, const TensorView &value) {
  rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    std::vector<std::string> names = stateNames();
    check(std::find(names.begin(), names.end(), name) != names.end(),
          x.where + ": '" + name + "' is not state (an input the artifact also returns as '" +
              name + ".next')");
    const artifact::TensorDecl &d = declaredInput(x, name);
    std::string what = x.where + ": state '" + name + "'";
    check(toDType(value.dtype) == d.dtype,
          what + ": expected " + std::string(dtypeName(d.dtype)) + ", got " + elementTypeName(value.dtype));
    check(d.shape.size() == value.shape.size(), what + ": expected shape " + shapeStr(d.shape));
    for (size_t k = 0; k < d.shape.size(); ++k)
      check(d.shape[k].isStatic() && d.shape[k].value() == value.shape[k],
            what + ": expected shape " + shapeStr(d.shape) + ", got " + dimsStr(value.shape) +
                " (state has static sizes)");
    checkPlacement(x, value, what);
    State &st = *state_;
    auto &slots = st.state[name];
    for (std::optional<Tensor> &t : slots)
      if (!t)
        t = executable_->newTensor(value.dtype, value.shape);
    size_t bytes = bytesOf(d.dtype, value.shape);
    check(bytes == 0 || value.data, what + ": null data");
    transfer(*st.backend, x.backend->device(), value, Address(slots[size_t(st.current)]->data()),
             bytes, true);
    st.resolved = false;
  });
}

void Session::readState(const std::string &name, const TensorView &out) {
  rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    State &st = *state_;
    auto it = st.state.find(name);
    check(it != st.state.end(), x.where + ": no state '" + name + "' has been set");
    Tensor &t = *it->second[size_t(st.current)];
    std::string what = x.where + ": readState '" + name + "'";
    check(out.dtype == t.dtype() && out.shape == t.shape(),
          what + ": expected " + std::string(elementTypeName(t.dtype())) + " " + dimsStr(t.shape()));
    checkPlacement(x, out, what);
    transfer(*st.backend, x.backend->device(), out, Address(t.data()), t.nbytes(), false);
    st.backend->synchronize();
  });
}

void Session::bindInput(const std::string &name, const TensorView &value) {
  std::vector<std::string> states = stateNames();
  if (std::find(states.begin(), states.end(), name) != states.end())
    return setState(name, value);
  rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    const artifact::TensorDecl &d = declaredInput(x, name);
    std::string what = x.where + ": bound input '" + name + "'";
    check(toDType(value.dtype) == d.dtype,
          what + ": expected " + std::string(dtypeName(d.dtype)) + ", got " + elementTypeName(value.dtype));
    bool fits = d.shape.size() == value.shape.size();
    for (size_t k = 0; fits && k < d.shape.size(); ++k)
      fits = value.shape[k] >= 0 && (!d.shape[k].isStatic() || d.shape[k].value() == value.shape[k]);
    check(fits, what + ": expected shape " + shapeStr(d.shape) + ", got " + dimsStr(value.shape));
    checkPlacement(x, value, what);
    State &st = *state_;
    Tensor t = executable_->newTensor(value.dtype, value.shape);
    check(t.nbytes() == 0 || value.data, what + ": null data");
    transfer(*st.backend, x.backend->device(), value, Address(t.data()), t.nbytes(), true);
    st.bound.insert_or_assign(name, std::move(t));
    st.resolved = false;
  });
}

std::vector<std::string> Session::bindWeights(const Weights &weights) {
  std::vector<std::string> names;
  for (const TensorInfo &in : executable_->inputs())
    if (weights.contains(in.name)) {
      bindInput(in.name, weights.view(in.name));
      names.push_back(in.name);
    }
  return names;
}

std::vector<std::string> Session::boundInputNames() const {
  std::vector<std::string> names;
  for (const auto &[name, t] : state_->bound)
    names.push_back(name);
  return names;
}

void Session::enqueueStep(const std::map<std::string, TensorView> &inputs,
                          const std::map<std::string, TensorView> &outputs) {
  std::vector<TensorView> in, out;
  rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    State &st = *state_;
    size_t cur = size_t(st.current), next = 1 - cur;
    for (const auto &[name, v] : inputs)
      check(!st.state.count(name), x.where + ": input '" + name + "' is state: set it with setState");
    for (const artifact::TensorDecl &d : x.art.inputs) {
      if (auto s = st.state.find(d.name); s != st.state.end()) {
        in.push_back(s->second[cur]->view());
        continue;
      }
      auto given = inputs.find(d.name);
      if (given == inputs.end()) {
        auto b = st.bound.find(d.name);
        check(b != st.bound.end(), x.where + ": input '" + d.name + "' is neither given, bound nor state");
        in.push_back(b->second.view());
        continue;
      }
      in.push_back(given->second);
    }
    for (const auto &[name, v] : inputs)
      check(std::any_of(x.art.inputs.begin(), x.art.inputs.end(),
                        [&](const artifact::TensorDecl &d) { return d.name == name; }),
            x.where + ": no input named '" + name + "'");
    std::vector<std::vector<int64_t>> shapes = outputShapes(in);
    for (size_t i = 0; i < x.art.outputs.size(); ++i) {
      const std::string &name = x.art.outputs[i].name;
      std::string base = name.size() > 5 && name.compare(name.size() - 5, 5, ".next") == 0
                             ? name.substr(0, name.size() - 5)
                             : "";
      if (auto s = st.state.find(base); !base.empty() && s != st.state.end()) {
        out.push_back(s->second[next]->view());
        continue;
      }
      if (auto given = outputs.find(name); given != outputs.end()) {
        out.push_back(given->second);
        continue;
      }
      auto sc = st.scratch.find(name);
      if (sc == st.scratch.end() || sc->second.shape() != shapes[i])
        sc = st.scratch.insert_or_assign(name, executable_->newTensor(executable_->outputs()[i].dtype, shapes[i])).first;
      out.push_back(sc->second.view());
    }
    for (const auto &[name, v] : outputs)
      check(std::any_of(x.art.outputs.begin(), x.art.outputs.end(),
                        [&](const artifact::TensorDecl &o) { return o.name == name; }),
            x.where + ": no output named '" + name + "'");
  });
  enqueue(in, out);
  state_->current = 1 - state_->current;
}

namespace {

// A message from the artifact as text a terminal shows as it is: control
// bytes (an escape sequence in a node name) as \xNN, at most 1000 bytes.
std::string printable(const std::string &message) {
  std::string out;
  for (unsigned char c : message.substr(0, 1000)) {
    if (c < 0x20 || c == 0x7f) {
      const char *hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return message.size() > 1000 ? out + "..." : out;
}

} // namespace

void Session::synchronize() {
  rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    State &st = *state_;
    st.backend->synchronize();
    if (!st.pendingChecks)
      return;
    st.pendingChecks = false;
    const int32_t *flags = st.backend->flags();
    for (size_t i = 0; i < x.art.checks.size(); ++i)
      check(flags[i] == 0, x.where + ": " + printable(x.art.checks[i].message));
  });
}

void Session::setStream(void *stream) {
  rethrow([&] { state_->backend->setStream(stream, false); });
}

void Session::setCudaGraphs(bool on) { setCudaGraphs(on ? CudaGraphs::Always : CudaGraphs::Off); }

void Session::setCudaGraphs(CudaGraphs mode) {
  rethrow([&] { state_->backend->setGraphs(mode); });
}

void Session::useOwnStream() {
  rethrow([&] { state_->backend->setStream(nullptr, true); });
}

void Session::run(const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs) {
  enqueue(inputs, outputs);
  synchronize();
}

std::vector<Tensor> Session::run(const std::vector<TensorView> &inputs, Device where) {
  std::vector<Tensor> out;
  std::vector<TensorView> views;
  std::vector<std::vector<int64_t>> shapes = outputShapes(inputs);
  rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    check(where == Device{} || where == x.backend->device(),
          x.where + ": outputs can be returned in host memory or on " +
              deviceName(x.backend->device()) + ", not on " + deviceName(where));
    for (size_t i = 0; i < shapes.size(); ++i) {
      ElementType t = executable_->outputs()[i].dtype;
      if (where == Device{})
        out.emplace_back(t, shapes[i]);
      else
        out.push_back(executable_->newTensor(t, shapes[i]));
      views.push_back(out.back().view());
    }
  });
  run(inputs, views);
  return out;
}

} // namespace tensorc::runtime
