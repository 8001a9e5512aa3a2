#include "compiler/ir/tensor.h"

#include <cmath>

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

// IEEE 754 binary16 <-> double, exact in the widening direction and round-to-nearest-even
// in the narrowing one, so f16 tensors can be read and written like any other.
static double HalfToDouble(uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

static uint16_t DoubleToHalf(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isnan(v)) return sign | 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;  // rounds to infinity
  if (a < std::ldexp(1.0, -14)) {
    // Subnormal: units of 2^-24, rounded to nearest even.
    return sign | static_cast<uint16_t>(std::nearbyint(a * std::ldexp(1.0, 24)));
  }
  int exponent;
  double fraction = std::frexp(a, &exponent);  // a = fraction * 2^exponent, fraction in [0.5, 1)
  double scaled = std::nearbyint(fraction * 2048.0);  // 11 significant bits
  if (scaled == 2048.0) {
    scaled = 1024.0;
    ++exponent;
  }
  int biased = exponent - 1 + 15;
  if (biased >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>(biased << 10) | (static_cast<uint16_t>(scaled) - 1024);
}

static bool IsHalf(DataType dtype) { return dtype.code == DataType::kFloat && dtype.bits == 16; }

double NDArray::GetDouble(int64_t i) const {
  if (IsHalf(dtype)) return HalfToDouble(reinterpret_cast<const uint16_t*>(bytes.data())[i]);
  return VisitElement(dtype, bytes.data(), i, [](auto v) { return static_cast<double>(v); });
}

int64_t NDArray::GetInt(int64_t i) const {
  if (IsHalf(dtype)) return static_cast<int64_t>(GetDouble(i));
  return VisitElement(dtype, bytes.data(), i, [](auto v) { return static_cast<int64_t>(v); });
}

void NDArray::SetDouble(int64_t i, double v) {
  if (IsHalf(dtype)) {
    reinterpret_cast<uint16_t*>(bytes.data())[i] = DoubleToHalf(v);
    return;
  }
  uint8_t* base = bytes.data();
  VisitElement(dtype, base, i, [&](auto old) {
    using T = decltype(old);
    reinterpret_cast<T*>(base)[i] = static_cast<T>(v);
    return 0;
  });
}

void NDArray::SetInt(int64_t i, int64_t v) {
  if (!dtype.is_int() && dtype.code != DataType::kBool) {
    SetDouble(i, static_cast<double>(v));
    return;
  }
  uint8_t* base = bytes.data();
  VisitElement(dtype, base, i, [&](auto old) {
    using T = decltype(old);
    reinterpret_cast<T*>(base)[i] = static_cast<T>(v);
    return 0;
  });
}

}  // namespace kiln::ir
