// Quantization: (de)quantize with per-tensor or per-axis scales, dynamic quantization, and
// the integer and quantized-linear matmuls.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/nn_ops.h"

namespace kiln::op {
namespace {

using arith::DataType;
using arith::PrimExpr;
using ir::StructInfo;

// A scale or zero point: a scalar, or 1-D with one entry per slice of x along `axis`.
absl::Status CheckQuantParam(const ir::ExprNode& call, size_t i, const StructInfo& x,
                             const arith::Analyzer& analyzer) {
  const StructInfo* p = OptionalTensorArg(call, i);
  if (!p || !p->shape || p->shape->empty()) return absl::OkStatus();
  if (p->shape->size() != 1) {
    return OpError(call, absl::StrCat("argument ", i, " must be a scalar or 1-D"));
  }
  if (!x.shape || (*p->shape)[0]->is_const_int(1)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 1), x.shape->size()));
  if (!analyzer.ProveEqual((*p->shape)[0], (*x.shape)[axis])) {
    return OpError(call, absl::StrCat("argument ", i, " has ", arith::ToString((*p->shape)[0]),
                                      " entries for axis ", axis, " of extent ",
                                      arith::ToString((*x.shape)[axis])));
  }
  return absl::OkStatus();
}

// quantize_linear(x, scale, zero_point or none): the zero point's type, uint8 without one.
// dequantize_linear(x, scale, zero_point or none): the scale's type.
absl::StatusOr<StructInfo> InferQuantize(const ir::ExprNode& call,
                                         const arith::Analyzer& analyzer) {
  if (call.args.size() != 3) return OpError(call, "expects x, scale and zero point (or none)");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* scale, TensorArg(call, 1));
  for (size_t i = 1; i < 3; ++i) KILN_RETURN_IF_ERROR(CheckQuantParam(call, i, *x, analyzer));
  const StructInfo* zp = OptionalTensorArg(call, 2);
  DataType dtype = scale->dtype;
  if (call.name == "quantize_linear") dtype = zp ? zp->dtype : DataType::UInt(8);
  StructInfo out = *x;
  out.dtype = dtype;
  return out;
}

// dynamic_quantize_linear(x): (y uint8, scale f32 scalar, zero_point uint8 scalar).
absl::StatusOr<StructInfo> InferDynamicQuantize(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  StructInfo y = *x;
  y.dtype = DataType::UInt(8);
  return StructInfo::Tuple(
      {y, StructInfo::Tensor({}, DataType::Float(32)), StructInfo::Tensor({}, DataType::UInt(8))});
}

// matmul_integer(a, b, a_zero_point or none, b_zero_point or none): int32.
// qlinear_matmul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): y_zp's type.
absl::StatusOr<StructInfo> InferIntegerMatmul(const ir::ExprNode& call,
                                              const arith::Analyzer& analyzer) {
  bool qlinear = call.name == "qlinear_matmul";
  if (call.args.size() != (qlinear ? 8u : 4u)) {
    return OpError(call, absl::StrCat("expects ", qlinear ? 8 : 4, " arguments"));
  }
  KILN_ASSIGN_OR_RETURN(const StructInfo* a, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* b, TensorArg(call, qlinear ? 3 : 1));
  DataType dtype = DataType::Int(32);
  if (qlinear) {
    KILN_ASSIGN_OR_RETURN(const StructInfo* y_zp, TensorArg(call, 7));
    dtype = y_zp->dtype;
  }
  if (!a->shape || !b->shape) {
    return StructInfo::TensorRank(a->ndim < 0 || b->ndim < 0 ? -1 : std::max(a->ndim, b->ndim),
                                  dtype);
  }
  KILN_ASSIGN_OR_RETURN(auto out, MatmulShape(call, *a->shape, *b->shape, analyzer));
  return StructInfo::Tensor(std::move(out), dtype);
}

}  // namespace

std::vector<OpDef> NNQuantOps() {
  return {
      {"quantize_linear", InferQuantize},
      {"dequantize_linear", InferQuantize},
      {"dynamic_quantize_linear", InferDynamicQuantize},
      {"matmul_integer", InferIntegerMatmul},
      {"qlinear_matmul", InferIntegerMatmul},
  };
}

}  // namespace kiln::op
