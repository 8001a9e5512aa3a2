// ONNX convolution and pooling: Conv, ConvTranspose, ConvInteger, QLinearConv, MaxPool,
// AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, MaxUnpool. Window attributes are
// always made explicit (strides, dilations, pads, auto_pad, ...), with ONNX's defaults.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_nn.h"
#include "compiler/frontend/onnx_tensor_ops.h"

namespace kiln::frontend {
namespace {

// The number of spatial dims of the node's input 0 ([N, C, spatial...]).
absl::StatusOr<size_t> SpatialRank(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  int ndim = x->struct_info.ndim;
  if (ndim < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("input must have rank >= 3 ([N, C, spatial...]), got ", ndim));
  }
  return static_cast<size_t>(ndim - 2);
}

std::vector<int64_t> IntsOr(const ImportContext& ctx, const std::string& name, size_t size,
                            int64_t fallback) {
  if (!ctx.Attr(name)) return std::vector<int64_t>(size, fallback);
  return ctx.IntsAttr(name);
}

// kernel_shape, strides, dilations, pads and auto_pad with ONNX's defaults filled in.
ir::Attrs WindowAttrs(const ImportContext& ctx, size_t spatial, std::vector<int64_t> kernel) {
  std::string auto_pad = ctx.StringAttr("auto_pad", "NOTSET");
  return {
      {"kernel_shape", std::move(kernel)},
      {"strides", IntsOr(ctx, "strides", spatial, 1)},
      {"dilations", IntsOr(ctx, "dilations", spatial, 1)},
      {"pads", IntsOr(ctx, "pads", 2 * spatial, 0)},
      {"auto_pad", auto_pad.empty() ? std::string("NOTSET") : auto_pad},
  };
}

// The kernel extents of a convolution: kernel_shape, else the weight's spatial dims.
absl::StatusOr<std::vector<int64_t>> ConvKernel(ImportContext& ctx, int w_input) {
  if (ctx.Attr("kernel_shape")) return ctx.IntsAttr("kernel_shape");
  KILN_ASSIGN_OR_RETURN(ir::Expr w, ctx.Input(w_input));
  const ir::StructInfo& info = w->struct_info;
  std::vector<int64_t> kernel;
  for (size_t d = 2; info.shape && d < info.shape->size(); ++d) {
    const arith::PrimExpr& dim = (*info.shape)[d];
    if (dim->kind != arith::ExprKind::kIntImm) break;
    kernel.push_back(dim->int_value);
  }
  if (!info.shape || kernel.size() + 2 != info.shape->size()) {
    return absl::InvalidArgumentError(
        "kernel_shape is needed when the weight's shape is not known");
  }
  return kernel;
}

absl::StatusOr<ir::Attrs> ConvAttrs(ImportContext& ctx, int w_input) {
  KILN_ASSIGN_OR_RETURN(size_t spatial, SpatialRank(ctx));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ConvKernel(ctx, w_input));
  ir::Attrs attrs = WindowAttrs(ctx, spatial, std::move(kernel));
  attrs["group"] = ctx.IntAttr("group", 1);
  return attrs;
}

absl::StatusOr<std::vector<ir::Expr>> Inputs(ImportContext& ctx, int required, int optional) {
  std::vector<ir::Expr> args;
  for (int i = 0; i < required + optional; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr arg, i < required ? ctx.Input(i) : ctx.OptionalInput(i));
    args.push_back(arg);
  }
  return args;
}

absl::Status ConvertConv(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 2, 1));
  KILN_ASSIGN_OR_RETURN(ir::Attrs attrs, ConvAttrs(ctx, 1));
  return ctx.EmitOutput("conv", args, attrs);
}

absl::Status ConvertConvTranspose(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 2, 1));
  KILN_ASSIGN_OR_RETURN(ir::Attrs attrs, ConvAttrs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(size_t spatial, SpatialRank(ctx));
  attrs["output_padding"] = IntsOr(ctx, "output_padding", spatial, 0);
  if (ctx.Attr("output_shape")) attrs["output_shape"] = ctx.IntsAttr("output_shape");
  return ctx.EmitOutput("conv_transpose", args, attrs);
}

absl::Status ConvertConvInteger(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 2, 2));
  KILN_ASSIGN_OR_RETURN(ir::Attrs attrs, ConvAttrs(ctx, 1));
  return ctx.EmitOutput("conv_integer", args, attrs);
}

absl::Status ConvertQLinearConv(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 8, 1));
  KILN_ASSIGN_OR_RETURN(ir::Attrs attrs, ConvAttrs(ctx, 3));
  return ctx.EmitOutput("qlinear_conv", args, attrs);
}

absl::StatusOr<ir::Attrs> PoolAttrs(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(size_t spatial, SpatialRank(ctx));
  std::vector<int64_t> kernel = ctx.IntsAttr("kernel_shape");
  if (kernel.size() != spatial) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel_shape must have ", spatial, " entries, got ", kernel.size()));
  }
  ir::Attrs attrs = WindowAttrs(ctx, spatial, std::move(kernel));
  attrs["ceil_mode"] = ctx.IntAttr("ceil_mode", 0);
  return attrs;
}

// MaxPool's optional Indices output is its own op, max_pool_indices.
absl::Status ConvertMaxPool(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Attrs attrs, PoolAttrs(ctx));
  KILN_RETURN_IF_ERROR(ctx.EmitOutput("max_pool", {x}, attrs));
  if (!ctx.HasOutput(1)) return absl::OkStatus();
  attrs["storage_order"] = ctx.IntAttr("storage_order", 0);
  KILN_ASSIGN_OR_RETURN(ir::Expr indices,
                        ctx.Emit("max_pool_indices", {x}, attrs, ctx.node().output(1)));
  ctx.SetOutput(1, indices);
  return absl::OkStatus();
}

absl::Status ConvertAveragePool(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Attrs attrs, PoolAttrs(ctx));
  attrs["count_include_pad"] = ctx.IntAttr("count_include_pad", 0);
  return ctx.EmitOutput("average_pool", {x}, attrs);
}

// LpPool's p was a float attribute in opset 1 and an int since.
absl::Status ConvertLpPool(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Attrs attrs, PoolAttrs(ctx));
  const onnx::AttributeProto* p = ctx.Attr("p");
  bool is_float = p && p->type() == onnx::AttributeProto::FLOAT;
  attrs["p"] = is_float ? static_cast<int64_t>(p->f()) : ctx.IntAttr("p", 2);
  return ctx.EmitOutput("lp_pool", {x}, attrs);
}

Converter ConvertGlobalPool(const std::string& op) {
  return [op](ImportContext& ctx) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
    return ctx.EmitOutput(op, {x});
  };
}

// An output_shape read at run time is bound to symbolic variables, each checked at run time
// to be at least the unpooled extent (x's pooling inverted), as the reference requires.
absl::Status BindUnpoolOutputShape(ImportContext& ctx, const std::vector<int64_t>& kernel,
                                   const ir::Attrs& attrs, std::vector<ir::Expr>& args) {
  const auto& x = args[0]->struct_info.shape;
  if (!x || !IsSmallIntVector(args[2])) return absl::OkStatus();
  const std::string& name = ctx.node().input(2);
  KILN_ASSIGN_OR_RETURN(std::vector<arith::PrimExpr> dims, ctx.BindRuntimeValues(args[2], name));
  if (dims.size() != x->size()) {
    return absl::InvalidArgumentError(absl::StrCat("output_shape '", name, "' must have ",
                                                   x->size(), " values, got ", dims.size()));
  }
  const auto& strides = std::get<std::vector<int64_t>>(attrs.at("strides"));
  const auto& pads = std::get<std::vector<int64_t>>(attrs.at("pads"));
  size_t spatial = kernel.size();
  for (size_t d = 0; d < dims.size(); ++d) {
    arith::PrimExpr least = (*x)[d];
    if (d >= 2) {
      int64_t s = d - 2;
      least = (least - arith::IntImm(1)) * arith::IntImm(strides[s]) + arith::IntImm(kernel[s]) -
              arith::IntImm(pads[s] + pads[s + spatial]);
    }
    least = ctx.analyzer().Simplify(least);
    // Reports the extent itself when it is below the unpooled one.
    arith::PrimExpr fits = arith::Binary(arith::ExprKind::kGE, dims[d], least);
    ctx.CheckAtRunTime(arith::Select(fits, least, dims[d]), least,
                       absl::StrCat(name, "_", d, "_fits"));
  }
  args[2] = ir::MakeShapeExpr(dims);
  return absl::OkStatus();
}

// MaxUnpool's output_shape input keeps the result's shape symbolic when its values are known.
absl::Status ConvertMaxUnpool(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 2, 1));
  KILN_ASSIGN_OR_RETURN(size_t spatial, SpatialRank(ctx));
  std::vector<int64_t> kernel = ctx.IntsAttr("kernel_shape");
  if (kernel.size() != spatial) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel_shape must have ", spatial, " entries, got ", kernel.size()));
  }
  ir::Attrs attrs = {
      {"kernel_shape", kernel},
      {"strides", IntsOr(ctx, "strides", spatial, 1)},
      {"pads", IntsOr(ctx, "pads", 2 * spatial, 0)},
  };
  if (!ir::IsNone(args[2])) {
    if (auto shape = ctx.SymbolicValue(args[2])) {
      args[2] = ir::MakeShapeExpr(*shape);
    } else {
      KILN_RETURN_IF_ERROR(BindUnpoolOutputShape(ctx, kernel, attrs, args));
    }
  }
  return ctx.EmitOutput("max_unpool", args, attrs);
}

}  // namespace

void RegisterNNConvConverters(ConverterTable& table) {
  table["Conv"] = ConvertConv;
  table["ConvTranspose"] = ConvertConvTranspose;
  table["ConvInteger"] = ConvertConvInteger;
  table["QLinearConv"] = ConvertQLinearConv;
  table["MaxPool"] = ConvertMaxPool;
  table["AveragePool"] = ConvertAveragePool;
  table["LpPool"] = ConvertLpPool;
  table["GlobalAveragePool"] = ConvertGlobalPool("global_average_pool");
  table["GlobalMaxPool"] = ConvertGlobalPool("global_max_pool");
  table["MaxUnpool"] = ConvertMaxUnpool;
}

}  // namespace kiln::frontend
