// Graph files: parsing, canonical writing, literal typing, analysis.
#include "compiler/graph/GraphAnalysis.h"
#include "compiler/graph/GraphJson.h"
#include "ir/core/Error.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tensorc;

namespace {

const char *kGraph = R"({
  "format": "tensorc.graph", "version": 1, "name": "g",
  "dims": {"B": {"min": 2}},
  "inputs": [{"name": "x", "dtype": "f16", "shape": ["B", 3]},
             {"name": "i", "dtype": "i32", "shape": [3]}],
  "nodes": [
    {"name": "y", "op": "mul", "args": ["x", 2]},
    {"name": "j", "op": "add", "args": ["i", 1]},
    {"name": "c", "op": "gt", "args": [0.5, "x"]},
    {"name": "p", "op": "split", "args": ["y"], "attrs": {"sizes": [1, 2], "axis": -1}},
    {"name": "z", "op": "add", "args": [{"literal": 1, "dtype": "f64"}, {"literal": 2.5, "dtype": "f64"}]},
    {"name": "w", "op": "add", "args": [1.5, 2.5]}
  ],
  "outputs": ["p:1", "j", "c", "z"]
})";

TEST(GraphJson, ParsesEveryField) {
  Graph g = parseGraphJson(kGraph, "g.json");
  EXPECT_EQ(g.name, "g");
  EXPECT_EQ(g.dims.at("B").min, 2);
  EXPECT_FALSE(g.dims.at("B").max.has_value());
  ASSERT_EQ(g.nodes.size(), 6u);
  EXPECT_EQ(g.nodes[0].args[1].kind, Arg::Kind::Literal);
  EXPECT_EQ(g.nodes[0].args[1].literal.kind, Literal::Kind::Int);
  EXPECT_EQ(std::get<int64_t>(g.nodes[3].attrs.at("axis")), -1);
}

TEST(GraphAnalysis, LiteralsTakeTheDTypeOfTheirTensorArguments) {
  Graph g = parseGraphJson(kGraph, "g.json");
  GraphAnalysis a = analyzeGraph(g, "g.json");
  EXPECT_EQ(a.nodes[0].argTypes[1]->dtype, DType::F16); // 2 next to an f16 tensor
  EXPECT_EQ(a.nodes[1].argTypes[1]->dtype, DType::I32); // 1 next to an i32 tensor
  EXPECT_EQ(a.nodes[2].argTypes[0]->dtype, DType::F16); // literal first, tensor second
  EXPECT_EQ(a.nodes[4].argTypes[0]->dtype, DType::F64); // explicit
  EXPECT_EQ(a.nodes[5].argTypes[1]->dtype, DType::F32); // no tensor: f32 for floats
  ASSERT_EQ(a.outputs.size(), 4u);
  EXPECT_EQ(a.outputs[0].str(), "(B, 2) f16");
  EXPECT_EQ(a.outputs[2].dtype, DType::I1);
}

TEST(GraphJson, WriteParseRoundTrip) {
  Graph g = parseGraphJson(kGraph, "g.json");
  std::string text = writeGraphJson(g);
  Graph back = parseGraphJson(text, "again.json");
  EXPECT_EQ(writeGraphJson(back), text);
  // Attributes equal to their defaults are left out of the canonical form.
  Graph withDefault = parseGraphJson(R"({"format": "tensorc.graph", "version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
      "nodes": [{"name": "s", "op": "sum", "args": ["x"], "attrs": {"keepdim": false}}],
      "outputs": ["s"]})",
                                     "d.json");
  EXPECT_EQ(writeGraphJson(withDefault).find("keepdim"), std::string::npos);
}

TEST(GraphJson, SpecialFloatsRoundTrip) {
  Graph g = parseGraphJson(R"({"format": "tensorc.graph", "version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
      "nodes": [{"name": "c", "op": "clamp", "args": ["x"], "attrs": {"min": "-inf", "max": "inf"}},
                {"name": "n", "op": "add", "args": ["c", {"literal": "nan"}]}],
      "outputs": ["n"]})",
                           "f.json");
  EXPECT_TRUE(std::isinf(std::get<double>(g.nodes[0].attrs.at("min"))));
  EXPECT_TRUE(std::isnan(g.nodes[1].args[1].literal.floatValue));
  std::string text = writeGraphJson(g);
  EXPECT_NE(text.find("\"-inf\""), std::string::npos);
  EXPECT_NE(text.find("\"literal\": \"nan\""), std::string::npos);
  EXPECT_EQ(writeGraphJson(parseGraphJson(text, "again.json")), text);
}

TEST(GraphAnalysis, NodesMayComeInAnyOrder) {
  Graph g = parseGraphJson(R"({"format": "tensorc.graph", "version": 1,
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],
      "nodes": [{"name": "b", "op": "exp", "args": ["a"]}, {"name": "a", "op": "neg", "args": ["x"]}],
      "outputs": ["b"]})",
                           "o.json");
  GraphAnalysis a = analyzeGraph(g, "o.json");
  EXPECT_EQ(a.nodes[0].node->name, "a");
  EXPECT_EQ(a.nodes[1].node->name, "b");
}

TEST(GraphValueRefs, Parse) {
  EXPECT_EQ(parseValueRef("h").producer, "h");
  EXPECT_EQ(parseValueRef("h:2").index, 2);
  EXPECT_EQ(parseValueRef("h:2").producer, "h");
  EXPECT_EQ(parseValueRef("h:x").index, -1);
}

} // namespace
