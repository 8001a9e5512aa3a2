// Reference kernels for elementwise operators.
#include <cmath>

#include "compiler/arith/check.h"
#include "compiler/interp/kernel_util.h"

namespace kiln::interp {
namespace {

// Integer Div truncates toward zero, as in ONNX (C semantics); floats divide.
template <typename T>
T DivideValues(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;  // ONNX leaves it undefined; never trap in the oracle
  }
  return a / b;
}

KernelFn Binary(const std::string& op) {
  return [op](const ir::ExprNode& call, const std::vector<Value>& args) -> absl::StatusOr<Value> {
    KILN_ASSIGN_OR_RETURN(const NDArray* a, TensorArg(call, args, 0));
    KILN_ASSIGN_OR_RETURN(const NDArray* b, TensorArg(call, args, 1));
    KILN_ASSIGN_OR_RETURN(Shape shape, BroadcastShape(a->shape, b->shape));
    NDArray out;
    bool ok = DispatchDType(a->dtype, [&](auto tag) {
      using T = decltype(tag);
      out = BroadcastBinary<T, T>(*a, *b, shape, a->dtype, [&](T x, T y) -> T {
        if (op == "add") return x + y;
        if (op == "subtract") return x - y;
        if (op == "multiply") return x * y;
        return DivideValues(x, y);
      });
    });
    if (!ok) return KernelError(call, "unsupported dtype " + a->dtype.ToString());
    return Value(std::move(out));
  };
}

// Float-only unary math, computed in double and rounded once.
KernelFn FloatUnary(double (*fn)(double)) {
  return [fn](const ir::ExprNode& call, const std::vector<Value>& args) -> absl::StatusOr<Value> {
    KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
    if (!x->dtype.is_float() || x->dtype.bits == 16) {
      return KernelError(call, "needs a float32 or float64 tensor, got " + x->dtype.ToString());
    }
    NDArray out = NDArray::Zeros(x->dtype, x->shape);
    for (int64_t i = 0; i < x->num_elements(); ++i) out.SetDouble(i, fn(x->GetDouble(i)));
    return Value(std::move(out));
  };
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

absl::StatusOr<Value> Copy(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  return Value(*x);
}

// relu works on every numeric type (ONNX allows ints).
absl::StatusOr<Value> ReluKernel(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  NDArray out;
  bool ok = DispatchDType(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    out = MapUnary<T, T>(*x, x->dtype, [](T v) { return v < T(0) ? T(0) : v; });
  });
  if (!ok) return KernelError(call, "unsupported dtype " + x->dtype.ToString());
  return Value(std::move(out));
}

}  // namespace

void RegisterElementwiseKernels(KernelTable& table) {
  for (const char* op : {"add", "subtract", "multiply", "divide"}) table[op] = Binary(op);
  table["relu"] = ReluKernel;
  table["sigmoid"] = FloatUnary(Sigmoid);
  table["tanh"] = FloatUnary(static_cast<double (*)(double)>(std::tanh));
  table["exp"] = FloatUnary(static_cast<double (*)(double)>(std::exp));
  table["copy"] = Copy;
}

}  // namespace kiln::interp
