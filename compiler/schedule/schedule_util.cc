#include "compiler/schedule/schedule_util.h"

#include "compiler/arith/analyzer.h"

namespace kiln::schedule {

using arith::ExprKind;
using arith::PrimExpr;

PrimExpr I(int64_t v) { return arith::IntImm(v); }
PrimExpr Lt(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kLT, a, b); }
PrimExpr CeilDiv(PrimExpr a, int64_t b) { return arith::FloorDiv(a + I(b - 1), I(b)); }
bool IsVar(const PrimExpr& e, const PrimExpr& var) { return e.get() == var.get(); }

PrimExpr Replace(const PrimExpr& e, const std::vector<PrimExpr>& from,
                 const std::vector<PrimExpr>& to) {
  return arith::Substitute(e, [&](const PrimExpr& x) -> PrimExpr {
    for (size_t v = 0; v < from.size(); ++v) {
      if (x.get() == from[v].get()) return to[v];
    }
    return nullptr;
  });
}

std::optional<AffineAxis> AffineAxisOf(const PrimExpr& index, const PrimExpr& out,
                                       const PrimExpr& tap) {
  arith::Analyzer analyzer;
  auto at = [&](int64_t o, int64_t t) -> std::optional<int64_t> {
    PrimExpr v = analyzer.Simplify(Replace(index, {out, tap}, {I(o), I(t)}));
    if (v->kind != ExprKind::kIntImm) return std::nullopt;
    return v->int_value;
  };
  std::optional<int64_t> base = at(0, 0), step = at(1, 0), next = at(0, 1), far = at(3, 2);
  if (!base || !step || !next || !far) return std::nullopt;
  AffineAxis axis{*step - *base, *next - *base, *base};
  bool affine = *far == *base + 3 * axis.stride + 2 * axis.dilation;
  if (!affine || axis.stride < 1 || axis.dilation < 1) return std::nullopt;
  return axis;
}

ir::Stmt Prefetch(PrimExpr load) {
  return ir::Evaluate(arith::Call(arith::DataType::Int(32), ir::intrinsic::kPrefetch, {load}));
}

ir::Stmt Loop(const PrimExpr& var, PrimExpr extent, ir::ForKind kind, ir::Stmt body) {
  return ir::For(var, I(0), std::move(extent), kind, std::move(body));
}

}  // namespace kiln::schedule
