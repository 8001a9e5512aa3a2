// Reference kernels for slicing and joining: slice, pad, split, concat.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/tensor_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// Where one sliced axis starts, its step and how many elements it keeps (ONNX Slice:
// negative bounds count from the end, then clamp; negative steps walk backwards).
struct AxisSlice {
  int64_t start = 0, step = 1, extent = 0;
};

AxisSlice SliceAxis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  auto resolve = [dim](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v = v < -dim ? -1 : v + dim;  // below every bound; no overflow for INT64_MIN
    return std::clamp(v, lo, hi);
  };
  AxisSlice s;
  s.step = step;
  if (step > 0) {
    s.start = resolve(start, 0, dim);
    int64_t e = resolve(end, 0, dim);
    s.extent = e > s.start ? (e - s.start + step - 1) / step : 0;
  } else {
    s.start = resolve(start, 0, dim - 1);
    int64_t e = resolve(end, -1, dim - 1);
    s.extent = s.start > e ? (s.start - e - step - 1) / -step : 0;
  }
  return s;
}

absl::StatusOr<Value> Slice(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  std::vector<std::vector<int64_t>> v;
  for (size_t i = 1; i <= 4; ++i) {
    KILN_ASSIGN_OR_RETURN(auto values, IntsArg(call, args, i));
    if (!v.empty() && values.size() != v[0].size()) {
      return KernelError(call, "starts, ends, axes and steps must have the same length");
    }
    v.push_back(std::move(values));
  }
  size_t rank = x->shape.size();
  std::vector<AxisSlice> axes(rank);
  for (size_t d = 0; d < rank; ++d) axes[d].extent = x->shape[d];
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < v[0].size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, ResolveIndex(call, v[2][i], rank, "axis"));
    if (seen[axis]) return KernelError(call, absl::StrCat("axis ", v[2][i], " given twice"));
    seen[axis] = true;
    if (v[3][i] == 0) return KernelError(call, "steps must not be 0");
    axes[axis] = SliceAxis(x->shape[axis], v[0][i], v[1][i], v[3][i]);
  }
  Shape shape;
  for (const AxisSlice& s : axes) shape.push_back(s.extent);
  NDArray out = NDArray::Zeros(x->dtype, shape);
  Shape strides = Strides(x->shape);
  int64_t i = 0;
  ForEachIndex(shape, [&](const Index& idx) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += (axes[d].start + idx[d] * axes[d].step) * strides[d];
    CopyElement(out, i++, *x, src);
  });
  return Value(std::move(out));
}

// The source coordinate of a padded position c (in input coordinates) for the border
// modes; -1 for constant mode outside the input.
int64_t PadSource(int64_t c, int64_t dim, const std::string& mode) {
  if (c >= 0 && c < dim) return c;
  if (mode == "constant" || dim == 0) return -1;
  if (mode == "edge") return std::clamp<int64_t>(c, 0, dim - 1);
  if (mode == "wrap") return ((c % dim) + dim) % dim;
  if (dim == 1) return 0;  // reflect
  int64_t period = 2 * (dim - 1);
  c = ((c % period) + period) % period;
  return c < dim ? c : period - c;
}

absl::StatusOr<Value> Pad(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsArg(call, args, 1));
  KILN_ASSIGN_OR_RETURN(const NDArray* value, TensorArg(call, args, 2));
  std::string mode = op::GetStringAttr(call.attrs, "mode", "constant");
  size_t rank = x->shape.size();
  if (pads.size() != 2 * rank) return KernelError(call, "pads must have 2 * rank entries");
  if (value->num_elements() != 1 || value->dtype != x->dtype) {
    return KernelError(call, "value must be one element of the data's dtype");
  }
  Shape shape;
  for (size_t d = 0; d < rank; ++d) {
    shape.push_back(x->shape[d] + pads[d] + pads[d + rank]);
    if (shape.back() < 0) return KernelError(call, "pads make a dimension negative");
    if (mode != "constant" && x->shape[d] == 0 && shape.back() > 0) {
      return KernelError(call, "cannot pad an empty dimension in mode " + mode);
    }
  }
  NDArray out = NDArray::Zeros(x->dtype, shape);
  Shape strides = Strides(x->shape);
  int64_t i = 0;
  ForEachIndex(shape, [&](const Index& idx) {
    int64_t src = 0;
    for (size_t d = 0; d < rank && src >= 0; ++d) {
      int64_t c = PadSource(idx[d] - pads[d], x->shape[d], mode);
      src = c < 0 ? -1 : src + c * strides[d];
    }
    if (src >= 0) {
      CopyElement(out, i, *x, src);
    } else {
      CopyElement(out, i, *value, 0);
    }
    ++i;
  });
  return Value(std::move(out));
}

// Copies the block [begin, begin + extent) of `axis` between x and a part.
void CopyAlongAxis(const NDArray& src, NDArray& dst, int64_t axis, int64_t src_begin,
                   int64_t dst_begin, int64_t extent) {
  Shape block = src.shape;
  block[axis] = extent;
  Shape ss = Strides(src.shape), ds = Strides(dst.shape);
  ForEachIndex(block, [&](const Index& idx) {
    Index s = idx, t = idx;
    s[axis] += src_begin;
    t[axis] += dst_begin;
    CopyElement(dst, Offset(t, ds), src, Offset(s, ss));
  });
}

absl::StatusOr<Value> Split(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntsArg(call, args, 1));
  int64_t rank = x->shape.size();
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        ResolveIndex(call, op::GetIntAttr(call.attrs, "axis", 0), rank, "axis"));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return KernelError(call, "split sizes must not be negative");
    total += s;
  }
  if (total != x->shape[axis]) {
    return KernelError(
        call, absl::StrCat("split sizes add up to ", total, ", the axis has ", x->shape[axis]));
  }
  std::vector<Value> parts;
  int64_t begin = 0;
  for (int64_t s : sizes) {
    Shape shape = x->shape;
    shape[axis] = s;
    NDArray part = NDArray::Zeros(x->dtype, shape);
    CopyAlongAxis(*x, part, axis, begin, 0, s);
    parts.emplace_back(std::move(part));
    begin += s;
  }
  return Value::Tuple(std::move(parts));
}

absl::StatusOr<Value> Concat(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* first, TensorArg(call, args, 0));
  int64_t rank = first->shape.size();
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        ResolveIndex(call, op::GetIntAttr(call.attrs, "axis", 0), rank, "axis"));
  Shape shape = first->shape;
  shape[axis] = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, i));
    Shape expect = shape;
    expect[axis] = x->shape.size() == shape.size() ? x->shape[axis] : -1;
    if (x->shape != expect || x->dtype != first->dtype) {
      return KernelError(call, absl::StrCat("input ", i, " does not match input 0"));
    }
    shape[axis] += x->shape[axis];
  }
  NDArray out = NDArray::Zeros(first->dtype, shape);
  int64_t begin = 0;
  for (const Value& arg : args) {
    const NDArray& x = arg.tensor();
    CopyAlongAxis(x, out, axis, 0, begin, x.shape[axis]);
    begin += x.shape[axis];
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterTensorSliceKernels(KernelTable& table) {
  table["slice"] = Slice;
  table["pad"] = Pad;
  table["split"] = Split;
  table["concat"] = Concat;
}

}  // namespace kiln::interp
