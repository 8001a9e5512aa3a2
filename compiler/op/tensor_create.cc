// Operators that make tensors from shapes or scalars: shape, size, range,
// constant_of_shape, eye_like, trilu, one_hot.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/op/tensor_util.h"

namespace kiln::op {
namespace {

using arith::DataType;
using arith::PrimExpr;
using ir::StructInfo;

absl::StatusOr<DataType> DTypeAttr(const ir::ExprNode& call, const std::string& name) {
  auto dtype = DataType::Parse(GetStringAttr(call.attrs, name, ""));
  if (!dtype.ok()) return OpError(call, "attribute " + name + " must name a dtype");
  return *dtype;
}

// shape(data) {start, end}: the dims in [start, end), clamped to the rank as ONNX does.
absl::StatusOr<StructInfo> InferShape(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (x->ndim < 0) return StructInfo::TensorRank(1, DataType::Int(64));
  int64_t rank = x->ndim;
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clamp(GetIntAttr(call.attrs, "start", 0));
  int64_t end = clamp(GetIntAttr(call.attrs, "end", rank));
  return StructInfo::Tensor({arith::IntImm(std::max<int64_t>(end - start, 0))}, DataType::Int(64));
}

// tensor_to_shape(t): the values of a small tensor (0-d or 1-D of static length) as a Shape;
// float values truncate toward zero (a float OneHot depth). tensor_to_shape(t, dims) with
// float t and a ShapeExpr `dims` of as many values gives the extents the scales t make of
// dims: trunc(dims[k] * t[k]) in double, or -1 where t[k] is not positive (Resize). The
// values are unknown here; the importer binds them to fresh symbolic variables with
// match_cast, so that shapes computed from run-time data stay symbolic.
absl::StatusOr<StructInfo> InferTensorToShape(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.empty() || call.args.size() > 2) return OpError(call, "expects 1 or 2 arguments");
  KILN_ASSIGN_OR_RETURN(const StructInfo* t, TensorArg(call, 0));
  if (!t->dtype.is_int() && !t->dtype.is_float()) {
    return OpError(call, "argument 0 must be an integer or float tensor");
  }
  KILN_ASSIGN_OR_RETURN(int64_t n, ValueCount(call, 0));
  if (n < 0) return OpError(call, "argument 0 must have a length known at compile time");
  if (call.args.size() == 2) {
    const ir::Expr& dims = call.args[1];
    if (dims->kind != ir::ExprKind::kShapeExpr || static_cast<int64_t>(dims->values.size()) != n ||
        !t->dtype.is_float()) {
      return OpError(call, "scales take a float tensor and a ShapeExpr of as many dims");
    }
  }
  StructInfo out;
  out.kind = StructInfo::Kind::kShape;
  out.ndim = static_cast<int>(n);
  return out;
}

absl::StatusOr<StructInfo> InferSize(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_RETURN_IF_ERROR(TensorArg(call, 0).status());
  return StructInfo::Tensor({}, DataType::Int(64));
}

// The element count of a constant range, as numpy.arange: ceil((limit - start) / delta).
absl::StatusOr<int64_t> ConstantRangeLength(const ir::ExprNode& call) {
  const ir::NDArray &s = *call.args[0]->data, &l = *call.args[1]->data, &d = *call.args[2]->data;
  if (s.num_elements() != 1 || l.num_elements() != 1 || d.num_elements() != 1) {
    return OpError(call, "start, limit and delta must be scalars");
  }
  if (s.dtype.is_int()) {
    int64_t a = s.GetInt(0), b = l.GetInt(0), step = d.GetInt(0);
    if (step == 0) return OpError(call, "delta must not be 0");
    int64_t span = step > 0 ? b - a : a - b, mag = step > 0 ? step : -step;
    return span <= 0 ? 0 : (span + mag - 1) / mag;
  }
  double step = d.GetDouble(0);
  if (step == 0) return OpError(call, "delta must not be 0");
  return std::max<int64_t>(0, std::ceil((l.GetDouble(0) - s.GetDouble(0)) / step));
}

// range(start, limit, delta) {dtype}: the length is known when the scalars are constants,
// or symbolic integers with a constant delta.
// ceil((limit - start) / delta), at least 0, for a delta only known at run time (a value the
// importer bound, which may be negative): a select on its sign, each side dividing by a
// positive amount (max(.., 1) only guards delta = 0, which the importer checks at run time).
PrimExpr RuntimeRangeLength(const PrimExpr& start, const PrimExpr& limit, const PrimExpr& delta) {
  PrimExpr one = arith::IntImm(1);
  PrimExpr up = arith::FloorDiv(limit - start + delta - one, arith::Max(delta, one));
  PrimExpr down =
      arith::FloorDiv(start - limit - delta - one, arith::Max(arith::IntImm(0) - delta, one));
  PrimExpr n =
      arith::Select(arith::Binary(arith::ExprKind::kGT, delta, arith::IntImm(0)), up, down);
  return arith::Max(n, arith::IntImm(0));
}

// range(start, limit, delta, Shape([n])): a float range whose length n, a count computed at
// run time, the importer bound (frontend/onnx_tensor_ops_create.cc).
absl::StatusOr<StructInfo> InferRange(const ir::ExprNode& call, const arith::Analyzer& an) {
  if (call.args.size() != 3 && call.args.size() != 4) {
    return OpError(call, "expects start, limit, delta and optionally the length");
  }
  KILN_ASSIGN_OR_RETURN(DataType dtype, DTypeAttr(call, "dtype"));
  if (call.args.size() == 4) {
    const ir::Expr& length = call.args[3];
    if (length->kind != ir::ExprKind::kShapeExpr || length->values.size() != 1) {
      return OpError(call, "the length must be a ShapeExpr of one value");
    }
    return StructInfo::Tensor({length->values[0]}, dtype);
  }
  bool all_constant = true;
  for (const ir::Expr& arg : call.args) all_constant &= arg->kind == ir::ExprKind::kConstant;
  if (all_constant) {
    KILN_ASSIGN_OR_RETURN(int64_t n, ConstantRangeLength(call));
    return StructInfo::Tensor({arith::IntImm(n)}, dtype);
  }
  auto start = KnownValues(call.args[0]), limit = KnownValues(call.args[1]);
  auto delta = KnownInts(call.args[2]);
  auto symbolic_delta = KnownValues(call.args[2]);
  if (start && limit && !delta && symbolic_delta && start->size() == 1 && limit->size() == 1 &&
      symbolic_delta->size() == 1 && dtype.is_int()) {
    return StructInfo::Tensor({RuntimeRangeLength((*start)[0], (*limit)[0], (*symbolic_delta)[0])},
                              dtype);
  }
  if (!start || !limit || !delta || start->size() != 1 || limit->size() != 1 ||
      delta->size() != 1 || (*delta)[0] == 0) {
    return StructInfo::TensorRank(1, dtype);
  }
  int64_t step = (*delta)[0], mag = std::abs(step);
  PrimExpr span = step > 0 ? (*limit)[0] - (*start)[0] : (*start)[0] - (*limit)[0];
  PrimExpr n = an.Simplify(arith::FloorDiv(span + arith::IntImm(mag - 1), arith::IntImm(mag)));
  return StructInfo::Tensor({ProvedMax(n, arith::IntImm(0), an)}, dtype);
}

// constant_of_shape(shape, value): value is a one-element tensor giving dtype and fill.
absl::StatusOr<StructInfo> InferConstantOfShape(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2) return OpError(call, "expects shape and value");
  KILN_ASSIGN_OR_RETURN(const StructInfo* value, TensorArg(call, 1));
  KILN_ASSIGN_OR_RETURN(int64_t count, ValueCount(call, 0));
  auto dims = KnownValues(call.args[0]);
  if (!dims) return StructInfo::TensorRank(count, value->dtype);
  for (const PrimExpr& d : *dims) {
    if (d->kind == arith::ExprKind::kIntImm && d->int_value < 0) {
      return OpError(call, absl::StrCat("negative dimension ", d->int_value));
    }
  }
  return StructInfo::Tensor(*dims, value->dtype);
}

absl::StatusOr<StructInfo> InferEyeLike(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(DataType dtype, DTypeAttr(call, "dtype"));
  if (x->ndim >= 0 && x->ndim != 2) return OpError(call, "input must be 2-D");
  if (!x->shape) return StructInfo::TensorRank(2, dtype);
  return StructInfo::Tensor(*x->shape, dtype);
}

// trilu(data, k) {upper}: the same shape; k a scalar.
absl::StatusOr<StructInfo> InferTrilu(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2) return OpError(call, "expects data and k");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (x->ndim >= 0 && x->ndim < 2) return OpError(call, "input must have rank >= 2");
  return *x;
}

// The depth of one_hot when known: a one-element constant (any dtype, cast to int as ONNX
// says) or a symbolic value.
PrimExpr KnownDepth(const ir::Expr& depth) {
  if (depth->kind == ir::ExprKind::kConstant && depth->data->num_elements() == 1) {
    const ir::NDArray& d = *depth->data;
    return arith::IntImm(d.dtype.is_float() ? int64_t(d.GetDouble(0)) : d.GetInt(0));
  }
  auto values = KnownValues(depth);
  return values && values->size() == 1 ? (*values)[0] : nullptr;
}

// one_hot(indices, depth, values) {axis}: a new axis of size depth; dtype of values.
absl::StatusOr<StructInfo> InferOneHot(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 3) return OpError(call, "expects indices, depth and values");
  KILN_ASSIGN_OR_RETURN(const StructInfo* indices, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* values, TensorArg(call, 2));
  if (indices->ndim < 0) return StructInfo::TensorRank(-1, values->dtype);
  int64_t rank = indices->ndim + 1;
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", -1), rank));
  PrimExpr depth = KnownDepth(call.args[1]);
  if (!depth || !indices->shape) return StructInfo::TensorRank(rank, values->dtype);
  std::vector<PrimExpr> out = *indices->shape;
  out.insert(out.begin() + axis, depth);
  return StructInfo::Tensor(std::move(out), values->dtype);
}

}  // namespace

std::vector<OpDef> TensorCreateOps() {
  return {
      {"shape", InferShape},      {"size", InferSize},
      {"range", InferRange},      {"constant_of_shape", InferConstantOfShape},
      {"eye_like", InferEyeLike}, {"trilu", InferTrilu},
      {"one_hot", InferOneHot},   {"tensor_to_shape", InferTensorToShape},
  };
}

}  // namespace kiln::op
