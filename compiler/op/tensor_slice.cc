// Slicing and joining: slice, pad, split, concat.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/op/tensor_util.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

// Slice bounds past this magnitude mean "to the end" (ONNX models write INT64_MAX or
// INT32_MAX); no dimension is that large.
constexpr int64_t kUnbounded = int64_t{1} << 31;

bool IsConst(const PrimExpr& e) { return e->kind == arith::ExprKind::kIntImm; }

// A start or end index resolved against dim `d` as ONNX Slice does: negative counts from
// the end, then clamped to [lo, d + hi_offset].
PrimExpr ClampIndex(const PrimExpr& v, const PrimExpr& d, int64_t lo, int64_t hi_offset,
                    const arith::Analyzer& an) {
  PrimExpr hi = an.Simplify(d + arith::IntImm(hi_offset));
  if (IsConst(v) && v->int_value >= kUnbounded) return hi;
  if (IsConst(v) && v->int_value <= -kUnbounded) return arith::IntImm(lo);
  PrimExpr resolved;
  if (IsConst(v)) {
    resolved = v->int_value < 0 ? an.Simplify(v + d) : v;
  } else if (an.ProveGE(v, arith::IntImm(0))) {
    resolved = v;
  } else {
    resolved = arith::Select(arith::Binary(arith::ExprKind::kLT, v, arith::IntImm(0)), v + d, v);
  }
  return ProvedMax(arith::IntImm(lo), ProvedMin(resolved, hi, an), an);
}

// The extent for a step read at run time (non-zero, checked by the host): both forms under a
// select on its sign, each dividing by a positive value whatever the sign.
PrimExpr RuntimeSliceExtent(const PrimExpr& d, const PrimExpr& start, const PrimExpr& end,
                            const PrimExpr& step, const arith::Analyzer& an) {
  PrimExpr zero = arith::IntImm(0), one = arith::IntImm(1);
  PrimExpr b = ClampIndex(start, d, 0, 0, an), e = ClampIndex(end, d, 0, 0, an);
  PrimExpr up = arith::FloorDiv(e - b + step - one, arith::Max(step, one));
  b = ClampIndex(start, d, 0, -1, an);
  e = ClampIndex(end, d, -1, -1, an);
  PrimExpr down = arith::FloorDiv(b - e - step - one, arith::Max(zero - step, one));
  PrimExpr len = arith::Select(arith::Binary(arith::ExprKind::kGT, step, zero), up, down);
  return arith::Max(len, zero);
}

// The extent of one sliced axis.
PrimExpr SliceExtent(const PrimExpr& d, const PrimExpr& start, const PrimExpr& end,
                     const PrimExpr& step, const arith::Analyzer& an) {
  if (!IsConst(step)) return RuntimeSliceExtent(d, start, end, step, an);
  int64_t s = step->int_value;
  PrimExpr len;
  if (s > 0) {
    PrimExpr b = ClampIndex(start, d, 0, 0, an), e = ClampIndex(end, d, 0, 0, an);
    len = arith::FloorDiv(e - b + arith::IntImm(s - 1), arith::IntImm(s));
  } else {
    PrimExpr b = ClampIndex(start, d, 0, -1, an), e = ClampIndex(end, d, -1, -1, an);
    len = arith::FloorDiv(b - e + arith::IntImm(-s - 1), arith::IntImm(-s));
  }
  return ProvedMax(an.Simplify(len), arith::IntImm(0), an);
}

// slice(data, starts, ends, axes, steps), all four shape-like and of one length.
absl::StatusOr<StructInfo> InferSlice(const ir::ExprNode& call, const arith::Analyzer& an) {
  if (call.args.size() != 5) return OpError(call, "expects data, starts, ends, axes, steps");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  std::vector<std::optional<std::vector<PrimExpr>>> v;
  int64_t count = -1;
  for (size_t i = 1; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t n, ValueCount(call, i));
    if (n >= 0 && count >= 0 && n != count) {
      return OpError(call, "starts, ends, axes and steps must have the same length");
    }
    if (n >= 0) count = n;
    v.push_back(KnownValues(call.args[i]));
  }
  if (!x->shape || !v[0] || !v[1] || !v[2] || !v[3])
    return StructInfo::TensorRank(x->ndim, x->dtype);
  std::vector<PrimExpr> out = *x->shape;
  std::vector<bool> seen(out.size(), false);
  for (size_t i = 0; i < v[0]->size(); ++i) {
    const PrimExpr& a = (*v[2])[i];
    if (!IsConst(a)) return StructInfo::TensorRank(x->ndim, x->dtype);
    KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(call, a->int_value, out.size()));
    if (seen[axis]) return OpError(call, absl::StrCat("axis ", a->int_value, " given twice"));
    seen[axis] = true;
    if ((*v[3])[i]->is_const_int(0)) return OpError(call, "steps must not be 0");
    out[axis] = SliceExtent(out[axis], (*v[0])[i], (*v[1])[i], (*v[3])[i], an);
  }
  return StructInfo::Tensor(std::move(out), x->dtype);
}

// pad(data, pads, value) {mode}: pads is shape-like, [begin_0.., end_0..]; value a scalar.
absl::StatusOr<StructInfo> InferPad(const ir::ExprNode& call, const arith::Analyzer& an) {
  if (call.args.size() != 3) return OpError(call, "expects data, pads and value");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  std::string mode = GetStringAttr(call.attrs, "mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return OpError(call, "unknown mode '" + mode + "'");
  }
  KILN_ASSIGN_OR_RETURN(int64_t count, ValueCount(call, 1));
  if (x->ndim >= 0 && count >= 0 && count != 2 * x->ndim) {
    return OpError(call, absl::StrCat("pads has ", count, " entries for rank ", x->ndim));
  }
  auto pads = KnownValues(call.args[1]);
  if (!pads || !x->shape) return StructInfo::TensorRank(x->ndim, x->dtype);
  std::vector<PrimExpr> out;
  size_t rank = x->shape->size();
  for (size_t i = 0; i < rank; ++i) {
    PrimExpr d = an.Simplify((*x->shape)[i] + (*pads)[i] + (*pads)[i + rank]);
    if (IsConst(d) && d->int_value < 0) {
      return OpError(call, absl::StrCat("pads make dimension ", i, " negative"));
    }
    out.push_back(d);
  }
  return StructInfo::Tensor(std::move(out), x->dtype);
}

// split(data, sizes) {axis, num_outputs}: a tuple of num_outputs tensors.
absl::StatusOr<StructInfo> InferSplit(const ir::ExprNode& call, const arith::Analyzer& an) {
  if (call.args.size() != 2) return OpError(call, "expects data and split sizes");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  int64_t n = GetIntAttr(call.attrs, "num_outputs", -1);
  if (n < 1) return OpError(call, "num_outputs must be positive");
  KILN_ASSIGN_OR_RETURN(int64_t count, ValueCount(call, 1));
  if (count >= 0 && count != n) {
    return OpError(call, absl::StrCat("split has ", count, " sizes for ", n, " outputs"));
  }
  auto sizes = KnownValues(call.args[1]);
  std::vector<StructInfo> fields(n, StructInfo::TensorRank(x->ndim, x->dtype));
  if (x->ndim < 0) return StructInfo::Tuple(std::move(fields));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), x->ndim));
  if (!sizes || !x->shape) return StructInfo::Tuple(std::move(fields));
  PrimExpr total = arith::IntImm(0);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<PrimExpr> dims = *x->shape;
    dims[axis] = (*sizes)[i];
    total = total + (*sizes)[i];
    fields[i] = StructInfo::Tensor(std::move(dims), x->dtype);
  }
  PrimExpr dim = (*x->shape)[axis];
  total = an.Simplify(total);
  if (IsConst(total) && IsConst(dim) && total->int_value != dim->int_value) {
    return OpError(call, absl::StrCat("split sizes add up to ", total->int_value, ", the axis has ",
                                      dim->int_value));
  }
  return StructInfo::Tuple(std::move(fields));
}

// concat(inputs...) {axis}: dims other than axis must agree.
absl::StatusOr<StructInfo> InferConcat(const ir::ExprNode& call, const arith::Analyzer& an) {
  if (call.args.empty()) return OpError(call, "expects at least one input");
  std::vector<const StructInfo*> in;
  for (size_t i = 0; i < call.args.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const StructInfo* info, TensorArg(call, i));
    if (!in.empty() && info->dtype != in[0]->dtype) {
      return OpError(call, "inputs have different dtypes");
    }
    in.push_back(info);
  }
  int ndim = -1;
  for (const StructInfo* info : in) {
    if (info->ndim < 0) continue;
    if (ndim >= 0 && info->ndim != ndim) return OpError(call, "inputs have different ranks");
    ndim = info->ndim;
  }
  if (ndim < 0) return StructInfo::TensorRank(-1, in[0]->dtype);
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), ndim));
  for (const StructInfo* info : in) {
    if (!info->shape) return StructInfo::TensorRank(ndim, in[0]->dtype);
  }
  std::vector<PrimExpr> out = *in[0]->shape;
  for (size_t i = 1; i < in.size(); ++i) {
    for (int d = 0; d < ndim; ++d) {
      const PrimExpr& dim = (*in[i]->shape)[d];
      if (d == axis) {
        out[d] = out[d] + dim;
      } else if (!IsConst(out[d]) && IsConst(dim)) {
        out[d] = dim;  // the symbolic dim must equal it at run time
      } else if (IsConst(out[d]) && IsConst(dim) && !an.ProveEqual(out[d], dim)) {
        return OpError(call,
                       absl::StrCat("input ", i, " dimension ", d, " is ", arith::ToString(dim),
                                    ", expected ", arith::ToString(out[d])));
      }
    }
  }
  out[axis] = an.Simplify(out[axis]);
  return StructInfo::Tensor(std::move(out), in[0]->dtype);
}

}  // namespace

std::vector<OpDef> TensorSliceOps() {
  return {
      {"slice", InferSlice},
      {"pad", InferPad},
      {"split", InferSplit},
      {"concat", InferConcat},
  };
}

}  // namespace kiln::op
