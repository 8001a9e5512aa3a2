// ONNX neural-network operators: MatMul, Gemm, the softmax family and Einsum here;
// convolution and pooling, normalization and quantization in onnx_nn_*.cc.
#include "compiler/frontend/onnx_nn.h"

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"

namespace kiln::frontend {
namespace {

using arith::IntImm;
using arith::PrimExpr;

absl::StatusOr<std::vector<PrimExpr>> KnownShape(const ir::Expr& x, const std::string& what) {
  if (!x->struct_info.shape) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must have a known shape"));
  }
  return *x->struct_info.shape;
}

absl::Status ConvertMatMul(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr b, ctx.Input(1));
  return EmitMatmulOutput(ctx, "matmul", {a, b}, 0, 1);
}

// Gemm: Y = alpha * op(A) @ op(B) + beta * C, op being an optional transpose; C broadcasts.
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
      KILN_ASSIGN_OR_RETURN(
          c, ctx.Emit("multiply", {c, ScalarConstant(beta, dtype)}, {}, name + "_c"));
    }
    KILN_ASSIGN_OR_RETURN(y, ctx.Emit("add", {y, c}, {}, name));
  }
  ctx.SetOutput(0, y);
  return absl::OkStatus();
}

PrimExpr Product(const std::vector<PrimExpr>& dims, size_t begin, size_t end) {
  PrimExpr p = IntImm(1);
  for (size_t i = begin; i < end; ++i) p = p * dims[i];
  return p;
}

// Softmax, LogSoftmax and Hardmax: opset 13 made them act on one axis; before, they
// flattened [axis, rank) into one dim (and axis defaulted to 1).
Converter ConvertSoftmax(const std::string& op) {
  return [op](ImportContext& ctx) -> absl::Status {
    const std::string& name = ctx.node().output(0);
    KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
    int64_t rank = x->struct_info.ndim;
    int64_t axis = ctx.IntAttr("axis", ctx.opset() >= 13 ? -1 : 1);
    if (rank < 0) return absl::InvalidArgumentError("input rank must be known");
    if (axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("axis ", axis, " out of range for rank ", rank));
    }
    if (axis < 0) axis += rank;
    if (ctx.opset() >= 13 || axis == rank - 1) return ctx.EmitOutput(op, {x}, {{"axis", axis}});
    KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> dims, KnownShape(x, "input"));
    const arith::Analyzer& an = ctx.analyzer();
    PrimExpr outer = an.Simplify(Product(dims, 0, axis));
    PrimExpr inner = an.Simplify(Product(dims, axis, dims.size()));
    KILN_ASSIGN_OR_RETURN(ir::Expr flat, ctx.Emit("reshape", {x, ir::MakeShapeExpr({outer, inner})},
                                                  {}, name + "_2d"));
    KILN_ASSIGN_OR_RETURN(ir::Expr y,
                          ctx.Emit(op, {flat}, {{"axis", int64_t{1}}}, name + "_" + op));
    return ctx.EmitOutput("reshape", {y, ir::MakeShapeExpr(dims)});
  };
}

absl::Status ConvertEinsum(ImportContext& ctx) {
  std::vector<ir::Expr> operands;
  for (int i = 0; i < ctx.node().input_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(i));
    operands.push_back(x);
  }
  if (!ctx.Attr("equation")) return absl::InvalidArgumentError("equation attribute is required");
  return ctx.EmitOutput("einsum", operands, {{"equation", ctx.StringAttr("equation", "")}});
}

}  // namespace

absl::Status EmitMatmulOutput(ImportContext& ctx, const std::string& op, std::vector<ir::Expr> args,
                              size_t a, size_t b) {
  const std::string& name = ctx.node().output(0);
  bool a_vector = args[a]->struct_info.ndim == 1, b_vector = args[b]->struct_info.ndim == 1;
  if (!a_vector && !b_vector) return ctx.EmitOutput(op, args);
  if (a_vector) {
    KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> k, KnownShape(args[a], "a 1-D operand"));
    KILN_ASSIGN_OR_RETURN(
        args[a],
        ctx.Emit("reshape", {args[a], ir::MakeShapeExpr({IntImm(1), k[0]})}, {}, name + "_a2d"));
  }
  if (b_vector) {
    KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> k, KnownShape(args[b], "a 1-D operand"));
    KILN_ASSIGN_OR_RETURN(
        args[b],
        ctx.Emit("reshape", {args[b], ir::MakeShapeExpr({k[0], IntImm(1)})}, {}, name + "_b2d"));
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr y, ctx.Emit(op, args, {}, name + "_" + op));
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> dims, KnownShape(y, "the product"));
  // Drop the dims the 1-D operands gained: b's trailing 1 first, then a's (now last) 1.
  if (b_vector) dims.pop_back();
  if (a_vector) dims.erase(dims.end() - 1 - (b_vector ? 0 : 1));
  return ctx.EmitOutput("reshape", {y, ir::MakeShapeExpr(dims)});
}

void RegisterNNConverters(ConverterTable& table) {
  table["MatMul"] = ConvertMatMul;
  table["Gemm"] = ConvertGemm;
  table["Softmax"] = ConvertSoftmax("softmax");
  table["LogSoftmax"] = ConvertSoftmax("log_softmax");
  table["Hardmax"] = ConvertSoftmax("hardmax");
  table["Einsum"] = ConvertEinsum;
  RegisterNNConvConverters(table);
  RegisterNNNormConverters(table);
  RegisterNNQuantConverters(table);
}

}  // namespace kiln::frontend
