#include "compiler/schedule/simplify_indices.h"

#include <algorithm>
#include <limits>

#include "compiler/arith/analyzer.h"

namespace kiln::schedule {
namespace {

using arith::Analyzer;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;
using ir::StmtKind;

// `e` with its index arithmetic simplified: every i64 sub-expression (indices, and the
// operands of conditions) in canonical form. Values of other types keep their form: the
// canonical form is i64, and an i32 max would become one.
PrimExpr Simplified(const PrimExpr& e, const Analyzer& analyzer) {
  if (!e) return e;
  if (e->dtype == arith::DataType::Int(64) && e->kind != ExprKind::kLoad &&
      e->kind != ExprKind::kCall && e->kind != ExprKind::kCast) {
    return analyzer.Simplify(e);
  }
  if (e->args.empty()) return e;
  arith::ExprNode copy = *e;
  for (PrimExpr& arg : copy.args) arg = Simplified(arg, analyzer);
  return std::make_shared<const arith::ExprNode>(std::move(copy));
}

// Inside `loop`: its variable's range, and a symbolic extent that is a variable at least 1.
Analyzer InsideLoop(const Analyzer& outer, const ir::StmtNode& loop) {
  Analyzer inner = outer;
  const PrimExpr& min = loop.min;
  const PrimExpr& extent = loop.extent;
  if (min->kind == ExprKind::kIntImm && extent->kind == ExprKind::kIntImm) {
    if (extent->int_value > 0) {
      inner.Bind(loop.var, {min->int_value, min->int_value + extent->int_value - 1});
    }
  } else if (min->is_const_int(0)) {
    inner.BindBelow(loop.var, extent);
    if (extent->kind == ExprKind::kVar) {
      arith::IntBounds b = outer.ConstBounds(extent);
      inner.Bind(extent, {std::max<int64_t>(b.min, 1), b.max});
    }
  } else {
    // Not a shape variable: as low as its start may be.
    inner.Bind(loop.var, {outer.ConstBounds(min).min, std::numeric_limits<int64_t>::max()});
  }
  return inner;
}

// Inside `let`: its variable within its value's bounds. Unbound, the analyzer would take it
// for a shape variable (>= 0), and a let may be negative (an index before wrapping).
Analyzer AfterLet(const Analyzer& outer, const ir::StmtNode& let) {
  Analyzer inner = outer;
  if (let.var->dtype.is_int()) inner.Bind(let.var, outer.ConstBounds(let.value));
  return inner;
}

Stmt Rewrite(const Stmt& s, const Analyzer& analyzer) {
  if (!s) return s;
  ir::StmtNode copy = *s;
  switch (s->kind) {
    case StmtKind::kFor:
      copy.body = Rewrite(s->body, InsideLoop(analyzer, *s));
      break;
    case StmtKind::kStore:
      for (PrimExpr& index : copy.indices) index = Simplified(index, analyzer);
      copy.value = Simplified(s->value, analyzer);
      break;
    case StmtKind::kLet:
      copy.value = Simplified(s->value, analyzer);
      copy.body = Rewrite(s->body, AfterLet(analyzer, *s));
      break;
    case StmtKind::kIfThenElse:
      copy.condition = Simplified(s->condition, analyzer);
      copy.then_case = Rewrite(s->then_case, analyzer);
      copy.else_case = Rewrite(s->else_case, analyzer);
      break;
    case StmtKind::kAllocate:
      copy.body = Rewrite(s->body, analyzer);
      break;
    case StmtKind::kEvaluate:
      copy.value = Simplified(s->value, analyzer);
      break;
    case StmtKind::kSeq:
      for (Stmt& child : copy.seq) child = Rewrite(child, analyzer);
      break;
    case StmtKind::kAssert:
      copy.condition = Simplified(s->condition, analyzer);
      break;
  }
  return std::make_shared<const ir::StmtNode>(std::move(copy));
}

}  // namespace

Stmt SimplifyIndices(const Stmt& body) { return Rewrite(body, Analyzer()); }

}  // namespace kiln::schedule
