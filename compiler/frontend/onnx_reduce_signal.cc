// ONNX Det and the opset-17 signal operators: DFT, STFT, the window functions and
// MelWeightMatrix.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_reduce_internal.h"
#include "compiler/frontend/onnx_tensor.h"
#include "compiler/frontend/onnx_tensor_ops.h"

namespace kiln::frontend {
namespace {

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

absl::Status ConvertSTFT(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 2, 4));
  return ctx.EmitOutput("stft", args, {{"onesided", ctx.IntAttr("onesided", 1)}});
}

// A size read at run time is bound to a symbolic variable (checked >= 0 then): the extent.
absl::Status ConvertWindow(const std::string& op, ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr size, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(size, DimsArg(ctx, size, ctx.node().input(0)));
  KILN_ASSIGN_OR_RETURN(std::string dtype, OutputDType(ctx));
  return ctx.EmitOutput(op, {size}, {{"periodic", ctx.IntAttr("periodic", 1)}, {"dtype", dtype}});
}

absl::Status ConvertMelWeightMatrix(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 5, 5));
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
