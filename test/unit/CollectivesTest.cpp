// Collectives: device groups of a mesh, shape inference and its errors, and
// the interpreter's SPMD semantics on hand-computed values (docs/sharding.md).
#include "TestUtil.h"

#include "compiler/graph/GraphJson.h"
#include "compiler/transforms/Decompose.h"
#include "ir/core/Error.h"
#include "ir/core/Mesh.h"
#include "runtime/host/EnvSeconds.h"

#include <random>

using namespace tensorc;
using namespace tensorc::testing;
using trace::Tensor;
using trace::Tracer;

namespace {

const Mesh kMesh{"mesh", {"data", "model"}, {2, 3}};

TEST(Collectives, DeviceGroupsAreRowMajorOverTheListedAxes) {
  // Device d is (data d / 3, model d % 3).
  DeviceGroups model(kMesh, {"model"});
  EXPECT_EQ(model.groupSize(), 3);
  EXPECT_EQ(model.groupOf(4), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(model.rankOf(4), 1);
  DeviceGroups data(kMesh, {"data"});
  EXPECT_EQ(data.groupOf(4), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(data.rankOf(4), 1);
  // Listed model-major: rank = model * 2 + data.
  DeviceGroups both(kMesh, {"model", "data"});
  EXPECT_EQ(both.groupSize(), 6);
  EXPECT_EQ(both.groupOf(0), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(both.rankOf(5), 5);
  EXPECT_EQ(both.rankOf(1), 2);
}

TEST(Collectives, GroupErrorsNameTheAxis) {
  auto message = [](const std::vector<std::string> &axes) {
    try {
      DeviceGroups g(kMesh, axes);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({}).find("axes is empty"), std::string::npos);
  EXPECT_NE(message({"rows"}).find("axis \"rows\" is not an axis of mesh \"mesh\""), std::string::npos);
  EXPECT_NE(message({"data", "data"}).find("appears twice"), std::string::npos);
}

// The message of tracing `build` on a graph with kMesh, or "" if it traced.
std::string traceError(const std::function<void(Tracer &, const Tensor &)> &build) {
  Tracer t("g");
  t.mesh(kMesh.name, kMesh.axes, kMesh.sizes);
  Tensor x = t.input("x", DType::F32, {6, "B"});
  try {
    build(t, x);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TEST(Collectives, ShapeInference) {
  Tracer t("g");
  t.mesh(kMesh.name, kMesh.axes, kMesh.sizes);
  Tensor x = t.input("x", DType::F32, {6, "B"});
  trace::MeshAxes model{"mesh", {"model"}}, both{"mesh", {"data", "model"}};
  EXPECT_EQ(shapeStr(all_reduce(x, both, "mean").shape()), "(6, B)");
  EXPECT_EQ(shapeStr(all_gather(x, model, 1).shape()), "(6, 3*B)");
  EXPECT_EQ(shapeStr(reduce_scatter(x, both, 0).shape()), "(1, B)");
  EXPECT_EQ(shapeStr(all_slice(x, model, -2).shape()), "(2, B)");
  EXPECT_EQ(shapeStr(all_to_all(x, model, 0, 1).shape()), "(2, 3*B)");
  EXPECT_EQ(shapeStr(all_slice(all_gather(x, model, 1), model, 1).shape()), "(6, B)");
  Tensor r = axis_index(t, both);
  EXPECT_EQ(r.spec().str(), "() i64");

  EXPECT_NE(traceError([](Tracer &, const Tensor &x) { all_slice(x, {"mesh", {"model"}}, 1); })
                .find("dim 1 (B) is not divisible by the group size 3 (axes [\"model\"] of mesh \"mesh\")"),
            std::string::npos);
  EXPECT_EQ(traceError([](Tracer &, const Tensor &x) { reduce_scatter(x, {"mesh", {"data", "model"}}, 0); }),
            ""); // 6 / 6 divides
  EXPECT_NE(traceError([](Tracer &, const Tensor &x) { all_gather(x, {"grid", {"model"}}); })
                .find("mesh \"grid\" is not declared; meshes: \"mesh\""),
            std::string::npos);
  EXPECT_NE(traceError([](Tracer &, const Tensor &x) { all_reduce(x, {"mesh", {"rows"}}); })
                .find("axis \"rows\" is not an axis of mesh \"mesh\""),
            std::string::npos);
  EXPECT_NE(traceError([](Tracer &, const Tensor &x) { collective_broadcast(x, {"mesh", {"data"}}, 2); })
                .find("root 2 is not a rank of the group size 2"),
            std::string::npos);
  EXPECT_NE(traceError([](Tracer &, const Tensor &x) {
              all_reduce(cast(x, DType::I64), {"mesh", {"data"}}, "mean");
            }).find("a float dtype is required"),
            std::string::npos);
  EXPECT_NE(traceError([](Tracer &, const Tensor &x) { all_reduce(x, {"mesh", {"data"}}, "avg"); })
                .find("expected one of \"sum\", \"mean\", \"max\", \"min\""),
            std::string::npos);
  EXPECT_NE(traceError([](Tracer &, const Tensor &x) { all_gather(x, {"mesh", {"data"}}, 2); })
                .find("axis 2 is out of range for rank 2"),
            std::string::npos);
}

// Runs `build` on the 6 devices of kMesh; device d's x is xs[d].
std::vector<HostTensor> spmd(const std::vector<HostTensor> &xs,
                             const std::function<Tensor(Tracer &, const Tensor &)> &build) {
  Tracer t("g");
  t.mesh(kMesh.name, kMesh.axes, kMesh.sizes);
  std::vector<std::variant<int64_t, std::string>> shape(xs[0].shape().begin(), xs[0].shape().end());
  Tensor x = t.input("x", xs[0].dtype(), shape);
  t.output(build(t, x));
  GraphAnalysis a = analyzeGraph(t.graph(), "test");
  std::vector<std::map<std::string, HostTensor>> inputs;
  for (const HostTensor &v : xs)
    inputs.push_back({{"x", v}});
  std::vector<HostTensor> outs;
  for (InterpreterResult &r : interpretSpmd(t.graph(), a, inputs))
    outs.push_back(r.outputs.at(0));
  return outs;
}

// Device d holds [10d, 10d + 1, ...] in `shape`.
std::vector<HostTensor> numbered(std::vector<int64_t> shape, DType dtype = DType::F32) {
  std::vector<HostTensor> xs;
  for (int d = 0; d < 6; ++d) {
    HostTensor t(dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      isFloat(dtype) ? t.setF(i, 10.0 * d + double(i)) : t.setI(i, 10 * d + i);
    xs.push_back(t);
  }
  return xs;
}

TEST(Collectives, AllReduce) {
  trace::MeshAxes data{"mesh", {"data"}};
  // Device 4's group over data is {1, 4}.
  auto sum = spmd(numbered({2}), [&](Tracer &, const Tensor &x) { return all_reduce(x, data); });
  expectValues(sum[4], {2}, {50, 52});
  expectValues(sum[1], {2}, {50, 52});
  expectValues(sum[0], {2}, {30, 32}); // {0, 3}
  auto mean = spmd(numbered({2}), [&](Tracer &, const Tensor &x) { return all_reduce(x, data, "mean"); });
  expectValues(mean[5], {2}, {35, 36}); // {2, 5}
  auto max = spmd(numbered({2}, DType::I64),
                  [&](Tracer &, const Tensor &x) { return all_reduce(x, {"mesh", {"model"}}, "max"); });
  expectValues(max[3], {2}, {50, 51}); // {3, 4, 5}
  auto min = spmd(numbered({2}), [&](Tracer &, const Tensor &x) { return all_reduce(x, data, "min"); });
  expectValues(min[4], {2}, {10, 11});
}

TEST(Collectives, GatherScatterSliceAndExchange) {
  trace::MeshAxes model{"mesh", {"model"}};
  auto gathered = spmd(numbered({1, 2}), [&](Tracer &, const Tensor &x) { return all_gather(x, model, 1); });
  expectValues(gathered[4], {1, 6}, {30, 31, 40, 41, 50, 51});
  auto scattered = spmd(numbered({3, 1}),
                        [&](Tracer &, const Tensor &x) { return reduce_scatter(x, model, 0); });
  // Group {3, 4, 5}: sums 120, 123, 126; rank 2 keeps the last.
  expectValues(scattered[5], {1, 1}, {126});
  expectValues(scattered[0], {1, 1}, {30}); // group {0, 1, 2}: 0 + 10 + 20
  auto sliced = spmd(numbered({6}), [&](Tracer &, const Tensor &x) { return all_slice(x, model, 0); });
  expectValues(sliced[4], {2}, {42, 43});
  // all_to_all: rank r receives chunk r (along axis 1) of every member, stacked along axis 0.
  auto exchanged = spmd(numbered({1, 3}),
                        [&](Tracer &, const Tensor &x) { return all_to_all(x, model, 1, 0); });
  expectValues(exchanged[1], {3, 1}, {1, 11, 21});
  auto broadcast = spmd(numbered({2}), [&](Tracer &, const Tensor &x) {
    return collective_broadcast(x, {"mesh", {"model", "data"}}, 3);
  });
  // Rank 3 over (model, data) is model 1, data 1: device 4, for every device.
  for (const HostTensor &b : broadcast)
    expectValues(b, {2}, {40, 41});
  auto ranks = spmd(numbered({1}), [&](Tracer &t, const Tensor &) {
    return axis_index(t, {"mesh", {"model", "data"}});
  });
  for (int d = 0; d < 6; ++d)
    expectValues(ranks[d], {}, {double((d % 3) * 2 + d / 3)});
}

// Identities that must hold for any values: all_gather(all_slice(x)) of a
// replicated x is x, reduce_scatter = all_slice(all_reduce), all_to_all is
// undone by the swapped all_to_all.
TEST(Collectives, Identities) {
  std::mt19937_64 rng(freshSeed());
  std::vector<HostTensor> xs;
  for (int d = 0; d < 6; ++d) {
    HostTensor t(DType::F64, {6, 3});
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setF(i, std::uniform_real_distribution<double>(-1, 1)(rng));
    xs.push_back(t);
  }
  trace::MeshAxes both{"mesh", {"model", "data"}}, model{"mesh", {"model"}};
  auto replicated = spmd(xs, [&](Tracer &, const Tensor &x) { return collective_broadcast(x, both, 0); });
  auto roundTrip = spmd(xs, [&](Tracer &, const Tensor &x) {
    return all_gather(all_slice(collective_broadcast(x, both, 0), both, 0), both, 0);
  });
  auto scatter = spmd(xs, [&](Tracer &, const Tensor &x) { return reduce_scatter(x, both, 0); });
  auto sliceOfSum =
      spmd(xs, [&](Tracer &, const Tensor &x) { return all_slice(all_reduce(x, both), both, 0); });
  auto exchangeBack =
      spmd(xs, [&](Tracer &, const Tensor &x) { return all_to_all(all_to_all(x, model, 0, 1), model, 1, 0); });
  for (int d = 0; d < 6; ++d) {
    for (int64_t i = 0; i < xs[d].numel(); ++i) {
      EXPECT_EQ(roundTrip[d].getF(i), replicated[0].getF(i));
      EXPECT_EQ(exchangeBack[d].getF(i), xs[d].getF(i));
    }
    for (int64_t i = 0; i < scatter[d].numel(); ++i)
      EXPECT_NEAR(scatter[d].getF(i), sliceOfSum[d].getF(i), 1e-15);
  }
}

// The backends' form (compiler/transforms/Decompose.cpp): every collective
// along axis 0 of contiguous chunks, as NCCL and MPI exchange them; the
// rewritten program computes the same on every device.
TEST(Collectives, FlatFormsComputeTheSame) {
  std::mt19937_64 rng(freshSeed());
  std::vector<HostTensor> xs;
  for (int d = 0; d < 6; ++d) {
    HostTensor t(DType::F64, {6, 6, 3});
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setF(i, std::uniform_real_distribution<double>(-1, 1)(rng));
    xs.push_back(t);
  }
  trace::MeshAxes model{"mesh", {"model"}}, both{"mesh", {"model", "data"}};
  std::vector<std::function<Tensor(Tracer &, const Tensor &)>> programs = {
      [&](Tracer &, const Tensor &x) { return all_gather(x, model, 1); },
      [&](Tracer &, const Tensor &x) { return all_gather(x, both, 2); },
      [&](Tracer &, const Tensor &x) { return all_gather(x, model, 0); },
      [&](Tracer &, const Tensor &x) { return reduce_scatter(x, model, 1, "max"); },
      [&](Tracer &, const Tensor &x) { return reduce_scatter(x, both, 0); },
      [&](Tracer &, const Tensor &x) { return reduce_scatter(x, both, -2, "mean"); },
      [&](Tracer &, const Tensor &x) { return all_slice(x, model, 1); },
      [&](Tracer &, const Tensor &x) { return all_slice(x, both, 0); },
      [&](Tracer &, const Tensor &x) { return all_to_all(x, model, 1, 2); },
      [&](Tracer &, const Tensor &x) { return all_to_all(x, model, 0, 1); },
      [&](Tracer &, const Tensor &x) { return all_to_all(x, model, 1, 0); },
      [&](Tracer &, const Tensor &x) { return all_to_all(x, both, 1, 1); },
      [&](Tracer &, const Tensor &x) { return all_to_all(x, model, 0, 0); },
  };
  for (size_t p = 0; p < programs.size(); ++p) {
    SCOPED_TRACE("program " + std::to_string(p));
    Tracer t("g");
    t.mesh(kMesh.name, kMesh.axes, kMesh.sizes);
    Tensor x = t.input("x", DType::F64, {6, 6, 3});
    t.output(programs[p](t, x));
    Graph flat = transforms::decomposeGraph(t.graph(), {"all_gather", "reduce_scatter", "all_slice", "all_to_all"});
    for (const Node &n : flat.nodes)
      for (const char *key : {"axis", "split_axis", "concat_axis"})
        if (hasAttr(n.attrs, key))
          EXPECT_EQ(getInt(n.attrs, key), 0) << n.name << " " << key;
    std::vector<std::map<std::string, HostTensor>> inputs;
    for (const HostTensor &v : xs)
      inputs.push_back({{"x", v}});
    std::vector<InterpreterResult> want = interpretSpmd(t.graph(), analyzeGraph(t.graph(), "g"), inputs);
    std::vector<InterpreterResult> got = interpretSpmd(flat, analyzeGraph(flat, "flat"), inputs);
    for (int d = 0; d < 6; ++d) {
      ASSERT_EQ(got[d].outputs[0].shape(), want[d].outputs[0].shape());
      for (int64_t i = 0; i < want[d].outputs[0].numel(); ++i)
        EXPECT_EQ(got[d].outputs[0].getF(i), want[d].outputs[0].getF(i)) << "device " << d << " [" << i << "]";
    }
  }
}

TEST(Collectives, TheInterpreterRefusesTheWrongDeviceCount) {
  Tracer t("g");
  t.mesh(kMesh.name, kMesh.axes, kMesh.sizes);
  Tensor x = t.input("x", DType::F32, {2});
  t.output(all_reduce(x, {"mesh", {"data"}}).named("s"));
  GraphAnalysis a = analyzeGraph(t.graph(), "test");
  try {
    interpret(t.graph(), a, {{"x", f32({2}, {1, 2})}});
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("node \"s\" (all_reduce): a collective over mesh \"mesh\" (6 devices) "
                                         "in a program run on 1 device"),
              std::string::npos)
        << e.what();
  }
}

TEST(Collectives, GraphFilesRoundTrip) {
  Tracer t("g");
  t.mesh(kMesh.name, kMesh.axes, kMesh.sizes);
  Tensor x = t.input("x", DType::F32, {6, 4});
  t.output(all_to_all(reduce_scatter(x, {"mesh", {"model", "data"}}, 0, "max"), {"mesh", {"data"}}, 1, 0));
  std::string text = writeGraphJson(t.graph());
  EXPECT_NE(text.find("\"reduce_scatter\""), std::string::npos) << text;
  EXPECT_EQ(parseGraphJson(text, "test.json"), t.graph());
}

} // namespace

// Collectives' time limits (TENSORC_NCCL_TIMEOUT, TENSORC_MPI_TIMEOUT):
// unset or empty means none; anything but positive seconds is an error
// naming the variable and the value.
TEST(Collectives, TimeoutsFromTheEnvironment) {
  const char *name = "TENSORC_TEST_TIMEOUT";
  ::unsetenv(name);
  EXPECT_FALSE(secondsFromEnvironment(name, "MPI").has_value());
  ::setenv(name, "", 1);
  EXPECT_FALSE(secondsFromEnvironment(name, "MPI").has_value());
  ::setenv(name, "2.5", 1);
  EXPECT_EQ(secondsFromEnvironment(name, "MPI"), 2.5);
  for (const char *bad : {"0", "-1", "ten", "5s"}) {
    ::setenv(name, bad, 1);
    try {
      secondsFromEnvironment(name, "MPI");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()), std::string("MPI: TENSORC_TEST_TIMEOUT must be a positive number of seconds, not '") +
                                           bad + "'");
    }
  }
  ::unsetenv(name);
}
