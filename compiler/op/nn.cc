// Neural-network operators: matmul, convolution, pooling, normalization, softmax.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

// numpy matmul for ranks >= 2: batch dims broadcast, inner dims must agree.
absl::StatusOr<StructInfo> InferMatmul(const ir::ExprNode& call,
                                       const arith::Analyzer& analyzer) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 2));
  const auto& a = *args[0]->shape;
  const auto& b = *args[1]->shape;
  if (a.size() < 2 || b.size() < 2) {
    return OpError(call, absl::StrCat("operands must have rank >= 2, got ", a.size(), " and ",
                                      b.size()));
  }
  if (args[0]->dtype != args[1]->dtype) return OpError(call, "operand dtypes differ");
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
  return StructInfo::Tensor(std::move(out), args[0]->dtype);
}

absl::StatusOr<StructInfo> InferSoftmax(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (x->ndim >= 0) {
    KILN_RETURN_IF_ERROR(NormalizeAxis(call, GetIntAttr(call.attrs, "axis", -1), x->ndim).status());
  }
  return *x;
}

}  // namespace

std::vector<OpDef> NNOps() {
  return {
      {"matmul", InferMatmul},
      {"softmax", InferSoftmax},
  };
}

}  // namespace kiln::op
