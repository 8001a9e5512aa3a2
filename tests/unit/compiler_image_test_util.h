// Helpers for the image family's tests: typed tensors, the struct info a model's outputs get
// at import, and running a model through the reference interpreter.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/onnx_builder.h"

namespace kiln::testing {

template <typename T>
ir::NDArray MakeTensor(arith::DataType dtype, std::vector<int64_t> shape, std::vector<T> values) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, std::move(shape));
  std::memcpy(a.bytes.data(), values.data(), a.bytes.size());
  return a;
}

inline ir::NDArray F32(std::vector<int64_t> shape, std::vector<float> values) {
  return MakeTensor(arith::DataType::Float(), std::move(shape), std::move(values));
}

inline ir::NDArray I64(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return MakeTensor(arith::DataType::Int(64), std::move(shape), std::move(values));
}

template <typename T>
std::vector<T> Values(const ir::NDArray& a) {
  const T* p = a.data<T>();
  return std::vector<T>(p, p + a.num_elements());
}

// The struct info of each output of `main`, printed.
inline std::vector<std::string> OutputInfos(const ir::IRModule& m) {
  const ir::StructInfo& info = m.functions.at("main").result->struct_info;
  if (info.kind != ir::StructInfo::Kind::kTuple) return {ir::ToString(info)};
  std::vector<std::string> out;
  for (const ir::StructInfo& field : info.fields) out.push_back(ir::ToString(field));
  return out;
}

inline absl::StatusOr<std::vector<ir::NDArray>> ImportAndRun(
    const std::string& model, const std::vector<ir::NDArray>& inputs) {
  auto module = driver::ImportModel(model);
  if (!module.ok()) return module.status();
  return interp::Run(*module, inputs);
}

inline void StringAttr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

inline void FloatsAttr(onnx::NodeProto& n, const std::string& name, const std::vector<float>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

}  // namespace kiln::testing
