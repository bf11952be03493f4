// The op table in ir/core and the ODS definitions in ir/dialect agree: the
// same ops, and for each the same attribute names.
#include "compiler/interpreter/Interpreter.h"
#include "ir/core/OpSchema.h"
#include "ir/dialect/TCDialect.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>

using namespace tensorc;

TEST(Schema, MatchesTheRegisteredDialect) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<tc::TCDialect>();
  std::set<std::string> registered;
  for (mlir::RegisteredOperationName name : ctx.getRegisteredOperations()) {
    llvm::StringRef s = name.getStringRef();
    if (!s.consume_front("tc.") || s == "mesh" || s == "fused" || s == "yield")
      continue;
    registered.insert(s.str());
    const OpSchema *schema = findOpSchema(s.str());
    ASSERT_NE(schema, nullptr) << "tc." << s.str() << " has no row in OpSchema.cpp";
    std::set<std::string> odsAttrs, tableAttrs;
    for (mlir::StringAttr a : name.getAttributeNames())
      if (a.getValue() != "operandSegmentSizes")
        odsAttrs.insert(a.getValue().str());
    for (const AttrDef &a : schema->attrs)
      tableAttrs.insert(a.name);
    EXPECT_EQ(odsAttrs, tableAttrs) << "attributes of tc." << s.str();
  }
  for (const OpSchema &op : allOpSchemas())
    EXPECT_TRUE(registered.count(op.name)) << op.name << " is in OpSchema.cpp but not in TCOps.td";
  EXPECT_EQ(registered.size(), allOpSchemas().size());
}

TEST(Schema, TheInterpreterSupportsEveryOp) {
  for (const OpSchema &op : allOpSchemas())
    EXPECT_TRUE(interpreterSupports(op.name)) << op.name;
}

#include "compiler/autodiff/GradRules.h"

TEST(Schema, DifferentiableOpsAreExactlyThoseWithGradientRules) {
  for (const OpSchema &op : allOpSchemas())
    EXPECT_EQ(op.differentiable, autodiff::findGradRule(op.name) != nullptr) << op.name;
}
