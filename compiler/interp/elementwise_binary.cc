// Reference kernels for elementwise operators of several operands: arithmetic, comparisons,
// logic, bit shifts, pow, prelu and the variadic max/min/sum/mean.
#include <cmath>
#include <limits>

#include "compiler/arith/check.h"
#include "compiler/interp/elementwise.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

absl::Status UnsupportedDType(const ir::ExprNode& call, DataType dtype) {
  return KernelError(call, "unsupported dtype " + dtype.ToString());
}

// Integer arithmetic wraps around (two's complement), as the hardware does, instead of
// overflowing into undefined behaviour: it is done in uint64 and truncated.
template <typename T, typename Op>
T Arith(T a, T b, Op op) {
  if constexpr (kIsInteger<T>) {
    return static_cast<T>(op(static_cast<uint64_t>(a), static_cast<uint64_t>(b)));
  } else {
    return static_cast<T>(op(a, b));
  }
}

// Integer division truncates toward zero (C, ONNX); x / 0 is 0 rather than a trap, since
// ONNX leaves it undefined.
template <typename T>
T Divide(T a, T b) {
  if constexpr (kIsInteger<T>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return Arith(T(0), a, std::minus<>());  // INT_MIN / -1 wraps
    }
  }
  return static_cast<T>(a / b);
}

// Integer mod takes the divisor's sign (Python), unless `fmod`, which takes the dividend's
// (C); floats only have fmod.
template <typename T>
T Mod(T a, T b, bool fmod) {
  if constexpr (kIsInteger<T>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return 0;
    }
    T r = static_cast<T>(a % b);
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  } else if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    return a;
  }
}

// Shifting by the element width or more shifts every bit out.
template <typename T>
T Shift(T a, T b, bool left) {
  if constexpr (std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
    if (b >= std::numeric_limits<T>::digits) return 0;
    return static_cast<T>(left ? a << b : a >> b);
  } else {
    return a;
  }
}

// Applies fn(a, b, attrs) over the broadcast of two operands of one dtype; fn returns the
// element type, or bool for comparisons and logic.
template <typename Fn>
KernelFn SameType(Fn fn) {
  return [fn](const ir::ExprNode& call, const std::vector<Value>& args) -> absl::StatusOr<Value> {
    KILN_ASSIGN_OR_RETURN(const NDArray* a, TensorArg(call, args, 0));
    KILN_ASSIGN_OR_RETURN(const NDArray* b, TensorArg(call, args, 1));
    if (a->dtype != b->dtype) {
      return KernelError(
          call, "operand dtypes differ: " + a->dtype.ToString() + " and " + b->dtype.ToString());
    }
    auto shape = BroadcastShape(a->shape, b->shape);
    if (!shape.ok()) return KernelError(call, std::string(shape.status().message()));
    NDArray out;
    bool ok = DispatchDType(a->dtype, [&](auto tag) {
      using T = decltype(tag);
      using R =
          std::conditional_t<std::is_same_v<decltype(fn(T{}, T{}, call.attrs)), bool>, bool, T>;
      DataType dtype = std::is_same_v<R, bool> ? DataType::Bool() : a->dtype;
      out = BroadcastBinary<T, R>(*a, *b, *shape, dtype,
                                  [&](T x, T y) { return static_cast<R>(fn(x, y, call.attrs)); });
    });
    if (!ok) return UnsupportedDType(call, a->dtype);
    return Value(std::move(out));
  };
}

void RegisterArithmetic(KernelTable& t) {
  t["add"] = SameType([](auto a, auto b, const ir::Attrs&) { return Arith(a, b, std::plus<>()); });
  t["subtract"] =
      SameType([](auto a, auto b, const ir::Attrs&) { return Arith(a, b, std::minus<>()); });
  t["multiply"] =
      SameType([](auto a, auto b, const ir::Attrs&) { return Arith(a, b, std::multiplies<>()); });
  t["divide"] = SameType([](auto a, auto b, const ir::Attrs&) { return Divide(a, b); });
  t["mod"] = SameType([](auto a, auto b, const ir::Attrs& attrs) {
    return Mod(a, b, op::GetIntAttr(attrs, "fmod", 0) != 0);
  });
  t["bit_shift"] = SameType([](auto a, auto b, const ir::Attrs& attrs) {
    return Shift(a, b, op::GetStringAttr(attrs, "direction", "") == "LEFT");
  });
}

void RegisterComparisons(KernelTable& t) {
  t["equal"] = SameType([](auto a, auto b, const ir::Attrs&) -> bool { return a == b; });
  t["greater"] = SameType([](auto a, auto b, const ir::Attrs&) -> bool { return a > b; });
  t["greater_or_equal"] = SameType([](auto a, auto b, const ir::Attrs&) -> bool { return a >= b; });
  t["less"] = SameType([](auto a, auto b, const ir::Attrs&) -> bool { return a < b; });
  t["less_or_equal"] = SameType([](auto a, auto b, const ir::Attrs&) -> bool { return a <= b; });
  t["and"] = SameType([](auto a, auto b, const ir::Attrs&) -> bool { return a && b; });
  t["or"] = SameType([](auto a, auto b, const ir::Attrs&) -> bool { return a || b; });
  t["xor"] = SameType([](auto a, auto b, const ir::Attrs&) -> bool { return !a != !b; });
}

// Integer powers by repeated squaring (exact, wrapping like multiplication); a negative
// exponent gives the truncated reciprocal: 1 or -1 for bases 1 and -1, else 0.
template <typename T, typename E>
T IntPow(T base, E exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<T>) {
      if (base == -1) return (static_cast<int64_t>(exponent) % 2 == 0) ? 1 : -1;
    }
    return 0;
  }
  T result = 1;
  auto e = static_cast<uint64_t>(exponent);
  for (; e; e >>= 1, base = Arith(base, base, std::multiplies<>())) {
    if (e & 1) result = Arith(result, base, std::multiplies<>());
  }
  return result;
}

template <typename T, typename E>
T PowElement(T base, E exponent) {
  if constexpr (kIsInteger<T> && kIsInteger<E>) {
    return IntPow(base, exponent);
  } else {
    double r = std::pow(static_cast<double>(base), static_cast<double>(exponent));
    if constexpr (kIsInteger<T>) {
      if (std::isnan(r)) return 0;
      if (r <= static_cast<double>(std::numeric_limits<T>::lowest()))
        return std::numeric_limits<T>::lowest();
      if (r >= static_cast<double>(std::numeric_limits<T>::max()))
        return std::numeric_limits<T>::max();
    }
    return static_cast<T>(r);
  }
}

// pow(base, exponent): the operands may have different types; the result has the base's.
absl::StatusOr<Value> PowKernel(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(auto in, TensorArgs(call, args));
  if (in.size() != 2) return KernelError(call, "expects 2 arguments");
  KILN_ASSIGN_OR_RETURN(Broadcast b, BroadcastAll(call, in));
  NDArray out = NDArray::Zeros(in[0]->dtype, b.shape);
  bool exponent_ok = false;
  bool base_ok = DispatchDType(in[0]->dtype, [&](auto base_tag) {
    using T = decltype(base_tag);
    exponent_ok = DispatchDType(in[1]->dtype, [&](auto exponent_tag) {
      using E = decltype(exponent_tag);
      if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<E, bool>) {
        const T* x = in[0]->data<T>();
        const E* y = in[1]->data<E>();
        for (int64_t i = 0; i < out.num_elements(); ++i) {
          out.data<T>()[i] = PowElement(x[b.offsets[0][i]], y[b.offsets[1][i]]);
        }
      }
    });
  });
  if (!base_ok) return UnsupportedDType(call, in[0]->dtype);
  if (!exponent_ok) return UnsupportedDType(call, in[1]->dtype);
  return Value(std::move(out));
}

// prelu(x, slope) = x < 0 ? slope * x : x, slope broadcast to x.
absl::StatusOr<Value> PReluKernel(const ir::ExprNode& call, const std::vector<Value>& args) {
  return SameType([](auto x, auto slope, const ir::Attrs&) {
    using T = decltype(x);
    return x < T(0) ? Arith(slope, x, std::multiplies<>()) : x;
  })(call, args);
}

// Folds operands left to right; floats accumulate in double and round once.
enum class Fold { kMax, kMin, kSum, kMean };

template <typename T>
T FoldElements(Fold fold, const std::vector<const NDArray*>& in, const Broadcast& b, int64_t i) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  Acc acc = in[0]->data<T>()[b.offsets[0][i]];
  for (size_t k = 1; k < in.size(); ++k) {
    Acc v = in[k]->data<T>()[b.offsets[k][i]];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(v) && fold != Fold::kSum && fold != Fold::kMean) acc = v;  // NaN wins
      if (std::isnan(acc)) continue;
    }
    if (fold == Fold::kMax) acc = v > acc ? v : acc;
    if (fold == Fold::kMin) acc = v < acc ? v : acc;
    if (fold == Fold::kSum || fold == Fold::kMean) acc = Arith(acc, v, std::plus<>());
  }
  if (fold == Fold::kMean) acc = Divide(acc, static_cast<Acc>(in.size()));
  return static_cast<T>(acc);
}

KernelFn Variadic(Fold fold) {
  return [fold](const ir::ExprNode& call, const std::vector<Value>& args) -> absl::StatusOr<Value> {
    KILN_ASSIGN_OR_RETURN(auto in, TensorArgs(call, args));
    if (in.empty()) return KernelError(call, "expects at least 1 argument");
    for (const NDArray* a : in) {
      if (a->dtype != in[0]->dtype) return KernelError(call, "operand dtypes differ");
    }
    KILN_ASSIGN_OR_RETURN(Broadcast b, BroadcastAll(call, in));
    NDArray out = NDArray::Zeros(in[0]->dtype, b.shape);
    bool ok = DispatchDType(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        for (int64_t i = 0; i < out.num_elements(); ++i)
          out.data<T>()[i] = FoldElements<T>(fold, in, b, i);
      }
    });
    if (!ok || out.dtype == DataType::Bool()) return UnsupportedDType(call, out.dtype);
    return Value(std::move(out));
  };
}

}  // namespace

void RegisterElementwiseBinaryKernels(KernelTable& table) {
  RegisterArithmetic(table);
  RegisterComparisons(table);
  table["pow"] = PowKernel;
  table["prelu"] = PReluKernel;
  table["max"] = Variadic(Fold::kMax);
  table["min"] = Variadic(Fold::kMin);
  table["sum"] = Variadic(Fold::kSum);
  table["mean"] = Variadic(Fold::kMean);
}

}  // namespace kiln::interp
