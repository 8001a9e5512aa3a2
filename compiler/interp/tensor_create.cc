// Reference kernels for operators that make tensors from shapes or scalars: shape, size,
// range, constant_of_shape, eye_like, trilu, one_hot.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/tensor_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

absl::StatusOr<DataType> DTypeAttr(const ir::ExprNode& call, const std::string& name) {
  auto dtype = DataType::Parse(op::GetStringAttr(call.attrs, name, ""));
  if (!dtype.ok()) return KernelError(call, "attribute " + name + " must name a dtype");
  return *dtype;
}

absl::StatusOr<Value> ShapeOf(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  int64_t rank = x->shape.size();
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clamp(op::GetIntAttr(call.attrs, "start", 0));
  int64_t end = std::max(start, clamp(op::GetIntAttr(call.attrs, "end", rank)));
  NDArray out = NDArray::Zeros(DataType::Int(64), {end - start});
  for (int64_t d = start; d < end; ++d) out.data<int64_t>()[d - start] = x->shape[d];
  return Value(std::move(out));
}

// The values of a small tensor as a 1-D i64 vector: how shapes travel here. Floats truncate;
// with dims, the extents float scales make of them (op/tensor_create.cc), as Resize computes.
absl::StatusOr<Value> TensorToShape(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* t, TensorArg(call, args, 0));
  NDArray out = NDArray::Zeros(DataType::Int(64), {t->num_elements()});
  const NDArray* dims = nullptr;
  if (args.size() == 2) {
    KILN_ASSIGN_OR_RETURN(dims, TensorArg(call, args, 1));
    if (dims->num_elements() != t->num_elements()) return KernelError(call, "one dim per scale");
  }
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    int64_t& v = out.data<int64_t>()[i];
    if (dims) {
      double scale = t->GetDouble(i);
      v = scale > 0 ? static_cast<int64_t>(scale * static_cast<double>(dims->GetInt(i))) : -1;
    } else {
      v = t->dtype.is_float() ? static_cast<int64_t>(t->GetDouble(i)) : t->GetInt(i);
    }
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> Size(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  NDArray out = NDArray::Zeros(DataType::Int(64), {});
  out.data<int64_t>()[0] = x->num_elements();
  return Value(std::move(out));
}

absl::StatusOr<const NDArray*> ScalarArg(const ir::ExprNode& call, const std::vector<Value>& args,
                                         size_t i) {
  KILN_ASSIGN_OR_RETURN(const NDArray* a, TensorArg(call, args, i));
  if (a->num_elements() != 1) {
    return KernelError(call, absl::StrCat("argument ", i, " must hold one element"));
  }
  return a;
}

// numpy.arange: ceil((limit - start) / delta) elements start + i * delta; integers stay
// exact, floats are computed in double and rounded once.
absl::StatusOr<Value> Range(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(DataType dtype, DTypeAttr(call, "dtype"));
  KILN_ASSIGN_OR_RETURN(const NDArray* start, ScalarArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* limit, ScalarArg(call, args, 1));
  KILN_ASSIGN_OR_RETURN(const NDArray* delta, ScalarArg(call, args, 2));
  if (dtype.is_int()) {
    int64_t a = start->GetInt(0), b = limit->GetInt(0), step = delta->GetInt(0);
    if (step == 0) return KernelError(call, "delta must not be 0");
    int64_t span = step > 0 ? b - a : a - b, mag = step > 0 ? step : -step;
    int64_t n = span <= 0 ? 0 : (span + mag - 1) / mag;
    NDArray out = NDArray::Zeros(dtype, {n});
    DispatchDType(dtype, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < n; ++i) out.data<T>()[i] = static_cast<T>(a + i * step);
    });
    return Value(std::move(out));
  }
  double a = start->GetDouble(0), step = delta->GetDouble(0);
  if (step == 0) return KernelError(call, "delta must not be 0");
  int64_t n = std::max<int64_t>(0, std::ceil((limit->GetDouble(0) - a) / step));
  NDArray out = NDArray::Zeros(dtype, {n});
  for (int64_t i = 0; i < n; ++i) out.SetDouble(i, a + i * step);
  return Value(std::move(out));
}

absl::StatusOr<Value> ConstantOfShape(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, IntsArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* value, ScalarArg(call, args, 1));
  for (int64_t d : shape) {
    if (d < 0) return KernelError(call, absl::StrCat("negative dimension ", d));
  }
  NDArray out = NDArray::Zeros(value->dtype, shape);
  for (int64_t i = 0; i < out.num_elements(); ++i) CopyElement(out, i, *value, 0);
  return Value(std::move(out));
}

absl::StatusOr<Value> EyeLike(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(DataType dtype, DTypeAttr(call, "dtype"));
  if (x->shape.size() != 2) return KernelError(call, "input must be 2-D");
  int64_t k = op::GetIntAttr(call.attrs, "k", 0), rows = x->shape[0], cols = x->shape[1];
  NDArray out = NDArray::Zeros(dtype, x->shape);
  for (int64_t i = 0; i < rows; ++i) {
    if (i + k >= 0 && i + k < cols) out.SetDouble(i * cols + i + k, 1.0);
  }
  return Value(std::move(out));
}

// Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of each trailing matrix.
absl::StatusOr<Value> Trilu(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* k_arg, ScalarArg(call, args, 1));
  if (x->shape.size() < 2) return KernelError(call, "input must have rank >= 2");
  int64_t k = k_arg->GetInt(0);
  bool upper = op::GetIntAttr(call.attrs, "upper", 1) != 0;
  int64_t rows = x->shape[x->shape.size() - 2], cols = x->shape.back();
  NDArray out = NDArray::Zeros(x->dtype, x->shape);
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int64_t r = (i / cols) % rows, c = i % cols;
    if (upper ? c - r >= k : c - r <= k) CopyElement(out, i, *x, i);
  }
  return Value(std::move(out));
}

// values = [off, on]; the new axis of size depth is hot where it equals the index
// (negative indices count from depth; out-of-range ones leave the row all off).
absl::StatusOr<Value> OneHot(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* indices, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* depth_arg, ScalarArg(call, args, 1));
  KILN_ASSIGN_OR_RETURN(const NDArray* values, TensorArg(call, args, 2));
  if (values->num_elements() != 2) return KernelError(call, "values must hold [off, on]");
  int64_t depth =
      depth_arg->dtype.is_float() ? int64_t(depth_arg->GetDouble(0)) : depth_arg->GetInt(0);
  if (depth < 1) return KernelError(call, "depth must be positive");
  int64_t rank = indices->shape.size() + 1;
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        ResolveIndex(call, op::GetIntAttr(call.attrs, "axis", -1), rank, "axis"));
  Shape shape = indices->shape;
  shape.insert(shape.begin() + axis, depth);
  NDArray out = NDArray::Zeros(values->dtype, shape);
  Shape in_strides = Strides(indices->shape);
  int64_t i = 0;
  ForEachIndex(shape, [&](const Index& idx) {
    Index src = idx;
    src.erase(src.begin() + axis);
    int64_t off = Offset(src, in_strides);
    int64_t v = indices->dtype.is_float() ? int64_t(indices->GetDouble(off)) : indices->GetInt(off);
    if (v < 0) v += depth;
    CopyElement(out, i++, *values, v == idx[axis] ? 1 : 0);
  });
  return Value(std::move(out));
}

}  // namespace

void RegisterTensorCreateKernels(KernelTable& table) {
  table["shape"] = ShapeOf;
  table["size"] = Size;
  table["range"] = Range;
  table["constant_of_shape"] = ConstantOfShape;
  table["eye_like"] = EyeLike;
  table["trilu"] = Trilu;
  table["one_hot"] = OneHot;
  table["tensor_to_shape"] = TensorToShape;
}

}  // namespace kiln::interp
