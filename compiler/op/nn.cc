// Neural-network operators: matmul and the softmax family here; convolution, pooling,
// normalization, quantization and einsum in the nn_*.cc files.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/nn_ops.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

absl::StatusOr<StructInfo> InferMatmul(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  if (call.args.size() != 2) return OpError(call, "expects 2 arguments");
  KILN_ASSIGN_OR_RETURN(const StructInfo* a, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* b, TensorArg(call, 1));
  if (a->dtype != b->dtype) return OpError(call, "operand dtypes differ");
  if (!a->shape || !b->shape) {
    // Shapes known only at run time (the kernel checks them); the rank still follows.
    bool ranked = a->ndim >= 2 && b->ndim >= 2;
    return StructInfo::TensorRank(ranked ? std::max(a->ndim, b->ndim) : -1, a->dtype);
  }
  KILN_ASSIGN_OR_RETURN(auto out, MatmulShape(call, *a->shape, *b->shape, analyzer));
  return StructInfo::Tensor(std::move(out), a->dtype);
}

// softmax, log_softmax, hardmax: along one axis, shape and dtype unchanged.
absl::StatusOr<StructInfo> InferSoftmax(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (x->ndim >= 0) {
    KILN_RETURN_IF_ERROR(NormalizeAxis(call, GetIntAttr(call.attrs, "axis", -1), x->ndim).status());
  }
  return *x;
}

}  // namespace

absl::StatusOr<std::vector<PrimExpr>> MatmulShape(const ir::ExprNode& call,
                                                  const std::vector<PrimExpr>& a,
                                                  const std::vector<PrimExpr>& b,
                                                  const arith::Analyzer& analyzer) {
  if (a.size() < 2 || b.size() < 2) {
    return OpError(call,
                   absl::StrCat("operands must have rank >= 2, got ", a.size(), " and ", b.size()));
  }
  const PrimExpr& k_a = a[a.size() - 1];
  const PrimExpr& k_b = b[b.size() - 2];
  if (!analyzer.ProveEqual(k_a, k_b)) {
    return OpError(call, absl::StrCat("inner dimensions differ: ", arith::ToString(k_a), " and ",
                                      arith::ToString(k_b)));
  }
  std::vector<PrimExpr> batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  auto batch = BroadcastShapes(batch_a, batch_b, analyzer);
  if (!batch.ok()) return OpError(call, std::string(batch.status().message()));
  std::vector<PrimExpr> out = *std::move(batch);
  out.push_back(a[a.size() - 2]);
  out.push_back(b[b.size() - 1]);
  return out;
}

std::vector<OpDef> NNOps() {
  std::vector<OpDef> ops = {
      {"matmul", InferMatmul},
      {"softmax", InferSoftmax},
      {"log_softmax", InferSoftmax},
      {"hardmax", InferSoftmax},
  };
  for (auto group : {NNConvOps, NNNormOps, NNQuantOps, NNEinsumOps}) {
    for (OpDef& def : group()) ops.push_back(std::move(def));
  }
  return ops;
}

}  // namespace kiln::op
