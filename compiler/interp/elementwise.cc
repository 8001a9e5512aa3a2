// Reference kernels for elementwise operators: registration, the broadcast helper, and the
// ops that move values rather than compute them (cast, where, clip, dropout, copy).
#include "compiler/interp/elementwise.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {

absl::StatusOr<Broadcast> BroadcastAll(const ir::ExprNode& call,
                                       const std::vector<const NDArray*>& operands) {
  Broadcast out;
  for (const NDArray* a : operands) {
    auto shape = BroadcastShape(out.shape, a->shape);
    if (!shape.ok()) return KernelError(call, std::string(shape.status().message()));
    out.shape = *std::move(shape);
  }
  for (const NDArray* a : operands) {
    Shape strides = Strides(a->shape);
    std::vector<int64_t> offsets;
    offsets.reserve(ir::ShapeProduct(out.shape));
    ForEachIndex(out.shape, [&](const Index& idx) {
      offsets.push_back(BroadcastOffset(idx, a->shape, strides));
    });
    out.offsets.push_back(std::move(offsets));
  }
  return out;
}

absl::StatusOr<std::vector<const NDArray*>> TensorArgs(const ir::ExprNode& call,
                                                       const std::vector<Value>& args,
                                                       size_t first) {
  std::vector<const NDArray*> out;
  for (size_t i = first; i < args.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const NDArray* a, TensorArg(call, args, i));
    out.push_back(a);
  }
  return out;
}

namespace {

absl::Status UnsupportedDType(const ir::ExprNode& call, DataType dtype) {
  return KernelError(call, "unsupported dtype " + dtype.ToString());
}

// One element converted as ONNX Cast does: floats truncate toward zero into integers, any
// nonzero is true. Out-of-range floats saturate and NaN becomes 0, where C++ would leave the
// result undefined.
template <typename To, typename From>
To ConvertElement(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (kIsInteger<To> && std::is_floating_point_v<From>) {
    if (std::isnan(v)) return To(0);
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) {
      return std::numeric_limits<To>::lowest();
    }
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) {
      return std::numeric_limits<To>::max();
    }
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

bool IsHalf(DataType t) { return t.is_float() && t.bits == 16; }

// float16 has no C++ type here: its casts go through double, which holds every f16 value
// exactly, so the only rounding is the final one.
absl::StatusOr<Value> CastHalf(const ir::ExprNode& call, const NDArray& x, DataType to) {
  NDArray out = NDArray::Zeros(to, x.shape);
  if (IsHalf(to)) {
    for (int64_t i = 0; i < x.num_elements(); ++i) out.SetDouble(i, x.GetDouble(i));
    return Value(std::move(out));
  }
  bool ok = DispatchDType(to, [&](auto tag) {
    using To = decltype(tag);
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      out.data<To>()[i] = ConvertElement<To>(x.GetDouble(i));
    }
  });
  if (!ok) return UnsupportedDType(call, to);
  return Value(std::move(out));
}

absl::StatusOr<Value> CastKernel(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  auto to = DataType::Parse(op::GetStringAttr(call.attrs, "to", ""));
  if (!to.ok()) return KernelError(call, std::string(to.status().message()));
  if (IsHalf(x->dtype) || IsHalf(*to)) return CastHalf(call, *x, *to);
  NDArray out;
  bool to_ok = false;
  bool from_ok = DispatchDType(x->dtype, [&](auto from_tag) {
    using From = decltype(from_tag);
    to_ok = DispatchDType(*to, [&](auto to_tag) {
      using To = decltype(to_tag);
      out = MapUnary<From, To>(*x, *to, [](From v) { return ConvertElement<To>(v); });
    });
  });
  if (!from_ok) return UnsupportedDType(call, x->dtype);
  if (!to_ok) return UnsupportedDType(call, *to);
  return Value(std::move(out));
}

// where(cond, x, y): copies whole elements, so it works for any dtype.
absl::StatusOr<Value> WhereKernel(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(auto in, TensorArgs(call, args));
  if (in.size() != 3) return KernelError(call, "expects 3 arguments");
  KILN_ASSIGN_OR_RETURN(Broadcast b, BroadcastAll(call, in));
  NDArray out = NDArray::Zeros(in[1]->dtype, b.shape);
  const int size = out.dtype.bytes();
  const uint8_t* cond = in[0]->data<uint8_t>();
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    int which = cond[b.offsets[0][i]] ? 1 : 2;
    std::memcpy(out.bytes.data() + i * size, in[which]->bytes.data() + b.offsets[which][i] * size,
                size);
  }
  return Value(std::move(out));
}

// clip(x, min, max): a missing bound does not clamp; min > max gives max everywhere.
absl::StatusOr<Value> ClipKernel(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  if (args.size() != 3) return KernelError(call, "expects 3 arguments");
  const NDArray* lo = args[1].is_tensor() ? &args[1].tensor() : nullptr;
  const NDArray* hi = args[2].is_tensor() ? &args[2].tensor() : nullptr;
  for (const NDArray* bound : {lo, hi}) {
    if (bound && (bound->num_elements() != 1 || bound->dtype != x->dtype)) {
      return KernelError(call, "bounds must be scalars of the input's dtype");
    }
  }
  NDArray out;
  bool ok = DispatchDType(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    out = MapUnary<T, T>(*x, x->dtype, [&](T v) {
      if (lo && v < lo->data<T>()[0]) v = lo->data<T>()[0];
      if (hi && v > hi->data<T>()[0]) v = hi->data<T>()[0];
      return v;
    });
  });
  if (!ok) return UnsupportedDType(call, x->dtype);
  return Value(std::move(out));
}

// Inference-mode dropout: the input passes through and the mask keeps everything.
absl::StatusOr<Value> DropoutKernel(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  NDArray mask = NDArray::Zeros(DataType::Bool(), x->shape);
  std::fill(mask.bytes.begin(), mask.bytes.end(), uint8_t{1});
  return Value::Tuple({Value(*x), Value(std::move(mask))});
}

absl::StatusOr<Value> CopyKernel(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  return Value(*x);
}

}  // namespace

NDArray ConvertTo(const NDArray& x, DataType to) {
  NDArray out = NDArray::Zeros(to, x.shape);
  for (int64_t i = 0; i < x.num_elements(); ++i) out.SetDouble(i, x.GetDouble(i));
  return out;
}

// Runs a kernel on float16 operands in float32 and rounds the float result back to float16.
// Exact for max, min and mod; within an ulp for arithmetic.
KernelFn WithHalfAsFloat(KernelFn kernel) {
  return [kernel](const ir::ExprNode& call, const std::vector<Value>& args) -> absl::StatusOr<Value> {
    bool half = false;
    std::vector<Value> widened;
    for (const Value& a : args) {
      if (a.is_tensor() && IsHalf(a.tensor().dtype)) {
        half = true;
        widened.push_back(Value(ConvertTo(a.tensor(), DataType::Float(32))));
      } else {
        widened.push_back(a);
      }
    }
    if (!half) return kernel(call, args);
    KILN_ASSIGN_OR_RETURN(Value out, kernel(call, widened));
    if (out.is_tensor() && out.tensor().dtype == DataType::Float(32)) {
      return Value(ConvertTo(out.tensor(), DataType::Float(16)));
    }
    return out;
  };
}

void RegisterElementwiseKernels(KernelTable& table) {
  KernelTable family;
  RegisterElementwiseMathKernels(family);
  RegisterElementwiseBinaryKernels(family);
  for (auto& [name, kernel] : family) table[name] = WithHalfAsFloat(std::move(kernel));
  table["cast"] = CastKernel;
  table["where"] = WhereKernel;
  table["clip"] = ClipKernel;
  table["dropout"] = DropoutKernel;
  table["copy"] = CopyKernel;
}

}  // namespace kiln::interp
