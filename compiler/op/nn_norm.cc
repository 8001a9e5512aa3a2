// Normalizations: batch (inference and training forms), layer, instance, LRN, mean-variance.
// Each keeps its input's shape; the statistics outputs have their own shapes.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/nn_ops.h"

namespace kiln::op {
namespace {

using arith::DataType;
using arith::IntImm;
using arith::PrimExpr;
using ir::StructInfo;

// Arguments 1.. are per-channel parameters: 1-D tensors of the channel count (dim 1).
absl::Status CheckChannelParams(const ir::ExprNode& call, const StructInfo& x, size_t first,
                                const arith::Analyzer& analyzer) {
  for (size_t i = first; i < call.args.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const StructInfo* p, TensorArg(call, i));
    if (!p->shape || !x.shape) continue;
    if (p->shape->size() != 1) {
      return OpError(call,
                     absl::StrCat("argument ", i, " must be 1-D, got rank ", p->shape->size()));
    }
    if (!analyzer.ProveEqual((*p->shape)[0], (*x.shape)[1])) {
      return OpError(call,
                     absl::StrCat("argument ", i, " has ", arith::ToString((*p->shape)[0]),
                                  " entries for ", arith::ToString((*x.shape)[1]), " channels"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const StructInfo*> ChannelInput(const ir::ExprNode& call, size_t count,
                                               const arith::Analyzer& analyzer) {
  if (call.args.size() != count) {
    return OpError(call, absl::StrCat("expects ", count, " arguments, got ", call.args.size()));
  }
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (x->ndim >= 0 && x->ndim < 2) {
    return OpError(call, absl::StrCat("input must have rank >= 2 ([N, C, ...]), got ", x->ndim));
  }
  KILN_RETURN_IF_ERROR(CheckChannelParams(call, *x, 1, analyzer));
  return x;
}

// batch_normalization(x, scale, bias, mean, var), instance_normalization(x, scale, bias).
absl::StatusOr<StructInfo> InferChannelNorm(const ir::ExprNode& call,
                                            const arith::Analyzer& analyzer) {
  size_t count = call.name == "instance_normalization" ? 3 : 5;
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, ChannelInput(call, count, analyzer));
  return *x;
}

// batch_normalization_training: (y, running_mean, running_var).
absl::StatusOr<StructInfo> InferBatchNormTraining(const ir::ExprNode& call,
                                                  const arith::Analyzer& analyzer) {
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, ChannelInput(call, 5, analyzer));
  const StructInfo& mean = call.args[3]->struct_info;
  const StructInfo& var = call.args[4]->struct_info;
  return StructInfo::Tuple({*x, mean, var});
}

// The float type statistics are computed in: stash_type (an ONNX TensorProto type: 1 is
// float, 11 double), the input's type otherwise.
DataType StashType(const ir::ExprNode& call, DataType x) {
  int64_t stash = GetIntAttr(call.attrs, "stash_type", 1);
  if (stash == 1) return DataType::Float(32);
  if (stash == 11) return DataType::Float(64);
  return x;
}

// layer_normalization(x, scale, bias or none): scale and bias broadcast to x.
absl::StatusOr<StructInfo> InferLayerNorm(const ir::ExprNode& call,
                                          const arith::Analyzer& analyzer) {
  if (call.args.size() != 3) return OpError(call, "expects x, scale and bias (or none)");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (x->ndim >= 0) {
    KILN_RETURN_IF_ERROR(NormalizeAxis(call, GetIntAttr(call.attrs, "axis", -1), x->ndim).status());
  }
  for (size_t i = 1; i < 3; ++i) {
    const StructInfo* p = OptionalTensorArg(call, i);
    if (!p || !p->shape || !x->shape) continue;
    auto shape = BroadcastShapes(*x->shape, *p->shape, analyzer);
    if (!shape.ok() || shape->size() != x->shape->size()) {
      return OpError(call, absl::StrCat("argument ", i, " does not broadcast to the input"));
    }
  }
  return *x;
}

// layer_normalization_stats(x): (mean, inv_std_dev), shaped [d0 .. d(axis-1), 1, ..., 1].
absl::StatusOr<StructInfo> InferLayerNormStats(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  DataType dtype = StashType(call, x->dtype);
  if (!x->shape) {
    StructInfo stat = StructInfo::TensorRank(x->ndim, dtype);
    return StructInfo::Tuple({stat, stat});
  }
  std::vector<PrimExpr> shape = *x->shape;
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", -1), shape.size()));
  for (size_t d = axis; d < shape.size(); ++d) shape[d] = IntImm(1);
  StructInfo stat = StructInfo::Tensor(shape, dtype);
  return StructInfo::Tuple({stat, stat});
}

// lrn and mean_variance_normalization: shape and dtype unchanged.
absl::StatusOr<StructInfo> InferSameShape(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (call.name == "lrn" && x->ndim >= 0 && x->ndim < 2) {
    return OpError(call, "input must have rank >= 2 ([N, C, ...])");
  }
  for (int64_t axis : GetIntsAttr(call.attrs, "axes")) {
    if (x->ndim >= 0) KILN_RETURN_IF_ERROR(NormalizeAxis(call, axis, x->ndim).status());
  }
  return *x;
}

}  // namespace

std::vector<OpDef> NNNormOps() {
  return {
      {"batch_normalization", InferChannelNorm},
      {"batch_normalization_training", InferBatchNormTraining},
      {"instance_normalization", InferChannelNorm},
      {"layer_normalization", InferLayerNorm},
      {"layer_normalization_stats", InferLayerNormStats},
      {"lrn", InferSameShape},
      {"mean_variance_normalization", InferSameShape},
  };
}

}  // namespace kiln::op
