// ONNX shape and data-movement operators: Reshape, Flatten, Transpose, Identity, Constant,
// Squeeze, Unsqueeze, Expand, Tile, Shape, Size, Concat, Split, Slice, Pad. Indexing ops are
// in onnx_tensor_ops_index.cc, ops that make tensors in onnx_tensor_ops_create.cc.
//
// Shape arithmetic that models compute at run time (Shape -> Gather -> Concat -> Reshape)
// is followed symbolically: the converters of ops that move integer vectors record the
// SymbolicValue of their result, and the ops that consume shapes read it back, so a
// reshape to [batch, seq, 4, 16] keeps those dims instead of only a rank.
#include "compiler/frontend/onnx_tensor_ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_tensor.h"

namespace kiln::frontend {

using arith::PrimExpr;

ir::Expr IntsConstant(const std::vector<int64_t>& values) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Int(64), {int64_t(values.size())});
  std::copy(values.begin(), values.end(), a.data<int64_t>());
  return Constant(std::move(a));
}

std::optional<std::vector<int64_t>> ConstantInts(const ImportContext& ctx, const ir::Expr& value) {
  const ir::NDArray* data = ctx.ConstantValue(value);
  if (!data || !data->dtype.is_int()) return std::nullopt;
  std::vector<int64_t> out(data->num_elements());
  for (int64_t i = 0; i < data->num_elements(); ++i) out[i] = data->GetInt(i);
  return out;
}

ir::Expr ValuesArg(const std::vector<PrimExpr>& values) {
  std::vector<int64_t> ints;
  for (const PrimExpr& v : values) {
    if (v->kind != arith::ExprKind::kIntImm) return ir::MakeShapeExpr(values);
    ints.push_back(v->int_value);
  }
  return IntsConstant(ints);
}

ir::Expr ShapeLikeArg(const ImportContext& ctx, const ir::Expr& value) {
  auto known = ctx.SymbolicValue(value);
  return known ? ValuesArg(*known) : value;
}

bool IsSmallIntVector(const ir::Expr& value) {
  const ir::StructInfo& info = value->struct_info;
  if (!info.is_tensor() || !info.dtype.is_int() || info.ndim < 0 || info.ndim > 1) return false;
  if (info.ndim == 0) return true;
  return info.shape && (*info.shape)[0]->kind == arith::ExprKind::kIntImm;
}

void CheckNonNegative(ImportContext& ctx, const std::vector<PrimExpr>& dims,
                      const std::string& name_hint) {
  for (const PrimExpr& d : dims) {
    PrimExpr negative_part = arith::Select(arith::Binary(arith::ExprKind::kGE, d, arith::IntImm(0)),
                                           arith::IntImm(0), d);
    ctx.CheckAtRunTime(negative_part, arith::IntImm(0), name_hint + "_nonnegative");
  }
}

absl::StatusOr<ir::Expr> DimsArg(ImportContext& ctx, const ir::Expr& value,
                                 const std::string& name_hint) {
  if (auto known = ctx.SymbolicValue(value)) return ValuesArg(*known);
  if (!IsSmallIntVector(value)) return value;
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> vars, ctx.BindRuntimeValues(value, name_hint));
  CheckNonNegative(ctx, vars, name_hint);
  return ir::MakeShapeExpr(vars);
}

namespace {

// Helpers for axes read at run time: everything is a select over their values, so the
// analyzer never assumes them >= 0 (ImportContext::BindRuntimeValues).
PrimExpr Indicator(const PrimExpr& cond) {
  return arith::Select(cond, arith::IntImm(1), arith::IntImm(0));
}
PrimExpr Eq(const PrimExpr& a, int64_t b) {
  return arith::Binary(arith::ExprKind::kEQ, a, arith::IntImm(b));
}

}  // namespace

std::vector<PrimExpr> KeptDims(const std::vector<PrimExpr>& in,
                               const std::vector<PrimExpr>& dropped, size_t out_rank) {
  std::vector<PrimExpr> dims;
  PrimExpr dropped_before = arith::IntImm(0);
  std::vector<PrimExpr> kept_before;  // kept dims before position i
  for (size_t i = 0; i < in.size(); ++i) {
    kept_before.push_back(arith::IntImm(i) - dropped_before);
    dropped_before = dropped_before + Indicator(dropped[i]);
  }
  for (size_t k = 0; k < out_rank; ++k) {
    PrimExpr dim = arith::IntImm(0);
    for (size_t i = 0; i < in.size(); ++i) {
      PrimExpr is_it =
          arith::Binary(arith::ExprKind::kAnd, arith::Not(dropped[i]), Eq(kept_before[i], k));
      dim = arith::Select(is_it, in[i], dim);
    }
    dims.push_back(dim);
  }
  return dims;
}

void CheckAxesAtRunTime(ImportContext& ctx, const std::vector<PrimExpr>& axes, int64_t rank,
                        const std::string& name_hint) {
  using arith::ExprKind;
  PrimExpr named = arith::IntImm(0);
  for (const PrimExpr& a : op::NamedPositions(axes, rank)) named = named + Indicator(a);
  for (const PrimExpr& a : axes) {
    PrimExpr in_range =
        arith::Binary(ExprKind::kAnd, arith::Binary(ExprKind::kGE, a, arith::IntImm(-rank)),
                      arith::Binary(ExprKind::kLT, a, arith::IntImm(rank)));
    // Reports the axis itself; 0 is in range for every rank the axes may name.
    ctx.CheckAtRunTime(arith::Select(in_range, arith::IntImm(0), a), arith::IntImm(0),
                       name_hint + "_in_range");
  }
  ctx.CheckAtRunTime(named, arith::IntImm(axes.size()), name_hint + "_distinct");
}

namespace {

absl::StatusOr<int64_t> Axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// prod(num) / prod(den) for products of dims. Factors provably equal on both sides cancel
// first, so that batch * seq * 64 / (batch * seq * 4) comes out as 16.
PrimExpr DivideDims(std::vector<PrimExpr> num, std::vector<PrimExpr> den,
                    const arith::Analyzer& a) {
  for (auto it = den.begin(); it != den.end();) {
    auto match = std::find_if(num.begin(), num.end(),
                              [&](const PrimExpr& n) { return a.ProveEqual(n, *it); });
    if (match == num.end()) {
      ++it;
      continue;
    }
    num.erase(match);
    it = den.erase(it);
  }
  PrimExpr p = arith::IntImm(1), q = arith::IntImm(1);
  for (const PrimExpr& d : num) p = p * d;
  for (const PrimExpr& d : den) q = q * d;
  return a.Simplify(arith::FloorDiv(a.Simplify(p), a.Simplify(q)));
}

// Resolves Reshape's target: 0 copies the input dim (unless allowzero), -1 is inferred.
absl::StatusOr<std::vector<PrimExpr>> ResolveReshape(const ImportContext& ctx,
                                                     const std::vector<PrimExpr>& in,
                                                     const std::vector<PrimExpr>& target) {
  bool allow_zero = ctx.IntAttr("allowzero", 0) != 0;
  std::vector<PrimExpr> out;
  int infer_at = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    const PrimExpr& v = target[i];
    if (v->is_const_int(-1)) {
      if (infer_at >= 0) return absl::InvalidArgumentError("shape has more than one -1");
      infer_at = static_cast<int>(i);
      out.push_back(arith::IntImm(1));
    } else if (v->is_const_int(0) && !allow_zero) {
      if (i >= in.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape entry ", i, " is 0 but the input has rank ", in.size()));
      }
      out.push_back(in[i]);
    } else if (v->kind == arith::ExprKind::kIntImm && v->int_value < 0) {
      return absl::InvalidArgumentError(absl::StrCat("shape entry ", i, " is ", v->int_value));
    } else {
      out.push_back(v);
    }
  }
  if (infer_at >= 0) {
    std::vector<PrimExpr> known = out;
    known.erase(known.begin() + infer_at);
    out[infer_at] = DivideDims(in, known, ctx.analyzer());
  }
  return out;
}

// Marks a reshape whose element count is checked at run time (ImportContext::CheckAtRunTime),
// so shape inference need not prove it.
ir::Attrs CheckedAtRunTime() { return {{"checked_at_run_time", int64_t{1}}}; }

PrimExpr ElementCount(const std::vector<PrimExpr>& dims, const arith::Analyzer& a) {
  PrimExpr n = arith::IntImm(1);
  for (const PrimExpr& d : dims) n = n * d;
  return a.Simplify(n);
}

// Reshape's target when its values are only known at run time (vars bound by
// BindRuntimeValues): entry i is select(v == -1, inferred, select(v == 0, in[i], v)), the
// selects keeping the analyzer from assuming v >= 0. The element count is checked at run time.
std::vector<PrimExpr> RuntimeReshapeDims(const ImportContext& ctx, const std::vector<PrimExpr>& in,
                                         const std::vector<PrimExpr>& target) {
  using arith::ExprKind;
  bool allow_zero = ctx.IntAttr("allowzero", 0) != 0;
  std::vector<PrimExpr> copied;
  for (size_t i = 0; i < target.size(); ++i) {
    const PrimExpr& v = target[i];
    bool can_copy = !allow_zero && i < in.size();
    copied.push_back(
        can_copy ? arith::Select(arith::Binary(ExprKind::kEQ, v, arith::IntImm(0)), in[i], v) : v);
  }
  PrimExpr total = ElementCount(in, ctx.analyzer());
  std::vector<PrimExpr> out;
  for (size_t i = 0; i < target.size(); ++i) {
    PrimExpr others = arith::IntImm(1);
    for (size_t j = 0; j < target.size(); ++j) {
      if (j != i) others = others * copied[j];
    }
    // max(.., 1): a zero-sized or invalid target must not divide by zero before it is checked.
    PrimExpr inferred = arith::FloorDiv(total, arith::Max(others, arith::IntImm(1)));
    PrimExpr is_inferred = arith::Binary(ExprKind::kEQ, target[i], arith::IntImm(-1));
    out.push_back(arith::Select(is_inferred, inferred, copied[i]));
  }
  return out;
}

bool HasZeroOrMinusOne(const std::vector<PrimExpr>& values) {
  return std::any_of(values.begin(), values.end(),
                     [](const PrimExpr& v) { return v->is_const_int(0) || v->is_const_int(-1); });
}

// A known target becomes a ShapeExpr (what legalize understands); a constant input folds
// through a constant target; otherwise the kernel resolves the target at run time.
absl::Status ConvertReshape(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr shape, ctx.Input(1));
  int64_t allow_zero = ctx.IntAttr("allowzero", 0);
  auto target = ctx.SymbolicValue(shape);
  const ir::StructInfo& info = x->struct_info;
  auto x_values = ctx.SymbolicValue(x);
  if (!target && info.shape && IsSmallIntVector(shape)) {
    KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> values,
                          ctx.BindRuntimeValues(shape, ctx.node().input(1)));
    std::vector<PrimExpr> dims = RuntimeReshapeDims(ctx, *info.shape, values);
    const arith::Analyzer& a = ctx.analyzer();
    CheckNonNegative(ctx, dims, ctx.node().input(1));
    ctx.CheckAtRunTime(ElementCount(dims, a), ElementCount(*info.shape, a),
                       ctx.node().input(1) + "_fits");
    return ctx.EmitOutput("reshape", {x, ir::MakeShapeExpr(dims)}, CheckedAtRunTime());
  }
  if (!target || (!info.shape && HasZeroOrMinusOne(*target))) {
    return ctx.EmitOutput("reshape", {x, shape}, {{"allowzero", allow_zero}});
  }
  std::vector<PrimExpr> dims = *target;
  if (info.shape) {
    KILN_ASSIGN_OR_RETURN(dims, ResolveReshape(ctx, *info.shape, *target));
  }
  ir::Expr out;
  if (ctx.ConstantValue(x)) {
    ir::Expr resolved = ValuesArg(dims);
    if (resolved->kind == ir::ExprKind::kConstant) {
      KILN_ASSIGN_OR_RETURN(out, ctx.Emit("reshape", {x, resolved}, {{"allowzero", int64_t{1}}}));
    }
  }
  if (!out) {
    KILN_ASSIGN_OR_RETURN(out, ctx.Emit("reshape", {x, ir::MakeShapeExpr(dims)}));
  }
  if (x_values) ctx.SetSymbolicValue(out, *x_values);
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

absl::Status ConvertFlatten(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  if (!x->struct_info.shape) return absl::InvalidArgumentError("input shape must be known");
  const std::vector<PrimExpr>& dims = *x->struct_info.shape;
  int64_t rank = dims.size();
  int64_t axis = ctx.IntAttr("axis", 1);
  if (axis < -rank || axis > rank) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  if (axis < 0) axis += rank;
  const arith::Analyzer& a = ctx.analyzer();
  PrimExpr outer = arith::IntImm(1), inner = arith::IntImm(1);
  for (int64_t i = 0; i < axis; ++i) outer = outer * dims[i];
  for (int64_t i = axis; i < rank; ++i) inner = inner * dims[i];
  return ctx.EmitOutput("reshape", {x, ir::MakeShapeExpr({a.Simplify(outer), a.Simplify(inner)})});
}

absl::Status ConvertTranspose(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  std::vector<int64_t> perm = ctx.IntsAttr("perm");
  if (!ctx.Attr("perm")) {
    if (x->struct_info.ndim < 0) return absl::InvalidArgumentError("input rank must be known");
    for (int64_t i = x->struct_info.ndim - 1; i >= 0; --i) perm.push_back(i);
  }
  return ctx.EmitOutput("transpose", {x}, {{"perm", perm}});
}

absl::Status ConvertConstant(ImportContext& ctx) {
  if (ctx.node().attribute_size() != 1) {
    return absl::InvalidArgumentError("Constant needs exactly one value attribute");
  }
  KILN_ASSIGN_OR_RETURN(ir::NDArray value, NDArrayFromConstantAttr(ctx.node().attribute(0)));
  ctx.SetOutput(0, Constant(std::move(value)));
  return absl::OkStatus();
}

absl::Status ConvertIdentity(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  ctx.SetOutput(0, x);
  return absl::OkStatus();
}

// The axes of Squeeze / Unsqueeze: an attribute before opset 13, an input from 13 on.
// nullptr when absent.
absl::StatusOr<ir::Expr> AxesOperand(ImportContext& ctx) {
  if (ctx.opset() < 13) {
    return ctx.Attr("axes") ? IntsConstant(ctx.IntsAttr("axes")) : ir::Expr();
  }
  if (!ctx.HasInput(1)) return ir::Expr();
  KILN_ASSIGN_OR_RETURN(ir::Expr axes, ctx.Input(1));
  return ShapeLikeArg(ctx, axes);
}

// Emits op(x, axes); a vector whose elements are known keeps them (only its rank changes).
absl::Status EmitAxesOp(ImportContext& ctx, const std::string& op, const ir::Expr& x,
                        const ir::Expr& axes) {
  auto values = ctx.SymbolicValue(x);
  KILN_ASSIGN_OR_RETURN(ir::Expr out, ctx.Emit(op, {x, axes}));
  if (values) ctx.SetSymbolicValue(out, *values);
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

// Squeeze and Unsqueeze only reshape: with axes known at run time they become a reshape to
// dims computed from the axes, with the constraints checked at run time: every axis names a
// distinct position (so as many are named as given), and a squeezed dim is 1.
absl::Status EmitRuntimeUnsqueeze(ImportContext& ctx, const ir::Expr& x, const ir::Expr& axes) {
  const std::vector<PrimExpr>& in = *x->struct_info.shape;
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> values,
                        ctx.BindRuntimeValues(axes, ctx.node().input(1)));
  int64_t rank = in.size() + values.size();
  std::vector<PrimExpr> inserted = op::NamedPositions(values, rank);
  std::vector<PrimExpr> dims;
  PrimExpr inserted_before = arith::IntImm(0);
  for (int64_t k = 0; k < rank; ++k) {
    // Not inserted: input dim k - (number inserted before k).
    PrimExpr source = arith::IntImm(k) - inserted_before;
    PrimExpr dim = arith::IntImm(1);
    for (size_t i = 0; i < in.size(); ++i) dim = arith::Select(Eq(source, i), in[i], dim);
    dims.push_back(arith::Select(inserted[k], arith::IntImm(1), dim));
    inserted_before = inserted_before + Indicator(inserted[k]);
  }
  ctx.CheckAtRunTime(inserted_before, arith::IntImm(values.size()), ctx.node().input(1) + "_fits");
  return ctx.EmitOutput("reshape", {x, ir::MakeShapeExpr(dims)}, CheckedAtRunTime());
}

absl::Status EmitRuntimeSqueeze(ImportContext& ctx, const ir::Expr& x, const ir::Expr& axes) {
  const std::vector<PrimExpr>& in = *x->struct_info.shape;
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> values,
                        ctx.BindRuntimeValues(axes, ctx.node().input(1)));
  int64_t rank = in.size();
  std::vector<PrimExpr> dropped = op::NamedPositions(values, rank);
  PrimExpr count = arith::IntImm(0), not_one = arith::IntImm(0);
  for (int64_t i = 0; i < rank; ++i) {
    count = count + Indicator(dropped[i]);
    not_one = not_one + Indicator(arith::Binary(
                            arith::ExprKind::kAnd, dropped[i],
                            arith::Binary(arith::ExprKind::kNE, in[i], arith::IntImm(1))));
  }
  int64_t out_rank = rank - static_cast<int64_t>(values.size());
  if (out_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("axes has ", values.size(), " entries for rank ", rank));
  }
  std::string name = ctx.node().input(1);
  ctx.CheckAtRunTime(count, arith::IntImm(values.size()), name + "_fits");
  ctx.CheckAtRunTime(not_one, arith::IntImm(0), name + "_squeezes_ones");
  return ctx.EmitOutput("reshape", {x, ir::MakeShapeExpr(KeptDims(in, dropped, out_rank))},
                        CheckedAtRunTime());
}

bool IsRuntimeAxes(const ImportContext& ctx, const ir::Expr& x, const ir::Expr& axes) {
  return axes && x->struct_info.shape && !ctx.SymbolicValue(axes) && IsSmallIntVector(axes);
}

// Without axes, Squeeze drops every dim of size 1 (a symbolic dim is taken not to be 1).
absl::Status ConvertSqueeze(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr axes, AxesOperand(ctx));
  if (!axes) {
    if (!x->struct_info.shape) return absl::InvalidArgumentError("input shape must be known");
    std::vector<int64_t> ones;
    const auto& dims = *x->struct_info.shape;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d]->is_const_int(1)) ones.push_back(d);
    }
    axes = IntsConstant(ones);
  }
  if (IsRuntimeAxes(ctx, x, axes)) return EmitRuntimeSqueeze(ctx, x, axes);
  return EmitAxesOp(ctx, "squeeze", x, axes);
}

absl::Status ConvertUnsqueeze(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(ir::Expr axes, AxesOperand(ctx));
  if (!axes) return absl::InvalidArgumentError("axes are required");
  if (IsRuntimeAxes(ctx, x, axes)) return EmitRuntimeUnsqueeze(ctx, x, axes);
  return EmitAxesOp(ctx, "unsqueeze", x, axes);
}

// op(x, shape-like input 1): Expand and Tile.
Converter ShapeOperandOp(std::string op) {
  return [op](ImportContext& ctx) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
    KILN_ASSIGN_OR_RETURN(ir::Expr operand, ctx.Input(1));
    KILN_ASSIGN_OR_RETURN(ir::Expr dims, DimsArg(ctx, operand, ctx.node().input(1)));
    return ctx.EmitOutput(op, {x, dims});
  };
}

// Shape (start/end from opset 15): a constant when the dims are, else computed at run time
// with its symbolic value recorded.
absl::Status ConvertShape(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  int64_t rank = x->struct_info.ndim;
  if (rank < 0) return ctx.EmitOutput("shape", {x}, {{"start", ctx.IntAttr("start", 0)}});
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clamp(ctx.IntAttr("start", 0));
  int64_t end = std::max(start, clamp(ctx.IntAttr("end", rank)));
  if (!x->struct_info.shape) {
    return ctx.EmitOutput("shape", {x}, {{"start", start}, {"end", end}});
  }
  std::vector<PrimExpr> dims(x->struct_info.shape->begin() + start,
                             x->struct_info.shape->begin() + end);
  ir::Expr known = ValuesArg(dims);
  if (known->kind == ir::ExprKind::kConstant) {
    ctx.SetOutput(0, known);
    return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr out, ctx.Emit("shape", {x}, {{"start", start}, {"end", end}}));
  ctx.SetSymbolicValue(out, dims);
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

absl::Status ConvertSize(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  if (!x->struct_info.shape) return ctx.EmitOutput("size", {x});
  PrimExpr n = arith::IntImm(1);
  for (const PrimExpr& d : *x->struct_info.shape) n = n * d;
  n = ctx.analyzer().Simplify(n);
  if (n->kind == arith::ExprKind::kIntImm) {
    ctx.SetOutput(0, ScalarConstant(static_cast<double>(n->int_value), arith::DataType::Int(64)));
    return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(ir::Expr out, ctx.Emit("size", {x}));
  ctx.SetSymbolicValue(out, {n});
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

absl::Status ConvertConcat(ImportContext& ctx) {
  std::vector<ir::Expr> inputs;
  std::optional<std::vector<PrimExpr>> values = std::vector<PrimExpr>{};
  for (int i = 0; i < ctx.node().input_size(); ++i) {
    if (!ctx.HasInput(i)) continue;
    KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(i));
    auto v = ctx.SymbolicValue(x);
    if (v && values) {
      values->insert(values->end(), v->begin(), v->end());
    } else {
      values.reset();
    }
    inputs.push_back(x);
  }
  if (!ctx.Attr("axis")) return absl::InvalidArgumentError("attribute axis is required");
  KILN_ASSIGN_OR_RETURN(ir::Expr out,
                        ctx.Emit("concat", inputs, {{"axis", ctx.IntAttr("axis", 0)}}));
  if (values && out->struct_info.ndim == 1) ctx.SetSymbolicValue(out, *values);
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

}  // namespace

void RegisterTensorConverters(ConverterTable& table) {
  table["Reshape"] = ConvertReshape;
  table["Flatten"] = ConvertFlatten;
  table["Transpose"] = ConvertTranspose;
  table["Constant"] = ConvertConstant;
  table["Identity"] = ConvertIdentity;
  table["Squeeze"] = ConvertSqueeze;
  table["Unsqueeze"] = ConvertUnsqueeze;
  table["Expand"] = ShapeOperandOp("expand");
  table["Tile"] = ShapeOperandOp("tile");
  table["Shape"] = ConvertShape;
  table["Size"] = ConvertSize;
  table["Concat"] = ConvertConcat;
  RegisterTensorSliceConverters(table);
  RegisterTensorIndexConverters(table);
  RegisterTensorCreateConverters(table);
}

}  // namespace kiln::frontend
