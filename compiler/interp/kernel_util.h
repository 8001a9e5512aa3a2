// Small helpers the reference kernels share: dtype dispatch, index arithmetic, numpy
// broadcasting. Plain loops over multi-indices; clarity over speed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/interp/kernels.h"
#include "compiler/ir/tensor.h"

namespace kiln::interp {

using arith::DataType;
using ir::NDArray;
using Shape = std::vector<int64_t>;
using Index = std::vector<int64_t>;

// Calls fn(T{}) with T the C++ type of `dtype` (bool as bool, stored one byte). float16 is
// not a C++ type here: DispatchDType returns false for it and for unknown types.
template <typename Fn>
bool DispatchDType(DataType dtype, Fn&& fn) {
  switch (dtype.code) {
    case DataType::kFloat:
      if (dtype.bits == 32) return fn(float{}), true;
      if (dtype.bits == 64) return fn(double{}), true;
      return false;
    case DataType::kInt:
      if (dtype.bits == 8) return fn(int8_t{}), true;
      if (dtype.bits == 16) return fn(int16_t{}), true;
      if (dtype.bits == 32) return fn(int32_t{}), true;
      if (dtype.bits == 64) return fn(int64_t{}), true;
      return false;
    case DataType::kUInt:
      if (dtype.bits == 8) return fn(uint8_t{}), true;
      if (dtype.bits == 16) return fn(uint16_t{}), true;
      if (dtype.bits == 32) return fn(uint32_t{}), true;
      if (dtype.bits == 64) return fn(uint64_t{}), true;
      return false;
    case DataType::kBool: return fn(bool{}), true;
    default: return false;
  }
}

// Row-major strides, in elements.
Shape Strides(const Shape& shape);
int64_t Offset(const Index& index, const Shape& strides);
// Calls fn(index) for every multi-index of `shape` in row-major order.
void ForEachIndex(const Shape& shape, const std::function<void(const Index&)>& fn);
// numpy broadcast of concrete shapes; INVALID_ARGUMENT naming the dims that clash.
absl::StatusOr<Shape> BroadcastShape(const Shape& a, const Shape& b);
// The element offset in a tensor of shape `in` broadcast to the output index `out_index`.
int64_t BroadcastOffset(const Index& out_index, const Shape& in, const Shape& in_strides);

// The argument i as a tensor, or a KernelError naming the op.
absl::StatusOr<const NDArray*> TensorArg(const ir::ExprNode& call, const std::vector<Value>& args,
                                         size_t i);
// Reads a 1-D integer tensor (or scalar) as int64 values.
std::vector<int64_t> ToInt64s(const NDArray& a);

// out[i] = fn(a[i], b[i]) with numpy broadcasting; T is the input element type, R the output.
template <typename T, typename R, typename Fn>
NDArray BroadcastBinary(const NDArray& a, const NDArray& b, const Shape& out_shape,
                        DataType out_dtype, Fn fn) {
  NDArray out = NDArray::Zeros(out_dtype, out_shape);
  Shape sa = Strides(a.shape), sb = Strides(b.shape);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* po = out.data<R>();
  int64_t i = 0;
  ForEachIndex(out_shape, [&](const Index& idx) {
    po[i++] = static_cast<R>(fn(pa[BroadcastOffset(idx, a.shape, sa)],
                                pb[BroadcastOffset(idx, b.shape, sb)]));
  });
  return out;
}

// out[i] = fn(x[i]), same shape; T input type, R output type.
template <typename T, typename R, typename Fn>
NDArray MapUnary(const NDArray& x, DataType out_dtype, Fn fn) {
  NDArray out = NDArray::Zeros(out_dtype, x.shape);
  const T* px = x.data<T>();
  R* po = out.data<R>();
  for (int64_t i = 0; i < x.num_elements(); ++i) po[i] = static_cast<R>(fn(px[i]));
  return out;
}

}  // namespace kiln::interp
