// ONNX Det and the opset-17 signal operators: DFT, STFT, the window functions and
// MelWeightMatrix.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_reduce_internal.h"
#include "compiler/frontend/onnx_tensor.h"
#include "compiler/frontend/onnx_tensor_ops.h"

namespace kiln::frontend {
namespace {

using arith::PrimExpr;

// output_datatype (a TensorProto.DataType, float by default) as a Kiln dtype name.
absl::StatusOr<std::string> OutputDType(const ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(arith::DataType dtype,
                        DataTypeFromOnnx(static_cast<int32_t>(ctx.IntAttr("output_datatype", 1))));
  return dtype.ToString();
}

absl::StatusOr<std::vector<ir::Expr>> Inputs(ImportContext& ctx, int required, int total) {
  std::vector<ir::Expr> args;
  for (int i = 0; i < total; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr arg, i < required ? ctx.Input(i) : ctx.OptionalInput(i));
    args.push_back(arg);
  }
  return args;
}

absl::Status ConvertDet(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  return ctx.EmitOutput("det", {x});
}

absl::Status ConvertDFT(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 1, 2));
  return ctx.EmitOutput("dft", args,
                        {{"axis", ctx.IntAttr("axis", 1)},
                         {"inverse", ctx.IntAttr("inverse", 0)},
                         {"onesided", ctx.IntAttr("onesided", 0)}});
}

PrimExpr AtLeast(const PrimExpr& v, const PrimExpr& least) {
  return arith::Select(arith::Binary(arith::ExprKind::kGE, v, least), least, v);
}

// Input i, a one-value integer read at run time, as a ShapeExpr of a symbolic variable bound
// to its value (ImportContext::BindRuntimeValues), checked >= `least` at run time then, so
// that shapes made from it stay symbolic. Constants and other values stay as they are.
absl::StatusOr<ir::Expr> BindRuntimeSize(ImportContext& ctx, int i, int64_t least) {
  KILN_ASSIGN_OR_RETURN(ir::Expr v, ctx.OptionalInput(i));
  const ir::StructInfo& info = v->struct_info;
  if (ir::IsNone(v) || ctx.ConstantValue(v) || !info.is_tensor() || !info.dtype.is_int() ||
      !info.shape) {
    return v;
  }
  for (const PrimExpr& d : *info.shape) {
    if (!d->is_const_int(1)) return v;
  }
  const std::string& name = ctx.node().input(i);
  std::vector<PrimExpr> values;
  if (auto known = ctx.SymbolicValue(v)) {
    values = *known;
  } else {
    KILN_ASSIGN_OR_RETURN(values, ctx.BindRuntimeValues(v, name));
  }
  KILN_CHECK_EQ(values.size(), 1u) << "a scalar binds one value";
  ctx.CheckAtRunTime(AtLeast(values[0], arith::IntImm(least)), arith::IntImm(least),
                     absl::StrCat(name, "_at_least_", least));
  return ir::MakeShapeExpr(values);
}

// frame_step and frame_length read at run time are bound to symbolic variables, checked as
// the reference does (positive, a frame no longer than the signal, as long as the window),
// so the number of frames and bins are expressions of them.
absl::Status ConvertSTFT(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 2, 4));
  KILN_ASSIGN_OR_RETURN(args[1], BindRuntimeSize(ctx, 1, 1));
  KILN_ASSIGN_OR_RETURN(args[3], BindRuntimeSize(ctx, 3, 1));
  const ir::StructInfo& signal = args[0]->struct_info;
  const ir::StructInfo& window = args[2]->struct_info;
  bool has_window = !ir::IsNone(args[2]) && window.shape && window.shape->size() == 1;
  PrimExpr frame;
  std::string name;
  if (args[3]->kind == ir::ExprKind::kShapeExpr) {
    frame = args[3]->values[0];
    name = ctx.node().input(3);
    if (has_window) ctx.CheckAtRunTime(frame, (*window.shape)[0], name + "_is_window_length");
  } else if (ir::IsNone(args[3]) && has_window) {
    frame = (*window.shape)[0];
    name = ctx.node().input(2);
  }
  if (frame && signal.shape && signal.shape->size() == 3) {
    PrimExpr length = (*signal.shape)[1];
    if (frame->kind == arith::ExprKind::kIntImm && length->kind == arith::ExprKind::kIntImm) {
      if (frame->int_value > length->int_value) {
        return absl::InvalidArgumentError(absl::StrCat("STFT: the frame length ", frame->int_value,
                                                       " of '", name, "' exceeds the signal's ",
                                                       length->int_value));
      }
    } else {
      // Reports the frame length itself when it exceeds the signal's.
      ctx.CheckAtRunTime(
          arith::Select(arith::Binary(arith::ExprKind::kLE, frame, length), length, frame), length,
          name + "_fits_signal");
    }
  }
  return ctx.EmitOutput("stft", args, {{"onesided", ctx.IntAttr("onesided", 1)}});
}

// A size read at run time is bound to a symbolic variable (checked >= 0 then): the extent.
absl::Status ConvertWindow(const std::string& op, ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr size, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(size, DimsArg(ctx, size, ctx.node().input(0)));
  KILN_ASSIGN_OR_RETURN(std::string dtype, OutputDType(ctx));
  return ctx.EmitOutput(op, {size}, {{"periodic", ctx.IntAttr("periodic", 1)}, {"dtype", dtype}});
}

// num_mel_bins and dft_length read at run time are bound to symbolic variables (checked
// positive then): the output's extents. sample_rate is checked positive too.
absl::Status ConvertMelWeightMatrix(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 5, 5));
  KILN_ASSIGN_OR_RETURN(args[0], BindRuntimeSize(ctx, 0, 1));
  KILN_ASSIGN_OR_RETURN(args[1], BindRuntimeSize(ctx, 1, 1));
  if (args[0]->kind == ir::ExprKind::kShapeExpr || args[1]->kind == ir::ExprKind::kShapeExpr) {
    // The kernel reads sample_rate from its tensor; it is bound only to be checked.
    KILN_RETURN_IF_ERROR(BindRuntimeSize(ctx, 2, 1).status());
  }
  KILN_ASSIGN_OR_RETURN(std::string dtype, OutputDType(ctx));
  return ctx.EmitOutput("mel_weight_matrix", args, {{"dtype", dtype}});
}

}  // namespace

void RegisterSignalConverters(ConverterTable& table) {
  table["Det"] = ConvertDet;
  table["DFT"] = ConvertDFT;
  table["STFT"] = ConvertSTFT;
  table["HannWindow"] = [](ImportContext& ctx) { return ConvertWindow("hann_window", ctx); };
  table["HammingWindow"] = [](ImportContext& ctx) { return ConvertWindow("hamming_window", ctx); };
  table["BlackmanWindow"] = [](ImportContext& ctx) {
    return ConvertWindow("blackman_window", ctx);
  };
  table["MelWeightMatrix"] = ConvertMelWeightMatrix;
}

}  // namespace kiln::frontend
