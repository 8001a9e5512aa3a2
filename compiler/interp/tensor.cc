// Reference kernels for shape and data-movement operators: transpose, reshape, squeeze,
// unsqueeze, expand, tile. The other tensor kernels live in tensor_slice.cc,
// tensor_create.cc and tensor_index.cc.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/arith/check.h"
#include "compiler/interp/tensor_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {

absl::StatusOr<std::vector<int64_t>> IntsArg(const ir::ExprNode& call,
                                             const std::vector<Value>& args, size_t i) {
  KILN_ASSIGN_OR_RETURN(const NDArray* a, TensorArg(call, args, i));
  if (!a->dtype.is_int() || a->shape.size() > 1) {
    return KernelError(call, absl::StrCat("argument ", i, " must be a 1-D integer tensor"));
  }
  return ToInt64s(*a);
}

absl::StatusOr<int64_t> ResolveIndex(const ir::ExprNode& call, int64_t index, int64_t dim,
                                     const char* what) {
  if (index < -dim || index >= dim) {
    return KernelError(call, absl::StrCat(what, " ", index, " out of range for size ", dim));
  }
  return index < 0 ? index + dim : index;
}

namespace {

std::string ShapeText(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<Value> Transpose(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  std::vector<int64_t> perm = op::GetIntsAttr(call.attrs, "perm");
  if (perm.size() != x->shape.size()) return KernelError(call, "perm does not match the rank");
  Shape out_shape;
  for (int64_t p : perm) out_shape.push_back(x->shape[p]);
  NDArray out = NDArray::Zeros(x->dtype, out_shape);
  Shape in_strides = Strides(x->shape);
  int64_t i = 0;
  ForEachIndex(out_shape, [&](const Index& idx) {
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d) src += idx[d] * in_strides[perm[d]];
    CopyElement(out, i++, *x, src);
  });
  return Value(std::move(out));
}

// A ShapeExpr target is already resolved; a tensor computed at run time is resolved here:
// 0 copies the input dim (unless allowzero), -1 takes what is left.
absl::StatusOr<Shape> ResolveTarget(const ir::ExprNode& call, const Shape& in, Shape target) {
  if (call.args[1]->kind == ir::ExprKind::kShapeExpr) return target;
  bool allow_zero = op::GetIntAttr(call.attrs, "allowzero", 0) != 0;
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) {
      if (i >= in.size()) return KernelError(call, "shape entry 0 beyond the input rank");
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (infer_at >= 0) return KernelError(call, "shape has more than one -1");
      infer_at = static_cast<int>(i);
    } else if (target[i] < 0) {
      return KernelError(call, absl::StrCat("shape entry ", i, " is ", target[i]));
    } else {
      known *= target[i];
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || ir::ShapeProduct(in) % known != 0) {
      return KernelError(call, absl::StrCat("cannot infer the -1 entry of ", ShapeText(target),
                                            " for ", ir::ShapeProduct(in), " elements"));
    }
    target[infer_at] = ir::ShapeProduct(in) / known;
  }
  return target;
}

absl::StatusOr<Value> Reshape(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(Shape target, IntsArg(call, args, 1));
  KILN_ASSIGN_OR_RETURN(Shape shape, ResolveTarget(call, x->shape, std::move(target)));
  if (ir::ShapeProduct(shape) != x->num_elements()) {
    return KernelError(
        call, absl::StrCat("cannot reshape ", ShapeText(x->shape), " into ", ShapeText(shape)));
  }
  NDArray out = *x;
  out.shape = shape;
  return Value(std::move(out));
}

absl::StatusOr<Value> Squeeze(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntsArg(call, args, 1));
  std::vector<bool> drop(x->shape.size(), false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, ResolveIndex(call, a, x->shape.size(), "axis"));
    if (x->shape[axis] != 1) {
      return KernelError(call,
                         absl::StrCat("cannot squeeze axis ", a, " of size ", x->shape[axis]));
    }
    drop[axis] = true;
  }
  NDArray out = *x;
  out.shape.clear();
  for (size_t d = 0; d < x->shape.size(); ++d) {
    if (!drop[d]) out.shape.push_back(x->shape[d]);
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> Unsqueeze(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntsArg(call, args, 1));
  int64_t rank = x->shape.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, ResolveIndex(call, a, rank, "axis"));
    if (inserted[axis]) return KernelError(call, absl::StrCat("axis ", a, " given twice"));
    inserted[axis] = true;
  }
  NDArray out = *x;
  out.shape.clear();
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) out.shape.push_back(inserted[d] ? 1 : x->shape[next++]);
  return Value(std::move(out));
}

absl::StatusOr<Value> Expand(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(Shape target, IntsArg(call, args, 1));
  auto shape = BroadcastShape(x->shape, target);
  if (!shape.ok()) return KernelError(call, std::string(shape.status().message()));
  NDArray out = NDArray::Zeros(x->dtype, *shape);
  Shape strides = Strides(x->shape);
  int64_t i = 0;
  ForEachIndex(*shape, [&](const Index& idx) {
    CopyElement(out, i++, *x, BroadcastOffset(idx, x->shape, strides));
  });
  return Value(std::move(out));
}

absl::StatusOr<Value> Tile(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(Shape repeats, IntsArg(call, args, 1));
  if (repeats.size() != x->shape.size()) return KernelError(call, "repeats must match the rank");
  Shape shape;
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) return KernelError(call, "repeats must not be negative");
    shape.push_back(x->shape[d] * repeats[d]);
  }
  NDArray out = NDArray::Zeros(x->dtype, shape);
  Shape strides = Strides(x->shape);
  int64_t i = 0;
  ForEachIndex(shape, [&](const Index& idx) {
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d) src += (idx[d] % x->shape[d]) * strides[d];
    CopyElement(out, i++, *x, src);
  });
  return Value(std::move(out));
}

}  // namespace

void RegisterTensorKernels(KernelTable& table) {
  table["transpose"] = Transpose;
  table["reshape"] = Reshape;
  table["squeeze"] = Squeeze;
  table["unsqueeze"] = Unsqueeze;
  table["expand"] = Expand;
  table["tile"] = Tile;
  RegisterTensorSliceKernels(table);
  RegisterTensorCreateKernels(table);
  RegisterTensorIndexKernels(table);
}

}  // namespace kiln::interp
