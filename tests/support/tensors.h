// Tensors for tests: ir::NDArrays built from values, and their values read back.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "compiler/ir/tensor.h"

namespace kiln::testing {

// A tensor of `dtype` holding `values` as stored (T is the element type); elements past the
// end of `values` stay zero.
template <typename T>
ir::NDArray TensorOf(arith::DataType dtype, std::vector<int64_t> shape,
                     const std::vector<T>& values) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, std::move(shape));
  std::memcpy(a.bytes.data(), values.data(), std::min(a.bytes.size(), values.size() * sizeof(T)));
  return a;
}

inline ir::NDArray F32(std::vector<int64_t> shape, const std::vector<float>& values) {
  return TensorOf(arith::DataType::Float(32), std::move(shape), values);
}

inline ir::NDArray I64(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  return TensorOf(arith::DataType::Int(64), std::move(shape), values);
}

// An array of `dtype` and `shape` holding `values` (converted from double).
inline ir::NDArray ArrayOf(arith::DataType dtype, std::vector<int64_t> shape,
                           const std::vector<double>& values) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), a.num_elements());
  for (int64_t i = 0; i < a.num_elements() && i < static_cast<int64_t>(values.size()); ++i) {
    a.SetDouble(i, values[i]);
  }
  return a;
}

// 0, 1, 2, ... as float32.
inline ir::NDArray Iota(std::vector<int64_t> shape) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(shape));
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = static_cast<float>(i);
  return a;
}

// The elements of `a`: as stored when T is given (it must be `a`'s element type), converted
// to double from any element type by default.
template <typename T = double>
std::vector<T> Values(const ir::NDArray& a) {
  std::vector<T> out;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    if constexpr (std::is_same_v<T, double>) {
      out.push_back(a.GetDouble(i));
    } else {
      out.push_back(a.data<T>()[i]);
    }
  }
  return out;
}

}  // namespace kiln::testing
