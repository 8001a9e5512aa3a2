// Reference kernels for shape and data-movement operators.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

absl::StatusOr<Value> Transpose(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  std::vector<int64_t> perm = op::GetIntsAttr(call.attrs, "perm");
  if (perm.size() != x->shape.size()) return KernelError(call, "perm does not match the rank");
  Shape out_shape;
  for (int64_t p : perm) out_shape.push_back(x->shape[p]);
  NDArray out = NDArray::Zeros(x->dtype, out_shape);
  Shape in_strides = Strides(x->shape);
  int64_t bytes = x->dtype.bytes(), i = 0;
  ForEachIndex(out_shape, [&](const Index& idx) {
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d) src += idx[d] * in_strides[perm[d]];
    std::memcpy(out.bytes.data() + bytes * i++, x->bytes.data() + bytes * src, bytes);
  });
  return Value(std::move(out));
}

// The shape argument is already resolved (no -1 or 0 entries): the importer does that.
absl::StatusOr<Value> Reshape(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* shape_arg, TensorArg(call, args, 1));
  Shape shape = ToInt64s(*shape_arg);
  if (ir::ShapeProduct(shape) != x->num_elements()) {
    return KernelError(call, absl::StrCat("cannot reshape ", x->num_elements(), " elements into ",
                                          ir::ShapeProduct(shape)));
  }
  NDArray out = *x;
  out.shape = shape;
  return Value(std::move(out));
}

}  // namespace

void RegisterTensorKernels(KernelTable& table) {
  table["transpose"] = Transpose;
  table["reshape"] = Reshape;
}

}  // namespace kiln::interp
