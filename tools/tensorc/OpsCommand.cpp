// tensorc ops [--json]: every op of the op set with its arity, attributes,
// differentiability and the engines that support it.
#include "tools/tensorc/Commands.h"

#include "codegen/Program.h"
#include "codegen/cpu/CpuProgram.h"
#include "compiler/interpreter/Interpreter.h"
#include "ir/core/OpSchema.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

namespace tensorc::cli {

static std::string arity(const OpSchema &op) {
  int required = 0, optional = 0;
  for (const OperandDef &o : op.operands) {
    if (o.arity == Arity::Variadic)
      return "1+";
    (o.arity == Arity::One ? required : optional)++;
  }
  return optional ? std::to_string(required) + "-" + std::to_string(required + optional)
                  : std::to_string(required);
}

static std::string attrSummary(const AttrDef &a) {
  std::string s = a.name + ":" + attrKindName(a.kind);
  if (a.required)
    return s + "!";
  if (a.defaultValue)
    return s + "=" + attrStr(*a.defaultValue);
  return s + "?";
}

static std::vector<std::string> engines(const OpSchema &op) {
  std::vector<std::string> e;
  if (interpreterSupports(op.name))
    e.push_back("interp");
  if (codegen::cpu::cpuSupportsOp(op.name))
    e.push_back("cpu");
  // The CUDA backend shares the program builder (codegen/Program.cpp); its
  // GPU parity cases cover every op but the collectives, which run one
  // process per GPU through NCCL (test/gpu/OpCatalog.cpp, docs/sharding.md).
  if (codegen::supportsOp(op.name))
    e.push_back("cuda");
  return e;
}

void addOpsCommand(CLI::App &app) {
  auto *cmd =
      app.add_subcommand("ops", "List every op: arity, attributes, differentiability, engines");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print JSON for machines");
  cmd->callback([json] {
    const std::vector<OpSchema> &ops = allOpSchemas();
    if (*json) {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const OpSchema &op : ops) {
        nlohmann::ordered_json operands = nlohmann::ordered_json::array(),
                               attrs = nlohmann::ordered_json::array();
        for (const OperandDef &o : op.operands)
          operands.push_back({{"name", o.name},
                              {"arity", o.arity == Arity::One        ? "one"
                                        : o.arity == Arity::Optional ? "optional"
                                                                     : "variadic"}});
        for (const AttrDef &a : op.attrs) {
          nlohmann::ordered_json j = {
              {"name", a.name}, {"kind", attrKindName(a.kind)}, {"required", a.required}};
          if (a.defaultValue)
            j["default"] = attrStr(*a.defaultValue);
          if (!a.choices.empty())
            j["choices"] = a.choices;
          attrs.push_back(j);
        }
        out.push_back({{"name", op.name},
                       {"category", op.category},
                       {"operands", operands},
                       {"attributes", attrs},
                       {"results", op.numResults < 0 ? "variadic" : std::to_string(op.numResults)},
                       {"differentiable", op.differentiable},
                       {"engines", engines(op)}});
      }
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::printf("%-30s %-11s %-6s %-5s %-16s %s\n", "op", "category", "arity", "diff", "engines",
                "attributes");
    for (const OpSchema &op : ops) {
      std::string attrs, eng;
      for (const AttrDef &a : op.attrs)
        attrs += (attrs.empty() ? "" : " ") + attrSummary(a);
      for (const std::string &e : engines(op))
        eng += (eng.empty() ? "" : ",") + e;
      std::printf("%-30s %-11s %-6s %-5s %-16s %s\n", op.name.c_str(), op.category.c_str(),
                  arity(op).c_str(), op.differentiable ? "yes" : "no", eng.c_str(), attrs.c_str());
    }
    std::printf("\n%zu ops. Attributes: name:kind, '!' required, '=' default, '?' optional.\n",
                ops.size());
  });
}

} // namespace tensorc::cli
