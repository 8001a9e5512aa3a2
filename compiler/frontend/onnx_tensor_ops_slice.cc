// ONNX slicing operators: Split, Slice, Pad. Their index operands were attributes in old
// opsets and are inputs now; both become shape-like operands of the Kiln op.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/frontend/onnx_tensor_ops.h"

namespace kiln::frontend {
namespace {

using arith::PrimExpr;

absl::StatusOr<int64_t> Axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// Equal parts of `dim` for Split without sizes; opset 18's num_outputs allows a smaller
// last part (ceil-sized chunks).
absl::StatusOr<ir::Expr> EqualSplit(const ImportContext& ctx, const PrimExpr& dim, int64_t n,
                                    bool uneven) {
  if (dim->kind != arith::ExprKind::kIntImm) {
    PrimExpr part = ctx.analyzer().Simplify(arith::FloorDiv(dim, arith::IntImm(n)));
    return ir::MakeShapeExpr(std::vector<PrimExpr>(n, part));
  }
  int64_t d = dim->int_value;
  if (!uneven && d % n != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", d, " into ", n, " equal parts"));
  }
  int64_t chunk = (d + n - 1) / n;
  std::vector<int64_t> sizes(n, chunk);
  sizes.back() = d - chunk * (n - 1);
  if (sizes.back() < 0) return absl::InvalidArgumentError("too many outputs for the split");
  return IntsConstant(sizes);
}

// Sizes read at run time (a small integer vector) become symbolic variables, checked >= 0
// and to add up to the split dim then; others as ShapeLikeArg.
absl::StatusOr<ir::Expr> RuntimeSplitSizes(ImportContext& ctx, const ir::Expr& x, int64_t axis,
                                           const ir::Expr& split) {
  if (ctx.SymbolicValue(split) || !IsSmallIntVector(split) || !x->struct_info.shape) {
    return ShapeLikeArg(ctx, split);
  }
  const std::string& name = ctx.node().input(1);
  KILN_ASSIGN_OR_RETURN(ir::Expr sizes, DimsArg(ctx, split, name));
  PrimExpr total = arith::IntImm(0);
  for (const PrimExpr& v : sizes->values) total = total + v;
  ctx.CheckAtRunTime(total, (*x->struct_info.shape)[axis], name + "_sums_to_dim");
  return sizes;
}

absl::Status ConvertSplit(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  int64_t rank = x->struct_info.ndim;
  if (rank < 0) return absl::InvalidArgumentError("input rank must be known");
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx.IntAttr("axis", 0), rank));
  int64_t n = ctx.Attr("num_outputs") ? ctx.IntAttr("num_outputs", 1) : ctx.num_outputs();
  ir::Expr sizes;
  if (ctx.opset() >= 13 && ctx.HasInput(1)) {
    KILN_ASSIGN_OR_RETURN(ir::Expr split, ctx.Input(1));
    KILN_ASSIGN_OR_RETURN(sizes, RuntimeSplitSizes(ctx, x, axis, split));
  } else if (ctx.opset() < 13 && ctx.Attr("split")) {
    sizes = IntsConstant(ctx.IntsAttr("split"));
  } else {
    if (!x->struct_info.shape) return absl::InvalidArgumentError("input shape must be known");
    KILN_ASSIGN_OR_RETURN(sizes, EqualSplit(ctx, (*x->struct_info.shape)[axis], n,
                                            ctx.Attr("num_outputs") != nullptr));
  }
  return ctx.EmitTupleOutputs("split", {x, sizes}, {{"axis", axis}, {"num_outputs", n}});
}

// The element positions a 1-D slice keeps, as the Slice kernel computes them.
std::vector<int64_t> SlicePositions(int64_t n, int64_t start, int64_t end, int64_t step) {
  auto resolve = [n](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v = v < -n ? -1 : v + n;
    return std::clamp(v, lo, hi);
  };
  std::vector<int64_t> out;
  if (step > 0) {
    for (int64_t i = resolve(start, 0, n); i < resolve(end, 0, n); i += step) out.push_back(i);
  } else if (step < 0) {
    for (int64_t i = resolve(start, 0, n - 1); i > resolve(end, -1, n - 1); i += step) {
      out.push_back(i);
    }
  }
  return out;
}

// Slicing a vector whose elements are known (part of a shape) keeps them known.
void RecordSlicedValues(ImportContext& ctx, const ir::Expr& x, const ir::Expr& out,
                        const std::vector<ir::Expr>& operands) {
  auto values = ctx.SymbolicValue(x);
  if (!values || x->struct_info.ndim != 1) return;
  std::vector<std::vector<int64_t>> ints;
  for (const ir::Expr& e : operands) {
    auto v = ConstantInts(ctx, e);
    if (!v || v->size() != 1) return;
    ints.push_back(*v);
  }
  std::vector<PrimExpr> kept;
  int64_t n = values->size();
  for (int64_t i : SlicePositions(n, ints[0][0], ints[1][0], ints[3][0])) {
    kept.push_back((*values)[i]);
  }
  ctx.SetSymbolicValue(out, kept);
}

// The number of values in a shape-like operand, from its known values or its static shape.
absl::StatusOr<int64_t> OperandLength(const ImportContext& ctx, const ir::Expr& operand) {
  if (operand->kind == ir::ExprKind::kShapeExpr) return operand->values.size();
  if (auto v = ctx.SymbolicValue(operand)) return v->size();
  const ir::StructInfo& info = operand->struct_info;
  if (info.ndim == 1 && info.shape && (*info.shape)[0]->kind == arith::ExprKind::kIntImm) {
    return (*info.shape)[0]->int_value;
  }
  return absl::InvalidArgumentError("starts must have a static length");
}

absl::StatusOr<std::vector<ir::Expr>> SliceOperands(ImportContext& ctx) {
  if (ctx.opset() < 10) {
    std::vector<int64_t> starts = ctx.IntsAttr("starts");
    std::vector<ir::Expr> out = {IntsConstant(starts), IntsConstant(ctx.IntsAttr("ends"))};
    if (ctx.Attr("axes")) out.push_back(IntsConstant(ctx.IntsAttr("axes")));
    return out;
  }
  std::vector<ir::Expr> out;
  for (int i = 1; i <= 4 && ctx.HasInput(i); ++i) {
    KILN_ASSIGN_OR_RETURN(ir::Expr operand, ctx.Input(i));
    out.push_back(ShapeLikeArg(ctx, operand));
  }
  if (out.size() < 2) return absl::InvalidArgumentError("starts and ends are required");
  return out;
}

PrimExpr SelectLess(const PrimExpr& a, const PrimExpr& b, const PrimExpr& then_value,
                    const PrimExpr& else_value) {
  return arith::Select(arith::Binary(arith::ExprKind::kLT, a, b), then_value, else_value);
}

// A start or end read at run time, resolved as ONNX does for a positive step: negative counts
// from the end, then clamped to [0, dim]. The value only appears under a select, so the
// analyzer never assumes it >= 0 (ImportContext::BindRuntimeValues).
PrimExpr ResolveSliceBound(const PrimExpr& v, const PrimExpr& dim) {
  PrimExpr zero = arith::IntImm(0);
  // v < 0 ? v + dim : v, written so that neither arm overflows for values near the i64 limits
  // (ONNX models say "to the end" with INT64_MAX).
  PrimExpr r = SelectLess(v, zero, v, v - dim) + dim;
  // min/max of a select: the analyzer derives no bounds from the value, so none are assumed.
  return arith::Max(zero, arith::Min(r, dim));
}

// Starts and ends computed at run time (with constant axes and positive constant steps)
// become their resolved values over symbolic variables, so the result keeps its dims.
absl::Status ResolveRuntimeSliceBounds(ImportContext& ctx, const ir::Expr& x,
                                       std::vector<ir::Expr>& operands) {
  const ir::StructInfo& info = x->struct_info;
  auto axes = ConstantInts(ctx, operands[2]);
  auto steps = ConstantInts(ctx, operands[3]);
  if (!info.shape || !axes || !steps) return absl::OkStatus();
  if (std::any_of(steps->begin(), steps->end(), [](int64_t s) { return s <= 0; })) {
    return absl::OkStatus();
  }
  for (int k = 0; k < 2; ++k) {
    ir::Expr& operand = operands[k];
    if (ctx.SymbolicValue(operand) || !IsSmallIntVector(operand)) continue;
    KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> values,
                          ctx.BindRuntimeValues(operand, ctx.node().input(k + 1)));
    if (values.size() != axes->size()) {
      return absl::InvalidArgumentError("starts, ends, axes and steps must have the same length");
    }
    for (size_t i = 0; i < values.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t axis, Axis((*axes)[i], info.shape->size()));
      values[i] = ResolveSliceBound(values[i], (*info.shape)[axis]);
    }
    operand = ir::MakeShapeExpr(values);
  }
  return absl::OkStatus();
}

// An operand's values as expressions: known ones as they are, a small integer vector read at
// run time bound to symbolic variables, each under a select so that the analyzer assumes
// nothing of it (ImportContext::BindRuntimeValues). nullopt when neither.
absl::StatusOr<std::optional<std::vector<PrimExpr>>> OperandValues(ImportContext& ctx,
                                                                   const ir::Expr& operand,
                                                                   int input) {
  if (operand->kind == ir::ExprKind::kShapeExpr) return operand->values;
  if (auto known = ctx.SymbolicValue(operand)) return known;
  if (!IsSmallIntVector(operand)) return std::nullopt;
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> values,
                        ctx.BindRuntimeValues(operand, ctx.node().input(input)));
  for (PrimExpr& v : values) {
    v = arith::Select(arith::Binary(arith::ExprKind::kGE, v, arith::IntImm(0)), v, v);
  }
  return values;
}

// Whether axis value `a` names dim `d`: a constant when `a` is one (checked in range here),
// else a condition that the host evaluates (range checked at run time).
absl::StatusOr<PrimExpr> NamesDim(const PrimExpr& a, int64_t d, int64_t rank) {
  if (a->kind != arith::ExprKind::kIntImm) {
    return op::NamedPositions({a}, rank)[d];
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(a->int_value, rank));
  return arith::IntImm(axis == d, arith::DataType::Bool());
}

// Axes or steps read at run time: the slice is rewritten over every dim, in order. Dim d takes
// the start, end and step given for the axis that names it (a select over the axes), else the
// whole dim with step 1. The host checks that the axes are in range and distinct and that no
// step is 0, and reports the input that breaks it.
absl::Status SliceEveryDim(ImportContext& ctx, const std::vector<PrimExpr>& dims,
                           std::vector<ir::Expr>& operands) {
  std::vector<std::vector<PrimExpr>> v(4);
  for (int k = 0; k < 4; ++k) {
    KILN_ASSIGN_OR_RETURN(auto values, OperandValues(ctx, operands[k], k + 1));
    if (!values) return absl::OkStatus();  // only the rank is known
    v[k] = std::move(*values);
    if (v[k].size() != v[0].size()) {
      return absl::InvalidArgumentError("starts, ends, axes and steps must have the same length");
    }
  }
  int64_t rank = dims.size();
  auto is_const = [](const PrimExpr& e) { return e->kind == arith::ExprKind::kIntImm; };
  if (!std::all_of(v[2].begin(), v[2].end(), is_const)) {
    CheckAxesAtRunTime(ctx, v[2], rank, ctx.node().input(3));
  }
  for (const PrimExpr& step : v[3]) {
    if (step->is_const_int(0)) return absl::InvalidArgumentError("steps must not be 0");
    if (is_const(step)) continue;
    PrimExpr is_zero = arith::Binary(arith::ExprKind::kEQ, step, arith::IntImm(0));
    ctx.CheckAtRunTime(arith::Select(is_zero, arith::IntImm(0), arith::IntImm(1)), arith::IntImm(1),
                       ctx.node().input(4) + "_nonzero");
  }
  std::vector<PrimExpr> starts, ends, axes, steps;
  for (int64_t d = 0; d < rank; ++d) {
    PrimExpr start = arith::IntImm(0), end = dims[d], step = arith::IntImm(1);
    for (size_t i = v[0].size(); i-- > 0;) {
      KILN_ASSIGN_OR_RETURN(PrimExpr named, NamesDim(v[2][i], d, rank));
      start = arith::Select(named, v[0][i], start);
      end = arith::Select(named, v[1][i], end);
      step = arith::Select(named, v[3][i], step);
    }
    starts.push_back(start);
    ends.push_back(end);
    axes.push_back(arith::IntImm(d));
    steps.push_back(ctx.analyzer().Simplify(step));
  }
  operands = {ir::MakeShapeExpr(starts), ir::MakeShapeExpr(ends), ValuesArg(axes),
              ValuesArg(steps)};
  return absl::OkStatus();
}

absl::Status ConvertSlice(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Expr> operands, SliceOperands(ctx));
  KILN_ASSIGN_OR_RETURN(int64_t n, OperandLength(ctx, operands[0]));
  if (operands.size() < 3) {
    std::vector<int64_t> axes(n);
    for (int64_t i = 0; i < n; ++i) axes[i] = i;
    operands.push_back(IntsConstant(axes));
  }
  if (operands.size() < 4) operands.push_back(IntsConstant(std::vector<int64_t>(n, 1)));
  const ir::StructInfo& info = x->struct_info;
  if (info.shape && (!ConstantInts(ctx, operands[2]) || !ConstantInts(ctx, operands[3]))) {
    KILN_RETURN_IF_ERROR(SliceEveryDim(ctx, *info.shape, operands));
  } else {
    KILN_RETURN_IF_ERROR(ResolveRuntimeSliceBounds(ctx, x, operands));
  }
  std::vector<ir::Expr> args = {x};
  args.insert(args.end(), operands.begin(), operands.end());
  KILN_ASSIGN_OR_RETURN(ir::Expr out, ctx.Emit("slice", args));
  RecordSlicedValues(ctx, x, out, operands);
  ctx.SetOutput(0, out);
  return absl::OkStatus();
}

// Opset 18's axes input names the dims that pads cover; the others get no padding.
absl::StatusOr<ir::Expr> PadsForAxes(ImportContext& ctx, const ir::Expr& pads, int64_t rank) {
  KILN_ASSIGN_OR_RETURN(ir::Expr axes_in, ctx.Input(3));
  auto axes = ConstantInts(ctx, axes_in);
  auto given = ConstantInts(ctx, pads);
  if (!axes || !given || given->size() != 2 * axes->size()) {
    return absl::InvalidArgumentError("pads and axes must be constants of matching length");
  }
  std::vector<int64_t> full(2 * rank, 0);
  for (size_t i = 0; i < axes->size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, Axis((*axes)[i], rank));
    full[axis] = (*given)[i];
    full[axis + rank] = (*given)[i + axes->size()];
  }
  return IntsConstant(full);
}

// Pads read at run time: bound to symbolic variables that may be negative (a negative pad
// crops), so each enters the dims under a select, from which the analyzer derives no bounds;
// every resulting dim is checked >= 0 at run time.
absl::StatusOr<ir::Expr> RuntimePads(ImportContext& ctx, const ir::Expr& x, const ir::Expr& pads) {
  const ir::StructInfo& info = x->struct_info;
  if (!info.shape || ctx.SymbolicValue(pads) || !IsSmallIntVector(pads)) return pads;
  KILN_ASSIGN_OR_RETURN(std::vector<PrimExpr> values,
                        ctx.BindRuntimeValues(pads, ctx.node().input(1)));
  size_t rank = info.shape->size();
  if (values.size() != 2 * rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("pads has ", values.size(), " entries for rank ", rank));
  }
  for (PrimExpr& v : values) {
    v = arith::Select(arith::Binary(arith::ExprKind::kGE, v, arith::IntImm(0)), v, v);
  }
  std::vector<PrimExpr> dims;
  for (size_t d = 0; d < rank; ++d) dims.push_back((*info.shape)[d] + values[d] + values[d + rank]);
  CheckNonNegative(ctx, dims, ctx.node().input(1));
  return ir::MakeShapeExpr(values);
}

absl::Status ConvertPad(ImportContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ir::Expr x, ctx.Input(0));
  arith::DataType dtype = x->struct_info.dtype;
  std::string mode = ctx.StringAttr("mode", "constant");
  ir::Expr pads, value = Constant(ir::NDArray::Zeros(dtype, {}));
  if (ctx.opset() < 11) {
    pads = IntsConstant(ctx.IntsAttr(ctx.Attr("paddings") ? "paddings" : "pads"));
    float v = ctx.FloatAttr("value", 0.0f);
    if (v != 0.0f) value = ScalarConstant(v, dtype);
  } else {
    KILN_ASSIGN_OR_RETURN(ir::Expr pads_in, ctx.Input(1));
    pads = ShapeLikeArg(ctx, pads_in);
    if (ctx.HasInput(2)) {
      KILN_ASSIGN_OR_RETURN(value, ctx.Input(2));
    }
    if (ctx.HasInput(3)) {
      KILN_ASSIGN_OR_RETURN(pads, PadsForAxes(ctx, pads, x->struct_info.ndim));
    } else {
      KILN_ASSIGN_OR_RETURN(pads, RuntimePads(ctx, x, pads));
    }
  }
  return ctx.EmitOutput("pad", {x, pads, value}, {{"mode", mode}});
}

}  // namespace

void RegisterTensorSliceConverters(ConverterTable& table) {
  table["Split"] = ConvertSplit;
  table["Slice"] = ConvertSlice;
  table["Pad"] = ConvertPad;
}

}  // namespace kiln::frontend
