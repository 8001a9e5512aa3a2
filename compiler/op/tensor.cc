// Shape and data-movement operators: reshape, transpose, squeeze, unsqueeze, expand, tile.
// The other tensor ops live in tensor_slice.cc, tensor_create.cc and tensor_index.cc.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/op/tensor_util.h"

namespace kiln::op {

using arith::PrimExpr;
using ir::StructInfo;

std::optional<std::vector<PrimExpr>> KnownValues(const ir::Expr& arg) {
  if (arg->kind == ir::ExprKind::kShapeExpr) return arg->values;
  if (arg->kind != ir::ExprKind::kConstant) return std::nullopt;
  const ir::NDArray& data = *arg->data;
  if (!data.dtype.is_int() || data.shape.size() > 1) return std::nullopt;
  std::vector<PrimExpr> out;
  for (int64_t i = 0; i < data.num_elements(); ++i) out.push_back(arith::IntImm(data.GetInt(i)));
  return out;
}

std::optional<std::vector<int64_t>> KnownInts(const ir::Expr& arg) {
  auto values = KnownValues(arg);
  if (!values) return std::nullopt;
  std::vector<int64_t> out;
  for (const PrimExpr& v : *values) {
    if (v->kind != arith::ExprKind::kIntImm) return std::nullopt;
    out.push_back(v->int_value);
  }
  return out;
}

absl::StatusOr<int64_t> ValueCount(const ir::ExprNode& call, size_t i) {
  if (i >= call.args.size()) return OpError(call, absl::StrCat("missing argument ", i));
  const ir::Expr& arg = call.args[i];
  if (arg->kind == ir::ExprKind::kShapeExpr) return static_cast<int64_t>(arg->values.size());
  KILN_ASSIGN_OR_RETURN(const StructInfo* info, TensorArg(call, i));
  if (info->ndim == 0) return 1;
  if (info->ndim > 1) return OpError(call, absl::StrCat("argument ", i, " must be 1-D"));
  if (info->ndim < 0 || !info->shape) return -1;
  const PrimExpr& n = (*info->shape)[0];
  return n->kind == arith::ExprKind::kIntImm ? n->int_value : -1;
}

PrimExpr ProvedMin(const PrimExpr& a, const PrimExpr& b, const arith::Analyzer& analyzer) {
  if (analyzer.ProveLE(a, b)) return analyzer.Simplify(a);
  if (analyzer.ProveLE(b, a)) return analyzer.Simplify(b);
  return analyzer.Simplify(arith::Min(a, b));
}

PrimExpr ProvedMax(const PrimExpr& a, const PrimExpr& b, const arith::Analyzer& analyzer) {
  if (analyzer.ProveGE(a, b)) return analyzer.Simplify(a);
  if (analyzer.ProveGE(b, a)) return analyzer.Simplify(b);
  return analyzer.Simplify(arith::Max(a, b));
}

PrimExpr DimProduct(const std::vector<PrimExpr>& dims, const arith::Analyzer& analyzer) {
  PrimExpr p = arith::IntImm(1);
  for (const PrimExpr& d : dims) p = p * d;
  return analyzer.Simplify(p);
}

namespace {

absl::StatusOr<StructInfo> InferTranspose(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  std::vector<int64_t> perm = GetIntsAttr(call.attrs, "perm");
  if (x->ndim >= 0 && perm.size() != static_cast<size_t>(x->ndim)) {
    return OpError(call, absl::StrCat("perm has ", perm.size(), " entries for rank ", x->ndim));
  }
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p]) {
      return OpError(call, absl::StrCat("perm entry ", p, " is not a permutation"));
    }
    seen[p] = true;
  }
  if (!x->shape) return StructInfo::TensorRank(perm.size(), x->dtype);
  std::vector<PrimExpr> out;
  for (int64_t p : perm) out.push_back((*x->shape)[p]);
  return StructInfo::Tensor(std::move(out), x->dtype);
}

// reshape(data, shape): with a ShapeExpr the target is resolved (no 0 or -1 entries) and the
// result shape is known symbolically; with a tensor computed at run time only its rank is,
// and the kernel resolves 0 and -1 (attr allowzero).
absl::StatusOr<StructInfo> InferReshape(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  if (call.args.size() != 2) return OpError(call, "expects data and shape");
  KILN_ASSIGN_OR_RETURN(const StructInfo* data, TensorArg(call, 0));
  const ir::Expr& shape = call.args[1];
  if (shape->kind != ir::ExprKind::kShapeExpr) {
    KILN_ASSIGN_OR_RETURN(int64_t n, ValueCount(call, 1));
    if (n < 0) return OpError(call, "shape must be a 1-D tensor of known length");
    return StructInfo::TensorRank(n, data->dtype);
  }
  const std::vector<PrimExpr>& target = shape->values;
  if (!data->shape) return StructInfo::Tensor(target, data->dtype);
  PrimExpr in_size = DimProduct(*data->shape, analyzer);
  PrimExpr out_size = DimProduct(target, analyzer);
  // A target computed from values read at run time is checked then, by a check the importer
  // emits before the reshape (ImportContext::CheckAtRunTime).
  bool checked = GetIntAttr(call.attrs, "checked_at_run_time", 0) != 0;
  if (!analyzer.ProveEqual(in_size, out_size) && !checked) {
    return OpError(call, absl::StrCat("cannot reshape ", arith::ToString(in_size),
                                      " elements into ", arith::ToString(out_size)));
  }
  return StructInfo::Tensor(target, data->dtype);
}

// squeeze(data, axes): axes is shape-like; each squeezed dim must be 1 (a symbolic dim is
// taken to be 1, and checked at run time).
absl::StatusOr<StructInfo> InferSqueeze(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2) return OpError(call, "expects data and axes");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(int64_t count, ValueCount(call, 1));
  auto axes = KnownInts(call.args[1]);
  if (!axes || !x->shape) {
    if (x->ndim < 0 || count < 0) return StructInfo::TensorRank(-1, x->dtype);
    return StructInfo::TensorRank(x->ndim - count, x->dtype);
  }
  const std::vector<PrimExpr>& in = *x->shape;
  std::vector<bool> drop(in.size(), false);
  for (int64_t a : *axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(call, a, in.size()));
    const PrimExpr& d = in[axis];
    if (d->kind == arith::ExprKind::kIntImm && d->int_value != 1) {
      return OpError(call, absl::StrCat("cannot squeeze axis ", a, " of size ", d->int_value));
    }
    if (drop[axis]) return OpError(call, absl::StrCat("axis ", a, " given twice"));
    drop[axis] = true;
  }
  std::vector<PrimExpr> out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  return StructInfo::Tensor(std::move(out), x->dtype);
}

// unsqueeze(data, axes): axes index the output, whose rank is rank + len(axes).
absl::StatusOr<StructInfo> InferUnsqueeze(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2) return OpError(call, "expects data and axes");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(int64_t count, ValueCount(call, 1));
  if (x->ndim < 0 || count < 0) return StructInfo::TensorRank(-1, x->dtype);
  int64_t rank = x->ndim + count;
  auto axes = KnownInts(call.args[1]);
  if (!axes || !x->shape) return StructInfo::TensorRank(rank, x->dtype);
  std::vector<bool> inserted(rank, false);
  for (int64_t a : *axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(call, a, rank));
    if (inserted[axis]) return OpError(call, absl::StrCat("axis ", a, " given twice"));
    inserted[axis] = true;
  }
  std::vector<PrimExpr> out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) {
    out.push_back(inserted[i] ? arith::IntImm(1) : (*x->shape)[next++]);
  }
  return StructInfo::Tensor(std::move(out), x->dtype);
}

// One dim of ONNX's bidirectional broadcast (Expand); nullptr when it cannot be decided at
// compile time (two symbolic dims not provably equal).
PrimExpr BroadcastDim(const PrimExpr& a, const PrimExpr& b, const arith::Analyzer& analyzer) {
  if (a->is_const_int(1)) return b;
  if (b->is_const_int(1) || analyzer.ProveEqual(a, b)) return a;
  bool a_const = a->kind == arith::ExprKind::kIntImm;
  bool b_const = b->kind == arith::ExprKind::kIntImm;
  if (a_const && !b_const) return a;  // b must be 1 or a
  if (b_const && !a_const) return b;
  return nullptr;
}

absl::StatusOr<StructInfo> InferExpand(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  if (call.args.size() != 2) return OpError(call, "expects data and shape");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(int64_t count, ValueCount(call, 1));
  auto target = KnownValues(call.args[1]);
  if (!target || !x->shape) {
    if (x->ndim < 0 || count < 0) return StructInfo::TensorRank(-1, x->dtype);
    return StructInfo::TensorRank(std::max<int64_t>(x->ndim, count), x->dtype);
  }
  const std::vector<PrimExpr>& in = *x->shape;
  size_t rank = std::max(in.size(), target->size());
  std::vector<PrimExpr> out;
  for (size_t i = 0; i < rank; ++i) {
    PrimExpr a = i < rank - in.size() ? arith::IntImm(1) : in[i - (rank - in.size())];
    size_t off = rank - target->size();
    PrimExpr b = i < off ? arith::IntImm(1) : (*target)[i - off];
    if (a->kind == arith::ExprKind::kIntImm && b->kind == arith::ExprKind::kIntImm &&
        a->int_value != 1 && b->int_value != 1 && a->int_value != b->int_value) {
      return OpError(call, absl::StrCat("cannot expand dimension ", i, " of size ", a->int_value,
                                        " to ", b->int_value));
    }
    PrimExpr d = BroadcastDim(a, b, analyzer);
    if (!d) return StructInfo::TensorRank(rank, x->dtype);
    out.push_back(d);
  }
  return StructInfo::Tensor(std::move(out), x->dtype);
}

absl::StatusOr<StructInfo> InferTile(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  if (call.args.size() != 2) return OpError(call, "expects data and repeats");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(int64_t count, ValueCount(call, 1));
  if (x->ndim >= 0 && count >= 0 && count != x->ndim) {
    return OpError(call, absl::StrCat("repeats has ", count, " entries for rank ", x->ndim));
  }
  auto repeats = KnownValues(call.args[1]);
  if (!repeats || !x->shape) return StructInfo::TensorRank(x->ndim, x->dtype);
  std::vector<PrimExpr> out;
  for (size_t i = 0; i < repeats->size(); ++i) {
    out.push_back(analyzer.Simplify((*x->shape)[i] * (*repeats)[i]));
  }
  return StructInfo::Tensor(std::move(out), x->dtype);
}

}  // namespace

std::vector<OpDef> TensorOps() {
  std::vector<OpDef> ops = {
      {"transpose", InferTranspose}, {"reshape", InferReshape}, {"squeeze", InferSqueeze},
      {"unsqueeze", InferUnsqueeze}, {"expand", InferExpand},   {"tile", InferTile},
  };
  for (auto family : {TensorSliceOps, TensorCreateOps, TensorIndexOps}) {
    for (OpDef& def : family()) ops.push_back(std::move(def));
  }
  return ops;
}

}  // namespace kiln::op
