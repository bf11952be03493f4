// Bad input never crashes: random corruptions of valid graph files either
// load (import + verify) or fail with one tensorc::Error; nothing else
// escapes (no other exception, no crash, no MLIR assertion).
#include "TestUtil.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphAnalysis.h"
#include "compiler/graph/GraphJson.h"
#include "ir/core/Error.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#ifndef TENSORC_SOURCE_DIR
#error "TENSORC_SOURCE_DIR must be defined"
#endif

using namespace tensorc;
using tensorc::testing::freshSeed;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string mutate(std::string text, std::mt19937_64 &rng) {
  static const char *tokens[] = {"-1",      "0",       "9223372036854775807",
                                 "1e308",   "null",    "\"\"",
                                 "[]",      "{}",      "true",
                                 "\"B*B\"", "\"x\"",   "-100",
                                 "3.5",     "\"nan\"", "\"f8\"",
                                 ":",       ","};
  int edits = 1 + int(rng() % 3);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    size_t at = rng() % text.size();
    switch (rng() % 5) {
    case 0:
      text.erase(at, 1 + rng() % 8);
      break; // delete
    case 1:
      text.insert(at, tokens[rng() % std::size(tokens)]);
      break; // insert a token
    case 2:
      text[at] = char(32 + rng() % 95);
      break;  // change a character
    case 3: { // replace a number
      size_t d = text.find_first_of("0123456789", at);
      if (d != std::string::npos)
        text.replace(d, 1, tokens[rng() % 4]);
      break;
    }
    default:
      text = text.substr(0, at);
      break; // truncate
    }
  }
  return text;
}

TEST(GraphFuzz, CorruptedFilesFailCleanly) {
  std::string root = TENSORC_SOURCE_DIR;
  std::vector<std::string> seeds = {readFile(root + "/examples/mlp.json"),
                                    readFile(root + "/examples/transformer_block.json"),
                                    readFile(root + "/test/graph/Inputs/features.json"),
                                    readFile(root + "/test/passes/Inputs/composites.json")};
  uint64_t seed = freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int loaded = 0, rejected = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string text = mutate(seeds[trial % seeds.size()], rng);
    try {
      Graph g = parseGraphJson(text, "fuzz.json");
      GraphAnalysis a = analyzeGraph(g, "fuzz.json");
      mlir::MLIRContext ctx;
      importGraph(ctx, g, a, "fuzz.json");
      ++loaded;
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()).rfind("fuzz.json", 0), 0u)
          << "error does not name the file: " << e.what();
      ++rejected;
    } catch (const std::exception &e) {
      ADD_FAILURE() << "unexpected exception " << e.what() << " for input:\n" << text;
    }
  }
  EXPECT_GT(rejected, 2000);
  EXPECT_GT(loaded, 10); // some mutations (a changed name or value) are still valid graphs
}

} // namespace
