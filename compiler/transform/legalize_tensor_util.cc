#include "compiler/transform/legalize_tensor_util.h"

#include "absl/strings/str_cat.h"

namespace kiln::transform {

using arith::PrimExpr;

std::optional<std::vector<PrimExpr>> IntsOperand(const ir::ExprNode& call, size_t i) {
  if (i >= call.args.size()) return std::nullopt;
  const ir::ExprNode& arg = *call.args[i];
  if (arg.kind == ir::ExprKind::kShapeExpr) return arg.values;
  if (arg.kind != ir::ExprKind::kConstant || !arg.data->dtype.is_int()) return std::nullopt;
  std::vector<PrimExpr> values;
  for (int64_t j = 0; j < arg.data->num_elements(); ++j) {
    values.push_back(arith::IntImm(arg.data->GetInt(j)));
  }
  return values;
}

absl::Status NotConstant(const ir::ExprNode& call, size_t i, const std::string& what) {
  return absl::UnimplementedError(absl::StrCat("op ", call.name, ": ", what, " (argument ", i,
                                               ") must be known at compile time"));
}

size_t InputIndex(const ir::ExprNode& call, size_t i) {
  size_t n = 0;
  for (size_t j = 0; j < i; ++j) n += call.args[j]->kind != ir::ExprKind::kShapeExpr;
  return n;
}

PrimExpr ScalarOperand(const KernelContext& k, size_t i) {
  const ir::ExprNode& arg = *k.call.args[i];
  if (arg.kind == ir::ExprKind::kShapeExpr) return arg.values[0];
  const arith::Buffer& buf = k.inputs[InputIndex(k.call, i)];
  return arith::Load(buf, Indices(buf->shape.size(), arith::IntImm(0)));
}

}  // namespace kiln::transform
