// ONNX reductions, recurrent networks, losses and signal processing.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/import_context.h"
#include "compiler/frontend/onnx_reduce_internal.h"
#include "compiler/frontend/onnx_tensor_ops.h"

namespace kiln::frontend {
namespace {

using arith::PrimExpr;

// The symbolic value of a reduction over the only axis of a 1-D integer tensor (say the
// element count Shape -> ReduceProd computes), so that shapes built from it stay symbolic.
std::optional<PrimExpr> ReduceSymbolic(const std::string& op, const std::vector<PrimExpr>& v,
                                       const arith::Analyzer& an) {
  if (v.empty()) return std::nullopt;
  PrimExpr r = v[0];
  for (size_t i = 1; i < v.size(); ++i) {
    if (op == "reduce_sum") {
      r = r + v[i];
    } else if (op == "reduce_prod") {
      r = r * v[i];
    } else if (op == "reduce_max") {
      r = arith::Max(r, v[i]);
    } else if (op == "reduce_min") {
      r = arith::Min(r, v[i]);
    } else {
      return std::nullopt;
    }
  }
  return an.Simplify(r);
}

void RecordSymbolic(ImportContext& ctx, const std::string& op, const ir::Expr& x,
                    const ir::Expr& out) {
  if (x->struct_info.ndim != 1 || !x->struct_info.dtype.is_int()) return;
  auto values = ctx.SymbolicValue(x);
  if (!values) return;
  std::optional<PrimExpr> r = ReduceSymbolic(op, *values, ctx.analyzer());
  if (r) ctx.SetSymbolicValue(out, {*r});
}

// Axes read at run time (a small integer vector of static length) are bound to symbolic
// variables and checked then, so the result keeps its dims: the reduction keeps the reduced
// dims (as 1, a select over the axes) and, without keepdims, a reshape drops them.
absl::Status EmitRuntimeAxesReduce(const std::string& op, ImportContext& ctx, const ir::Expr& x,
                                   const ir::Expr& axes, ir::Attrs attrs) {
  const std::vector<PrimExpr>& in = *x->struct_info.shape;
  int64_t rank = in.size();
  const std::string& name = ctx.node().input(1);
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> values, ctx.BindRuntimeValues(axes, name));
  if (static_cast<int64_t>(values.size()) > rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("axes has ", values.size(), " entries for rank ", rank));
  }
  CheckAxesAtRunTime(ctx, values, rank, name);
  bool keepdims = std::get<int64_t>(attrs["keepdims"]) != 0;
  attrs.erase("axes");
  attrs["keepdims"] = int64_t{1};
  KILN_ASSIGN_OR_RETURN(ir::Expr kept, ctx.Emit(op, {x, ir::MakeShapeExpr(values)}, attrs,
                                                keepdims ? "" : ctx.node().output(0) + "_kept"));
  if (keepdims) {
    ctx.SetOutput(0, kept);
    return absl::OkStatus();
  }
  std::vector<PrimExpr> dims = KeptDims(in, op::NamedPositions(values, rank), rank - values.size());
  return ctx.EmitOutput("reshape", {kept, ir::MakeShapeExpr(dims)},
                        {{"checked_at_run_time", int64_t{1}}});
}

// Axes are an attribute before opset 13 (ReduceSum) or 18 (the others), an optional input
// after. Known axes become the `axes` attribute; run-time ones stay an operand.
absl::Status ConvertReduce(const std::string& op, ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  ir::Attrs attrs = {{"keepdims", ctx.IntAttr("keepdims", 1)},
                     {"noop_with_empty_axes", ctx.IntAttr("noop_with_empty_axes", 0)}};
  std::vector<ir::Expr> args = {x};
  bool axes_input = ctx.opset() >= (op == "reduce_sum" ? 13 : 18);
  attrs["axes"] = ctx.IntsAttr("axes");
  if (axes_input && ctx.HasInput(1)) {
    KILN_ASSIGN_OR_RETURN(ir::Expr axes, ctx.Input(1));
    if (const ir::NDArray* known = ctx.ConstantValue(axes)) {
      std::vector<int64_t> values;
      for (int64_t i = 0; i < known->num_elements(); ++i) values.push_back(known->GetInt(i));
      attrs["axes"] = values;
    } else if (IsSmallIntVector(axes) && axes->struct_info.ndim == 1 &&
               (*axes->struct_info.shape)[0]->is_const_int(0)) {
      attrs["axes"] = std::vector<int64_t>{};  // empty at run time too
    } else if (IsSmallIntVector(axes) && x->struct_info.shape) {
      return EmitRuntimeAxesReduce(op, ctx, x, axes, attrs);
    } else {
      attrs.erase("axes");
      args.push_back(axes);
    }
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr out, ctx.Emit(op, args, attrs));
  if (args.size() == 1) {
    const auto& axes = std::get<std::vector<int64_t>>(attrs["axes"]);
    bool all = axes.empty() ? !ctx.IntAttr("noop_with_empty_axes", 0)
                            : axes.size() == 1 && (axes[0] == 0 || axes[0] == -1);
    if (all) RecordSymbolic(ctx, op, x, out);
  }
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

absl::Status CheckReduction(const std::string& reduction) {
  if (reduction == "none" || reduction == "sum" || reduction == "mean") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("unknown reduction '", reduction, "'"));
}

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss share operands and attributes.
absl::StatusOr<std::pair<std::vector<ir::Expr>, ir::Attrs>> LossOperands(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr input, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr target, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(ir::Expr weight, ctx.OptionalInput(2));
  std::string reduction = ctx.StringAttr("reduction", "mean");
  KILN_RETURN_IF_ERROR(CheckReduction(reduction));
  ir::Attrs attrs = {{"reduction", reduction}};
  // No default: without the attribute no target value is ignored.
  if (ctx.Attr("ignore_index")) attrs["ignore_index"] = ctx.IntAttr("ignore_index", 0);
  return std::make_pair(std::vector<ir::Expr>{input, target, weight}, attrs);
}

absl::Status ConvertNLLLoss(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto operands, LossOperands(ctx));
  return ctx.EmitOutput("negative_log_likelihood_loss", operands.first, operands.second);
}

absl::Status ConvertSoftmaxCrossEntropyLoss(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto operands, LossOperands(ctx));
  return ctx.EmitTupleOutputs("softmax_cross_entropy_loss", operands.first, operands.second);
}

}  // namespace

void RegisterReduceConverters(ConverterTable& table) {
  const std::pair<const char*, const char*> reductions[] = {
      {"ReduceSum", "reduce_sum"},
      {"ReduceMean", "reduce_mean"},
      {"ReduceMax", "reduce_max"},
      {"ReduceMin", "reduce_min"},
      {"ReduceProd", "reduce_prod"},
      {"ReduceL1", "reduce_l1"},
      {"ReduceL2", "reduce_l2"},
      {"ReduceLogSum", "reduce_log_sum"},
      {"ReduceLogSumExp", "reduce_log_sum_exp"},
      {"ReduceSumSquare", "reduce_sum_square"},
  };
  for (const auto& [onnx_name, op] : reductions) {
    table[onnx_name] = [op = std::string(op)](ImportContext& ctx) {
      return ConvertReduce(op, ctx);
    };
  }
  table["NegativeLogLikelihoodLoss"] = ConvertNLLLoss;
  table["SoftmaxCrossEntropyLoss"] = ConvertSoftmaxCrossEntropyLoss;
  RegisterRecurrentConverters(table);
  RegisterSignalConverters(table);
}

}  // namespace kiln::frontend
