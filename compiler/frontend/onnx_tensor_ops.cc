// ONNX shape and data-movement operators.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/import_context.h"
#include "compiler/frontend/onnx_tensor.h"

namespace kiln::frontend {
namespace {

using arith::PrimExpr;

PrimExpr Product(const std::vector<PrimExpr>& dims, size_t begin, size_t end) {
  PrimExpr p = arith::IntImm(1);
  for (size_t i = begin; i < end; ++i) p = p * dims[i];
  return p;
}

// Resolves Reshape's target: 0 copies the input dim (unless allowzero), -1 is inferred.
absl::StatusOr<std::vector<PrimExpr>> ResolveReshape(const ImportContext& ctx,
                                                      const std::vector<PrimExpr>& in,
                                                      const std::vector<PrimExpr>& target) {
  bool allow_zero = ctx.IntAttr("allowzero", 0) != 0;
  std::vector<PrimExpr> out;
  int infer_at = -1;
  PrimExpr known = arith::IntImm(1);
  for (size_t i = 0; i < target.size(); ++i) {
    const PrimExpr& v = target[i];
    if (v->is_const_int(-1)) {
      if (infer_at >= 0) return absl::InvalidArgumentError("shape has more than one -1");
      infer_at = static_cast<int>(i);
      out.push_back(nullptr);
      continue;
    }
    if (v->is_const_int(0) && !allow_zero) {
      if (i >= in.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape entry ", i, " is 0 but the input has rank ", in.size()));
      }
      out.push_back(in[i]);
    } else if (v->kind == arith::ExprKind::kIntImm && v->int_value < 0) {
      return absl::InvalidArgumentError(absl::StrCat("shape entry ", i, " is ", v->int_value));
    } else {
      out.push_back(v);
    }
    known = known * out.back();
  }
  if (infer_at >= 0) {
    const arith::Analyzer& a = ctx.analyzer();
    out[infer_at] = a.Simplify(arith::FloorDiv(Product(in, 0, in.size()), a.Simplify(known)));
  }
  return out;
}

absl::Status ConvertReshape(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr shape, ctx.Input(1));
  auto target = ctx.SymbolicValue(shape);
  const ir::StructInfo& info = x->struct_info;
  if (!target || !info.shape) {
    // Known only at run time: the result keeps its rank and the kernel checks the size.
    return ctx.EmitOutput("reshape", {x, shape});
  }
  KILN_ASSIGN_OR_RETURN(auto dims, ResolveReshape(ctx, *info.shape, *target));
  return ctx.EmitOutput("reshape", {x, ir::MakeShapeExpr(dims)});
}

absl::Status ConvertFlatten(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  if (!x->struct_info.shape) return absl::InvalidArgumentError("input shape must be known");
  const std::vector<PrimExpr>& dims = *x->struct_info.shape;
  int64_t rank = dims.size();
  int64_t axis = ctx.IntAttr("axis", 1);
  if (axis < -rank || axis > rank) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  if (axis < 0) axis += rank;
  const arith::Analyzer& a = ctx.analyzer();
  std::vector<PrimExpr> shape = {a.Simplify(Product(dims, 0, axis)),
                                 a.Simplify(Product(dims, axis, rank))};
  return ctx.EmitOutput("reshape", {x, ir::MakeShapeExpr(shape)});
}

absl::Status ConvertTranspose(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  std::vector<int64_t> perm = ctx.IntsAttr("perm");
  if (!ctx.Attr("perm")) {
    for (int64_t i = x->struct_info.ndim - 1; i >= 0; --i) perm.push_back(i);
  }
  return ctx.EmitOutput("transpose", {x}, {{"perm", perm}});
}

absl::Status ConvertConstant(ImportContext& ctx) {
  if (ctx.node().attribute_size() != 1) {
    return absl::InvalidArgumentError("Constant needs exactly one value attribute");
  }
  KILN_ASSIGN_OR_RETURN(ir::NDArray value, NDArrayFromConstantAttr(ctx.node().attribute(0)));
  ctx.SetOutput(0, Constant(std::move(value)));
  return absl::OkStatus();
}

absl::Status ConvertIdentity(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  ctx.SetOutput(0, x);
  return absl::OkStatus();
}

}  // namespace

void RegisterTensorConverters(ConverterTable& table) {
  table["Reshape"] = ConvertReshape;
  table["Flatten"] = ConvertFlatten;
  table["Transpose"] = ConvertTranspose;
  table["Constant"] = ConvertConstant;
  table["Identity"] = ConvertIdentity;
}

}  // namespace kiln::frontend
