// Imports an ONNX model (a tests/support/onnx_builder.h one, or its bytes) and runs it on the
// reference interpreter; reads the struct info import gave its values.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/onnx_builder.h"

namespace kiln::testing {

inline absl::StatusOr<std::vector<ir::NDArray>> ImportAndRun(
    const std::string& model, const std::vector<ir::NDArray>& inputs) {
  auto module = driver::ImportModel(model);
  if (!module.ok()) return module.status();
  return interp::Run(*module, inputs);
}

inline absl::StatusOr<std::vector<ir::NDArray>> ImportAndRun(
    const OnnxBuilder& b, const std::vector<ir::NDArray>& inputs) {
  return ImportAndRun(b.Serialize(), inputs);
}

// The struct info of each output of `main`, printed.
inline std::vector<std::string> OutputInfos(const ir::IRModule& m) {
  const ir::StructInfo& info = m.functions.at("main").result->struct_info;
  if (info.kind != ir::StructInfo::Kind::kTuple) return {ir::ToString(info)};
  std::vector<std::string> out;
  for (const ir::StructInfo& field : info.fields) out.push_back(ir::ToString(field));
  return out;
}

// The struct info of the value bound to `name` (an ONNX output name) in main, as text.
inline std::string InfoOf(const ir::IRModule& m, const std::string& name) {
  for (const auto& block : m.functions.at("main").blocks) {
    for (const auto& binding : block.bindings) {
      if (binding.var->name == name) return ir::ToString(binding.var->struct_info);
    }
  }
  return "<no binding " + name + ">";
}

}  // namespace kiln::testing
