// ONNX operators that make tensors from shapes or scalars: Range, ConstantOfShape, EyeLike,
// Trilu, OneHot.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_tensor.h"
#include "compiler/frontend/onnx_tensor_ops.h"

namespace kiln::frontend {
namespace {

using arith::PrimExpr;

// A scalar operand whose value is symbolic (a dim computed with Shape) becomes a one-value
// ShapeExpr, so inference sees it; constants and run-time values stay as they are.
ir::Expr SymbolicScalar(const ImportContext& ctx, const ir::Expr& value) {
  if (ctx.ConstantValue(value)) return value;
  auto known = ctx.SymbolicValue(value);
  if (!known || known->size() != 1) return value;
  return ir::MakeShapeExpr(*known);
}

absl::Status ConvertRange(ImportContext& ctx) {
  std::vector<ir::Expr> args;
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr v, ctx.Input(i));
    args.push_back(SymbolicScalar(ctx, v));
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr start, ctx.Input(0));
  return ctx.EmitOutput("range", args, {{"dtype", start->struct_info.dtype.ToString()}});
}

absl::Status ConvertConstantOfShape(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr shape, ctx.Input(0));
  ir::NDArray value = ir::NDArray::Zeros(arith::DataType::Float(32), {1});
  if (const onnx::AttributeProto* attr = ctx.Attr("value")) {
    KILN_ASSIGN_OR_RETURN(value, NDArrayFromTensorProto(attr->t()));
    if (value.num_elements() != 1) return absl::InvalidArgumentError("value must hold one element");
  }
  return ctx.EmitOutput("constant_of_shape",
                        {ShapeLikeArg(ctx, shape), Constant(std::move(value))});
}

absl::Status ConvertEyeLike(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  arith::DataType dtype = x->struct_info.dtype;
  if (ctx.Attr("dtype")) {
    KILN_ASSIGN_OR_RETURN(dtype, DataTypeFromOnnx(ctx.IntAttr("dtype", 0)));
  }
  return ctx.EmitOutput("eye_like", {x}, {{"dtype", dtype.ToString()}, {"k", ctx.IntAttr("k", 0)}});
}

absl::Status ConvertTrilu(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  ir::Expr k = ScalarConstant(0, arith::DataType::Int(64));
  if (ctx.HasInput(1)) {
    KILN_ASSIGN_OR_RETURN(k, ctx.Input(1));
  }
  return ctx.EmitOutput("trilu", {x, k}, {{"upper", ctx.IntAttr("upper", 1)}});
}

absl::Status ConvertOneHot(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr indices, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr depth, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(ir::Expr values, ctx.Input(2));
  return ctx.EmitOutput("one_hot", {indices, SymbolicScalar(ctx, depth), values},
                        {{"axis", ctx.IntAttr("axis", -1)}});
}

}  // namespace

void RegisterTensorCreateConverters(ConverterTable& table) {
  table["Range"] = ConvertRange;
  table["ConstantOfShape"] = ConvertConstantOfShape;
  table["EyeLike"] = ConvertEyeLike;
  table["Trilu"] = ConvertTrilu;
  table["OneHot"] = ConvertOneHot;
}

}  // namespace kiln::frontend
