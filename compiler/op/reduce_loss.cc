// Losses: negative_log_likelihood_loss(input, target, weight?) and
// softmax_cross_entropy_loss(scores, labels, weights?), which returns (loss, log_prob).
// Attrs: reduction ("none", "sum", "mean"); ignore_index, absent when no class is ignored.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/reduce_internal.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

// Checks input [N, C, d1..dk], target [N, d1..dk], weight [C] and returns the loss's info.
absl::StatusOr<StructInfo> InferLossShape(const ir::ExprNode& call,
                                          const arith::Analyzer& analyzer) {
  if (call.args.size() != 3) return OpError(call, "expects input, target and weight (or none)");
  KILN_ASSIGN_OR_RETURN(const StructInfo* input, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* target, TensorArg(call, 1));
  if (!input->dtype.is_float()) return OpError(call, "input must be a float tensor");
  if (!target->dtype.is_int()) return OpError(call, "target must be an integer tensor");
  std::string reduction = GetStringAttr(call.attrs, "reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return OpError(call, absl::StrCat("unknown reduction '", reduction, "'"));
  }
  if (input->ndim >= 0 && input->ndim < 2) return OpError(call, "input must have rank >= 2");
  if (input->ndim >= 0 && target->ndim >= 0 && target->ndim != input->ndim - 1) {
    return OpError(call,
                   absl::StrCat("target has rank ", target->ndim, ", expected ", input->ndim - 1));
  }
  if (!ir::IsNone(call.args[2])) {
    KILN_ASSIGN_OR_RETURN(const StructInfo* weight, TensorArg(call, 2));
    if (weight->dtype != input->dtype) return OpError(call, "weight dtype differs from input");
    if (weight->ndim >= 0 && weight->ndim != 1) return OpError(call, "weight must be 1-D");
    if (weight->shape && input->shape &&
        !analyzer.ProveEqual((*weight->shape)[0], (*input->shape)[1])) {
      return OpError(call, "weight length differs from the number of classes");
    }
  }
  if (reduction != "none") return StructInfo::Tensor({}, input->dtype);
  if (!input->shape || !target->shape) return StructInfo::TensorRank(target->ndim, input->dtype);
  const std::vector<PrimExpr>& in = *input->shape;
  const std::vector<PrimExpr>& t = *target->shape;
  for (size_t d = 0; d < t.size(); ++d) {
    const PrimExpr& expected = in[d == 0 ? 0 : d + 1];
    if (!analyzer.ProveEqual(t[d], expected)) {
      return OpError(call, absl::StrCat("target dimension ", d, " is ", arith::ToString(t[d]),
                                        ", input has ", arith::ToString(expected)));
    }
  }
  return StructInfo::Tensor(t, input->dtype);
}

absl::StatusOr<StructInfo> InferSoftmaxCrossEntropy(const ir::ExprNode& call,
                                                    const arith::Analyzer& an) {
  KILN_ASSIGN_OR_RETURN(StructInfo loss, InferLossShape(call, an));
  return StructInfo::Tuple({loss, call.args[0]->struct_info});
}

}  // namespace

std::vector<OpDef> LossOps() {
  return {
      {"negative_log_likelihood_loss", InferLossShape},
      {"softmax_cross_entropy_loss", InferSoftmaxCrossEntropy},
  };
}

}  // namespace kiln::op
