#include "compiler/transform/legalize_tensor_util.h"

#include <cmath>

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
  for (size_t j = 0; j < i; ++j) {
    n += call.args[j]->kind != ir::ExprKind::kShapeExpr && !ir::IsNone(call.args[j]);
  }
  return n;
}

const arith::Buffer* OptionalInput(const KernelContext& k, size_t i) {
  if (i >= k.call.args.size() || ir::IsNone(k.call.args[i]) ||
      k.call.args[i]->kind == ir::ExprKind::kShapeExpr) {
    return nullptr;
  }
  return &k.inputs[InputIndex(k.call, i)];
}

PrimExpr WrapIndex(PrimExpr index, PrimExpr dim) {
  PrimExpr v =
      index->dtype == arith::DataType::Int() ? index : arith::Cast(arith::DataType::Int(), index);
  return arith::Select(arith::Binary(arith::ExprKind::kLT, v, arith::IntImm(0)), v + dim, v);
}

PrimExpr CheckedIndex(const KernelContext& k, size_t arg, PrimExpr index, PrimExpr size, int dim,
                      bool wrap) {
  int input = arg < k.arg_inputs.size() ? k.arg_inputs[arg] : -1;
  return arith::Call(
      arith::DataType::Int(), ir::intrinsic::CheckIndexName(k.call.name),
      {CastIfNeeded(arith::DataType::Int(), index), size,
       arith::IntImm(input, arith::DataType::Int(32)), arith::IntImm(dim, arith::DataType::Int(32)),
       arith::IntImm(wrap ? 1 : 0, arith::DataType::Int(32))});
}

PrimExpr CheckedSequenceLength(const KernelContext& k, size_t arg, PrimExpr length,
                               PrimExpr steps) {
  return CheckedIndex(k, arg, length, steps + arith::IntImm(1), ir::intrinsic::kCheckSequenceLength,
                      false);
}

PrimExpr ScalarOperand(const KernelContext& k, size_t i) {
  const ir::ExprNode& arg = *k.call.args[i];
  if (arg.kind == ir::ExprKind::kShapeExpr) return arg.values[0];
  const arith::Buffer& buf = k.inputs[InputIndex(k.call, i)];
  return arith::Load(buf, Indices(buf->shape.size(), arith::IntImm(0)));
}

PrimExpr ParamAt(const arith::Buffer& p, PrimExpr pos) {
  bool single = true;
  for (const PrimExpr& d : p->shape) single &= d->is_const_int(1);
  if (single) return arith::Load(p, Indices(p->shape.size(), arith::IntImm(0)));
  return arith::Load(p, {pos});
}

PrimExpr Saturate(PrimExpr v, arith::DataType t) {
  double lo = 0, hi = 0;
  if (t.code == arith::DataType::kUInt) {
    hi = std::ldexp(1.0, t.bits) - 1;
  } else {
    lo = -std::ldexp(1.0, t.bits - 1);
    hi = -lo - 1;
  }
  arith::DataType f64 = arith::DataType::Float(64);
  PrimExpr rounded = arith::Call(f64, "round", {v});
  return arith::Min(arith::Max(rounded, arith::FloatImm(lo, f64)), arith::FloatImm(hi, f64));
}

arith::PrimExpr DoubleImm(double v) { return arith::FloatImm(v, arith::DataType::Float(64)); }

arith::PrimExpr CastIfNeeded(arith::DataType t, arith::PrimExpr v) {
  return v->dtype == t ? v : arith::Cast(t, v);
}

}  // namespace kiln::transform
