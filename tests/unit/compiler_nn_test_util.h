// Shared helpers of the nn family's tests: typed tensors from values, typed initializers,
// import and run on the reference interpreter.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/onnx_builder.h"

namespace kiln::nn_test {

using testing::OnnxBuilder;

// A tensor of `dtype` holding `values` (converted from double).
inline ir::NDArray Array(arith::DataType dtype, std::vector<int64_t> shape,
                         const std::vector<double>& values) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, std::move(shape));
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(a.num_elements()); ++i) {
    a.SetDouble(i, values[i]);
  }
  return a;
}

inline ir::NDArray F32(std::vector<int64_t> shape, const std::vector<double>& values) {
  return Array(arith::DataType::Float(32), std::move(shape), values);
}

// 0, 1, 2, ... as float32.
inline ir::NDArray Iota(std::vector<int64_t> shape) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(shape));
  for (int64_t i = 0; i < a.num_elements(); ++i) a.SetDouble(i, static_cast<double>(i));
  return a;
}

inline std::vector<double> Values(const ir::NDArray& a) {
  std::vector<double> out;
  for (int64_t i = 0; i < a.num_elements(); ++i) out.push_back(a.GetDouble(i));
  return out;
}

// An initializer of ONNX element type `elem_type` (uint8, int8, int32, float...), raw data.
inline void Initializer(OnnxBuilder& b, const std::string& name, int elem_type,
                        const ir::NDArray& value) {
  onnx::TensorProto* t = b.model().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elem_type);
  for (int64_t d : value.shape) t->add_dims(d);
  t->set_raw_data(std::string(value.bytes.begin(), value.bytes.end()));
}

inline void StringAttr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

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

}  // namespace kiln::nn_test
