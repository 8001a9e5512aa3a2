// The generic rule: parallel outer loops, vectorized contiguous inner loops.
#include <map>
#include <set>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/stmt_functor.h"
#include "compiler/schedule/rules.h"

namespace kiln::schedule {
namespace {

using arith::ExprKind;
using arith::PrimExpr;
using ir::ForKind;
using ir::Stmt;
using ir::StmtKind;
using Indices = std::vector<PrimExpr>;

// An outer loop shorter than this leaves threads idle; the rule looks one loop further in.
constexpr int64_t kMinParallelTasks = 8;

bool UsesVar(const PrimExpr& e, const PrimExpr& var) {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    if (v.get() == var.get()) return true;
  }
  return false;
}

bool SameIndices(const Indices& a, const Indices& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    if (!arith::StructuralEqual(a[d], b[d])) return false;
  }
  return true;
}

bool ContainsLoop(const Stmt& s) {
  bool found = false;
  ir::VisitStmts(s, [&](const ir::StmtNode& n) { found |= n.kind == StmtKind::kFor; });
  return found;
}

// `index` is var plus terms free of it: consecutive iterations, consecutive elements.
bool UnitStride(const PrimExpr& index, const PrimExpr& var) {
  if (index.get() == var.get()) return true;
  return UsesVar(index, var) && !UsesVar(arith::Analyzer().Simplify(index - var), var);
}

// Every store in `body` writes, and every load reads, element [..., var + c] of its buffer (c
// free of var), and no other index uses `var`: iterations touch consecutive elements.
bool IsContiguousIn(const PrimExpr& var, const Stmt& body) {
  bool contiguous = true;
  auto check = [&](const Indices& indices, bool is_store) {
    for (size_t d = 0; d + 1 < indices.size(); ++d) contiguous &= !UsesVar(indices[d], var);
    bool unit_stride = !indices.empty() && UnitStride(indices.back(), var);
    if (is_store) {
      contiguous &= unit_stride;
    } else {
      contiguous &= unit_stride || indices.empty() || !UsesVar(indices.back(), var);
    }
  };
  ir::VisitStmts(body, [&](const ir::StmtNode& n) {
    if (n.kind == StmtKind::kStore) check(n.indices, true);
  });
  ir::VisitExprs(body, [&](const PrimExpr& e) {
    if (e->kind == ExprKind::kLoad) check(e->args, false);
  });
  return contiguous;
}

Stmt WithKind(const ir::StmtNode& loop, ForKind kind, Stmt body) {
  return ir::For(loop.var, loop.min, loop.extent, kind, std::move(body));
}

Stmt Rewrite(const Stmt& s, bool may_parallelize);

// `loop` in parallel. A symbolic extent is often 1 (a batch of one): the loop is fused with
// the independent loops nested in it until their constant extents give kMinParallelTasks
// tasks, the innermost loop kept for vectors. BERT's transposed keys, [batch, 8, 64, seq],
// ran on one thread as [batch] tasks; as [batch * 8] they use all.
Stmt Parallel(const Stmt& loop) {
  std::vector<const ir::StmtNode*> chain = {loop.get()};
  const bool symbolic = loop->extent->kind != ExprKind::kIntImm && loop->min->is_const_int(0);
  int64_t tasks = 1;
  for (Stmt inner = loop->body; symbolic && tasks < kMinParallelTasks; inner = inner->body) {
    if (inner->kind != StmtKind::kFor || inner->for_kind != ForKind::kSerial ||
        !inner->min->is_const_int(0) || !ContainsLoop(inner->body) ||
        !IterationsAreIndependent(inner->var, inner->body)) {
      break;
    }
    chain.push_back(inner.get());
    if (inner->extent->kind == ExprKind::kIntImm) tasks *= inner->extent->int_value;
  }
  if (chain.size() == 1) return WithKind(*loop, ForKind::kParallel, Rewrite(loop->body, false));
  // One fused index; each loop variable is its digit in the mixed radix of the extents.
  arith::Analyzer analyzer;
  PrimExpr fused = arith::MakeVar(loop->var->name + "_fused");
  PrimExpr stride = arith::IntImm(1);
  Stmt body = Rewrite(chain.back()->body, false);
  for (size_t d = chain.size(); d-- > 0;) {
    PrimExpr digit = arith::FloorMod(arith::FloorDiv(fused, stride), chain[d]->extent);
    body = ir::Let(chain[d]->var, analyzer.Simplify(digit), body);
    stride = analyzer.Simplify(stride * chain[d]->extent);
  }
  return ir::For(fused, arith::IntImm(0), stride, ForKind::kParallel, body);
}

// Innermost contiguous loops become vectorized; the outermost independent loop with enough
// work becomes parallel (looking past short outer loops and loops that carry a dependence).
Stmt ScheduleLoop(const Stmt& loop, bool may_parallelize) {
  const ir::StmtNode& s = *loop;
  if (s.for_kind != ForKind::kSerial) return loop;
  bool enough_work = EstimateWork(loop) >= kMinParallelWork;
  bool parallel = may_parallelize && enough_work && ExtentEstimate(s.extent) >= kMinParallelTasks &&
                  IterationsAreIndependent(s.var, s.body);
  // The outlined body of a parallel loop runs its range as a plain loop, which the
  // optimizer still vectorizes on its own.
  if (parallel) return Parallel(loop);
  bool vectorize = !ContainsLoop(s.body) && ExtentEstimate(s.extent) >= kMinVectorExtent &&
                   IsContiguousIn(s.var, s.body);
  if (vectorize) return WithKind(s, ForKind::kVectorized, s.body);
  return WithKind(s, s.for_kind, Rewrite(s.body, may_parallelize && enough_work));
}

Stmt Rewrite(const Stmt& s, bool may_parallelize) {
  switch (s->kind) {
    case StmtKind::kFor:
      return ScheduleLoop(s, may_parallelize);
    case StmtKind::kSeq: {
      std::vector<Stmt> seq;
      for (const Stmt& child : s->seq) seq.push_back(Rewrite(child, may_parallelize));
      return ir::Seq(std::move(seq));
    }
    case StmtKind::kLet:
      return ir::Let(s->var, s->value, Rewrite(s->body, may_parallelize));
    case StmtKind::kAllocate:
      return ir::Allocate(s->buffer, Rewrite(s->body, may_parallelize));
    case StmtKind::kIfThenElse:
      return ir::IfThenElse(s->condition, Rewrite(s->then_case, may_parallelize),
                            s->else_case ? Rewrite(s->else_case, may_parallelize) : nullptr);
    default:
      return s;
  }
}

}  // namespace

int64_t ExtentEstimate(const PrimExpr& extent) {
  return extent->kind == ExprKind::kIntImm ? extent->int_value : kSymbolicExtent;
}

int64_t EstimateWork(const Stmt& s) {
  constexpr int64_t kCap = int64_t{1} << 40;
  switch (s->kind) {
    case StmtKind::kFor:
      return std::min(kCap, ExtentEstimate(s->extent) * EstimateWork(s->body));
    case StmtKind::kSeq: {
      int64_t total = 0;
      for (const Stmt& child : s->seq) total = std::min(kCap, total + EstimateWork(child));
      return total;
    }
    case StmtKind::kLet:
    case StmtKind::kAllocate:
      return EstimateWork(s->body);
    case StmtKind::kIfThenElse:
      return std::max(EstimateWork(s->then_case),
                      s->else_case ? EstimateWork(s->else_case) : int64_t{0});
    default:
      return 1;
  }
}

bool IterationsAreIndependent(const PrimExpr& var, const Stmt& body) {
  std::set<const arith::BufferNode*> local;
  std::map<const arith::BufferNode*, std::vector<Indices>> stores;
  bool has_effects = false;
  ir::VisitStmts(body, [&](const ir::StmtNode& n) {
    if (n.kind == StmtKind::kAllocate) local.insert(n.buffer.get());
    if (n.kind == StmtKind::kStore) stores[n.buffer.get()].push_back(n.indices);
    if (n.kind == StmtKind::kEvaluate || n.kind == StmtKind::kAssert) has_effects = true;
  });
  if (has_effects) return false;
  std::map<const arith::BufferNode*, std::vector<Indices>> accesses = stores;
  ir::VisitExprs(body, [&](const PrimExpr& e) {
    if (e->kind == ExprKind::kLoad && stores.count(e->buffer.get())) {
      accesses[e->buffer.get()].push_back(e->args);
    }
  });
  for (const auto& [buffer, all] : accesses) {
    if (local.count(buffer)) continue;
    // One element per iteration, named by `var` itself, and every access to that element.
    const Indices& first = all.front();
    bool keyed_by_var = false;
    for (const PrimExpr& index : first) keyed_by_var |= index.get() == var.get();
    if (!keyed_by_var) return false;
    for (const Indices& other : all) {
      if (!SameIndices(first, other)) return false;
    }
  }
  return true;
}

Stmt ScheduleLoopNests(const Stmt& body) { return Rewrite(body, true); }

}  // namespace kiln::schedule
