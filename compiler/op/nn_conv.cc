// Convolutions and pooling over [N, C, spatial...] tensors, 1-D to 3-D (any rank works).
// Output spatial extents are PrimExprs, so symbolic batch and image sizes flow through.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/nn_ops.h"
#include "compiler/op/nn_window.h"

namespace kiln::op {
namespace {

using arith::DataType;
using arith::IntImm;
using arith::PrimExpr;
using ir::StructInfo;

// The data operand of a windowed op: a tensor of rank >= 3 ([N, C, spatial...]).
absl::StatusOr<const StructInfo*> WindowInput(const ir::ExprNode& call, size_t i) {
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, i));
  if (x->ndim >= 0 && x->ndim < 3) {
    return OpError(call,
                   absl::StrCat("input must have rank >= 3 ([N, C, spatial...]), got ", x->ndim));
  }
  return x;
}

// The kernel extents: the kernel_shape attr, else the weight's spatial dims when constant.
absl::StatusOr<std::vector<int64_t>> KernelExtents(const ir::ExprNode& call,
                                                   const std::vector<PrimExpr>& w) {
  std::vector<int64_t> kernel = GetIntsAttr(call.attrs, "kernel_shape");
  if (!kernel.empty()) return kernel;
  for (size_t d = 2; d < w.size(); ++d) {
    if (w[d]->kind != arith::ExprKind::kIntImm) {
      return OpError(call, "kernel_shape is needed when the weight's spatial dims are symbolic");
    }
    kernel.push_back(w[d]->int_value);
  }
  return kernel;
}

absl::Status CheckDim(const ir::ExprNode& call, const std::string& what, const PrimExpr& got,
                      const PrimExpr& want, const arith::Analyzer& analyzer) {
  if (analyzer.ProveEqual(got, want)) return absl::OkStatus();
  return OpError(call, absl::StrCat(what, " is ", arith::ToString(analyzer.Simplify(got)),
                                    ", expected ", arith::ToString(analyzer.Simplify(want))));
}

// A known output extent must not be negative: the window would not fit even once.
absl::Status CheckExtent(const ir::ExprNode& call, size_t d, const PrimExpr& out) {
  if (out->kind != arith::ExprKind::kIntImm || out->int_value >= 0) return absl::OkStatus();
  return OpError(call, absl::StrCat("the window does not fit spatial dim ", d, " (output extent ",
                                    out->int_value, ")"));
}

// conv / conv_transpose / conv_integer / qlinear_conv: x is argument 0, the weight w_index.
absl::StatusOr<StructInfo> InferConvShape(const ir::ExprNode& call, const arith::Analyzer& analyzer,
                                          size_t w_index, const StructInfo* bias, DataType dtype,
                                          bool transpose) {
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, WindowInput(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* w, TensorArg(call, w_index));
  if (!x->shape || !w->shape) return StructInfo::TensorRank(x->ndim, dtype);
  const std::vector<PrimExpr>& xs = *x->shape;
  const std::vector<PrimExpr>& ws = *w->shape;
  if (ws.size() != xs.size()) {
    return OpError(call, absl::StrCat("weight has rank ", ws.size(), ", input rank ", xs.size()));
  }
  int64_t group = GetIntAttr(call.attrs, "group", 1);
  if (group < 1) return OpError(call, absl::StrCat("group must be positive, got ", group));
  PrimExpr g = IntImm(group);
  PrimExpr out_channels = transpose ? analyzer.Simplify(ws[1] * g) : ws[0];
  KILN_RETURN_IF_ERROR(
      CheckDim(call, "input channel count", xs[1], transpose ? ws[0] : ws[1] * g, analyzer));
  if (bias && bias->shape) {
    if (bias->shape->size() != 1) return OpError(call, "bias must be 1-D");
    KILN_RETURN_IF_ERROR(CheckDim(call, "bias length", (*bias->shape)[0], out_channels, analyzer));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, KernelExtents(call, ws));
  KILN_ASSIGN_OR_RETURN(Window win, ReadWindow(call, xs.size() - 2, kernel));
  std::vector<PrimExpr> out = {xs[0], out_channels};
  for (size_t d = 0; d < win.rank(); ++d) {
    WindowDim dim = transpose ? ConvTransposeWindowDim(win, d, xs[d + 2], analyzer)
                              : ConvWindowDim(win, d, xs[d + 2], analyzer);
    KILN_RETURN_IF_ERROR(CheckExtent(call, d, dim.out));
    out.push_back(dim.out);
  }
  return StructInfo::Tensor(std::move(out), dtype);
}

absl::StatusOr<StructInfo> InferConv(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  if (call.args.size() != 3) return OpError(call, "expects x, w and bias (or none)");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  return InferConvShape(call, analyzer, 1, OptionalTensorArg(call, 2), x->dtype,
                        call.name == "conv_transpose");
}

// conv_integer(x, w, x_zero_point, w_zero_point) accumulates in int32.
absl::StatusOr<StructInfo> InferConvInteger(const ir::ExprNode& call,
                                            const arith::Analyzer& analyzer) {
  if (call.args.size() != 4) return OpError(call, "expects x, w and two zero points");
  return InferConvShape(call, analyzer, 1, nullptr, DataType::Int(32), false);
}

// qlinear_conv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias): y has y_zp's type.
absl::StatusOr<StructInfo> InferQLinearConv(const ir::ExprNode& call,
                                            const arith::Analyzer& analyzer) {
  if (call.args.size() != 9) return OpError(call, "expects 8 operands and a bias (or none)");
  KILN_ASSIGN_OR_RETURN(const StructInfo* y_zp, TensorArg(call, 7));
  return InferConvShape(call, analyzer, 3, OptionalTensorArg(call, 8), y_zp->dtype, false);
}

// max_pool, max_pool_indices, average_pool, lp_pool: [N, C, out...].
absl::StatusOr<StructInfo> InferPool(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, WindowInput(call, 0));
  DataType dtype = call.name == "max_pool_indices" ? DataType::Int(64) : x->dtype;
  if (!x->shape) return StructInfo::TensorRank(x->ndim, dtype);
  const std::vector<PrimExpr>& xs = *x->shape;
  KILN_ASSIGN_OR_RETURN(Window win, ReadWindow(call, xs.size() - 2));
  std::vector<PrimExpr> out = {xs[0], xs[1]};
  for (size_t d = 0; d < win.rank(); ++d) {
    WindowDim dim = ConvWindowDim(win, d, xs[d + 2], analyzer);
    KILN_RETURN_IF_ERROR(CheckExtent(call, d, dim.out));
    out.push_back(dim.out);
  }
  return StructInfo::Tensor(std::move(out), dtype);
}

// global_average_pool, global_max_pool: every spatial dim becomes 1.
absl::StatusOr<StructInfo> InferGlobalPool(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, WindowInput(call, 0));
  if (!x->shape) return StructInfo::TensorRank(x->ndim, x->dtype);
  std::vector<PrimExpr> out = *x->shape;
  for (size_t d = 2; d < out.size(); ++d) out[d] = IntImm(1);
  return StructInfo::Tensor(std::move(out), x->dtype);
}

// max_unpool(x, indices, output_shape or none): the default extent inverts the pooling,
// (in - 1) * stride + kernel - pads; a given output_shape is a ShapeExpr or a run-time tensor.
absl::StatusOr<StructInfo> InferMaxUnpool(const ir::ExprNode& call,
                                          const arith::Analyzer& analyzer) {
  if (call.args.size() != 3) return OpError(call, "expects x, indices and output_shape (or none)");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, WindowInput(call, 0));
  const ir::Expr& shape = call.args[2];
  if (shape->kind == ir::ExprKind::kShapeExpr) return StructInfo::Tensor(shape->values, x->dtype);
  if (!ir::IsNone(shape) || !x->shape) return StructInfo::TensorRank(x->ndim, x->dtype);
  const std::vector<PrimExpr>& xs = *x->shape;
  KILN_ASSIGN_OR_RETURN(Window win, ReadWindow(call, xs.size() - 2));
  std::vector<PrimExpr> out = {xs[0], xs[1]};
  for (size_t d = 0; d < win.rank(); ++d) {
    PrimExpr extent = (xs[d + 2] - IntImm(1)) * IntImm(win.strides[d]) + IntImm(win.kernel[d]) -
                      IntImm(win.pads[d]) - IntImm(win.pads[d + win.rank()]);
    out.push_back(analyzer.Simplify(extent));
  }
  return StructInfo::Tensor(std::move(out), x->dtype);
}

}  // namespace

const StructInfo* OptionalTensorArg(const ir::ExprNode& call, size_t i) {
  if (i >= call.args.size() || ir::IsNone(call.args[i])) return nullptr;
  const StructInfo& info = call.args[i]->struct_info;
  return info.is_tensor() ? &info : nullptr;
}

std::vector<OpDef> NNConvOps() {
  return {
      {"conv", InferConv},
      {"conv_transpose", InferConv},
      {"conv_integer", InferConvInteger},
      {"qlinear_conv", InferQLinearConv},
      {"max_pool", InferPool},
      {"max_pool_indices", InferPool},
      {"average_pool", InferPool},
      {"lp_pool", InferPool},
      {"global_average_pool", InferGlobalPool},
      {"global_max_pool", InferGlobalPool},
      {"max_unpool", InferMaxUnpool},
  };
}

}  // namespace kiln::op
