// Reductions, recurrent networks, losses and signal processing.
//
// A reduction is `reduce_*(data) {axes, keepdims, noop_with_empty_axes}` when its axes are
// known at import, or `reduce_*(data, axes)` when they are a run-time tensor; then only the
// rank of the result is known (or not even that, without keepdims), unless the axes are a
// ShapeExpr of symbolic values (bound by the importer) and keepdims is set.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/op/reduce_internal.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

const char* const kReduceOps[] = {
    "reduce_sum", "reduce_mean", "reduce_max",     "reduce_min",         "reduce_prod",
    "reduce_l1",  "reduce_l2",   "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square"};

// The length of a 1-D axes tensor when its struct info says, else -1.
int64_t StaticLength(const StructInfo& info) {
  if (!info.is_tensor() || info.ndim != 1 || !info.shape) return -1;
  const PrimExpr& d = (*info.shape)[0];
  return d->kind == arith::ExprKind::kIntImm ? d->int_value : -1;
}

// Rank of the result when the axes are only known at run time.
StructInfo InferRuntimeAxes(const ir::ExprNode& call, const StructInfo& data) {
  bool keepdims = GetIntAttr(call.attrs, "keepdims", 1) != 0;
  if (keepdims || data.ndim < 0) {
    return StructInfo::TensorRank(keepdims ? data.ndim : -1, data.dtype);
  }
  int64_t k = StaticLength(call.args[1]->struct_info);
  if (k < 0) return StructInfo::TensorRank(-1, data.dtype);
  if (k == 0) {
    bool noop = GetIntAttr(call.attrs, "noop_with_empty_axes", 0) != 0;
    return StructInfo::TensorRank(noop ? data.ndim : 0, data.dtype);
  }
  return StructInfo::TensorRank(std::max<int64_t>(data.ndim - k, 0), data.dtype);
}

// Axes whose values are symbolic (read at run time, a ShapeExpr): with keepdims each dim is
// 1 where some axis names it, a select the host evaluates once the axes are read.
StructInfo InferSymbolicAxes(const ir::ExprNode& call, const StructInfo& data,
                             const std::vector<PrimExpr>& axes) {
  if (GetIntAttr(call.attrs, "keepdims", 1) == 0 || !data.shape) {
    return InferRuntimeAxes(call, data);
  }
  std::vector<PrimExpr> named = NamedPositions(axes, data.ndim);
  std::vector<PrimExpr> out;
  for (int64_t d = 0; d < data.ndim; ++d) {
    out.push_back(arith::Select(named[d], arith::IntImm(1), (*data.shape)[d]));
  }
  return StructInfo::Tensor(std::move(out), data.dtype);
}

absl::StatusOr<StructInfo> InferReduce(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.empty() || call.args.size() > 2) {
    return OpError(call, "expects data and optional axes");
  }
  KILN_ASSIGN_OR_RETURN(const StructInfo* data, TensorArg(call, 0));
  std::vector<int64_t> axes = GetIntsAttr(call.attrs, "axes");
  if (call.args.size() == 2 && !ir::IsNone(call.args[1])) {
    const ir::Expr& arg = call.args[1];
    if (arg->kind == ir::ExprKind::kShapeExpr) return InferSymbolicAxes(call, *data, arg->values);
    if (arg->kind != ir::ExprKind::kConstant) return InferRuntimeAxes(call, *data);
    for (int64_t i = 0; i < arg->data->num_elements(); ++i) axes.push_back(arg->data->GetInt(i));
  }
  if (data->ndim < 0) return StructInfo::TensorRank(-1, data->dtype);
  KILN_ASSIGN_OR_RETURN(std::vector<bool> reduced, ReducedAxes(call, axes, data->ndim));
  bool keepdims = GetIntAttr(call.attrs, "keepdims", 1) != 0;
  if (!data->shape) {
    int64_t kept = std::count(reduced.begin(), reduced.end(), false);
    return StructInfo::TensorRank(keepdims ? data->ndim : kept, data->dtype);
  }
  std::vector<PrimExpr> out;
  for (int64_t d = 0; d < data->ndim; ++d) {
    if (!reduced[d]) {
      out.push_back((*data->shape)[d]);
    } else if (keepdims) {
      out.push_back(arith::IntImm(1));
    }
  }
  return StructInfo::Tensor(std::move(out), data->dtype);
}

}  // namespace

absl::StatusOr<std::vector<bool>> ReducedAxes(const ir::ExprNode& call,
                                              const std::vector<int64_t>& axes, int64_t rank) {
  bool noop = GetIntAttr(call.attrs, "noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(rank, axes.empty() && !noop);
  for (int64_t axis : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(call, axis, rank));
    if (reduced[a]) return OpError(call, absl::StrCat("axis ", axis, " appears twice"));
    reduced[a] = true;
  }
  return reduced;
}

std::vector<OpDef> ReduceOps() {
  std::vector<OpDef> ops;
  for (const char* name : kReduceOps) ops.push_back({name, InferReduce});
  for (auto* family : {LossOps, RecurrentOps, SignalOps}) {
    for (OpDef& def : family()) ops.push_back(std::move(def));
  }
  return ops;
}

}  // namespace kiln::op
