#include "compiler/ir/tensor.h"

#include "compiler/arith/check.h"

namespace kiln::ir {

using arith::DataType;

int64_t ShapeProduct(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NDArray NDArray::Zeros(DataType dtype, std::vector<int64_t> shape) {
  NDArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.bytes.assign(ShapeProduct(a.shape) * dtype.bytes(), 0);
  return a;
}

int64_t NDArray::num_elements() const { return ShapeProduct(shape); }

// Dispatches on the dtype once; the callers stay free of per-type switches.
template <typename Fn>
static auto VisitElement(DataType dtype, const uint8_t* base, int64_t i, Fn fn) {
  switch (dtype.code) {
    case DataType::kFloat:
      if (dtype.bits == 32) return fn(reinterpret_cast<const float*>(base)[i]);
      if (dtype.bits == 64) return fn(reinterpret_cast<const double*>(base)[i]);
      break;
    case DataType::kInt:
      if (dtype.bits == 8) return fn(reinterpret_cast<const int8_t*>(base)[i]);
      if (dtype.bits == 16) return fn(reinterpret_cast<const int16_t*>(base)[i]);
      if (dtype.bits == 32) return fn(reinterpret_cast<const int32_t*>(base)[i]);
      if (dtype.bits == 64) return fn(reinterpret_cast<const int64_t*>(base)[i]);
      break;
    case DataType::kUInt:
      if (dtype.bits == 8) return fn(reinterpret_cast<const uint8_t*>(base)[i]);
      if (dtype.bits == 16) return fn(reinterpret_cast<const uint16_t*>(base)[i]);
      if (dtype.bits == 32) return fn(reinterpret_cast<const uint32_t*>(base)[i]);
      if (dtype.bits == 64) return fn(reinterpret_cast<const uint64_t*>(base)[i]);
      break;
    case DataType::kBool:
      return fn(reinterpret_cast<const uint8_t*>(base)[i]);
    default:
      break;
  }
  KILN_CHECK(false) << "unsupported element type " << dtype.ToString();
  return fn(0);
}

double NDArray::GetDouble(int64_t i) const {
  return VisitElement(dtype, bytes.data(), i, [](auto v) { return static_cast<double>(v); });
}

int64_t NDArray::GetInt(int64_t i) const {
  return VisitElement(dtype, bytes.data(), i, [](auto v) { return static_cast<int64_t>(v); });
}

void NDArray::SetDouble(int64_t i, double v) {
  uint8_t* base = bytes.data();
  VisitElement(dtype, base, i, [&](auto old) {
    using T = decltype(old);
    reinterpret_cast<T*>(base)[i] = static_cast<T>(v);
    return 0;
  });
}

}  // namespace kiln::ir
