// ONNX normalizations: BatchNormalization, LayerNormalization, InstanceNormalization, LRN,
// MeanVarianceNormalization.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_nn.h"

namespace kiln::frontend {
namespace {

absl::StatusOr<std::vector<ir::Expr>> Inputs(ImportContext& ctx, int count) {
  std::vector<ir::Expr> args;
  for (int i = 0; i < count; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr arg, ctx.Input(i));
    args.push_back(arg);
  }
  return args;
}

// training_mode (opset 14+) normalizes with the batch's statistics and also returns the
// updated running mean and variance; otherwise the given statistics are used.
absl::Status ConvertBatchNorm(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 5));
  double epsilon = ctx.FloatAttr("epsilon", 1e-5f);
  if (ctx.IntAttr("training_mode", 0) == 0) {
    return ctx.EmitOutput("batch_normalization", args, {{"epsilon", epsilon}});
  }
  double momentum = ctx.FloatAttr("momentum", 0.9f);
  return ctx.EmitTupleOutputs("batch_normalization_training", args,
                              {{"epsilon", epsilon}, {"momentum", momentum}});
}

// Y is layer_normalization; the optional Mean and InvStdDev outputs come from
// layer_normalization_stats, so a model that does not ask for them never computes them.
absl::Status ConvertLayerNorm(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr scale, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(ir::Expr bias, ctx.OptionalInput(2));
  ir::Attrs attrs = {{"axis", ctx.IntAttr("axis", -1)},
                     {"epsilon", static_cast<double>(ctx.FloatAttr("epsilon", 1e-5f))},
                     {"stash_type", ctx.IntAttr("stash_type", 1)}};
  KILN_RETURN_IF_ERROR(ctx.EmitOutput("layer_normalization", {x, scale, bias}, attrs));
  if (!ctx.HasOutput(1) && !ctx.HasOutput(2)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(ir::Expr stats, ctx.Emit("layer_normalization_stats", {x}, attrs,
                                                 ctx.node().output(0) + "_stats"));
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.HasOutput(i)) continue;
    KILN_ASSIGN_OR_RETURN(ir::Expr field,
                          ctx.Bind(ir::MakeTupleGetItem(stats, i - 1), ctx.node().output(i)));
    ctx.SetOutput(i, field);
  }
  return absl::OkStatus();
}

absl::Status ConvertInstanceNorm(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 3));
  double epsilon = ctx.FloatAttr("epsilon", 1e-5f);
  return ctx.EmitOutput("instance_normalization", args, {{"epsilon", epsilon}});
}

absl::Status ConvertLrn(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  if (!ctx.Attr("size")) return absl::InvalidArgumentError("size attribute is required");
  ir::Attrs attrs = {{"alpha", static_cast<double>(ctx.FloatAttr("alpha", 1e-4f))},
                     {"beta", static_cast<double>(ctx.FloatAttr("beta", 0.75f))},
                     {"bias", static_cast<double>(ctx.FloatAttr("bias", 1.0f))},
                     {"size", ctx.IntAttr("size", 1)}};
  return ctx.EmitOutput("lrn", {x}, attrs);
}

absl::Status ConvertMeanVarianceNorm(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  std::vector<int64_t> axes =
      ctx.Attr("axes") ? ctx.IntsAttr("axes") : std::vector<int64_t>{0, 2, 3};
  return ctx.EmitOutput("mean_variance_normalization", {x}, {{"axes", axes}});
}

}  // namespace

void RegisterNNNormConverters(ConverterTable& table) {
  table["BatchNormalization"] = ConvertBatchNorm;
  table["LayerNormalization"] = ConvertLayerNorm;
  table["InstanceNormalization"] = ConvertInstanceNorm;
  table["LRN"] = ConvertLrn;
  table["MeanVarianceNormalization"] = ConvertMeanVarianceNorm;
}

}  // namespace kiln::frontend
