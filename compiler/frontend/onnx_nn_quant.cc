// ONNX quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_nn.h"

namespace kiln::frontend {
namespace {

absl::StatusOr<std::vector<ir::Expr>> Inputs(ImportContext& ctx, int required, int optional) {
  std::vector<ir::Expr> args;
  for (int i = 0; i < required + optional; ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr arg, i < required ? ctx.Input(i) : ctx.OptionalInput(i));
    args.push_back(arg);
  }
  return args;
}

// The axis attr arrived in opset 13; before, scales were per tensor and any axis will do.
Converter ConvertQuantize(const std::string& op) {
  return [op](ImportContext& ctx) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 2, 1));
    int64_t axis = ctx.IntAttr("axis", 1);
    if (args[0]->struct_info.ndim == 0 || args[0]->struct_info.ndim == 1) axis = 0;
    return ctx.EmitOutput(op, args, {{"axis", axis}});
  };
}

absl::Status ConvertDynamicQuantize(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  return ctx.EmitTupleOutputs("dynamic_quantize_linear", {x});
}

absl::Status ConvertMatMulInteger(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 2, 2));
  return EmitMatmulOutput(ctx, "matmul_integer", args, 0, 1);
}

absl::Status ConvertQLinearMatMul(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> args, Inputs(ctx, 8, 0));
  return EmitMatmulOutput(ctx, "qlinear_matmul", args, 0, 3);
}

}  // namespace

void RegisterNNQuantConverters(ConverterTable& table) {
  table["QuantizeLinear"] = ConvertQuantize("quantize_linear");
  table["DequantizeLinear"] = ConvertQuantize("dequantize_linear");
  table["DynamicQuantizeLinear"] = ConvertDynamicQuantize;
  table["MatMulInteger"] = ConvertMatMulInteger;
  table["QLinearMatMul"] = ConvertQLinearMatMul;
}

}  // namespace kiln::frontend
