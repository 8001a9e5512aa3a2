// ONNX image and index operators: Resize, GridSample, RoiAlign, NonMaxSuppression, TopK...
// Every Kiln op gets all its attributes explicitly, with the defaults of the model's opset.
#include <utility>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/import_context.h"
#include "compiler/frontend/onnx_tensor_ops.h"

namespace kiln::frontend {
namespace {

using arith::PrimExpr;

absl::Status Unsupported(ImportContext& ctx, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(ctx.node().op_type(), ": ", what, " is not supported"));
}

// Optional input i, with an empty constant (how opset 11 spells "not given") read as omitted.
absl::StatusOr<ir::Expr> GivenInput(ImportContext& ctx, int i) {
  KILN_ASSIGN_OR_RETURN(ir::Expr v, ctx.OptionalInput(i));
  const ir::NDArray* data = ir::IsNone(v) ? nullptr : ctx.ConstantValue(v);
  if (data && data->num_elements() == 0) return ir::MakeNone();
  return v;
}

ir::Expr FloatsConstant(const std::vector<float>& values) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(), {int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i) a.SetDouble(i, values[i]);
  return Constant(std::move(a));
}

// Scales computed at run time: the output shape they give, bound to symbolic variables
// (ImportContext::BindScaledExtents) and checked >= 0 at run time (a scale that is not
// positive gives -1), as a ShapeExpr to pass with the scales; none when the scales are known
// or the shape cannot be had.
absl::StatusOr<ir::Expr> ScaledShape(ImportContext& ctx, const ir::Expr& x, const ir::Expr& scales,
                                     int input) {
  const ir::StructInfo& info = scales->struct_info;
  const auto& shape = x->struct_info.shape;
  if (ir::IsNone(scales) || ctx.ConstantValue(scales) || !shape || !info.dtype.is_float() ||
      info.ndim != 1 || !info.shape || !(*info.shape)[0]->is_const_int(shape->size())) {
    return ir::MakeNone();
  }
  const std::string& name = ctx.node().input(input);
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> dims, ctx.BindScaledExtents(scales, *shape, name));
  CheckNonNegative(ctx, dims, name);
  return ir::MakeShapeExpr(dims);
}

ir::Attrs ResizeAttrs(const std::string& mode, const std::string& transform,
                      const std::string& nearest_mode, double cubic_a, int64_t exclude_outside,
                      double extrapolation) {
  return {{"mode", mode},
          {"coordinate_transformation_mode", transform},
          {"nearest_mode", nearest_mode},
          {"cubic_coeff_a", cubic_a},
          {"exclude_outside", exclude_outside},
          {"extrapolation_value", extrapolation}};
}

// Before opset 11 there was no coordinate transformation or nearest mode: sources are
// x / scale, and nearest picks floor when upsampling, ceil when downsampling ("simple", as
// onnxruntime keeps it for these opsets).
absl::Status EmitLegacyResize(ImportContext& ctx, ir::Expr x, ir::Expr scales, int input) {
  std::string mode = ctx.StringAttr("mode", "nearest");
  if (mode != "nearest" && mode != "linear") return Unsupported(ctx, "mode " + mode);
  KILN_ASSIGN_OR_RETURN(ir::Expr sizes, ScaledShape(ctx, x, scales, input));
  return ctx.EmitOutput("resize", {x, ir::MakeNone(), scales, sizes},
                        ResizeAttrs(mode, "asymmetric", "simple", -0.75, 0, 0));
}

absl::Status ConvertUpsample(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  if (ctx.opset() < 9) {
    return EmitLegacyResize(ctx, x, FloatsConstant(ctx.FloatsAttr("scales")), -1);
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr scales, ctx.Input(1));
  return EmitLegacyResize(ctx, x, scales, 1);
}

// Opset 18's additions are accepted only at their defaults.
absl::Status CheckResize18Attrs(ImportContext& ctx) {
  if (ctx.IntAttr("antialias", 0) != 0) return Unsupported(ctx, "antialias");
  if (ctx.Attr("axes")) return Unsupported(ctx, "axes");
  std::string policy = ctx.StringAttr("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") return Unsupported(ctx, "keep_aspect_ratio_policy " + policy);
  return absl::OkStatus();
}

absl::Status ConvertResize(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  if (ctx.opset() < 11) {
    KILN_ASSIGN_OR_RETURN(ir::Expr scales, ctx.Input(1));
    return EmitLegacyResize(ctx, x, scales, 1);
  }
  KILN_RETURN_IF_ERROR(CheckResize18Attrs(ctx));
  std::string transform = ctx.StringAttr("coordinate_transformation_mode", "half_pixel");
  KILN_ASSIGN_OR_RETURN(ir::Expr roi, GivenInput(ctx, 1));
  KILN_ASSIGN_OR_RETURN(ir::Expr scales, GivenInput(ctx, 2));
  KILN_ASSIGN_OR_RETURN(ir::Expr sizes, GivenInput(ctx, 3));
  // roi matters only when cropping; sizes, when given, win over scales (which opset 11
  // requires to be empty then, possibly at run time).
  if (transform != "tf_crop_and_resize") roi = ir::MakeNone();
  if (!ir::IsNone(sizes)) scales = ir::MakeNone();
  if (ir::IsNone(scales) && ir::IsNone(sizes)) {
    return absl::InvalidArgumentError("Resize: one of scales and sizes must be given");
  }
  std::string mode = ctx.StringAttr("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    return Unsupported(ctx, "mode " + mode);
  }
  ir::Expr sizes_arg = sizes;
  if (!ir::IsNone(sizes)) {
    KILN_ASSIGN_OR_RETURN(sizes_arg, DimsArg(ctx, sizes, ctx.node().input(3)));
  } else {
    KILN_ASSIGN_OR_RETURN(sizes_arg, ScaledShape(ctx, x, scales, 2));
  }
  return ctx.EmitOutput(
      "resize", {x, roi, scales, sizes_arg},
      ResizeAttrs(mode, transform, ctx.StringAttr("nearest_mode", "round_prefer_floor"),
                  ctx.FloatAttr("cubic_coeff_a", -0.75f), ctx.IntAttr("exclude_outside", 0),
                  ctx.FloatAttr("extrapolation_value", 0.0f)));
}

absl::Status ConvertDepthToSpace(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  return ctx.EmitOutput(
      "depth_to_space", {x},
      {{"blocksize", ctx.IntAttr("blocksize", 0)}, {"mode", ctx.StringAttr("mode", "DCR")}});
}

absl::Status ConvertSpaceToDepth(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  return ctx.EmitOutput("space_to_depth", {x}, {{"blocksize", ctx.IntAttr("blocksize", 0)}});
}

// Opset 20 renamed the modes (linear, cubic); Kiln keeps opset 16's names.
absl::Status ConvertGridSample(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr grid, ctx.Input(1));
  std::string mode = ctx.StringAttr("mode", ctx.opset() >= 20 ? "linear" : "bilinear");
  if (mode == "linear") mode = "bilinear";
  if (mode == "cubic") mode = "bicubic";
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") {
    return Unsupported(ctx, "mode " + mode);
  }
  std::string padding = ctx.StringAttr("padding_mode", "zeros");
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    return Unsupported(ctx, "padding_mode " + padding);
  }
  return ctx.EmitOutput("grid_sample", {x, grid},
                        {{"mode", mode},
                         {"padding_mode", padding},
                         {"align_corners", ctx.IntAttr("align_corners", 0)}});
}

// Opset 16 added coordinate_transformation_mode; before, boxes were not shifted by half a
// pixel (output_half_pixel).
absl::Status ConvertRoiAlign(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr rois, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(ir::Expr batch_indices, ctx.Input(2));
  std::string transform = ctx.StringAttr("coordinate_transformation_mode",
                                         ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  std::string mode = ctx.StringAttr("mode", "avg");
  if (mode != "avg" && mode != "max") return Unsupported(ctx, "mode " + mode);
  return ctx.EmitOutput("roi_align", {x, rois, batch_indices},
                        {{"mode", mode},
                         {"output_height", ctx.IntAttr("output_height", 1)},
                         {"output_width", ctx.IntAttr("output_width", 1)},
                         {"sampling_ratio", ctx.IntAttr("sampling_ratio", 0)},
                         {"spatial_scale", double{ctx.FloatAttr("spatial_scale", 1.0f)}},
                         {"coordinate_transformation_mode", transform}});
}

// Field i of a tuple-valued binding, bound to its own variable.
absl::StatusOr<ir::Expr> Field(ImportContext& ctx, const ir::Expr& tuple, int i,
                               const std::string& name) {
  return ctx.Bind(ir::MakeTupleGetItem(tuple, i), name);
}

// The first `count` entries along `axis` of a result sized for the worst case.
absl::StatusOr<ir::Expr> TakeFirst(ImportContext& ctx, const ir::Expr& scratch, int64_t axis,
                                   const PrimExpr& count, const std::string& name) {
  return ctx.Emit("slice",
                  {scratch, IntsConstant({0}), ir::MakeShapeExpr({count}), IntsConstant({axis}),
                   IntsConstant({1})},
                  {}, name);
}

// How many boxes are selected depends on the data (Relax's data-dependent shapes, as for
// NonZero): non_max_suppression_select writes the selected rows into a buffer sized for the
// worst case (every box of every class) with their count, host code binds the count to a fresh
// variable, and the output is the first `count` rows. Boxes or scores of unknown shape keep
// the reference-only op.
absl::Status ConvertNonMaxSuppression(ImportContext& ctx) {
  std::vector<ir::Expr> args;
  for (int i = 0; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr v, i < 2 ? ctx.Input(i) : ctx.OptionalInput(i));
    args.push_back(v);
  }
  ir::Attrs attrs = {{"center_point_box", ctx.IntAttr("center_point_box", 0)}};
  const ir::StructInfo &boxes = args[0]->struct_info, &scores = args[1]->struct_info;
  if (!boxes.shape || !scores.shape || boxes.ndim != 3 || scores.ndim != 3) {
    return ctx.EmitOutput("non_max_suppression", std::move(args), std::move(attrs));
  }
  const std::string name = ctx.node().output(0);
  const auto &b = *boxes.shape, &s = *scores.shape;
  // Op inference rejects dims that differ at compile time; host code checks the others.
  std::vector<std::pair<PrimExpr, PrimExpr>> same = {
      {b[2], arith::IntImm(4)}, {s[0], b[0]}, {s[2], b[1]}};
  for (const auto& [actual, expected] : same) {
    if (!ctx.analyzer().ProveEqual(actual, expected)) {
      ctx.CheckAtRunTime(actual, expected, name + "_box_dims");
    }
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr selected, ctx.Emit("non_max_suppression_select", std::move(args),
                                                    std::move(attrs), name + "_select"));
  KILN_ASSIGN_OR_RETURN(ir::Expr rows, Field(ctx, selected, 0, name + "_rows"));
  KILN_ASSIGN_OR_RETURN(ir::Expr count, Field(ctx, selected, 1, name + "_count"));
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> n, ctx.BindRuntimeValues(count, name + "_n"));
  KILN_ASSIGN_OR_RETURN(ir::Expr out, TakeFirst(ctx, rows, 0, n[0], name));
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

// Before opset 10, k was an attribute.
absl::Status ConvertTopK(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  ir::Expr k;
  if (ctx.opset() < 10) {
    ir::NDArray value = ir::NDArray::Zeros(arith::DataType::Int(64), {1});
    value.data<int64_t>()[0] = ctx.IntAttr("k", 0);
    k = Constant(std::move(value));
  } else {
    KILN_ASSIGN_OR_RETURN(ir::Expr given, ctx.Input(1));
    KILN_ASSIGN_OR_RETURN(k, DimsArg(ctx, given, ctx.node().input(1)));
  }
  return ctx.EmitTupleOutputs("top_k", {x, k},
                              {{"axis", ctx.IntAttr("axis", -1)},
                               {"largest", ctx.IntAttr("largest", 1)},
                               {"sorted", ctx.IntAttr("sorted", 1)}});
}

Converter ArgReduce(const std::string& op) {
  return [op](ImportContext& ctx) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
    return ctx.EmitOutput(op, {x},
                          {{"axis", ctx.IntAttr("axis", 0)},
                           {"keepdims", ctx.IntAttr("keepdims", 1)},
                           {"select_last_index", ctx.IntAttr("select_last_index", 0)}});
  };
}

absl::Status ConvertCumSum(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr axis, ctx.Input(1));
  return ctx.EmitOutput(
      "cum_sum", {x, axis},
      {{"exclusive", ctx.IntAttr("exclusive", 0)}, {"reverse", ctx.IntAttr("reverse", 0)}});
}

absl::Status ConvertReverseSequence(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr lens, ctx.Input(1));
  return ctx.EmitOutput(
      "reverse_sequence", {x, lens},
      {{"batch_axis", ctx.IntAttr("batch_axis", 1)}, {"time_axis", ctx.IntAttr("time_axis", 0)}});
}

// Without an axis Unique works on the flattened input: Kiln flattens first, so the op
// always has an axis.
absl::Status ConvertUnique(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  int64_t axis = ctx.IntAttr("axis", 0);
  if (!ctx.Attr("axis")) {
    const auto& shape = x->struct_info.shape;
    if (!shape) return absl::InvalidArgumentError("Unique without axis needs a known input shape");
    PrimExpr size = arith::IntImm(1);
    for (const PrimExpr& d : *shape) size = size * d;
    KILN_ASSIGN_OR_RETURN(
        x, ctx.Emit("reshape", {x, ir::MakeShapeExpr({ctx.analyzer().Simplify(size)})}, {},
                    ctx.node().output(0) + "_flat"));
  }
  ir::Attrs attrs = {{"axis", axis}, {"sorted", ctx.IntAttr("sorted", 1)}};
  if (!x->struct_info.shape) return ctx.EmitTupleOutputs("unique", {x}, std::move(attrs));
  // As NonMaxSuppression: unique_select fills results sized for the worst case (one entry
  // per slice) and counts the distinct slices; the outputs are the first `count` entries,
  // except inverse_indices, which has one entry per slice anyway.
  const std::string name = ctx.node().output(0);
  KILN_ASSIGN_OR_RETURN(ir::Expr selected,
                        ctx.Emit("unique_select", {x}, std::move(attrs), name + "_select"));
  KILN_ASSIGN_OR_RETURN(ir::Expr count, Field(ctx, selected, 4, name + "_count"));
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> n, ctx.BindRuntimeValues(count, name + "_n"));
  for (int i = 0; i < 4 && i < ctx.num_outputs(); ++i) {
    if (!ctx.HasOutput(i)) continue;
    const std::string& out_name = ctx.node().output(i);
    KILN_ASSIGN_OR_RETURN(ir::Expr field,
                          Field(ctx, selected, i, i == 2 ? out_name : out_name + "_all"));
    if (i != 2) {
      KILN_ASSIGN_OR_RETURN(field, TakeFirst(ctx, field, i == 0 ? axis : 0, n[0], out_name));
    }
    ctx.SetOutput(i, field);
  }
  return absl::OkStatus();
}

absl::Status ConvertTfIdfVectorizer(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  if (!ctx.StringsAttr("pool_strings").empty()) return Unsupported(ctx, "pool_strings");
  std::vector<float> weights = ctx.FloatsAttr("weights");
  return ctx.EmitOutput("tf_idf_vectorizer", {x},
                        {{"max_gram_length", ctx.IntAttr("max_gram_length", 1)},
                         {"min_gram_length", ctx.IntAttr("min_gram_length", 1)},
                         {"max_skip_count", ctx.IntAttr("max_skip_count", 0)},
                         {"mode", ctx.StringAttr("mode", "TF")},
                         {"ngram_counts", ctx.IntsAttr("ngram_counts")},
                         {"ngram_indexes", ctx.IntsAttr("ngram_indexes")},
                         {"pool_int64s", ctx.IntsAttr("pool_int64s")},
                         {"weights", std::vector<double>(weights.begin(), weights.end())}});
}

}  // namespace

void RegisterImageConverters(ConverterTable& table) {
  table["Resize"] = ConvertResize;
  table["Upsample"] = ConvertUpsample;
  table["DepthToSpace"] = ConvertDepthToSpace;
  table["SpaceToDepth"] = ConvertSpaceToDepth;
  table["GridSample"] = ConvertGridSample;
  table["RoiAlign"] = ConvertRoiAlign;
  table["NonMaxSuppression"] = ConvertNonMaxSuppression;
  table["TopK"] = ConvertTopK;
  table["ArgMax"] = ArgReduce("arg_max");
  table["ArgMin"] = ArgReduce("arg_min");
  table["CumSum"] = ConvertCumSum;
  table["ReverseSequence"] = ConvertReverseSequence;
  table["Unique"] = ConvertUnique;
  table["TfIdfVectorizer"] = ConvertTfIdfVectorizer;
}

}  // namespace kiln::frontend
