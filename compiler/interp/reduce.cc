// Reference kernels for reductions, recurrent networks, losses and signal processing.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/interp/reduce_internal.h"
#include "compiler/op/op_def.h"
#include "compiler/op/reduce_internal.h"

namespace kiln::interp {
namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

double Sum(const std::vector<double>& v, double (*f)(double)) {
  double s = 0;
  for (double x : v) s += f(x);
  return s;
}

// The reduction of the values one output element gathers, in double.
double FinishFloat(ReduceKind kind, const std::vector<double>& v) {
  auto id = [](double x) { return x; };
  auto sq = [](double x) { return x * x; };
  double inf = std::numeric_limits<double>::infinity();
  switch (kind) {
    case ReduceKind::kSum:
      return Sum(v, id);
    case ReduceKind::kMean:
      return Sum(v, id) / static_cast<double>(v.size());
    case ReduceKind::kL1:
      return Sum(v, [](double x) { return std::abs(x); });
    case ReduceKind::kL2:
      return std::sqrt(Sum(v, sq));
    case ReduceKind::kSumSquare:
      return Sum(v, sq);
    case ReduceKind::kLogSum:
      return std::log(Sum(v, id));
    case ReduceKind::kProd: {
      double p = 1;
      for (double x : v) p *= x;
      return p;
    }
    case ReduceKind::kMax:
    case ReduceKind::kMin: {
      bool is_max = kind == ReduceKind::kMax;
      double m = is_max ? -inf : inf;
      for (double x : v) {
        if (std::isnan(x)) return x;  // numpy propagates NaN
        m = is_max ? std::max(m, x) : std::min(m, x);
      }
      return m;
    }
    case ReduceKind::kLogSumExp: {
      // Shift by the max so that large inputs do not overflow exp.
      double m = -inf;
      for (double x : v) m = std::max(m, x);
      if (std::isinf(m)) return m;
      double s = 0;
      for (double x : v) s += std::exp(x - m);
      return m + std::log(s);
    }
  }
  return 0;
}

// Integer reductions stay in int64 where they can, so values beyond 2^53 survive; the
// rest (mean, l2, logs) go through double and truncate, as numpy's astype does.
int64_t FinishInt(ReduceKind kind, const std::vector<int64_t>& v, int64_t lowest, int64_t highest) {
  int64_t r = 0;
  switch (kind) {
    case ReduceKind::kSum:
      for (int64_t x : v) r += x;
      return r;
    case ReduceKind::kL1:
      for (int64_t x : v) r += x < 0 ? -x : x;
      return r;
    case ReduceKind::kSumSquare:
      for (int64_t x : v) r += x * x;
      return r;
    case ReduceKind::kProd:
      r = 1;
      for (int64_t x : v) r *= x;
      return r;
    case ReduceKind::kMax:
      r = lowest;
      for (int64_t x : v) r = std::max(r, x);
      return r;
    case ReduceKind::kMin:
      r = highest;
      for (int64_t x : v) r = std::min(r, x);
      return r;
    case ReduceKind::kMean:
      for (int64_t x : v) r += x;
      return v.empty() ? 0 : r / static_cast<int64_t>(v.size());
    default: {
      std::vector<double> d(v.begin(), v.end());
      return static_cast<int64_t>(FinishFloat(kind, d));
    }
  }
}

// The axes from the run-time operand when there is one, else from the attribute.
std::vector<int64_t> AxesOf(const ir::ExprNode& call, const std::vector<Value>& args) {
  if (args.size() == 2 && args[1].is_tensor()) return ToInt64s(args[1].tensor());
  return op::GetIntsAttr(call.attrs, "axes");
}

// For each output element (row-major over `kept_shape`, the input shape with reduced dims
// set to 1), the offsets of the input elements that land on it.
std::vector<std::vector<int64_t>> Groups(const Shape& in_shape, const std::vector<bool>& reduced,
                                         const Shape& kept_shape) {
  std::vector<std::vector<int64_t>> groups(ir::ShapeProduct(kept_shape));
  Shape strides = Strides(kept_shape);
  int64_t i = 0;
  ForEachIndex(in_shape, [&](const Index& idx) {
    Index o = idx;
    for (size_t d = 0; d < o.size(); ++d) {
      if (reduced[d]) o[d] = 0;
    }
    groups[Offset(o, strides)].push_back(i++);
  });
  return groups;
}

// Integer inputs, read with their own type so that int64 values stay exact.
template <typename T>
void ReduceInts(ReduceKind kind, const NDArray& x, const std::vector<std::vector<int64_t>>& groups,
                NDArray& out) {
  const T* px = x.data<T>();
  T* po = out.data<T>();
  for (size_t k = 0; k < groups.size(); ++k) {
    std::vector<int64_t> v;
    for (int64_t i : groups[k]) v.push_back(static_cast<int64_t>(px[i]));
    po[k] = static_cast<T>(
        FinishInt(kind, v, std::numeric_limits<T>::lowest(),
                  static_cast<int64_t>(std::min<uint64_t>(std::numeric_limits<T>::max(),
                                                          std::numeric_limits<int64_t>::max()))));
  }
}

absl::StatusOr<Value> Reduce(ReduceKind kind, const ir::ExprNode& call,
                             const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  int64_t rank = x->shape.size();
  std::vector<int64_t> axes = AxesOf(call, args);
  // noop_with_empty_axes with no axes: the input itself (not, say, |x| for reduce_l2).
  if (axes.empty() && op::GetIntAttr(call.attrs, "noop_with_empty_axes", 0) != 0) return Value(*x);
  KILN_ASSIGN_OR_RETURN(std::vector<bool> reduced, op::ReducedAxes(call, axes, rank));
  bool keepdims = op::GetIntAttr(call.attrs, "keepdims", 1) != 0;
  Shape kept_shape, out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    kept_shape.push_back(reduced[d] ? 1 : x->shape[d]);
    if (!reduced[d] || keepdims) out_shape.push_back(kept_shape.back());
  }
  std::vector<std::vector<int64_t>> groups = Groups(x->shape, reduced, kept_shape);
  NDArray out = NDArray::Zeros(x->dtype, out_shape);
  if (x->dtype.is_float()) {  // f16, f32, f64 alike: math in double, rounded once
    for (size_t k = 0; k < groups.size(); ++k) {
      std::vector<double> v;
      for (int64_t i : groups[k]) v.push_back(x->GetDouble(i));
      out.SetDouble(k, FinishFloat(kind, v));
    }
    return Value(std::move(out));
  }
  bool supported = x->dtype.is_int() && DispatchDType(x->dtype, [&](auto t) {
                     using T = decltype(t);
                     if constexpr (!std::is_same_v<T, bool> && !std::is_floating_point_v<T>) {
                       ReduceInts<T>(kind, *x, groups, out);
                     }
                   });
  if (!supported) return KernelError(call, "unsupported dtype " + x->dtype.ToString());
  return Value(std::move(out));
}

}  // namespace

void RegisterReduceKernels(KernelTable& table) {
  const std::pair<const char*, ReduceKind> reductions[] = {
      {"reduce_sum", ReduceKind::kSum},
      {"reduce_mean", ReduceKind::kMean},
      {"reduce_max", ReduceKind::kMax},
      {"reduce_min", ReduceKind::kMin},
      {"reduce_prod", ReduceKind::kProd},
      {"reduce_l1", ReduceKind::kL1},
      {"reduce_l2", ReduceKind::kL2},
      {"reduce_log_sum", ReduceKind::kLogSum},
      {"reduce_log_sum_exp", ReduceKind::kLogSumExp},
      {"reduce_sum_square", ReduceKind::kSumSquare},
  };
  for (const auto& [name, kind] : reductions) {
    table[name] = [kind = kind](const ir::ExprNode& call, const std::vector<Value>& args) {
      return Reduce(kind, call, args);
    };
  }
  RegisterLossKernels(table);
  RegisterRecurrentKernels(table);
  RegisterSignalKernels(table);
}

}  // namespace kiln::interp
