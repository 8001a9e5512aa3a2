// Reference kernels for neural-network operators: matmul and the softmax family here, the
// other groups in nn_*.cc; helpers the groups share.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/nn_kernels.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// The output shape of a numpy matmul of ranks >= 2, or a KernelError.
absl::StatusOr<Shape> MatmulShape(const ir::ExprNode& call, const Shape& a, const Shape& b) {
  size_t ra = a.size(), rb = b.size();
  if (ra < 2 || rb < 2) return KernelError(call, "operands must have rank >= 2");
  if (b[rb - 2] != a[ra - 1]) {
    return KernelError(call,
                       absl::StrCat("inner dimensions differ: ", a[ra - 1], " and ", b[rb - 2]));
  }
  KILN_ASSIGN_OR_RETURN(
      Shape out, BroadcastShape(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2)));
  out.push_back(a[ra - 2]);
  out.push_back(b[rb - 1]);
  return out;
}

// Calls term(out, a, b) with element offsets for every multiply-add of a matmul whose shapes
// MatmulShape accepted.
void ForEachMatmulTerm(const Shape& a, const Shape& b,
                       const std::function<void(int64_t, int64_t, int64_t)>& term) {
  size_t ra = a.size(), rb = b.size();
  int64_t m = a[ra - 2], k = a[ra - 1], n = b[rb - 1];
  Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  Shape batch = *BroadcastShape(batch_a, batch_b);
  Shape sa = Strides(batch_a), sb = Strides(batch_b);
  int64_t o = 0;
  ForEachIndex(batch, [&](const Index& bidx) {
    int64_t base_a = BroadcastOffset(bidx, batch_a, sa) * m * k;
    int64_t base_b = BroadcastOffset(bidx, batch_b, sb) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j, ++o) {
        for (int64_t p = 0; p < k; ++p) term(o, base_a + i * k + p, base_b + p * n + j);
      }
    }
  });
}

// Floats accumulate in double and round once; integers accumulate in their own type,
// wrapping as C++ unsigned arithmetic does (never through double, so int64 stays exact).
absl::StatusOr<Value> Matmul(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* a, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* b, TensorArg(call, args, 1));
  if (a->dtype.is_float()) {
    KILN_ASSIGN_OR_RETURN(auto result,
                          MatmulDoubles(call, ToDoubles(*a), a->shape, ToDoubles(*b), b->shape));
    NDArray out = NDArray::Zeros(a->dtype, result.first);
    for (int64_t i = 0; i < out.num_elements(); ++i) out.SetDouble(i, result.second[i]);
    return Value(std::move(out));
  }
  KILN_ASSIGN_OR_RETURN(Shape shape, MatmulShape(call, a->shape, b->shape));
  std::vector<uint64_t> acc(ir::ShapeProduct(shape), 0);
  ForEachMatmulTerm(a->shape, b->shape, [&](int64_t o, int64_t i, int64_t j) {
    acc[o] += static_cast<uint64_t>(a->GetInt(i)) * static_cast<uint64_t>(b->GetInt(j));
  });
  NDArray out = NDArray::Zeros(a->dtype, shape);
  bool ok = DispatchDType(a->dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < out.num_elements(); ++i) out.data<T>()[i] = static_cast<T>(acc[i]);
  });
  if (!ok) return KernelError(call, "unsupported dtype " + a->dtype.ToString());
  return Value(std::move(out));
}

// Applies fn to every 1-D slice of x along `axis` (the op's "axis" attr): fn reads the slice
// and writes the output slice, both as doubles.
using SliceFn = std::function<void(const std::vector<double>&, std::vector<double>&)>;
absl::StatusOr<Value> MapAxis(const ir::ExprNode& call, const std::vector<Value>& args,
                              const SliceFn& fn) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  int64_t rank = x->shape.size();
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        op::NormalizeAxis(call, op::GetIntAttr(call.attrs, "axis", -1), rank));
  NDArray out = NDArray::Zeros(x->dtype, x->shape);
  Shape outer = x->shape;
  outer[axis] = 1;
  Shape strides = Strides(x->shape);
  int64_t extent = x->shape[axis], step = strides[axis];
  std::vector<double> in(extent), result(extent);
  ForEachIndex(outer, [&](const Index& idx) {
    int64_t base = Offset(idx, strides);
    for (int64_t k = 0; k < extent; ++k) in[k] = x->GetDouble(base + k * step);
    fn(in, result);
    for (int64_t k = 0; k < extent; ++k) out.SetDouble(base + k * step, result[k]);
  });
  return Value(std::move(out));
}

double MaxOf(const std::vector<double>& v) {
  double max = -std::numeric_limits<double>::infinity();
  for (double x : v) max = std::max(max, x);
  return max;
}

// Softmax and log-softmax subtract the max for stability.
void SoftmaxSlice(const std::vector<double>& in, std::vector<double>& out) {
  double max = MaxOf(in), sum = 0;
  for (double x : in) sum += std::exp(x - max);
  for (size_t k = 0; k < in.size(); ++k) out[k] = std::exp(in[k] - max) / sum;
}

void LogSoftmaxSlice(const std::vector<double>& in, std::vector<double>& out) {
  double max = MaxOf(in), sum = 0;
  for (double x : in) sum += std::exp(x - max);
  for (size_t k = 0; k < in.size(); ++k) out[k] = in[k] - max - std::log(sum);
}

// 1 at the first maximum, 0 elsewhere.
void HardmaxSlice(const std::vector<double>& in, std::vector<double>& out) {
  size_t arg = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] > in[arg]) arg = k;
  }
  for (size_t k = 0; k < in.size(); ++k) out[k] = k == arg ? 1 : 0;
}

KernelFn AxisKernel(void (*fn)(const std::vector<double>&, std::vector<double>&)) {
  return [fn](const ir::ExprNode& call, const std::vector<Value>& args) {
    return MapAxis(call, args, fn);
  };
}

}  // namespace

std::vector<double> ToDoubles(const NDArray& a, const NDArray* zero_point, int64_t axis) {
  std::vector<double> out(a.num_elements());
  for (int64_t i = 0; i < a.num_elements(); ++i) out[i] = a.GetDouble(i);
  if (!zero_point || zero_point->num_elements() == 0) return out;
  Shape strides = Strides(a.shape);
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    int64_t pos = a.shape.empty() ? 0 : (i / strides[axis]) % a.shape[axis];
    out[i] -= ParamAt(*zero_point, pos);
  }
  return out;
}

double ParamAt(const NDArray& p, int64_t i) { return p.GetDouble(p.num_elements() == 1 ? 0 : i); }

double QuantizeValue(double v, DataType dtype) {
  double lo = 0, hi = 0;
  if (dtype.code == DataType::kUInt) {
    hi = std::ldexp(1.0, dtype.bits) - 1;
  } else {
    lo = -std::ldexp(1.0, dtype.bits - 1);
    hi = -lo - 1;
  }
  return std::clamp(std::nearbyint(v), lo, hi);
}

void ForEachGroup(const Shape& shape, const std::vector<bool>& reduced,
                  const std::function<void(const std::vector<int64_t>&)>& fn) {
  Shape outer = shape, inner = shape;
  for (size_t d = 0; d < shape.size(); ++d) (reduced[d] ? outer : inner)[d] = 1;
  Shape strides = Strides(shape);
  std::vector<int64_t> offsets;
  ForEachIndex(outer, [&](const Index& o) {
    offsets.clear();
    int64_t base = Offset(o, strides);
    ForEachIndex(inner, [&](const Index& i) { offsets.push_back(base + Offset(i, strides)); });
    fn(offsets);
  });
}

absl::StatusOr<std::pair<Shape, std::vector<double>>> MatmulDoubles(const ir::ExprNode& call,
                                                                    const std::vector<double>& a,
                                                                    const Shape& a_shape,
                                                                    const std::vector<double>& b,
                                                                    const Shape& b_shape) {
  KILN_ASSIGN_OR_RETURN(Shape shape, MatmulShape(call, a_shape, b_shape));
  std::vector<double> out(ir::ShapeProduct(shape), 0);
  ForEachMatmulTerm(a_shape, b_shape,
                    [&](int64_t o, int64_t i, int64_t j) { out[o] += a[i] * b[j]; });
  return std::make_pair(shape, std::move(out));
}

void RegisterNNKernels(KernelTable& table) {
  table["matmul"] = Matmul;
  table["softmax"] = AxisKernel(SoftmaxSlice);
  table["log_softmax"] = AxisKernel(LogSoftmaxSlice);
  table["hardmax"] = AxisKernel(HardmaxSlice);
  RegisterNNConvKernels(table);
  RegisterNNPoolKernels(table);
  RegisterNNNormKernels(table);
  RegisterNNQuantKernels(table);
  RegisterNNEinsumKernels(table);
}

}  // namespace kiln::interp
