// ONNX neural-network operators: matmul, convolution, pooling, normalization, softmax.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/import_context.h"

namespace kiln::frontend {
namespace {

using arith::PrimExpr;

absl::Status ConvertMatMul(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr b, ctx.Input(1));
  return ctx.EmitOutput("matmul", {a, b});
}

// Gemm: Y = alpha * op(A) @ op(B) + beta * C, op being an optional transpose.
absl::Status ConvertGemm(ImportContext& ctx) {
  const std::string& name = ctx.node().output(0);
  KILN_ASSIGN_OR_RETURN(ir::Expr a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr b, ctx.Input(1));
  ir::Attrs swap = {{"perm", std::vector<int64_t>{1, 0}}};
  if (ctx.IntAttr("transA", 0)) {
    KILN_ASSIGN_OR_RETURN(a, ctx.Emit("transpose", {a}, swap, name + "_a_t"));
  }
  if (ctx.IntAttr("transB", 0)) {
    KILN_ASSIGN_OR_RETURN(b, ctx.Emit("transpose", {b}, swap, name + "_b_t"));
  }
  arith::DataType dtype = a->struct_info.dtype;
  float alpha = ctx.FloatAttr("alpha", 1.0f), beta = ctx.FloatAttr("beta", 1.0f);
  bool has_c = ctx.HasInput(2) && beta != 0.0f;
  bool scaled = alpha != 1.0f;
  KILN_ASSIGN_OR_RETURN(ir::Expr y,
                        ctx.Emit("matmul", {a, b}, {}, scaled || has_c ? name + "_mm" : name));
  if (scaled) {
    KILN_ASSIGN_OR_RETURN(y, ctx.Emit("multiply", {y, ScalarConstant(alpha, dtype)}, {},
                                      has_c ? name + "_scaled" : name));
  }
  if (has_c) {
    KILN_ASSIGN_OR_RETURN(ir::Expr c, ctx.Input(2));
    if (beta != 1.0f) {
      KILN_ASSIGN_OR_RETURN(c, ctx.Emit("multiply", {c, ScalarConstant(beta, dtype)}, {},
                                        name + "_c"));
    }
    KILN_ASSIGN_OR_RETURN(y, ctx.Emit("add", {y, c}, {}, name));
  }
  ctx.SetOutput(0, y);
  return absl::OkStatus();
}

PrimExpr Product(const std::vector<PrimExpr>& dims, size_t begin, size_t end) {
  PrimExpr p = arith::IntImm(1);
  for (size_t i = begin; i < end; ++i) p = p * dims[i];
  return p;
}

// Opset 13 made Softmax act on one axis; before, it flattened [axis, rank) into one.
absl::Status ConvertSoftmax(ImportContext& ctx) {
  const std::string& name = ctx.node().output(0);
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  int64_t rank = x->struct_info.ndim;
  int64_t axis = ctx.IntAttr("axis", ctx.opset() >= 13 ? -1 : 1);
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  if (axis < 0) axis += rank;
  if (ctx.opset() >= 13 || axis == rank - 1) {
    return ctx.EmitOutput("softmax", {x}, {{"axis", axis}});
  }
  if (!x->struct_info.shape) return absl::InvalidArgumentError("input shape must be known");
  const std::vector<PrimExpr>& dims = *x->struct_info.shape;
  const arith::Analyzer& an = ctx.analyzer();
  PrimExpr outer = an.Simplify(Product(dims, 0, axis));
  PrimExpr inner = an.Simplify(Product(dims, axis, dims.size()));
  KILN_ASSIGN_OR_RETURN(ir::Expr flat, ctx.Emit("reshape", {x, ir::MakeShapeExpr({outer, inner})},
                                                {}, name + "_2d"));
  KILN_ASSIGN_OR_RETURN(ir::Expr soft,
                        ctx.Emit("softmax", {flat}, {{"axis", int64_t{1}}}, name + "_softmax"));
  return ctx.EmitOutput("reshape", {soft, ir::MakeShapeExpr(dims)});
}

}  // namespace

void RegisterNNConverters(ConverterTable& table) {
  table["MatMul"] = ConvertMatMul;
  table["Gemm"] = ConvertGemm;
  table["Softmax"] = ConvertSoftmax;
}

}  // namespace kiln::frontend
