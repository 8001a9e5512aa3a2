#include "compiler/schedule/schedule_util.h"

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

ir::Stmt Prefetch(PrimExpr load) {
  return ir::Evaluate(arith::Call(arith::DataType::Int(32), ir::intrinsic::kPrefetch, {load}));
}

ir::Stmt Loop(const PrimExpr& var, PrimExpr extent, ir::ForKind kind, ir::Stmt body) {
  return ir::For(var, I(0), std::move(extent), kind, std::move(body));
}

}  // namespace kiln::schedule
