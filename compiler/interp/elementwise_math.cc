// Reference kernels for unary elementwise operators: math, activations and predicates.
#include <cmath>
#include <functional>

#include "compiler/arith/check.h"
#include "compiler/interp/elementwise.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

using DoubleFn = std::function<double(double)>;
using MakeDoubleFn = std::function<DoubleFn(const ir::Attrs&)>;

absl::Status UnsupportedDType(const ir::ExprNode& call, DataType dtype) {
  return KernelError(call, "unsupported dtype " + dtype.ToString());
}

// Float math: each element computed in double and rounded once to the tensor's type. `make`
// reads the op's attributes and returns the per-element function.
KernelFn FloatMath(MakeDoubleFn make) {
  return [make](const ir::ExprNode& call, const std::vector<Value>& args) -> absl::StatusOr<Value> {
    KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
    DoubleFn fn = make(call.attrs);
    NDArray out;
    bool ok = x->dtype.is_float() && DispatchDType(x->dtype, [&](auto tag) {
                using T = decltype(tag);
                if constexpr (std::is_floating_point_v<T>) {
                  out = MapUnary<T, T>(*x, x->dtype, [&](T v) { return static_cast<T>(fn(v)); });
                }
              });
    if (!ok) return UnsupportedDType(call, x->dtype);
    return Value(std::move(out));
  };
}

KernelFn FloatMath(double (*fn)(double)) {
  return FloatMath([fn](const ir::Attrs&) { return DoubleFn(fn); });
}

// Applies fn(v) to every element of any numeric type; fn returns the element's type for
// same-typed results, bool for predicates.
template <typename Fn>
KernelFn Typed(Fn fn) {
  return [fn](const ir::ExprNode& call, const std::vector<Value>& args) -> absl::StatusOr<Value> {
    KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
    NDArray out;
    bool ok = DispatchDType(x->dtype, [&](auto tag) {
      using T = decltype(tag);
      using R = decltype(fn(T{}, call.attrs));
      DataType dtype = std::is_same_v<R, bool> ? DataType::Bool() : x->dtype;
      out = MapUnary<T, R>(*x, dtype, [&](T v) { return fn(v, call.attrs); });
    });
    if (!ok) return UnsupportedDType(call, x->dtype);
    return Value(std::move(out));
  };
}

double Attr(const ir::Attrs& attrs, const char* name, double fallback) {
  return op::GetFloatAttr(attrs, name, fallback);
}

double Sigmoid(double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}
// log(1 + e^x) without overflow for large x.
double Softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double Clamp01(double x) { return x < 0 ? 0 : (x > 1 ? 1 : x); }

void RegisterPlainMath(KernelTable& t) {
  t["acos"] = FloatMath([](double x) { return std::acos(x); });
  t["acosh"] = FloatMath([](double x) { return std::acosh(x); });
  t["asin"] = FloatMath([](double x) { return std::asin(x); });
  t["asinh"] = FloatMath([](double x) { return std::asinh(x); });
  t["atan"] = FloatMath([](double x) { return std::atan(x); });
  t["atanh"] = FloatMath([](double x) { return std::atanh(x); });
  t["ceil"] = FloatMath([](double x) { return std::ceil(x); });
  t["cos"] = FloatMath([](double x) { return std::cos(x); });
  t["cosh"] = FloatMath([](double x) { return std::cosh(x); });
  t["erf"] = FloatMath([](double x) { return std::erf(x); });
  t["exp"] = FloatMath([](double x) { return std::exp(x); });
  t["floor"] = FloatMath([](double x) { return std::floor(x); });
  t["log"] = FloatMath([](double x) { return std::log(x); });
  t["reciprocal"] = FloatMath([](double x) { return 1 / x; });
  // Halves round to even: nearbyint under the default rounding mode.
  t["round"] = FloatMath([](double x) { return std::nearbyint(x); });
  t["sigmoid"] = FloatMath(Sigmoid);
  t["sin"] = FloatMath([](double x) { return std::sin(x); });
  t["sinh"] = FloatMath([](double x) { return std::sinh(x); });
  t["softplus"] = FloatMath(Softplus);
  t["softsign"] = FloatMath([](double x) { return x / (1 + std::abs(x)); });
  t["sqrt"] = FloatMath([](double x) { return std::sqrt(x); });
  t["tan"] = FloatMath([](double x) { return std::tan(x); });
  t["tanh"] = FloatMath([](double x) { return std::tanh(x); });
  t["hard_swish"] = FloatMath([](double x) { return x * Clamp01(x / 6 + 0.5); });
  t["mish"] = FloatMath([](double x) { return x * std::tanh(Softplus(x)); });
}

DoubleFn Gelu(const ir::Attrs& attrs) {
  if (op::GetStringAttr(attrs, "approximate", "none") == "tanh") {
    return [](double x) {
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    };
  }
  return [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
}

// Activations with attributes; the fallbacks are ONNX's defaults (the importer always sets
// the attributes, so they matter only for hand-built IR).
void RegisterActivations(KernelTable& t) {
  t["celu"] = FloatMath([](const ir::Attrs& a) -> DoubleFn {
    double alpha = Attr(a, "alpha", 1.0);
    return [alpha](double x) {
      return std::max(0.0, x) + std::min(0.0, alpha * std::expm1(x / alpha));
    };
  });
  t["elu"] = FloatMath([](const ir::Attrs& a) -> DoubleFn {
    double alpha = Attr(a, "alpha", 1.0);
    return [alpha](double x) { return x < 0 ? alpha * std::expm1(x) : x; };
  });
  t["hard_sigmoid"] = FloatMath([](const ir::Attrs& a) -> DoubleFn {
    double alpha = Attr(a, "alpha", 0.2), beta = Attr(a, "beta", 0.5);
    return [alpha, beta](double x) { return Clamp01(alpha * x + beta); };
  });
  t["leaky_relu"] = FloatMath([](const ir::Attrs& a) -> DoubleFn {
    double alpha = Attr(a, "alpha", 0.01);
    return [alpha](double x) { return x < 0 ? alpha * x : x; };
  });
  t["selu"] = FloatMath([](const ir::Attrs& a) -> DoubleFn {
    double alpha = Attr(a, "alpha", 1.67326319217681884765625);
    double gamma = Attr(a, "gamma", 1.05070102214813232421875);
    return [alpha, gamma](double x) { return x <= 0 ? gamma * alpha * std::expm1(x) : gamma * x; };
  });
  t["thresholded_relu"] = FloatMath([](const ir::Attrs& a) -> DoubleFn {
    double alpha = Attr(a, "alpha", 1.0);
    return [alpha](double x) { return x > alpha ? x : 0; };
  });
  t["gelu"] = FloatMath(Gelu);
}

// Ops defined on every numeric type. Signed integers wrap (two's complement) where the
// mathematical result does not fit, as -INT_MIN does.
void RegisterNumeric(KernelTable& t) {
  t["abs"] = Typed([](auto v, const ir::Attrs&) {
    using T = decltype(v);
    if constexpr (kIsInteger<T>)
      return v < T(0) ? static_cast<T>(0 - static_cast<uint64_t>(v)) : v;
    else
      return v < T(0) ? static_cast<T>(-v) : v;
  });
  t["neg"] = Typed([](auto v, const ir::Attrs&) {
    using T = decltype(v);
    if constexpr (kIsInteger<T>)
      return static_cast<T>(0 - static_cast<uint64_t>(v));
    else
      return static_cast<T>(-v);
  });
  t["sign"] = Typed([](auto v, const ir::Attrs&) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(v)) return v;
    }
    return static_cast<T>(v > T(0) ? 1 : (v < T(0) ? -1 : 0));
  });
  t["relu"] = Typed([](auto v, const ir::Attrs&) {
    using T = decltype(v);
    return v < T(0) ? T(0) : v;
  });
  t["shrink"] = Typed([](auto v, const ir::Attrs& a) {
    using T = decltype(v);
    double lambd = Attr(a, "lambd", 0.5), bias = Attr(a, "bias", 0.0);
    double x = static_cast<double>(v);
    return static_cast<T>(x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0));
  });
}

void RegisterPredicates(KernelTable& t) {
  t["is_nan"] = Typed([](auto v, const ir::Attrs&) -> bool {
    if constexpr (std::is_floating_point_v<decltype(v)>)
      return std::isnan(v);
    else
      return false;
  });
  t["is_inf"] = Typed([](auto v, const ir::Attrs& a) -> bool {
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      if (!std::isinf(v)) return false;
      return v > 0 ? op::GetIntAttr(a, "detect_positive", 1) != 0
                   : op::GetIntAttr(a, "detect_negative", 1) != 0;
    } else {
      return false;
    }
  });
  t["not"] = Typed([](auto v, const ir::Attrs&) -> bool { return !v; });
}

}  // namespace

void RegisterElementwiseMathKernels(KernelTable& table) {
  RegisterPlainMath(table);
  RegisterActivations(table);
  RegisterNumeric(table);
  RegisterPredicates(table);
}

}  // namespace kiln::interp
