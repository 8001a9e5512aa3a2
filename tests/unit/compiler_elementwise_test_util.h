// Helpers for the elementwise family's tests: typed tensors, and running a one-model import
// through the reference interpreter.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "onnx/onnx_pb.h"

namespace kiln::testing {

template <typename T>
ir::NDArray Tensor(arith::DataType dtype, std::vector<int64_t> shape, std::vector<T> values) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, std::move(shape));
  std::memcpy(a.bytes.data(), values.data(), a.bytes.size());
  return a;
}

inline ir::NDArray F32(std::vector<int64_t> shape, std::vector<float> values) {
  return Tensor(arith::DataType::Float(32), std::move(shape), std::move(values));
}

template <typename T>
std::vector<T> Values(const ir::NDArray& a) {
  const T* p = a.data<T>();
  return std::vector<T>(p, p + a.num_elements());
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

}  // namespace kiln::testing
