// Reference kernels for sorting and searching (top_k, arg_max, arg_min, unique) and scans
// (cum_sum, reverse_sequence). Comparisons and integer sums happen in the element type
// itself, so int64 values beyond 2^53 stay exact.
#include "compiler/interp/image_index.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {

namespace {

const DataType kI64 = DataType::Int(64);

bool Supported(DataType dtype) {
  return DispatchDType(dtype, [](auto) {});
}

// Three-way comparison of elements i and j of x, in x's own type.
int CompareElements(const NDArray& x, int64_t i, int64_t j) {
  int r = 0;
  DispatchDType(x.dtype, [&](auto t) {
    using T = decltype(t);
    const T* p = x.data<T>();
    r = p[i] < p[j] ? -1 : (p[j] < p[i] ? 1 : 0);
  });
  return r;
}

void CopyElement(const NDArray& from, int64_t src, NDArray& to, int64_t dst) {
  int64_t bytes = from.dtype.bytes();
  std::memcpy(to.bytes.data() + dst * bytes, from.bytes.data() + src * bytes, bytes);
}

// The lines of `shape` along `axis`: calls fn(base, step) for each, base being the offset of
// its first element and step the stride of the axis.
void ForEachLine(const Shape& shape, int64_t axis,
                 const std::function<void(int64_t, int64_t)>& fn) {
  Shape outer = shape;
  outer[axis] = 1;
  Shape strides = Strides(shape);
  ForEachIndex(outer, [&](const Index& idx) { fn(Offset(idx, strides), strides[axis]); });
}

absl::StatusOr<int64_t> AxisAttr(const ir::ExprNode& call, const NDArray& x, int64_t fallback) {
  return op::NormalizeAxis(call, op::GetIntAttr(call.attrs, "axis", fallback), x.shape.size());
}

// top_k(x, k) -> (values, indices) along `axis`, sorted; equal values keep index order.
absl::StatusOr<Value> TopK(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* k_arg, TensorArg(call, args, 1));
  if (x->shape.empty() || !Supported(x->dtype)) return KernelError(call, "unsupported input");
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(call, *x, -1));
  std::vector<int64_t> ks = ToInt64s(*k_arg);
  if (ks.size() != 1) return KernelError(call, "k must hold one value");
  int64_t k = ks[0], n = x->shape[axis];
  if (k < 0 || k > n) {
    return KernelError(call, absl::StrCat("k ", k, " out of range for axis size ", n));
  }
  bool largest = op::GetIntAttr(call.attrs, "largest", 1) != 0;
  Shape out_shape = x->shape;
  out_shape[axis] = k;
  NDArray values = NDArray::Zeros(x->dtype, out_shape);
  NDArray indices = NDArray::Zeros(kI64, out_shape);
  int64_t out_step = Strides(out_shape)[axis];
  std::vector<int64_t> out_bases;
  ForEachLine(out_shape, axis, [&](int64_t base, int64_t) { out_bases.push_back(base); });
  size_t line = 0;
  ForEachLine(x->shape, axis, [&](int64_t base, int64_t step) {
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      int c = CompareElements(*x, base + a * step, base + b * step);
      return largest ? c > 0 : c < 0;
    });
    int64_t out_base = out_bases[line++];
    for (int64_t i = 0; i < k; ++i) {
      CopyElement(*x, base + order[i] * step, values, out_base + i * out_step);
      indices.data<int64_t>()[out_base + i * out_step] = order[i];
    }
  });
  return Value::Tuple({Value(std::move(values)), Value(std::move(indices))});
}

// arg_max / arg_min: the first extreme index, or the last with select_last_index.
absl::StatusOr<Value> ArgReduce(const ir::ExprNode& call, const std::vector<Value>& args,
                                bool max) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  if (x->shape.empty() || !Supported(x->dtype)) return KernelError(call, "unsupported input");
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(call, *x, 0));
  bool last = op::GetIntAttr(call.attrs, "select_last_index", 0) != 0;
  int64_t n = x->shape[axis];
  if (n == 0) return KernelError(call, "cannot reduce an empty axis");
  Shape out_shape = x->shape;
  out_shape[axis] = 1;
  NDArray out = NDArray::Zeros(kI64, out_shape);
  int64_t o = 0;
  ForEachLine(x->shape, axis, [&](int64_t base, int64_t step) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
      int c = CompareElements(*x, base + i * step, base + best * step);
      if (!max) c = -c;
      if (c > 0 || (c == 0 && last)) best = i;
    }
    out.data<int64_t>()[o++] = best;
  });
  if (!op::GetIntAttr(call.attrs, "keepdims", 1)) out.shape.erase(out.shape.begin() + axis);
  return Value(std::move(out));
}

// Running sums along the axis given as the second argument; floats add in double.
absl::StatusOr<Value> CumSum(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* axis_arg, TensorArg(call, args, 1));
  std::vector<int64_t> axes = ToInt64s(*axis_arg);
  if (axes.size() != 1) return KernelError(call, "axis must hold one value");
  KILN_ASSIGN_OR_RETURN(int64_t axis, op::NormalizeAxis(call, axes[0], x->shape.size()));
  bool exclusive = op::GetIntAttr(call.attrs, "exclusive", 0) != 0;
  bool reverse = op::GetIntAttr(call.attrs, "reverse", 0) != 0;
  int64_t n = x->shape[axis];
  NDArray out = NDArray::Zeros(x->dtype, x->shape);
  bool ok = x->dtype.code != DataType::kBool && DispatchDType(x->dtype, [&](auto t) {
              using T = decltype(t);
              using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
              const T* in = x->data<T>();
              T* po = out.data<T>();
              ForEachLine(x->shape, axis, [&](int64_t base, int64_t step) {
                Acc sum = 0;
                for (int64_t i = 0; i < n; ++i) {
                  int64_t at = base + (reverse ? n - 1 - i : i) * step;
                  if (exclusive) po[at] = static_cast<T>(sum);
                  sum += static_cast<Acc>(in[at]);
                  if (!exclusive) po[at] = static_cast<T>(sum);
                }
              });
            });
  if (!ok) return KernelError(call, "unsupported dtype " + x->dtype.ToString());
  return Value(std::move(out));
}

// Reverses the first sequence_lens[b] steps along time_axis of each batch entry b.
absl::StatusOr<Value> ReverseSequence(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* lens_arg, TensorArg(call, args, 1));
  int64_t batch_axis = op::GetIntAttr(call.attrs, "batch_axis", 1);
  int64_t time_axis = op::GetIntAttr(call.attrs, "time_axis", 0);
  std::vector<int64_t> lens = ToInt64s(*lens_arg);
  if (x->shape.size() < 2 || static_cast<int64_t>(lens.size()) != x->shape[batch_axis]) {
    return KernelError(call, "sequence_lens must have one entry per batch element");
  }
  for (int64_t len : lens) {
    if (len < 0 || len > x->shape[time_axis]) {
      return KernelError(call, absl::StrCat("sequence length ", len, " out of range"));
    }
  }
  NDArray out = NDArray::Zeros(x->dtype, x->shape);
  Shape strides = Strides(x->shape);
  int64_t o = 0;
  ForEachIndex(x->shape, [&](const Index& idx) {
    Index src = idx;
    int64_t len = lens[idx[batch_axis]];
    if (idx[time_axis] < len) src[time_axis] = len - 1 - idx[time_axis];
    CopyElement(*x, Offset(src, strides), out, o++);
  });
  return Value(std::move(out));
}

// Slices of x along `axis`, compared element by element in row-major order (numpy's
// unique with an axis).
struct Slices {
  const NDArray* x;
  int64_t count, inner, outer;
  int64_t Offset(int64_t slice, int64_t e) const {
    return (e / inner) * count * inner + slice * inner + e % inner;
  }
  int Compare(int64_t a, int64_t b) const {
    for (int64_t e = 0; e < outer * inner; ++e) {
      if (int c = CompareElements(*x, Offset(a, e), Offset(b, e))) return c;
    }
    return 0;
  }
};

// Distinct slices, each listed with the ids of the slices equal to it (ascending), in
// ascending order or in order of first occurrence.
std::vector<std::vector<int64_t>> GroupSlices(const Slices& s, bool sorted) {
  std::vector<int64_t> order(s.count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return s.Compare(a, b) < 0; });
  std::vector<std::vector<int64_t>> groups;
  for (int64_t id : order) {
    if (groups.empty() || s.Compare(groups.back()[0], id) != 0) groups.emplace_back();
    groups.back().push_back(id);
  }
  if (!sorted) {
    std::sort(groups.begin(), groups.end(),
              [](const auto& a, const auto& b) { return a[0] < b[0]; });
  }
  return groups;
}

// unique(x) along `axis` -> (y, first indices, inverse_indices, counts).
absl::StatusOr<Value> Unique(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  if (x->shape.empty() || !Supported(x->dtype)) return KernelError(call, "unsupported input");
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(call, *x, 0));
  Shape strides = Strides(x->shape);
  int64_t count = x->shape[axis];
  int64_t inner = strides[axis],
          outer = count * inner == 0 ? 0 : x->num_elements() / (count * inner);
  Slices s{x, count, inner, outer};
  auto groups = GroupSlices(s, op::GetIntAttr(call.attrs, "sorted", 1) != 0);
  int64_t u = static_cast<int64_t>(groups.size());
  Shape y_shape = x->shape;
  y_shape[axis] = u;
  NDArray y = NDArray::Zeros(x->dtype, y_shape);
  NDArray first = NDArray::Zeros(kI64, {u}), counts = NDArray::Zeros(kI64, {u});
  NDArray inverse = NDArray::Zeros(kI64, {count});
  Slices out{&y, u, s.inner, s.outer};
  for (int64_t g = 0; g < u; ++g) {
    first.data<int64_t>()[g] = groups[g][0];
    counts.data<int64_t>()[g] = static_cast<int64_t>(groups[g].size());
    for (int64_t id : groups[g]) inverse.data<int64_t>()[id] = g;
    for (int64_t e = 0; e < s.outer * s.inner; ++e) {
      CopyElement(*x, s.Offset(groups[g][0], e), y, out.Offset(g, e));
    }
  }
  return Value::Tuple({Value(std::move(y)), Value(std::move(first)), Value(std::move(inverse)),
                       Value(std::move(counts))});
}

// unique_select(x) along `axis` -> unique's four results with y, indices and counts padded to
// one entry per slice of x (zeros past the distinct ones), and their number: the worst-case
// sized form that compiled code fills before the count binds the exact size.
absl::StatusOr<Value> UniqueSelect(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(Value result, Unique(call, args));
  const NDArray& x = args[0].tensor();
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(call, x, 0));
  const NDArray& y = result.fields()[0].tensor();
  int64_t count = x.shape[axis], u = y.shape[axis];
  int64_t inner = Strides(x.shape)[axis],
          outer = count * inner == 0 ? 0 : x.num_elements() / (count * inner);
  NDArray padded_y = NDArray::Zeros(x.dtype, x.shape);
  Slices from{&y, u, inner, outer}, to{&padded_y, count, inner, outer};
  for (int64_t g = 0; g < u; ++g) {
    for (int64_t e = 0; e < outer * inner; ++e) {
      CopyElement(y, from.Offset(g, e), padded_y, to.Offset(g, e));
    }
  }
  auto pad = [&](const NDArray& a) {
    NDArray out = NDArray::Zeros(kI64, {count});
    std::copy(a.data<int64_t>(), a.data<int64_t>() + u, out.data<int64_t>());
    return Value(std::move(out));
  };
  NDArray n = NDArray::Zeros(kI64, {});
  n.data<int64_t>()[0] = u;
  return Value::Tuple({Value(std::move(padded_y)), pad(result.fields()[1].tensor()),
                       result.fields()[2], pad(result.fields()[3].tensor()), Value(std::move(n))});
}

}  // namespace

void RegisterImageIndexKernels(KernelTable& table) {
  table["top_k"] = TopK;
  table["arg_max"] = [](const ir::ExprNode& call, const std::vector<Value>& args) {
    return ArgReduce(call, args, true);
  };
  table["arg_min"] = [](const ir::ExprNode& call, const std::vector<Value>& args) {
    return ArgReduce(call, args, false);
  };
  table["cum_sum"] = CumSum;
  table["reverse_sequence"] = ReverseSequence;
  table["unique"] = Unique;
  table["unique_select"] = UniqueSelect;
  RegisterImageBoxKernels(table);
}

}  // namespace kiln::interp
