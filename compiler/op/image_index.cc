// Index operators of the image family: sorting and searching (top_k, arg_max, arg_min,
// unique), scans (cum_sum, reverse_sequence), box selection and n-gram counting. Outputs
// whose size depends on the data (unique, non_max_suppression) keep their rank only; their
// _select forms have worst-case sizes and a count, which the importer binds.
#include "compiler/op/image_index.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"

namespace kiln::op {

using arith::PrimExpr;
using ir::StructInfo;

std::optional<std::vector<PrimExpr>> KnownIntValues(const ir::Expr& arg) {
  if (arg->kind == ir::ExprKind::kShapeExpr) return arg->values;
  if (arg->kind != ir::ExprKind::kConstant || !arg->data->dtype.is_int()) return std::nullopt;
  std::vector<PrimExpr> out;
  for (int64_t i = 0; i < arg->data->num_elements(); ++i) {
    out.push_back(arith::IntImm(arg->data->GetInt(i)));
  }
  return out;
}

namespace {

const arith::DataType kI64 = arith::DataType::Int(64);

// top_k(x, k) -> (values, indices): the axis dim becomes k.
absl::StatusOr<StructInfo> InferTopK(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2) return OpError(call, "expects x and k");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  auto rank_only = [&] {
    return StructInfo::Tuple(
        {StructInfo::TensorRank(x->ndim, x->dtype), StructInfo::TensorRank(x->ndim, kI64)});
  };
  if (x->ndim < 0) return rank_only();
  if (x->ndim == 0) return OpError(call, "input must have rank >= 1");
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", -1), x->ndim));
  auto k = KnownIntValues(call.args[1]);
  if (k && k->size() != 1) return OpError(call, "k must hold one value");
  if (!k || !x->shape) return rank_only();
  const PrimExpr& kv = (*k)[0];
  if (kv->kind == arith::ExprKind::kIntImm) {
    const PrimExpr& dim = (*x->shape)[axis];
    if (kv->int_value < 0) return OpError(call, absl::StrCat("k ", kv->int_value, " is negative"));
    if (dim->kind == arith::ExprKind::kIntImm && kv->int_value > dim->int_value) {
      return OpError(call,
                     absl::StrCat("k ", kv->int_value, " exceeds the axis size ", dim->int_value));
    }
  }
  std::vector<PrimExpr> shape = *x->shape;
  shape[axis] = kv;
  return StructInfo::Tuple({StructInfo::Tensor(shape, x->dtype), StructInfo::Tensor(shape, kI64)});
}

// arg_max / arg_min: i64 indices, the axis kept as 1 or dropped.
absl::StatusOr<StructInfo> InferArgReduce(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  bool keepdims = GetIntAttr(call.attrs, "keepdims", 1) != 0;
  if (x->ndim < 0) return StructInfo::TensorRank(-1, kI64);
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), x->ndim));
  if (!x->shape) return StructInfo::TensorRank(keepdims ? x->ndim : x->ndim - 1, kI64);
  std::vector<PrimExpr> shape = *x->shape;
  if (keepdims) {
    shape[axis] = arith::IntImm(1);
  } else {
    shape.erase(shape.begin() + axis);
  }
  return StructInfo::Tensor(std::move(shape), kI64);
}

// cum_sum(x, axis): same struct info as x; the axis is a scalar integer tensor.
absl::StatusOr<StructInfo> InferCumSum(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2) return OpError(call, "expects x and axis");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* axis, TensorArg(call, 1));
  if (!axis->dtype.is_int() || axis->ndim > 1)
    return OpError(call, "axis must be an integer scalar");
  if (x->ndim == 0) return OpError(call, "input must have rank >= 1");
  return *x;
}

absl::StatusOr<StructInfo> InferReverseSequence(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 2));
  const auto& x = *args[0]->shape;
  if (x.size() < 2) return OpError(call, "input must have rank >= 2");
  int64_t batch = GetIntAttr(call.attrs, "batch_axis", 1);
  int64_t time = GetIntAttr(call.attrs, "time_axis", 0);
  if (!((batch == 0 && time == 1) || (batch == 1 && time == 0))) {
    return OpError(call, absl::StrCat("batch_axis ", batch, " and time_axis ", time,
                                      " must be 0 and 1 in some order"));
  }
  if (args[1]->shape->size() != 1) return OpError(call, "sequence_lens must be 1-D");
  return *args[0];
}

// unique(x) along `axis` -> (y, indices, inverse_indices, counts); only inverse_indices has
// a size known before run time: one entry per slice of x.
absl::StatusOr<StructInfo> InferUnique(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  StructInfo inverse = StructInfo::TensorRank(1, kI64);
  if (x->ndim >= 0) {
    if (x->ndim == 0) return OpError(call, "input must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int64_t axis,
                          NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), x->ndim));
    if (x->shape) inverse = StructInfo::Tensor({(*x->shape)[axis]}, kI64);
  }
  return StructInfo::Tuple({StructInfo::TensorRank(x->ndim, x->dtype),
                            StructInfo::TensorRank(1, kI64), inverse,
                            StructInfo::TensorRank(1, kI64)});
}

// unique_select(x) {axis, sorted} -> (y, indices, inverse_indices, counts, count): unique's
// results sized for the worst case, one entry per slice of x, and the number of distinct
// slices (i64 scalar). The first `count` entries are unique's; the importer binds the count
// and slices them off.
absl::StatusOr<StructInfo> InferUniqueSelect(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (!x->shape) return OpError(call, "needs an input of known rank and shape");
  if (x->ndim == 0) return OpError(call, "input must have rank >= 1");
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), x->ndim));
  StructInfo per_slice = StructInfo::Tensor({(*x->shape)[axis]}, kI64);
  return StructInfo::Tuple({StructInfo::Tensor(*x->shape, x->dtype), per_slice, per_slice,
                            per_slice, StructInfo::Tensor({}, kI64)});
}

// non_max_suppression(boxes, scores, max_output, iou_threshold, score_threshold) ->
// [selected, 3] rows of (batch, class, box); how many are selected depends on the data.
absl::StatusOr<StructInfo> InferNonMaxSuppression(const ir::ExprNode& call,
                                                  const arith::Analyzer&) {
  if (call.args.size() != 5) return OpError(call, "expects 5 arguments");
  KILN_ASSIGN_OR_RETURN(const StructInfo* boxes, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* scores, TensorArg(call, 1));
  if ((boxes->ndim >= 0 && boxes->ndim != 3) || (scores->ndim >= 0 && scores->ndim != 3)) {
    return OpError(call, "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]");
  }
  return StructInfo::TensorRank(2, kI64);
}

// non_max_suppression_select(boxes, scores, max_output, iou_threshold, score_threshold) ->
// (rows [batch * classes * boxes, 3], count): non_max_suppression's rows sized for the worst
// case, the selected ones first, and how many were selected (i64 scalar).
absl::StatusOr<StructInfo> InferNonMaxSuppressionSelect(const ir::ExprNode& call,
                                                        const arith::Analyzer& an) {
  if (call.args.size() != 5) return OpError(call, "expects 5 arguments");
  KILN_ASSIGN_OR_RETURN(const StructInfo* boxes, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* scores, TensorArg(call, 1));
  if (!boxes->shape || !scores->shape || boxes->ndim != 3 || scores->ndim != 3) {
    return OpError(call, "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]");
  }
  // Dims that only the run time knows are checked there (the importer's CheckAtRunTime).
  const auto &b = *boxes->shape, &s = *scores->shape;
  auto differ = [&](const PrimExpr& x, const PrimExpr& y) {
    return x->kind == arith::ExprKind::kIntImm && y->kind == arith::ExprKind::kIntImm &&
           x->int_value != y->int_value;
  };
  if (differ(b[2], arith::IntImm(4)) || differ(b[0], s[0]) || differ(b[1], s[2])) {
    return OpError(
        call, absl::StrCat("boxes ", ir::ToString(*boxes), " and scores ", ir::ToString(*scores),
                           " must be [batch, boxes, 4] and [batch, classes, boxes]"));
  }
  PrimExpr rows = an.Simplify(b[0] * s[1] * b[1]);
  return StructInfo::Tuple(
      {StructInfo::Tensor({rows, arith::IntImm(3)}, kI64), StructInfo::Tensor({}, kI64)});
}

// tf_idf_vectorizer(x [C] or [N, C]) -> f32 [max(ngram_indexes) + 1] or [N, that].
absl::StatusOr<StructInfo> InferTfIdfVectorizer(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 1));
  const auto& x = *args[0]->shape;
  if (!args[0]->dtype.is_int()) return OpError(call, "only integer inputs are supported");
  if (x.size() != 1 && x.size() != 2) return OpError(call, "input must be 1-D or 2-D");
  std::vector<int64_t> indexes = GetIntsAttr(call.attrs, "ngram_indexes");
  int64_t width = 0;
  for (int64_t i : indexes) {
    if (i < 0) return OpError(call, absl::StrCat("ngram_indexes entry ", i, " is negative"));
    width = std::max(width, i + 1);
  }
  std::vector<PrimExpr> out;
  if (x.size() == 2) out.push_back(x[0]);
  out.push_back(arith::IntImm(width));
  return StructInfo::Tensor(std::move(out), arith::DataType::Float());
}

}  // namespace

std::vector<OpDef> ImageIndexOps() {
  return {
      {"top_k", InferTopK},
      {"arg_max", InferArgReduce},
      {"arg_min", InferArgReduce},
      {"cum_sum", InferCumSum},
      {"reverse_sequence", InferReverseSequence},
      {"unique", InferUnique},
      {"non_max_suppression", InferNonMaxSuppression},
      {"unique_select", InferUniqueSelect},
      {"non_max_suppression_select", InferNonMaxSuppressionSelect},
      {"tf_idf_vectorizer", InferTfIdfVectorizer},
  };
}

}  // namespace kiln::op
