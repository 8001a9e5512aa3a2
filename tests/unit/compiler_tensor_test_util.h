// Shared helpers of the tensor family's tests: tensors from values, import and run.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/onnx_builder.h"

namespace kiln::tensor_test {

using testing::OnnxBuilder;

inline ir::NDArray F32(std::vector<int64_t> shape, const std::vector<float>& values) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) a.data<float>()[i] = values[i];
  return a;
}

inline ir::NDArray I64(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Int(64), std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) a.data<int64_t>()[i] = values[i];
  return a;
}

// 0, 1, 2, ... in a tensor of `shape`.
inline ir::NDArray Iota(std::vector<int64_t> shape) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(shape));
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = static_cast<float>(i);
  return a;
}

inline std::vector<double> Values(const ir::NDArray& a) {
  std::vector<double> out;
  for (int64_t i = 0; i < a.num_elements(); ++i) out.push_back(a.GetDouble(i));
  return out;
}

inline void StringAttr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// Imports the model and runs it on the reference interpreter.
inline absl::StatusOr<std::vector<ir::NDArray>> ImportAndRun(
    const OnnxBuilder& b, const std::vector<ir::NDArray>& inputs) {
  auto module = driver::ImportModel(b.Serialize());
  if (!module.ok()) return module.status();
  return interp::Run(*module, inputs);
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

}  // namespace kiln::tensor_test
