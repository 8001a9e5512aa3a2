// ONNX operators that make tensors from shapes or scalars: Range, ConstantOfShape, EyeLike,
// Trilu, OneHot.
#include <cmath>

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

// Integer start, limit and delta given at run time become symbolic variables (delta checked
// non-zero then), so the length is an expression of them; float ranges keep only the rank.
absl::Status BindRuntimeRangeOperands(ImportContext& ctx, std::vector<ir::Expr>& args) {
  for (const ir::Expr& arg : args) {
    if (!ctx.ConstantValue(arg) && arg->kind != ir::ExprKind::kShapeExpr &&
        !IsSmallIntVector(arg)) {
      return absl::OkStatus();
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (ctx.ConstantValue(args[i]) || args[i]->kind == ir::ExprKind::kShapeExpr) continue;
    KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> v,
                          ctx.BindRuntimeValues(args[i], ctx.node().input(i)));
    args[i] = ir::MakeShapeExpr(v);
    if (i == 2) {
      PrimExpr is_zero = arith::Binary(arith::ExprKind::kEQ, v[0], arith::IntImm(0));
      ctx.CheckAtRunTime(arith::Select(is_zero, arith::IntImm(1), arith::IntImm(0)),
                         arith::IntImm(0), ctx.node().input(2) + "_nonzero");
    }
  }
  return absl::OkStatus();
}

bool IsOneValue(const ir::StructInfo& info) {
  if (!info.is_tensor() || !info.shape) return false;
  for (const PrimExpr& d : *info.shape) {
    if (!d->is_const_int(1)) return false;
  }
  return true;
}

// The length of a float range given at run time, max(ceil((limit - start) / delta), 0), as a
// fresh symbolic variable. It is a function of float values, which symbolic (integer)
// expressions cannot state, so it is a count that ordinary ops compute in double, as the
// reference does (interp/tensor_create.cc), and that host code reads once it exists
// (ImportContext::BindRuntimeValues), as NonZero's count. A zero delta counts -1, which a
// run-time check rejects; the length is capped so that its cast to i64 is defined.
absl::StatusOr<PrimExpr> BindFloatRangeLength(ImportContext& ctx, std::vector<ir::Expr> args) {
  const std::string name = ctx.node().output(0);
  arith::DataType f64 = arith::DataType::Float(64);
  for (ir::Expr& arg : args) {
    if (arg->struct_info.dtype == f64) continue;
    KILN_ASSIGN_OR_RETURN(arg, ctx.Emit("cast", {arg}, {{"to", f64.ToString()}}, name + "_f64"));
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr span,
                        ctx.Emit("subtract", {args[1], args[0]}, {}, name + "_span"));
  KILN_ASSIGN_OR_RETURN(ir::Expr steps, ctx.Emit("divide", {span, args[2]}, {}, name + "_steps"));
  KILN_ASSIGN_OR_RETURN(steps, ctx.Emit("ceil", {steps}, {}, name + "_steps"));
  KILN_ASSIGN_OR_RETURN(steps,
                        ctx.Emit("max", {steps, ScalarConstant(0, f64)}, {}, name + "_steps"));
  KILN_ASSIGN_OR_RETURN(steps, ctx.Emit("min", {steps, ScalarConstant(std::ldexp(1.0, 62), f64)},
                                        {}, name + "_steps"));
  KILN_ASSIGN_OR_RETURN(ir::Expr zero,
                        ctx.Emit("equal", {args[2], ScalarConstant(0, f64)}, {}, name + "_zero"));
  KILN_ASSIGN_OR_RETURN(ir::Expr count, ctx.Emit("where", {zero, ScalarConstant(-1, f64), steps},
                                                 {}, name + "_count"));
  KILN_ASSIGN_OR_RETURN(
      count,
      ctx.Emit("cast", {count}, {{"to", arith::DataType::Int(64).ToString()}}, name + "_count"));
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> n, ctx.BindRuntimeValues(count, name + "_n"));
  KILN_CHECK_EQ(n.size(), 1u) << "a count binds one value";
  PrimExpr negative = arith::Binary(arith::ExprKind::kLT, n[0], arith::IntImm(0));
  ctx.CheckAtRunTime(arith::Select(negative, arith::IntImm(1), arith::IntImm(0)), arith::IntImm(0),
                     ctx.node().input(2) + "_nonzero");
  return n[0];
}

absl::Status ConvertRange(ImportContext& ctx) {
  std::vector<ir::Expr> args;
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr v, ctx.Input(i));
    args.push_back(SymbolicScalar(ctx, v));
  }
  bool float_at_run_time = args[0]->struct_info.dtype.is_float();
  for (const ir::Expr& arg : args) float_at_run_time &= IsOneValue(arg->struct_info);
  if (float_at_run_time &&
      !(ctx.ConstantValue(args[0]) && ctx.ConstantValue(args[1]) && ctx.ConstantValue(args[2]))) {
    KILN_ASSIGN_OR_RETURN(PrimExpr n, BindFloatRangeLength(ctx, args));
    args.push_back(ir::MakeShapeExpr({n}));
  }
  KILN_RETURN_IF_ERROR(BindRuntimeRangeOperands(ctx, args));
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
  KILN_ASSIGN_OR_RETURN(ir::Expr dims, DimsArg(ctx, shape, ctx.node().input(0)));
  return ctx.EmitOutput("constant_of_shape", {dims, Constant(std::move(value))});
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

// A depth read at run time (one integer or float value; a float truncates) is bound to a
// symbolic variable, checked >= 1 then, so the new axis keeps it as its extent.
absl::StatusOr<ir::Expr> OneHotDepth(ImportContext& ctx, const ir::Expr& depth) {
  const ir::StructInfo& info = depth->struct_info;
  bool one_value =
      info.is_tensor() &&
      (info.ndim == 0 || (info.ndim == 1 && info.shape && (*info.shape)[0]->is_const_int(1)));
  if (ctx.ConstantValue(depth) || ctx.SymbolicValue(depth) || !one_value ||
      !(info.dtype.is_int() || info.dtype.is_float())) {
    return SymbolicScalar(ctx, depth);
  }
  const std::string& name = ctx.node().input(1);
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> v, ctx.BindRuntimeValues(depth, name));
  PrimExpr positive = arith::Binary(arith::ExprKind::kGE, v[0], arith::IntImm(1));
  // Reports the depth itself when it is below 1.
  ctx.CheckAtRunTime(arith::Select(positive, arith::IntImm(1), v[0]), arith::IntImm(1),
                     name + "_positive");
  return ir::MakeShapeExpr(v);
}

absl::Status ConvertOneHot(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr indices, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr depth, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(ir::Expr values, ctx.Input(2));
  KILN_ASSIGN_OR_RETURN(depth, OneHotDepth(ctx, depth));
  return ctx.EmitOutput("one_hot", {indices, depth, values}, {{"axis", ctx.IntAttr("axis", -1)}});
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
