#include "compiler/ir/loop.h"

#include <sstream>

#include "absl/strings/str_join.h"
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

static std::string Join(const std::vector<PrimExpr>& exprs) {
  return absl::StrJoin(
      exprs, ", ", [](std::string* out, const PrimExpr& e) { out->append(arith::ToString(e)); });
}

static void Print(std::ostream& os, const Stmt& s, int indent) {
  std::string pad(indent, ' ');
  switch (s->kind) {
    case StmtKind::kFor:
      os << pad << "for " << s->var << " in range(" << s->min << ", " << s->extent << ") "
         << ForKindName(s->for_kind) << " {\n";
      Print(os, s->body, indent + 2);
      os << pad << "}\n";
      break;
    case StmtKind::kStore:
      os << pad << s->buffer->name << "[" << Join(s->indices) << "] = " << s->value << "\n";
      break;
    case StmtKind::kLet:
      os << pad << "let " << s->var << ": " << s->var->dtype.ToString() << " = " << s->value
         << "\n";
      Print(os, s->body, indent);
      break;
    case StmtKind::kIfThenElse:
      os << pad << "if " << s->condition << " {\n";
      Print(os, s->then_case, indent + 2);
      if (s->else_case) {
        os << pad << "} else {\n";
        Print(os, s->else_case, indent + 2);
      }
      os << pad << "}\n";
      break;
    case StmtKind::kAllocate:
      os << pad << "alloc " << s->buffer->name << ": " << s->buffer->dtype.ToString() << "["
         << Join(s->buffer->shape) << "]\n";
      Print(os, s->body, indent);
      break;
    case StmtKind::kEvaluate:
      os << pad << s->value << "\n";
      break;
    case StmtKind::kSeq:
      for (const Stmt& item : s->seq) Print(os, item, indent);
      break;
    case StmtKind::kAssert:
      os << pad << "assert " << s->condition << " else " << s->on_fail << "\n";
      break;
  }
}

std::string ToString(const Stmt& stmt, int indent) {
  std::ostringstream os;
  Print(os, stmt, indent);
  return os.str();
}

std::string ToString(const PrimFunc& func) {
  std::ostringstream os;
  os << (func.is_host ? "host_func @" : "prim_func @") << func.name << "(";
  bool first = true;
  for (const Buffer& b : func.buffers) {
    os << (first ? "" : ", ") << b->name << ": " << b->dtype.ToString() << "[" << Join(b->shape)
       << "]";
    first = false;
  }
  for (const PrimExpr& v : func.scalars) {
    os << (first ? "" : ", ") << v << ": " << v->dtype.ToString();
    first = false;
  }
  os << ") {\n";
  Print(os, func.body, 2);
  os << "}\n";
  return os.str();
}

}  // namespace kiln::ir
