#include "compiler/op/registry.h"

#include <map>

#include "compiler/arith/check.h"

namespace kiln::op {
namespace {

const std::map<std::string, InferFn, std::less<>>& Registry() {
  static const auto* registry = [] {
    auto* table = new std::map<std::string, InferFn, std::less<>>;
    for (auto family : {ElementwiseOps, TensorOps, NNOps, ReduceOps, ImageOps, ControlOps}) {
      for (OpDef& def : family()) {
        KILN_CHECK(table->emplace(def.name, std::move(def.infer)).second)
            << "op " << def.name << " registered twice";
      }
    }
    return table;
  }();
  return *registry;
}

}  // namespace

bool IsRegistered(std::string_view op) { return Registry().count(op) > 0; }

std::vector<std::string> RegisteredOps() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : Registry()) names.push_back(name);
  return names;
}

absl::StatusOr<ir::StructInfo> InferStructInfo(const ir::ExprNode& call,
                                               const arith::Analyzer& analyzer) {
  auto it = Registry().find(call.name);
  KILN_CHECK(it != Registry().end()) << "unregistered op " << call.name;
  return it->second(call, analyzer);
}

}  // namespace kiln::op
