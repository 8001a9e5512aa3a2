#include "compiler/transform/classify_kernel.h"

#include <algorithm>
#include <unordered_set>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/stmt_functor.h"

namespace kiln::transform {

using arith::Buffer;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;
using ir::StmtKind;

const char* KernelClassName(KernelClass kind) {
  switch (kind) {
    case KernelClass::kElementwise:
      return "elementwise";
    case KernelClass::kBroadcast:
      return "broadcast";
    case KernelClass::kInjective:
      return "injective";
    case KernelClass::kReduction:
      return "reduction";
    case KernelClass::kOutputFusable:
      return "output-fusable";
    case KernelClass::kOpaque:
      return "opaque";
  }
  return "?";
}

namespace {

Stmt UnwrapSeq(Stmt s) {
  while (s && s->kind == StmtKind::kSeq && s->seq.size() == 1) s = s->seq[0];
  return s;
}

bool SameIndices(const std::vector<PrimExpr>& a, const std::vector<PrimExpr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!arith::StructuralEqual(a[i], b[i])) return false;
  }
  return true;
}

bool ContainsLoad(const PrimExpr& e, const Buffer& buffer = nullptr) {
  bool found = false;
  ir::VisitExprs(e, [&](const PrimExpr& x) {
    found |= x->kind == ExprKind::kLoad && (!buffer || x->buffer == buffer);
  });
  return found;
}

std::vector<PrimExpr> LoadsIn(const Stmt& s) {
  std::vector<PrimExpr> loads;
  ir::VisitExprs(s, [&](const PrimExpr& x) {
    if (x->kind == ExprKind::kLoad) loads.push_back(x);
  });
  return loads;
}

bool IsDataDependent(const PrimExpr& load) {
  return std::any_of(load->args.begin(), load->args.end(),
                     [](const PrimExpr& index) { return ContainsLoad(index); });
}

// The output's elements are touched only at `vars`: nothing else of it is read or written.
bool TouchesOutputOnlyAt(const Stmt& body, const Buffer& out, const std::vector<PrimExpr>& vars) {
  bool only = true;
  ir::VisitStmts(body, [&](const ir::StmtNode& s) {
    if (s.kind == StmtKind::kStore && s.buffer == out) only &= SameIndices(s.indices, vars);
  });
  for (const PrimExpr& load : LoadsIn(body)) {
    if (load->buffer == out) only &= SameIndices(load->args, vars);
  }
  return only;
}

// Calls and asserts may have effects that fusion must not duplicate or reorder.
bool HasEffects(const Stmt& body) {
  bool effects = false;
  ir::VisitStmts(body, [&](const ir::StmtNode& s) {
    effects |= s.kind == StmtKind::kEvaluate || s.kind == StmtKind::kAssert;
  });
  return effects;
}

// How a load reads its buffer relative to the output index `vars`, from cheapest to fuse.
enum class Access { kSame, kProjection, kExpression, kDataDependent };

Access ClassifyAccess(const PrimExpr& load, const std::vector<PrimExpr>& vars) {
  if (IsDataDependent(load)) return Access::kDataDependent;
  if (SameIndices(load->args, vars)) return Access::kSame;
  size_t next = 0;  // a projection keeps the output dims it reads in order
  for (const PrimExpr& index : load->args) {
    if (index->kind == ExprKind::kIntImm) continue;
    auto it = std::find(vars.begin() + next, vars.end(), index);
    if (it == vars.end()) return Access::kExpression;
    next = it - vars.begin() + 1;
  }
  return Access::kProjection;
}

bool IsInput(const ir::PrimFunc& func, const Buffer& buffer) {
  return std::find(func.buffers.begin(), func.buffers.end() - 1, buffer) != func.buffers.end() - 1;
}

// out[vars] = value: the worst access of any load decides.
KernelClass ClassifyCompute(const ir::PrimFunc& func, const std::vector<PrimExpr>& vars,
                            const PrimExpr& value) {
  Access worst = Access::kSame;
  bool foreign = false;
  ir::VisitExprs(value, [&](const PrimExpr& x) {
    if (x->kind != ExprKind::kLoad) return;
    foreign |= !IsInput(func, x->buffer);
    worst = std::max(worst, ClassifyAccess(x, vars));
  });
  if (foreign) return KernelClass::kOpaque;
  switch (worst) {
    case Access::kSame:
      return KernelClass::kElementwise;
    case Access::kProjection:
      return KernelClass::kBroadcast;
    case Access::kExpression:
      return KernelClass::kInjective;
    case Access::kDataDependent:
      return KernelClass::kOpaque;
  }
  return KernelClass::kOpaque;
}

// A store inside a loop of `s` that reads back the element it writes: an accumulation.
bool HasAccumulate(const Stmt& s, bool in_loop) {
  if (!s) return false;
  if (s->kind == StmtKind::kStore && in_loop) {
    bool reads_back = false;
    ir::VisitExprs(s->value, [&](const PrimExpr& x) {
      reads_back |=
          x->kind == ExprKind::kLoad && x->buffer == s->buffer && SameIndices(x->args, s->indices);
    });
    return reads_back;
  }
  in_loop |= s->kind == StmtKind::kFor;
  if (HasAccumulate(s->body, in_loop) || HasAccumulate(s->then_case, in_loop) ||
      HasAccumulate(s->else_case, in_loop)) {
    return true;
  }
  return std::any_of(s->seq.begin(), s->seq.end(),
                     [&](const Stmt& x) { return HasAccumulate(x, in_loop); });
}

// An input element that several output elements read (its indices leave out an output dim of
// extent > 1) is reuse, as in matmul and conv; a plain reduction reads each input once.
bool ReusesInputs(const ir::PrimFunc& func, const ElementNest& nest) {
  arith::Analyzer analyzer;
  for (const PrimExpr& load : LoadsIn(nest.body)) {
    if (!IsInput(func, load->buffer)) continue;
    std::unordered_set<const arith::ExprNode*> used;
    for (const PrimExpr& index : load->args) {
      for (const PrimExpr& v : arith::FreeVars(index)) used.insert(v.get());
    }
    for (size_t d = 0; d < nest.vars.size(); ++d) {
      bool unit = analyzer.ProveEqual(nest.loops[d]->extent, arith::IntImm(1));
      if (!unit && !used.count(nest.vars[d].get())) return true;
    }
  }
  return false;
}

KernelClass ClassifyReduction(const ir::PrimFunc& func, const ElementNest& nest) {
  std::vector<PrimExpr> loads = LoadsIn(nest.body);
  if (std::any_of(loads.begin(), loads.end(), IsDataDependent)) return KernelClass::kOpaque;
  if (!HasAccumulate(nest.body, false)) return KernelClass::kOpaque;
  return ReusesInputs(func, nest) ? KernelClass::kOutputFusable : KernelClass::kReduction;
}

// One loop nest of several (concat): loops, then one store to the output at index
// expressions of the loops, from inputs read without data dependence.
bool IsInjectivePiece(const ir::PrimFunc& func, Stmt s) {
  s = UnwrapSeq(s);
  while (s && s->kind == StmtKind::kFor) s = UnwrapSeq(s->body);
  if (!s || s->kind != StmtKind::kStore || s->buffer != func.buffers.back()) return false;
  for (const PrimExpr& index : s->indices) {
    if (ContainsLoad(index)) return false;
  }
  bool ok = true;
  ir::VisitExprs(s->value, [&](const PrimExpr& x) {
    if (x->kind == ExprKind::kLoad) ok &= IsInput(func, x->buffer) && !IsDataDependent(x);
  });
  return ok;
}

KernelClass ClassifyPieces(const ir::PrimFunc& func) {
  Stmt body = UnwrapSeq(func.body);
  std::vector<Stmt> pieces = body && body->kind == StmtKind::kSeq ? body->seq : std::vector{body};
  bool all = std::all_of(pieces.begin(), pieces.end(),
                         [&](const Stmt& s) { return IsInjectivePiece(func, s); });
  return all ? KernelClass::kInjective : KernelClass::kOpaque;
}

// `body` with its loads of `out` reading 0 in a dim of extent 1 reading that dim's loop
// variable instead: the same element, named as the nest names it. A broadcasting consumer
// reads an operand of extent 1 at 0, so without this, x[1, seq, K] @ w + b would not take the
// add as an epilogue where x[batch, seq, K] @ w + b does.
Stmt ReadOutputAtLoopVars(const Stmt& body, const Buffer& out, const ElementNest& nest) {
  arith::Analyzer analyzer;
  std::vector<bool> unit;
  for (const Stmt& loop : nest.loops) {
    unit.push_back(analyzer.ProveEqual(loop->extent, arith::IntImm(1)));
  }
  if (std::none_of(unit.begin(), unit.end(), [](bool u) { return u; })) return body;
  return ir::SubstituteStmt(body, [&](const PrimExpr& e) -> PrimExpr {
    if (e->kind != ExprKind::kLoad || e->buffer != out || e->args.size() != unit.size()) {
      return nullptr;
    }
    std::vector<PrimExpr> at = e->args;
    for (size_t d = 0; d < at.size(); ++d) {
      if (unit[d] && at[d]->is_const_int(0)) at[d] = nest.vars[d];
    }
    return arith::Load(out, at);
  });
}

}  // namespace

std::optional<ElementNest> MatchElementNest(const ir::PrimFunc& func) {
  if (func.is_host || func.buffers.empty()) return std::nullopt;
  const Buffer& out = func.buffers.back();
  arith::Analyzer analyzer;
  ElementNest nest;
  Stmt s = UnwrapSeq(func.body);
  for (const PrimExpr& dim : out->shape) {
    if (!s || s->kind != StmtKind::kFor || !s->min->is_const_int(0) ||
        !analyzer.ProveEqual(s->extent, dim)) {
      return std::nullopt;
    }
    nest.loops.push_back(s);
    nest.vars.push_back(s->var);
    s = UnwrapSeq(s->body);
  }
  if (s) s = ReadOutputAtLoopVars(s, out, nest);
  if (!s || !TouchesOutputOnlyAt(s, out, nest.vars)) return std::nullopt;
  nest.body = s;
  if (s->kind == StmtKind::kStore && s->buffer == out && !ContainsLoad(s->value, out)) {
    nest.value = s->value;
  }
  return nest;
}

Stmt RebuildNest(const ElementNest& nest, Stmt body) {
  for (size_t d = nest.loops.size(); d-- > 0;) {
    const ir::StmtNode& loop = *nest.loops[d];
    body = ir::For(loop.var, loop.min, loop.extent, loop.for_kind, body);
  }
  return body;
}

KernelClass ClassifyKernel(const ir::PrimFunc& func) {
  if (func.is_host || func.buffers.empty() || HasEffects(func.body)) return KernelClass::kOpaque;
  std::optional<ElementNest> nest = MatchElementNest(func);
  if (nest && nest->value) return ClassifyCompute(func, nest->vars, nest->value);
  if (nest) return ClassifyReduction(func, *nest);
  return ClassifyPieces(func);
}

}  // namespace kiln::transform
