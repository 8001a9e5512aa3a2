// NDArray: a dense, row-major tensor value on the host. Constants (weights) in the IR, the
// reference interpreter's values and test data all use it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/arith/expr.h"

namespace kiln::ir {

struct NDArray {
  arith::DataType dtype = arith::DataType::Float();
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // shape-product * dtype.bytes() bytes

  static NDArray Zeros(arith::DataType dtype, std::vector<int64_t> shape);
  int64_t num_elements() const;
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  // Element i converted to double / int64, whatever the dtype.
  double GetDouble(int64_t i) const;
  int64_t GetInt(int64_t i) const;
  void SetDouble(int64_t i, double v);
  // Exact for every integer dtype, also beyond 2^53.
  void SetInt(int64_t i, int64_t v);
};

int64_t ShapeProduct(const std::vector<int64_t>& shape);

}  // namespace kiln::ir
