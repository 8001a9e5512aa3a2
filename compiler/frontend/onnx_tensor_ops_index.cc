// ONNX indexing operators: Gather, GatherElements, GatherND, Scatter, ScatterElements,
// ScatterND, Compress, NonZero.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_tensor_ops.h"

namespace kiln::frontend {
namespace {

using arith::PrimExpr;

// Gathering constant positions of a vector whose elements are known keeps them known
// (Shape -> Gather(0) gives the batch size).
void RecordGatheredValues(ImportContext& ctx, const ir::Expr& x, const ir::Expr& indices,
                          const ir::Expr& out) {
  auto values = ctx.SymbolicValue(x);
  auto positions = ConstantInts(ctx, indices);
  if (!values || !positions || x->struct_info.ndim != 1 || indices->struct_info.ndim > 1) return;
  std::vector<PrimExpr> picked;
  int64_t n = values->size();
  for (int64_t p : *positions) {
    if (p < -n || p >= n) return;
    picked.push_back((*values)[p < 0 ? p + n : p]);
  }
  ctx.SetSymbolicValue(out, picked);
}

absl::Status ConvertGather(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr indices, ctx.Input(1));
  int64_t axis = ctx.IntAttr("axis", 0);
  KILN_ASSIGN_OR_RETURN(ir::Expr out, ctx.Emit("gather", {x, indices}, {{"axis", axis}}));
  if (axis == 0 || axis == -1) RecordGatheredValues(ctx, x, indices, out);
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

absl::Status ConvertGatherElements(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr indices, ctx.Input(1));
  return ctx.EmitOutput("gather_elements", {x, indices}, {{"axis", ctx.IntAttr("axis", 0)}});
}

absl::Status ConvertGatherND(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr indices, ctx.Input(1));
  return ctx.EmitOutput("gather_nd", {x, indices}, {{"batch_dims", ctx.IntAttr("batch_dims", 0)}});
}

// Scatter (opset 9-10) is ScatterElements under its old name.
absl::Status ConvertScatterElements(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr indices, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(ir::Expr updates, ctx.Input(2));
  return ctx.EmitOutput(
      "scatter_elements", {x, indices, updates},
      {{"axis", ctx.IntAttr("axis", 0)}, {"reduction", ctx.StringAttr("reduction", "none")}});
}

absl::Status ConvertScatterND(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr indices, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(ir::Expr updates, ctx.Input(2));
  return ctx.EmitOutput("scatter_nd", {x, indices, updates},
                        {{"reduction", ctx.StringAttr("reduction", "none")}});
}

// How many elements of `x` are not zero, as a fresh symbolic variable: a count computed
// by ordinary ops (cast to bool, to i64, summed) that host code reads once it exists and
// binds with match_cast (ImportContext::BindRuntimeValues). The op that fills the
// data-dependent output then has a symbolic shape, as any later op that uses it.
absl::StatusOr<PrimExpr> BindNonZeroCount(ImportContext& ctx, ir::Expr x, const std::string& name) {
  if (x->struct_info.dtype != arith::DataType::Bool()) {
    KILN_ASSIGN_OR_RETURN(
        x, ctx.Emit("cast", {x}, {{"to", arith::DataType::Bool().ToString()}}, name + "_mask"));
  }
  KILN_ASSIGN_OR_RETURN(
      x, ctx.Emit("cast", {x}, {{"to", arith::DataType::Int(64).ToString()}}, name + "_ones"));
  ir::Attrs all = {{"axes", std::vector<int64_t>{}},
                   {"keepdims", int64_t{0}},
                   {"noop_with_empty_axes", int64_t{0}}};
  KILN_ASSIGN_OR_RETURN(ir::Expr count, ctx.Emit("reduce_sum", {x}, all, name + "_count"));
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> values, ctx.BindRuntimeValues(count, name + "_n"));
  KILN_CHECK_EQ(values.size(), 1u) << "a count binds one value";
  return values[0];
}

// Compress's condition may be shorter than the axis, not longer: an error the importer reports
// when it can prove it and host code checks otherwise (the fill kernel would leave part of
// its output unwritten).
absl::Status CheckConditionFits(ImportContext& ctx, const ir::Expr& x, const ir::Expr& condition,
                                int64_t axis) {
  const auto& x_shape = x->struct_info.shape;
  const auto& c_shape = condition->struct_info.shape;
  if (!x_shape || !c_shape || c_shape->size() != 1) return absl::OkStatus();
  int64_t rank = static_cast<int64_t>(x_shape->size());
  if (axis < -rank || axis >= rank) return absl::OkStatus();  // op inference reports it
  PrimExpr length = (*c_shape)[0], extent = (*x_shape)[axis < 0 ? axis + rank : axis];
  if (ctx.analyzer().ProveLE(length, extent)) return absl::OkStatus();
  if (ctx.analyzer().ProveGE(length, extent + arith::IntImm(1))) {
    return absl::InvalidArgumentError(
        absl::StrCat("Compress: condition has ", arith::ToString(length),
                     " entries, more than the axis' ", arith::ToString(extent)));
  }
  // Reported as "a size computed from them is <the axis>, expected <the condition's length>".
  ctx.CheckAtRunTime(arith::Min(length, extent), length, ctx.node().output(0) + "_condition_fits");
  return absl::OkStatus();
}

// Without an axis, Compress works on the flattened input.
absl::Status ConvertCompress(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr condition, ctx.Input(1));
  int64_t axis = ctx.IntAttr("axis", 0);
  if (!ctx.Attr("axis")) {
    const std::string name = ctx.node().output(0) + "_flat";
    ir::Expr flat_shape = IntsConstant({-1});
    if (x->struct_info.shape) {
      PrimExpr n = arith::IntImm(1);
      for (const PrimExpr& d : *x->struct_info.shape) n = n * d;
      flat_shape = ir::MakeShapeExpr({ctx.analyzer().Simplify(n)});
    }
    KILN_ASSIGN_OR_RETURN(x,
                          ctx.Emit("reshape", {x, flat_shape}, {{"allowzero", int64_t{0}}}, name));
  }
  std::vector<ir::Expr> args = {x, condition};
  KILN_RETURN_IF_ERROR(CheckConditionFits(ctx, x, condition, axis));
  if (x->struct_info.shape && condition->struct_info.dtype == arith::DataType::Bool()) {
    KILN_ASSIGN_OR_RETURN(PrimExpr n, BindNonZeroCount(ctx, condition, ctx.node().output(0)));
    args.push_back(ir::MakeShapeExpr({n}));
  }
  return ctx.EmitOutput("compress", std::move(args), {{"axis", axis}});
}

absl::Status ConvertNonZero(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  std::vector<ir::Expr> args = {x};
  if (x->struct_info.shape) {
    KILN_ASSIGN_OR_RETURN(PrimExpr n, BindNonZeroCount(ctx, x, ctx.node().output(0)));
    args.push_back(ir::MakeShapeExpr({n}));
  }
  return ctx.EmitOutput("non_zero", std::move(args));
}

}  // namespace

void RegisterTensorIndexConverters(ConverterTable& table) {
  table["Gather"] = ConvertGather;
  table["GatherElements"] = ConvertGatherElements;
  table["GatherND"] = ConvertGatherND;
  table["Scatter"] = ConvertScatterElements;
  table["ScatterElements"] = ConvertScatterElements;
  table["ScatterND"] = ConvertScatterND;
  table["Compress"] = ConvertCompress;
  table["NonZero"] = ConvertNonZero;
}

}  // namespace kiln::frontend
