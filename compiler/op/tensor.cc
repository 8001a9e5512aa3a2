// Shape and data-movement operators.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

absl::StatusOr<StructInfo> InferTranspose(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 1));
  const auto& in = *args[0]->shape;
  std::vector<int64_t> perm = GetIntsAttr(call.attrs, "perm");
  if (perm.size() != in.size()) {
    return OpError(call, absl::StrCat("perm has ", perm.size(), " entries for rank ", in.size()));
  }
  std::vector<bool> seen(in.size(), false);
  std::vector<PrimExpr> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p]) {
      return OpError(call, absl::StrCat("perm entry ", p, " is not a permutation"));
    }
    seen[p] = true;
    out.push_back(in[p]);
  }
  return StructInfo::Tensor(std::move(out), args[0]->dtype);
}

// reshape(data, shape): with a ShapeExpr the result shape is known (symbolically); with a
// tensor of values computed at run time only its rank is.
absl::StatusOr<StructInfo> InferReshape(const ir::ExprNode& call,
                                        const arith::Analyzer& analyzer) {
  if (call.args.size() != 2) return OpError(call, "expects data and shape");
  KILN_ASSIGN_OR_RETURN(const StructInfo* data, TensorArg(call, 0));
  const ir::Expr& shape = call.args[1];
  if (shape->kind != ir::ExprKind::kShapeExpr) {
    const StructInfo& s = shape->struct_info;
    if (!s.is_tensor() || s.ndim != 1 || !s.shape || (*s.shape)[0]->kind != arith::ExprKind::kIntImm) {
      return OpError(call, "shape must be a 1-D tensor of known length");
    }
    return StructInfo::TensorRank((*s.shape)[0]->int_value, data->dtype);
  }
  const std::vector<PrimExpr>& target = shape->values;
  if (!data->shape) return StructInfo::Tensor(target, data->dtype);
  PrimExpr in_size = arith::IntImm(1), out_size = arith::IntImm(1);
  for (const PrimExpr& d : *data->shape) in_size = in_size * d;
  for (const PrimExpr& d : target) out_size = out_size * d;
  if (!analyzer.ProveEqual(in_size, out_size)) {
    return OpError(call, absl::StrCat("cannot reshape ", arith::ToString(analyzer.Simplify(in_size)),
                                      " elements into ",
                                      arith::ToString(analyzer.Simplify(out_size))));
  }
  return StructInfo::Tensor(target, data->dtype);
}

}  // namespace

std::vector<OpDef> TensorOps() {
  return {
      {"transpose", InferTranspose},
      {"reshape", InferReshape},
  };
}

}  // namespace kiln::op
