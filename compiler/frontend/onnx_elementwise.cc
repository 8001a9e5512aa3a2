// ONNX elementwise operators: math, activations, comparisons, logic, casts. Each converter
// fills in the ONNX defaults so the Kiln op always carries explicit attributes, and maps the
// older opsets' forms (legacy broadcast attributes, attributes that became inputs) onto the
// one Kiln op.
#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/import_context.h"
#include "compiler/frontend/onnx_tensor.h"

namespace kiln::frontend {
namespace {

using arith::DataType;
using arith::PrimExpr;

// Opsets before 7 broadcast only with broadcast=1, aligning B's dims with A's starting at
// `axis` (default: right-aligned, as numpy). Moving B's dims there with trailing 1s makes
// numpy broadcasting agree.
absl::StatusOr<ir::Expr> AlignLegacyBroadcast(ImportContext& ctx, const ir::Expr& a,
                                              const ir::Expr& b) {
  if (ctx.opset() >= 7 || ctx.IntAttr("broadcast", 0) == 0 || !ctx.Attr("axis")) return b;
  const ir::StructInfo& ia = a->struct_info;
  const ir::StructInfo& ib = b->struct_info;
  if (!ib.shape || ia.ndim < 0) {
    return absl::InvalidArgumentError("legacy broadcast with axis needs known ranks and shapes");
  }
  int64_t axis = ctx.IntAttr("axis", 0);
  if (axis < 0) axis += ia.ndim;
  int64_t trailing = ia.ndim - axis - ib.ndim;
  if (axis < 0 || trailing < 0) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast axis ", ctx.IntAttr("axis", 0),
                                                   " does not fit ranks ", ia.ndim, " and ",
                                                   ib.ndim));
  }
  if (trailing == 0) return b;
  std::vector<PrimExpr> dims = *ib.shape;
  dims.resize(dims.size() + trailing, arith::IntImm(1));
  return ctx.Emit("reshape", {b, ir::MakeShapeExpr(dims)}, {}, ctx.node().output(0) + "_b");
}

// Shape arithmetic (Shape -> Gather -> Mul -> Concat -> Reshape) stays symbolic: when both
// integer operands have known elements, so does the result. Division only where floor and
// truncation agree (non-negative dividend, positive divisor).
std::optional<PrimExpr> CombineSymbolic(const std::string& op, const PrimExpr& x, const PrimExpr& y,
                                        const arith::Analyzer& analyzer) {
  if (op == "add") return x + y;
  if (op == "subtract") return x - y;
  if (op == "multiply") return x * y;
  if (op == "divide" && analyzer.ProveGE(x, arith::IntImm(0)) &&
      analyzer.ProveGE(y, arith::IntImm(1))) {
    return arith::FloorDiv(x, y);
  }
  return std::nullopt;
}

void RecordSymbolicResult(ImportContext& ctx, const std::string& op, const ir::Expr& a,
                          const ir::Expr& b, const ir::Expr& out) {
  if (out->kind == ir::ExprKind::kConstant || !out->struct_info.is_tensor() ||
      !out->struct_info.dtype.is_int() || out->struct_info.ndim > 1) {
    return;
  }
  auto va = ctx.SymbolicValue(a), vb = ctx.SymbolicValue(b);
  if (!va || !vb) return;
  size_t n = std::max(va->size(), vb->size());
  if ((va->size() != n && va->size() != 1) || (vb->size() != n && vb->size() != 1)) return;
  std::vector<PrimExpr> values;
  for (size_t i = 0; i < n; ++i) {
    const PrimExpr& x = (*va)[va->size() == 1 ? 0 : i];
    const PrimExpr& y = (*vb)[vb->size() == 1 ? 0 : i];
    auto v = CombineSymbolic(op, x, y, ctx.analyzer());
    if (!v) return;
    values.push_back(ctx.analyzer().Simplify(*v));
  }
  ctx.SetSymbolicValue(out, std::move(values));
}

Converter Binary(std::string op, ir::Attrs attrs = {}) {
  return [op, attrs](ImportContext& ctx) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(ir::Expr a, ctx.Input(0));
    KILN_ASSIGN_OR_RETURN(ir::Expr b, ctx.Input(1));
    KILN_ASSIGN_OR_RETURN(b, AlignLegacyBroadcast(ctx, a, b));
    KILN_ASSIGN_OR_RETURN(ir::Expr out, ctx.Emit(op, {a, b}, attrs));
    RecordSymbolicResult(ctx, op, a, b, out);
    ctx.SetOutput(0, out);
    return absl::OkStatus();
  };
}

Converter Unary(std::string op) {
  return [op](ImportContext& ctx) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
    return ctx.EmitOutput(op, {x});
  };
}

// A unary op with float attributes, each given with its ONNX default.
Converter UnaryWithFloats(std::string op, std::vector<std::pair<std::string, float>> defaults) {
  return [op, defaults](ImportContext& ctx) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
    ir::Attrs attrs;
    for (const auto& [name, fallback] : defaults) {
      attrs[name] = static_cast<double>(ctx.FloatAttr(name, fallback));
    }
    return ctx.EmitOutput(op, {x}, std::move(attrs));
  };
}

Converter Variadic(std::string op) {
  return [op](ImportContext& ctx) -> absl::Status {
    std::vector<ir::Expr> args;
    for (int i = 0; i < ctx.node().input_size(); ++i) {
      KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(i));
      args.push_back(x);
    }
    return ctx.EmitOutput(op, std::move(args));
  };
}

absl::Status ConvertMod(ImportContext& ctx) {
  return Binary("mod", {{"fmod", ctx.IntAttr("fmod", 0)}})(ctx);
}

absl::Status ConvertBitShift(ImportContext& ctx) {
  return Binary("bit_shift", {{"direction", ctx.StringAttr("direction", "")}})(ctx);
}

absl::Status ConvertIsInf(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  return ctx.EmitOutput("is_inf", {x},
                        {{"detect_positive", ctx.IntAttr("detect_positive", 1)},
                         {"detect_negative", ctx.IntAttr("detect_negative", 1)}});
}

absl::Status ConvertGelu(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  return ctx.EmitOutput("gelu", {x}, {{"approximate", ctx.StringAttr("approximate", "none")}});
}

absl::Status ConvertWhere(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr cond, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(ir::Expr y, ctx.Input(2));
  return ctx.EmitOutput("where", {cond, x, y});
}

// Clip's bounds were attributes before opset 11 and optional inputs since.
absl::Status ConvertClip(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  std::vector<ir::Expr> args = {x};
  if (ctx.opset() < 11) {
    for (const char* name : {"min", "max"}) {
      const onnx::AttributeProto* attr = ctx.Attr(name);
      args.push_back(attr ? ScalarConstant(attr->f(), x->struct_info.dtype) : ir::MakeNone());
    }
  } else {
    for (int i = 1; i <= 2; ++i) {
      KILN_ASSIGN_OR_RETURN(ir::Expr bound, ctx.OptionalInput(i));
      args.push_back(bound);
    }
  }
  return ctx.EmitOutput("clip", std::move(args));
}

// PRelu before opset 7 applied a 1-D slope per channel (dim 1); numpy broadcasting needs it
// as [C, 1, ..., 1].
absl::Status ConvertPRelu(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr slope, ctx.Input(1));
  const ir::StructInfo& xs = x->struct_info;
  const ir::StructInfo& ss = slope->struct_info;
  if (ctx.opset() < 7 && xs.ndim >= 3 && ss.shape && ss.ndim == 1 &&
      !(*ss.shape)[0]->is_const_int(1)) {
    std::vector<PrimExpr> dims(xs.ndim - 1, arith::IntImm(1));
    dims[0] = (*ss.shape)[0];
    KILN_ASSIGN_OR_RETURN(slope, ctx.Emit("reshape", {slope, ir::MakeShapeExpr(dims)}, {},
                                          ctx.node().output(0) + "_slope"));
  }
  return ctx.EmitOutput("prelu", {x, slope});
}

// bfloat16 and strings are not Kiln element types.
absl::StatusOr<DataType> CastableType(int32_t onnx_type, const char* role) {
  auto dtype = DataTypeFromOnnx(onnx_type);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cast ", role, ": ", std::string(dtype.status().message())));
  }
  return dtype;
}

// Cast's target is an int since opset 6 and a type name ("FLOAT") before.
absl::StatusOr<DataType> CastTarget(const ImportContext& ctx) {
  const onnx::AttributeProto* attr = ctx.Attr("to");
  if (!attr) return absl::InvalidArgumentError("Cast needs the 'to' attribute");
  int32_t to = static_cast<int32_t>(attr->i());
  if (attr->type() == onnx::AttributeProto::STRING) {
    onnx::TensorProto::DataType parsed;
    if (!onnx::TensorProto::DataType_Parse(attr->s(), &parsed)) {
      return absl::InvalidArgumentError("Cast to unknown type '" + attr->s() + "'");
    }
    to = parsed;
  }
  return CastableType(to, "target");
}

absl::Status EmitCast(ImportContext& ctx, DataType to) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  if (x->struct_info.dtype == to) {
    ctx.SetOutput(0, x);
    return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr out, ctx.Emit("cast", {x}, {{"to", to.ToString()}}));
  // Shape values cast between integer types (i64 -> i32 -> i64) stay symbolic.
  auto values = ctx.SymbolicValue(x);
  if (values && x->struct_info.dtype.is_int() && to.is_int() && to.bits >= 32 &&
      out->kind != ir::ExprKind::kConstant) {
    ctx.SetSymbolicValue(out, *std::move(values));
  }
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

absl::Status ConvertCast(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(DataType to, CastTarget(ctx));
  return EmitCast(ctx, to);
}

absl::Status ConvertCastLike(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr like, ctx.Input(1));
  DataType to = like->struct_info.dtype;
  return EmitCast(ctx, to);
}

// Kiln compiles for inference, where Dropout passes its input through. Since opset 12 a
// training_mode input may ask for training; that is accepted only when it drops nothing.
absl::Status CheckDropoutInference(ImportContext& ctx) {
  if (ctx.opset() < 12 || !ctx.HasInput(2)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(const ir::NDArray* training, ctx.ConstantInput(2));
  if (training->num_elements() != 1 || training->GetInt(0) == 0) return absl::OkStatus();
  double ratio = 0.5;
  if (ctx.HasInput(1)) {
    KILN_ASSIGN_OR_RETURN(const ir::NDArray* r, ctx.ConstantInput(1));
    if (r->num_elements() == 1) ratio = r->GetDouble(0);
  }
  if (ratio == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("Dropout in training mode (ratio ", ratio,
                                                 ") is not supported: Kiln runs inference"));
}

absl::Status ConvertDropout(ImportContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckDropoutInference(ctx));
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  if (!ctx.HasOutput(1)) {
    ctx.SetOutput(0, x);
    return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr both, ctx.Emit("dropout", {x}));
  KILN_ASSIGN_OR_RETURN(ir::Expr out,
                        ctx.Bind(ir::MakeTupleGetItem(both, 0), ctx.node().output(0)));
  KILN_ASSIGN_OR_RETURN(ir::Expr mask,
                        ctx.Bind(ir::MakeTupleGetItem(both, 1), ctx.node().output(1)));
  // The mask was bool from opset 10 on, and of the input's type before.
  if (ctx.opset() < 10 && x->struct_info.dtype != DataType::Bool()) {
    KILN_ASSIGN_OR_RETURN(mask, ctx.Emit("cast", {mask}, {{"to", x->struct_info.dtype.ToString()}},
                                         ctx.node().output(1)));
  }
  ctx.SetOutput(0, out);
  ctx.SetOutput(1, mask);
  return absl::OkStatus();
}

}  // namespace

void RegisterElementwiseConverters(ConverterTable& table) {
  table["Add"] = Binary("add");
  table["Sub"] = Binary("subtract");
  table["Mul"] = Binary("multiply");
  table["Div"] = Binary("divide");
  table["Pow"] = Binary("pow");
  table["Mod"] = ConvertMod;
  table["BitShift"] = ConvertBitShift;
  table["PRelu"] = ConvertPRelu;
  // clang-format off
  const std::pair<const char*, const char*> binaries[] = {
      {"Equal", "equal"}, {"Greater", "greater"}, {"GreaterOrEqual", "greater_or_equal"},
      {"Less", "less"}, {"LessOrEqual", "less_or_equal"}, {"And", "and"}, {"Or", "or"},
      {"Xor", "xor"}};
  const std::pair<const char*, const char*> unaries[] = {
      {"Abs", "abs"}, {"Acos", "acos"}, {"Acosh", "acosh"}, {"Asin", "asin"},
      {"Asinh", "asinh"}, {"Atan", "atan"}, {"Atanh", "atanh"}, {"Ceil", "ceil"},
      {"Cos", "cos"}, {"Cosh", "cosh"}, {"Erf", "erf"}, {"Exp", "exp"}, {"Floor", "floor"},
      {"Log", "log"}, {"Neg", "neg"}, {"Not", "not"}, {"Reciprocal", "reciprocal"},
      {"Relu", "relu"}, {"Round", "round"}, {"Sigmoid", "sigmoid"}, {"Sign", "sign"},
      {"Sin", "sin"}, {"Sinh", "sinh"}, {"Softplus", "softplus"}, {"Softsign", "softsign"},
      {"Sqrt", "sqrt"}, {"Tan", "tan"}, {"Tanh", "tanh"}, {"IsNaN", "is_nan"},
      {"HardSwish", "hard_swish"}, {"Mish", "mish"}};
  // clang-format on
  for (const auto& [onnx_op, op] : binaries) table[onnx_op] = Binary(op);
  for (const auto& [onnx_op, op] : unaries) table[onnx_op] = Unary(op);
  table["Celu"] = UnaryWithFloats("celu", {{"alpha", 1.0f}});
  table["Elu"] = UnaryWithFloats("elu", {{"alpha", 1.0f}});
  table["HardSigmoid"] = UnaryWithFloats("hard_sigmoid", {{"alpha", 0.2f}, {"beta", 0.5f}});
  table["LeakyRelu"] = UnaryWithFloats("leaky_relu", {{"alpha", 0.01f}});
  table["Selu"] = UnaryWithFloats(
      "selu", {{"alpha", 1.67326319217681884765625f}, {"gamma", 1.05070102214813232421875f}});
  table["Shrink"] = UnaryWithFloats("shrink", {{"bias", 0.0f}, {"lambd", 0.5f}});
  table["ThresholdedRelu"] = UnaryWithFloats("thresholded_relu", {{"alpha", 1.0f}});
  table["IsInf"] = ConvertIsInf;
  table["Gelu"] = ConvertGelu;
  table["Where"] = ConvertWhere;
  table["Clip"] = ConvertClip;
  for (const char* name : {"Max", "Min", "Sum", "Mean"}) {
    std::string op = name;
    op[0] = static_cast<char>(std::tolower(op[0]));
    table[name] = Variadic(op);
  }
  table["Cast"] = ConvertCast;
  table["CastLike"] = ConvertCastLike;
  table["Dropout"] = ConvertDropout;
}

}  // namespace kiln::frontend
