#include "compiler/transform/merge_kernels.h"

#include <map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "compiler/arith/analyzer.h"
#include "compiler/ir/stmt_functor.h"
#include "compiler/transform/classify_kernel.h"

namespace kiln::transform {

using arith::Buffer;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

namespace {

enum class Mode { kInline, kEpilogue };

bool IsCheap(KernelClass c) {
  return c == KernelClass::kElementwise || c == KernelClass::kBroadcast ||
         c == KernelClass::kInjective;
}

std::optional<Mode> ChooseMode(KernelClass producer, KernelClass consumer) {
  if (IsCheap(producer) && IsCheap(consumer)) return Mode::kInline;
  bool reduces = producer == KernelClass::kReduction || producer == KernelClass::kOutputFusable;
  bool pointwise = consumer == KernelClass::kElementwise || consumer == KernelClass::kBroadcast;
  if (reduces && pointwise) return Mode::kEpilogue;
  return std::nullopt;
}

const std::vector<PrimExpr>& ShapeOf(const ir::Expr& value) { return *value->struct_info.shape; }

bool SameTensorType(const ir::Expr& a, const ir::Expr& b) {
  if (a->struct_info.dtype != b->struct_info.dtype) return false;
  if (ShapeOf(a).size() != ShapeOf(b).size()) return false;
  arith::Analyzer analyzer;
  for (size_t d = 0; d < ShapeOf(a).size(); ++d) {
    if (!analyzer.ProveEqual(ShapeOf(a)[d], ShapeOf(b)[d])) return false;
  }
  return true;
}

// The buffers of the merged kernel: one per graph value it reads or writes.
class GroupBuffers {
 public:
  Buffer Add(const ir::Expr& value, const std::string& name) {
    auto it = buffers_.find(value.get());
    if (it != buffers_.end()) return it->second;
    Buffer b = arith::MakeBuffer(name, value->struct_info.dtype, ShapeOf(value));
    buffers_[value.get()] = b;
    return b;
  }
  void Alias(const ir::Expr& value, Buffer b) { buffers_[value.get()] = b; }
  bool Has(const ir::Expr& value) const { return buffers_.count(value.get()); }
  Buffer Of(const ir::Expr& value) const { return buffers_.at(value.get()); }

 private:
  std::map<const ir::ExprNode*, Buffer> buffers_;
};

// Maps each of a kernel's scalars to the graph's expression for it: the graph dim where the
// kernel has the bare variable, else the graph variable itself (legalized kernels share
// the graph's variables) or one of the same name (a kernel written in text). nullopt if
// some scalar has no match.
std::optional<std::map<const arith::ExprNode*, PrimExpr>> MatchScalars(
    const ir::PrimFunc& kernel, const std::vector<const std::vector<PrimExpr>*>& graph_shapes) {
  std::map<const arith::ExprNode*, PrimExpr> map;
  std::vector<PrimExpr> graph_vars;
  for (size_t i = 0; i < kernel.buffers.size(); ++i) {
    const std::vector<PrimExpr>& dims = kernel.buffers[i]->shape;
    for (size_t d = 0; d < dims.size(); ++d) {
      const PrimExpr& graph_dim = (*graph_shapes[i])[d];
      if (dims[d]->kind == ExprKind::kVar) map.emplace(dims[d].get(), graph_dim);
      for (const PrimExpr& v : arith::FreeVars(graph_dim)) graph_vars.push_back(v);
    }
  }
  for (const PrimExpr& s : kernel.scalars) {
    if (map.count(s.get())) continue;
    for (const PrimExpr& v : graph_vars) {
      if (v == s || v->name == s->name) {
        map.emplace(s.get(), v);
        break;
      }
    }
    if (!map.count(s.get())) return std::nullopt;
  }
  return map;
}

// The kernel of `call` rewritten onto the group's buffers and the graph's symbolic vars, or
// nullopt when its buffers do not have the shapes of the values the call passes.
std::optional<ir::PrimFunc> BindKernel(const KernelCall& call, const GroupBuffers& group) {
  const ir::PrimFunc& kernel = *call.kernel;
  std::vector<ir::Expr> values = call.args;
  values.push_back(call.result);
  if (values.size() != kernel.buffers.size()) return std::nullopt;
  std::vector<const std::vector<PrimExpr>*> graph_shapes;
  for (size_t i = 0; i < values.size(); ++i) {
    graph_shapes.push_back(&ShapeOf(values[i]));
    if (kernel.buffers[i]->shape.size() != ShapeOf(values[i]).size()) return std::nullopt;
  }
  auto scalars = MatchScalars(kernel, graph_shapes);
  if (!scalars) return std::nullopt;
  auto substitute_scalars = [&](const PrimExpr& e) -> PrimExpr {
    auto it = e->kind == ExprKind::kVar ? scalars->find(e.get()) : scalars->end();
    return it == scalars->end() ? nullptr : it->second;
  };
  arith::Analyzer analyzer;
  std::map<const arith::BufferNode*, Buffer> buffers;
  for (size_t i = 0; i < values.size(); ++i) {
    Buffer b = group.Of(values[i]);
    for (size_t d = 0; d < b->shape.size(); ++d) {
      PrimExpr dim = arith::Substitute(kernel.buffers[i]->shape[d], substitute_scalars);
      if (!analyzer.ProveEqual(dim, b->shape[d])) return std::nullopt;
    }
    buffers[kernel.buffers[i].get()] = b;
  }
  ir::PrimFunc bound;
  for (const ir::Expr& v : values) bound.buffers.push_back(group.Of(v));
  bound.body = ir::SubstituteStmt(kernel.body, substitute_scalars, [&](const Buffer& b) {
    auto it = buffers.find(b.get());
    return it == buffers.end() ? nullptr : it->second;
  });
  return bound;
}

PrimExpr SubstituteVars(const PrimExpr& e, const std::vector<PrimExpr>& from,
                        const std::vector<PrimExpr>& to) {
  return arith::Substitute(e, [&](const PrimExpr& x) -> PrimExpr {
    for (size_t i = 0; i < from.size(); ++i) {
      if (x == from[i]) return to[i];
    }
    return nullptr;
  });
}

// A consumer that reads the intermediate twice (relu as select(x < 0, 0, x)) copies the
// producer's expression twice; a long chain of such kernels would grow exponentially, so
// inlining stops at this many expression nodes per kernel.
constexpr size_t kMaxInlinedNodes = 2048;

size_t CountNodes(const Stmt& s) {
  size_t n = 0;
  ir::VisitExprs(s, [&](const PrimExpr&) { ++n; });
  return n;
}

// Every load of `tmp` in the consumer becomes the producer's value at that load's index.
std::optional<Stmt> InlineProducer(const ir::PrimFunc& producer, const ir::PrimFunc& consumer,
                                   const Buffer& tmp) {
  std::optional<ElementNest> nest = MatchElementNest(producer);
  if (!nest || !nest->value) return std::nullopt;
  Stmt body = ir::SubstituteStmt(consumer.body, [&](const PrimExpr& e) -> PrimExpr {
    if (e->kind != ExprKind::kLoad || e->buffer != tmp) return nullptr;
    return SubstituteVars(nest->value, nest->vars, e->args);
  });
  if (CountNodes(body) > kMaxInlinedNodes) return std::nullopt;
  return body;
}

// `s; extra`, with `extra` inside the scratch allocations that end `s` (they scope the rest
// of their sequence), so it reads as one block.
Stmt AppendInScope(const Stmt& s, const Stmt& extra) {
  if (s->kind == ir::StmtKind::kAllocate) {
    return ir::Allocate(s->buffer, AppendInScope(s->body, extra));
  }
  if (s->kind != ir::StmtKind::kSeq) return ir::Seq({s, extra});
  std::vector<Stmt> seq = s->seq;
  if (!seq.empty() && seq.back()->kind == ir::StmtKind::kAllocate) {
    seq.back() = AppendInScope(seq.back(), extra);
  } else {
    seq.push_back(extra);
  }
  return ir::Seq(seq);
}

// After the producer finishes out[i], out[i] = consumer's value at i (reading out[i] where the
// consumer read the intermediate).
std::optional<Stmt> AppendEpilogue(const ir::PrimFunc& producer, const ir::PrimFunc& consumer) {
  std::optional<ElementNest> p = MatchElementNest(producer);
  std::optional<ElementNest> c = MatchElementNest(consumer);
  // The consumer reads the intermediate, now `out` itself, so its nest has no plain value.
  if (!p || !c || c->body->kind != ir::StmtKind::kStore) return std::nullopt;
  PrimExpr value = SubstituteVars(c->body->value, c->vars, p->vars);
  return RebuildNest(*p,
                     AppendInScope(p->body, ir::Store(producer.buffers.back(), p->vars, value)));
}

// The scalars a kernel needs: the variables of its buffers' shapes, then any other free
// variable of its body, each once.
std::vector<PrimExpr> KernelScalars(const std::vector<Buffer>& buffers, const Stmt& body) {
  std::vector<PrimExpr> vars;
  std::unordered_set<const arith::ExprNode*> seen;
  auto add = [&](const PrimExpr& v) {
    if (seen.insert(v.get()).second) vars.push_back(v);
  };
  for (const Buffer& b : buffers) {
    for (const PrimExpr& d : b->shape) {
      for (const PrimExpr& v : arith::FreeVars(d)) add(v);
    }
  }
  ir::VisitStmts(body, [&](const ir::StmtNode& s) {
    if (s.kind == ir::StmtKind::kFor || s.kind == ir::StmtKind::kLet) seen.insert(s.var.get());
  });
  ir::VisitExprs(body, [&](const PrimExpr& e) {
    if (e->kind == ExprKind::kVar) add(e);
  });
  return vars;
}

}  // namespace

std::optional<MergedKernel> MergeKernels(const KernelCall& producer, const KernelCall& consumer) {
  std::optional<Mode> mode =
      ChooseMode(ClassifyKernel(*producer.kernel), ClassifyKernel(*consumer.kernel));
  if (!mode) return std::nullopt;
  if (*mode == Mode::kEpilogue && !SameTensorType(producer.result, consumer.result)) {
    return std::nullopt;
  }
  MergedKernel merged;
  GroupBuffers group;
  for (const std::vector<ir::Expr>* args : {&producer.args, &consumer.args}) {
    for (const ir::Expr& arg : *args) {
      if (arg == producer.result || group.Has(arg)) continue;
      group.Add(arg, absl::StrCat("A", merged.args.size()));
      merged.args.push_back(arg);
    }
  }
  Buffer out = group.Add(consumer.result, "out");
  Buffer tmp = *mode == Mode::kInline ? group.Add(producer.result, "tmp") : out;
  group.Alias(producer.result, tmp);
  std::optional<ir::PrimFunc> p = BindKernel(producer, group);
  std::optional<ir::PrimFunc> c = BindKernel(consumer, group);
  if (!p || !c) return std::nullopt;
  std::optional<Stmt> body =
      *mode == Mode::kInline ? InlineProducer(*p, *c, tmp) : AppendEpilogue(*p, *c);
  if (!body) return std::nullopt;
  for (const ir::Expr& arg : merged.args) merged.kernel.buffers.push_back(group.Of(arg));
  merged.kernel.buffers.push_back(out);
  merged.kernel.body = *body;
  merged.kernel.scalars = KernelScalars(merged.kernel.buffers, *body);
  return merged;
}

}  // namespace kiln::transform
