#include "compiler/ir/stmt_functor.h"

namespace kiln::ir {

using arith::ExprKind;

void VisitStmts(const Stmt& stmt, const std::function<void(const StmtNode&)>& fn) {
  if (!stmt) return;
  fn(*stmt);
  VisitStmts(stmt->body, fn);
  VisitStmts(stmt->then_case, fn);
  VisitStmts(stmt->else_case, fn);
  for (const Stmt& s : stmt->seq) VisitStmts(s, fn);
}

void VisitExprs(const PrimExpr& expr, const std::function<void(const PrimExpr&)>& fn) {
  if (!expr) return;
  fn(expr);
  for (const PrimExpr& arg : expr->args) VisitExprs(arg, fn);
}

void VisitExprs(const Stmt& stmt, const std::function<void(const PrimExpr&)>& fn) {
  VisitStmts(stmt, [&](const StmtNode& s) {
    for (const PrimExpr* e : {&s.var, &s.min, &s.extent, &s.value, &s.condition, &s.on_fail}) {
      VisitExprs(*e, fn);
    }
    for (const PrimExpr& index : s.indices) VisitExprs(index, fn);
  });
}

PrimExpr SubstituteBuffers(const PrimExpr& e, const BufferFn& buffer_fn) {
  if (!buffer_fn) return e;
  return arith::Substitute(e, [&](const PrimExpr& x) -> PrimExpr {
    if (x->kind != ExprKind::kLoad) return nullptr;
    Buffer replaced = buffer_fn(x->buffer);
    if (!replaced || replaced == x->buffer) return nullptr;
    return arith::Load(replaced, x->args);
  });
}

namespace {

class StmtSubstituter {
 public:
  StmtSubstituter(const ExprFn& expr_fn, const BufferFn& buffer_fn)
      : expr_fn_(expr_fn), buffer_fn_(buffer_fn) {}

  Stmt Rewrite(const Stmt& stmt) {
    if (!stmt) return stmt;
    StmtNode node = *stmt;
    for (PrimExpr* e :
         {&node.var, &node.min, &node.extent, &node.value, &node.condition, &node.on_fail}) {
      *e = Expr(*e);
    }
    for (PrimExpr& index : node.indices) index = Expr(index);
    if (node.buffer && buffer_fn_) {
      if (Buffer replaced = buffer_fn_(node.buffer)) node.buffer = replaced;
    }
    node.body = Rewrite(node.body);
    node.then_case = Rewrite(node.then_case);
    node.else_case = Rewrite(node.else_case);
    for (Stmt& s : node.seq) s = Rewrite(s);
    return std::make_shared<const StmtNode>(std::move(node));
  }

 private:
  PrimExpr Expr(const PrimExpr& e) {
    if (!e) return e;
    PrimExpr mapped = SubstituteBuffers(e, buffer_fn_);
    return expr_fn_ ? arith::Substitute(mapped, expr_fn_) : mapped;
  }

  const ExprFn& expr_fn_;
  const BufferFn& buffer_fn_;
};

}  // namespace

Stmt SubstituteStmt(const Stmt& stmt, const ExprFn& expr_fn, const BufferFn& buffer_fn) {
  return StmtSubstituter(expr_fn, buffer_fn).Rewrite(stmt);
}

}  // namespace kiln::ir
