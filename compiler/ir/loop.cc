#include "compiler/ir/loop.h"

#include "compiler/arith/check.h"

namespace kiln::ir {

const char* ForKindName(ForKind kind) {
  switch (kind) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
    case ForKind::kGpuBlock:
      return "gpu_block";
    case ForKind::kGpuThread:
      return "gpu_thread";
  }
  return "?";
}

static Stmt Make(StmtNode node) { return std::make_shared<const StmtNode>(std::move(node)); }

Stmt For(PrimExpr var, PrimExpr min, PrimExpr extent, ForKind kind, Stmt body) {
  KILN_CHECK(var->kind == arith::ExprKind::kVar) << "loop variable must be a var";
  return Make({.kind = StmtKind::kFor,
               .var = var,
               .min = min,
               .extent = extent,
               .for_kind = kind,
               .body = body});
}

Stmt Store(Buffer buffer, std::vector<PrimExpr> indices, PrimExpr value) {
  KILN_CHECK_EQ(buffer->shape.size(), indices.size()) << "store to " << buffer->name;
  return Make(
      {.kind = StmtKind::kStore, .value = value, .buffer = buffer, .indices = std::move(indices)});
}

Stmt Let(PrimExpr var, PrimExpr value, Stmt body) {
  KILN_CHECK(var->kind == arith::ExprKind::kVar) << "let must bind a var";
  return Make({.kind = StmtKind::kLet, .var = var, .value = value, .body = body});
}

Stmt IfThenElse(PrimExpr condition, Stmt then_case, Stmt else_case) {
  return Make({.kind = StmtKind::kIfThenElse,
               .condition = condition,
               .then_case = then_case,
               .else_case = else_case});
}

Stmt Allocate(Buffer buffer, Stmt body) {
  return Make({.kind = StmtKind::kAllocate, .buffer = buffer, .body = body});
}

Stmt Evaluate(PrimExpr value) { return Make({.kind = StmtKind::kEvaluate, .value = value}); }

Stmt Seq(std::vector<Stmt> stmts) {
  if (stmts.size() == 1) return stmts[0];
  return Make({.kind = StmtKind::kSeq, .seq = std::move(stmts)});
}

Stmt Assert(PrimExpr condition, PrimExpr on_fail) {
  return Make({.kind = StmtKind::kAssert, .condition = condition, .on_fail = on_fail});
}

}  // namespace kiln::ir
