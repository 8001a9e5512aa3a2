// The rows rule (reduce_rule.h): a kernel whose outer data-parallel loops hold a row that
// reduces along a contiguous axis, as legalize writes softmax, layer norm and reductions over
// the last axis:
//
//   for o.. (independent)                 for task in (rows / R) parallel
//     alloc acc[1]                          for r in the task's R rows
//     acc[0] = init                           let o.. = the digits of r
//     for k: out[k] = f(k)                    alloc acc[1]; acc[0] = init
//            acc[0] = op(acc[0], g(k))  ->    partial[L] = identity             (vectorized)
//     for k: out[k] = h(out[k], acc[0])       for c < n / L: for l < L: k = c * L + l
//                                                out[k] = f(k); partial[l] op= g(k)  (vectorized)
//                                              for k in [n / L * L, n): the original body
//                                              for 0 < a < A: for l < W:             (vectorized)
//                                                partial[l] op= partial[a * W + l]
//                                              for l < W: acc[0] op= partial[l]
//                                              for k: out[k] = h(out[k], acc[0])  (vectorized)
//
// W is the vector width in f32 and L = W * A for A = `accumulators`: the partials are A
// independent vectors, so the loop-carried op is not one long chain. op is +, max or min on
// f32; max and min are exact in any order, sums are reassociated (as every BLAS does), within
// f32 rounding. Any statement the rule cannot prove safe (an integer or f64 reduction, a loop
// that carries another dependence, a strided row) leaves the kernel to the generic rule.
#include "compiler/schedule/reduce_rule.h"

#include <algorithm>
#include <limits>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/stmt_functor.h"
#include "compiler/schedule/schedule_util.h"

namespace kiln::schedule {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::ForKind;
using ir::Stmt;
using ir::StmtKind;
using ir::StmtNode;

// The knobs' choices, the default first. One row per task is the finest grain; the pool hands
// each thread one contiguous range of tasks anyway, so it costs no extra wake-ups.
const std::vector<int64_t> kRowsPerTask = {1, 4, 16, 64};
const std::vector<int64_t> kAccumulators = {2, 1, 4};

struct RowsKnobs {
  int64_t rows_per_task = kRowsPerTask[0];
  int64_t accumulators = kAccumulators[0];
};

int64_t Choice(const Trace& trace, std::string_view knob, const std::vector<int64_t>& choices) {
  int64_t value = trace.Get(knob, choices[0]);
  return std::find(choices.begin(), choices.end(), value) != choices.end() ? value : choices[0];
}

RowsKnobs KnobsOf(const Trace& trace) {
  if (trace.rule != "rows") return {};
  return {Choice(trace, "rows_per_task", kRowsPerTask),
          Choice(trace, "accumulators", kAccumulators)};
}

int64_t VectorLanes(const ir::Target& target) { return std::max(4, target.vector_bits / 32); }

bool Uses(const PrimExpr& e, const PrimExpr& var) {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    if (v.get() == var.get()) return true;
  }
  return false;
}

bool UsesAny(const PrimExpr& e, const std::vector<Axis>& axes) {
  for (const Axis& axis : axes) {
    if (Uses(e, axis.var)) return true;
  }
  return false;
}

// The statements of `s` in order, nested sequences flattened.
void Flatten(const Stmt& s, std::vector<Stmt>& out) {
  if (s->kind != StmtKind::kSeq) return out.push_back(s);
  for (const Stmt& child : s->seq) Flatten(child, out);
}

// Whether `s` loads from or stores to `buffer`.
bool Touches(const Stmt& s, const Buffer& buffer) {
  bool touches = false;
  ir::VisitStmts(
      s, [&](const StmtNode& n) { touches |= n.kind == StmtKind::kStore && n.buffer == buffer; });
  ir::VisitExprs(
      s, [&](const PrimExpr& e) { touches |= e->kind == ExprKind::kLoad && e->buffer == buffer; });
  return touches;
}

// `buf[c] = op(buf[c], operand)` on f32, c free of the loop variable `k`.
struct Update {
  Buffer buffer;
  std::vector<PrimExpr> index;
  ExprKind op;
  PrimExpr operand;
};

std::optional<Update> MatchUpdate(const StmtNode& s, const PrimExpr& k) {
  if (s.kind != StmtKind::kStore || s.buffer->dtype != DataType::Float(32)) return std::nullopt;
  for (const PrimExpr& i : s.indices) {
    if (Uses(i, k)) return std::nullopt;
  }
  const PrimExpr& v = s.value;
  if (v->kind != ExprKind::kAdd && v->kind != ExprKind::kMax && v->kind != ExprKind::kMin) {
    return std::nullopt;
  }
  for (int side : {0, 1}) {
    const PrimExpr& acc = v->args[side];
    if (acc->kind == ExprKind::kLoad && acc->buffer == s.buffer &&
        acc->args.size() == s.indices.size() &&
        std::equal(
            acc->args.begin(), acc->args.end(), s.indices.begin(),
            [](const PrimExpr& a, const PrimExpr& b) { return arith::StructuralEqual(a, b); })) {
      return Update{s.buffer, s.indices, v->kind, v->args[1 - side]};
    }
  }
  return std::nullopt;
}

// Every access in `body` moves by one element (or not at all) as `k` steps by one: k appears
// in no index but the last, and there with coefficient 1.
bool IsContiguousIn(const PrimExpr& k, const Stmt& body) {
  arith::Analyzer analyzer;
  bool contiguous = true;
  auto check = [&](const std::vector<PrimExpr>& indices) {
    for (size_t d = 0; d < indices.size(); ++d) {
      if (!Uses(indices[d], k)) continue;
      PrimExpr step = analyzer.Simplify(Replace(indices[d], {k}, {k + I(1)}) - indices[d]);
      contiguous &= d + 1 == indices.size() && step->is_const_int(1);
    }
  };
  ir::VisitStmts(body, [&](const StmtNode& n) {
    if (n.kind == StmtKind::kStore) check(n.indices);
  });
  ir::VisitExprs(body, [&](const PrimExpr& e) {
    if (e->kind == ExprKind::kLoad) check(e->args);
  });
  return contiguous;
}

PrimExpr Identity(ExprKind op) {
  double inf = std::numeric_limits<double>::infinity();
  return arith::FloatImm(op == ExprKind::kAdd   ? 0.0
                         : op == ExprKind::kMax ? -inf
                                                : inf,
                         DataType::Float(32));
}

// One loop of the row, `for k: items`, whose reductions (`updates`, at `slots` among the
// items) run in `accumulators` vectors of `width` partials each. The vectors fold into the
// first one lane by lane, then its lanes into the accumulator.
Stmt VectorizeReduction(const StmtNode& loop, std::vector<Stmt> items,
                        const std::vector<Update>& updates, const std::vector<size_t>& slots,
                        int64_t width, int64_t accumulators) {
  const int64_t lanes = width * accumulators;
  const PrimExpr& k = loop.var;
  PrimExpr chunk = arith::MakeVar(k->name + "_c"), lane = arith::MakeVar(k->name + "_l");
  std::vector<Buffer> partials;
  std::vector<Stmt> init, combine;
  std::vector<std::vector<Stmt>> folds(accumulators);
  for (size_t u = 0; u < updates.size(); ++u) {
    const Update& up = updates[u];
    Buffer p = arith::MakeBuffer(up.buffer->name + "_partial", up.buffer->dtype, {I(lanes)});
    partials.push_back(p);
    init.push_back(ir::Store(p, {lane}, Identity(up.op)));
    items[slots[u]] =
        ir::Store(p, {lane}, arith::Binary(up.op, arith::Load(p, {lane}), up.operand));
    for (int64_t a = 1; a < accumulators; ++a) {
      folds[a].push_back(ir::Store(
          p, {lane},
          arith::Binary(up.op, arith::Load(p, {lane}), arith::Load(p, {lane + I(a * width)}))));
    }
    combine.push_back(
        ir::Store(up.buffer, up.index,
                  arith::Binary(up.op, arith::Load(up.buffer, up.index), arith::Load(p, {I(0)}))));
  }
  arith::Analyzer analyzer;
  PrimExpr chunks = analyzer.Simplify(arith::FloorDiv(loop.extent, I(lanes)));
  PrimExpr done = analyzer.Simplify(chunks * I(lanes));
  Stmt main = ir::Let(k, analyzer.Simplify(loop.min + chunk * I(lanes) + lane), ir::Seq(items));
  std::vector<Stmt> steps = {
      Loop(lane, I(lanes), ForKind::kVectorized, ir::Seq(init)),
      Loop(chunk, chunks, ForKind::kSerial, Loop(lane, I(lanes), ForKind::kVectorized, main))};
  PrimExpr tail = analyzer.Simplify(loop.extent - done);
  if (!tail->is_const_int(0)) {
    steps.push_back(
        ir::For(k, analyzer.Simplify(loop.min + done), tail, ForKind::kSerial, loop.body));
  }
  for (int64_t a = 1; a < accumulators; ++a) {
    steps.push_back(Loop(lane, I(width), ForKind::kVectorized, ir::Seq(folds[a])));
  }
  // The first vector's lanes fold in halves, then lane 0 into the accumulator: log2(W)
  // vector steps where W scalar ones in one chain took a third of a softmax row of 128.
  for (int64_t n = width; n > 1; n = (n + 1) / 2) {
    const int64_t rest = (n + 1) / 2;
    std::vector<Stmt> fold;
    for (size_t u = 0; u < updates.size(); ++u) {
      const Buffer& p = partials[u];
      fold.push_back(ir::Store(
          p, {lane},
          arith::Binary(updates[u].op, arith::Load(p, {lane}), arith::Load(p, {lane + I(rest)}))));
    }
    steps.push_back(Loop(lane, I(n / 2), ForKind::kVectorized, ir::Seq(fold)));
  }
  steps.push_back(ir::Seq(combine));
  Stmt result = ir::Seq(std::move(steps));
  for (const Buffer& p : partials) result = ir::Allocate(p, result);
  return result;
}

// A statement of the row as the rule runs it; nullopt where the rule cannot prove it safe.
// `reduced` is set when a reduction runs in vector lanes.
std::optional<Stmt> ScheduleRowStatement(const Stmt& s, int64_t width, int64_t accumulators,
                                         bool& reduced) {
  const int64_t lanes = width * accumulators;
  if (s->kind == StmtKind::kStore) return s;
  if (s->kind != StmtKind::kFor || s->for_kind != ForKind::kSerial) return std::nullopt;
  const PrimExpr& k = s->var;
  std::vector<Stmt> items;
  Flatten(s->body, items);
  for (const Stmt& item : items) {
    if (item->kind != StmtKind::kStore) return std::nullopt;
  }
  if (!IsContiguousIn(k, s->body)) return std::nullopt;
  std::vector<Update> updates;
  std::vector<size_t> slots;
  std::vector<Stmt> rest;
  for (size_t i = 0; i < items.size(); ++i) {
    if (std::optional<Update> u = MatchUpdate(*items[i], k)) {
      updates.push_back(*u);
      slots.push_back(i);
    } else {
      rest.push_back(items[i]);
    }
  }
  const int64_t extent = s->extent->kind == ExprKind::kIntImm ? s->extent->int_value : -1;
  if (updates.empty()) {
    if (!IterationsAreIndependent(k, s->body)) return std::nullopt;
    if (extent >= 0 && extent < kMinVectorExtent) return s;
    return ir::For(k, s->min, s->extent, ForKind::kVectorized, s->body);
  }
  // The partials must be the only thing carried from one iteration to the next: the other
  // statements are independent and touch no accumulator, no operand reads one, and each
  // accumulator has one update.
  const Stmt others = ir::Seq(rest);
  if (!rest.empty() && !IterationsAreIndependent(k, others)) return std::nullopt;
  for (const Update& u : updates) {
    if (Touches(others, u.buffer)) return std::nullopt;
    for (const Update& other : updates) {
      if (&other != &u && other.buffer == u.buffer) return std::nullopt;
      if (Touches(ir::Evaluate(other.operand), u.buffer)) return std::nullopt;
    }
  }
  if (extent >= 0 && extent < lanes) return s;  // all tail: the loop as it is
  reduced = true;
  return VectorizeReduction(*s, std::move(items), updates, slots, width, accumulators);
}

// The kernel as rows: its outer data-parallel loops and the row inside them.
struct Rows {
  std::vector<Axis> axes;
  std::vector<PrimExpr> mins;
  Stmt row;
};

Rows SplitRows(const Stmt& body) {
  Rows rows;
  Stmt inner = body;
  // A loop of one iteration counts as independent (it writes what it writes once); an inner
  // extent may not depend on an outer loop (the fused index assumes a box).
  while (inner->kind == StmtKind::kFor && inner->for_kind == ForKind::kSerial &&
         (inner->extent->is_const_int(1) || IterationsAreIndependent(inner->var, inner->body)) &&
         !UsesAny(inner->min, rows.axes) && !UsesAny(inner->extent, rows.axes)) {
    rows.axes.push_back({inner->var, inner->extent});
    rows.mins.push_back(inner->min);
    inner = inner->body;
  }
  rows.row = inner;
  return rows;
}

// The row as the rule runs it, its own buffers allocated around it; nullopt when the rule
// does not take it.
std::optional<Stmt> ScheduleRow(const Stmt& row, int64_t width, int64_t accumulators) {
  std::vector<Buffer> allocations;
  Stmt body = row;
  while (body->kind == StmtKind::kAllocate) {
    allocations.push_back(body->buffer);
    body = body->body;
  }
  std::vector<Stmt> statements;
  Flatten(body, statements);
  bool reduced = false;
  for (Stmt& s : statements) {
    std::optional<Stmt> scheduled = ScheduleRowStatement(s, width, accumulators, reduced);
    if (!scheduled) return std::nullopt;
    s = *scheduled;
  }
  if (!reduced) return std::nullopt;
  Stmt result = ir::Seq(std::move(statements));
  for (auto b = allocations.rbegin(); b != allocations.rend(); ++b) {
    result = ir::Allocate(*b, result);
  }
  return result;
}

}  // namespace

std::optional<ScheduledKernel> ScheduleRows(const Stmt& body, const ir::Target& target,
                                            const Trace& trace) {
  if (target.IsGpu()) return std::nullopt;
  const RowsKnobs knobs = KnobsOf(trace);
  Rows rows = SplitRows(body);
  std::optional<Stmt> row = ScheduleRow(rows.row, VectorLanes(target), knobs.accumulators);
  if (!row) return std::nullopt;
  if (rows.axes.empty()) return ScheduledKernel{*row, std::nullopt};
  // One fused row index r; each loop variable is its digit in the mixed radix of the
  // extents, innermost fastest, so neighbouring rows are neighbours in memory.
  arith::Analyzer analyzer;
  PrimExpr r = arith::MakeVar("row");
  PrimExpr stride = I(1);
  Stmt element = *row;
  for (size_t d = rows.axes.size(); d-- > 0;) {
    PrimExpr digit = arith::FloorMod(arith::FloorDiv(r, stride), rows.axes[d].extent);
    element = ir::Let(rows.axes[d].var, analyzer.Simplify(rows.mins[d] + digit), element);
    stride = analyzer.Simplify(stride * rows.axes[d].extent);
  }
  const PrimExpr total = stride;
  const int64_t per_task = knobs.rows_per_task;
  PrimExpr task = arith::MakeVar("task");
  PrimExpr first = task * I(per_task);
  Stmt rows_of_task =
      per_task == 1 ? ir::Let(r, task, element)
                    : ir::For(r, first, analyzer.Simplify(arith::Min(I(per_task), total - first)),
                              ForKind::kSerial, element);
  const bool parallel = EstimateWork(body) >= kMinParallelWork &&
                        (total->kind != ExprKind::kIntImm || total->int_value > per_task);
  return ScheduledKernel{Loop(task, analyzer.Simplify(CeilDiv(total, per_task)),
                              parallel ? ForKind::kParallel : ForKind::kSerial, rows_of_task),
                         std::nullopt};
}

std::optional<SearchSpace> RowsSpace(const Stmt& body, const ir::Target& target) {
  if (!ScheduleRows(body, target)) return std::nullopt;
  return SearchSpace{"rows", {{"rows_per_task", kRowsPerTask}, {"accumulators", kAccumulators}}};
}

}  // namespace kiln::schedule
