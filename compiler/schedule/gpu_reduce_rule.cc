// The GPU row rule (rules.h, ScheduleRowsForGpu): one block per row of a kernel whose rows
// reduce (a sum, softmax's max and sum, a norm's mean), its threads sharing the row's loops:
//
//   for gpu_b (rows) gpu_block
//     shared: the row's own buffers (acc[1], ...), partial[threads] per reduced buffer
//     a statement outside loops (acc[0] = 0)      gpu_thread t: if t == 0: the statement
//     for k: out[k] = f(k); acc[0] += g(k)          gpu_thread t: partial[t] = 0;
//                                                     for k = t, t + T, ...: out[k] = f(k);
//                                                       partial[t] += g(k)
//                                                   for s = T/2 .. 32: gpu_thread t:
//                                                     if t < s: partial[t] += partial[t + s]
//                                                   gpu_thread t: folded = warp fold of partial
//                                                     (the last 32, in registers);
//                                                     if t == 0: acc[0] += folded
//     any other statement                          gpu_thread t: if t == 0: the statement
//
// Each gpu_thread loop is a phase (a barrier follows it), so what one phase writes the next
// reads. f64 partials, which shuffles do not carry here, fold all the way down in the tree. A
// reduction sums in a tree instead of in order: float results may differ from the interpreter's in
// the last bits, as any parallel reduction's do.
#include <limits>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/stmt_functor.h"
#include "compiler/schedule/rules.h"
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

constexpr int64_t kWarp = 32;
// Reductions shorter than this stay in one thread per row (the default rule).
constexpr int64_t kMinCooperativeExtent = 32;

// `buf[c] = op(buf[c], operand)`, c free of the loop variable.
struct Update {
  Buffer buffer;
  std::vector<PrimExpr> index;
  ExprKind op;
  PrimExpr operand;
};

bool Uses(const PrimExpr& e, const PrimExpr& var) {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    if (v.get() == var.get()) return true;
  }
  return false;
}

bool SameLoad(const PrimExpr& e, const Buffer& buffer, const std::vector<PrimExpr>& index) {
  if (e->kind != ExprKind::kLoad || e->buffer != buffer || e->args.size() != index.size()) {
    return false;
  }
  for (size_t d = 0; d < index.size(); ++d) {
    if (e->args[d].get() != index[d].get() &&
        arith::ToString(e->args[d]) != arith::ToString(index[d])) {
      return false;
    }
  }
  return true;
}

std::optional<Update> MatchUpdate(const StmtNode& s, const PrimExpr& k) {
  if (s.kind != StmtKind::kStore || !s.buffer->dtype.is_float()) return std::nullopt;
  for (const PrimExpr& i : s.indices) {
    if (Uses(i, k)) return std::nullopt;
  }
  const PrimExpr& v = s.value;
  if (v->kind != ExprKind::kAdd && v->kind != ExprKind::kMax && v->kind != ExprKind::kMin) {
    return std::nullopt;
  }
  for (int side : {0, 1}) {
    if (SameLoad(v->args[side], s.buffer, s.indices)) {
      return Update{s.buffer, s.indices, v->kind, v->args[1 - side]};
    }
  }
  return std::nullopt;
}

bool Reads(const Stmt& s, const Buffer& buffer) {
  bool reads = false;
  ir::VisitExprs(s, [&](const PrimExpr& e) {
    if (e->kind == ExprKind::kLoad && e->buffer == buffer) reads = true;
  });
  return reads;
}

PrimExpr Combine(ExprKind op, PrimExpr a, PrimExpr b) { return arith::Binary(op, a, b); }

std::string WarpFoldName(ExprKind op) {
  const char* name = op == ExprKind::kAdd ? "add" : op == ExprKind::kMax ? "max" : "min";
  return std::string(ir::intrinsic::kWarpFold) + "." + name;
}

// The statements of `s` in order, nested sequences flattened.
void Flatten(const Stmt& s, std::vector<Stmt>& out) {
  if (s->kind != StmtKind::kSeq) return out.push_back(s);
  for (const Stmt& child : s->seq) Flatten(child, out);
}

PrimExpr Identity(ExprKind op, DataType dtype) {
  double inf = std::numeric_limits<double>::infinity();
  return arith::FloatImm(op == ExprKind::kAdd ? 0.0 : op == ExprKind::kMax ? -inf : inf, dtype);
}

class RowScheduler {
 public:
  explicit RowScheduler(int64_t threads) : threads_(threads) {}

  // The row body as phases, or nullopt when it has no reduction to share among threads.
  std::optional<Stmt> Build(const Stmt& row) {
    Stmt body = row;
    while (body->kind == StmtKind::kAllocate) {  // the row's buffers: shared by its threads
      allocations_.push_back(body->buffer);
      body = body->body;
    }
    std::vector<Stmt> statements;
    Flatten(body, statements);
    std::vector<Stmt> phases, serial;  // serial: statements for the next one-thread phase
    auto flush = [&] {
      if (!serial.empty()) phases.push_back(OneThread(ir::Seq(serial)));
      serial.clear();
      folds_.clear();
    };
    for (const Stmt& s : statements) {
      if (std::optional<std::vector<Stmt>> shared = Cooperative(s)) {
        flush();
        phases.insert(phases.end(), shared->begin(), shared->end());
        // The reductions' last step runs in thread 0, with what follows it there.
        serial = std::move(finish_);
        folds_ = std::move(next_folds_);
      } else {
        serial.push_back(s);
      }
    }
    flush();
    if (!cooperative_) return std::nullopt;
    Stmt result = ir::Seq(phases);
    for (const Buffer& b : partials_) result = ir::Allocate(b, result);
    for (auto b = allocations_.rbegin(); b != allocations_.rend(); ++b) {
      result = ir::Allocate(*b, result);
    }
    return result;
  }

 private:
  Stmt Phase(Stmt body) { return Loop(t_, I(threads_), ForKind::kGpuThread, body); }

  // `s` in thread 0, after the warp folds of the last reduction (every thread takes part).
  Stmt OneThread(const Stmt& s) {
    Stmt body = ir::IfThenElse(arith::Binary(ExprKind::kEQ, t_, I(0)), s);
    for (auto it = folds_.rbegin(); it != folds_.rend(); ++it) {
      body = ir::Let(it->first, it->second, body);
    }
    return Phase(body);
  }

  // A loop whose iterations are independent but for reductions into elements it does not
  // otherwise read: its iterations spread over the threads, each reduction in a partial per
  // thread, then a tree.
  std::optional<std::vector<Stmt>> Cooperative(const Stmt& s) {
    if (s->kind != StmtKind::kFor || s->for_kind != ForKind::kSerial) return std::nullopt;
    if (s->extent->kind == ExprKind::kIntImm && s->extent->int_value < kMinCooperativeExtent) {
      return std::nullopt;
    }
    const PrimExpr& k = s->var;
    std::vector<Stmt> items;
    Flatten(s->body, items);
    std::vector<Update> updates;
    std::vector<Stmt> rest;
    std::vector<Stmt> rewritten;
    for (const Stmt& item : items) {
      std::optional<Update> u = MatchUpdate(*item, k);
      if (!u) {
        rest.push_back(item);
        rewritten.push_back(item);
        continue;
      }
      updates.push_back(*u);
      rewritten.push_back(nullptr);  // filled in below, once its partial exists
    }
    if (!IterationsAreIndependent(k, ir::Seq(rest))) return std::nullopt;
    for (const Update& u : updates) {
      if (Reads(ir::Seq(rest), u.buffer)) return std::nullopt;
      for (const Update& other : updates) {
        if (Reads(ir::Evaluate(other.operand), u.buffer)) return std::nullopt;
      }
    }
    // f32 partials fold their last 32 in registers, by warp shuffles, the rest in the tree.
    bool warp = true;
    for (const Update& u : updates) warp = warp && u.buffer->dtype == DataType::Float(32);
    const int64_t last = warp ? kWarp : 1;  // the tree's last width
    std::vector<Buffer> partials;
    std::vector<Stmt> init, finish;
    std::vector<std::pair<PrimExpr, PrimExpr>> folds;
    for (const Update& u : updates) {
      Buffer p = arith::MakeBuffer(u.buffer->name + "_partial", u.buffer->dtype, {I(threads_)});
      partials.push_back(p);
      init.push_back(ir::Store(p, {t_}, Identity(u.op, p->dtype)));
      PrimExpr total = arith::Load(p, {I(0)});
      if (warp) {
        PrimExpr folded = arith::MakeVar(u.buffer->name + "_folded", p->dtype);
        folds.push_back(
            {folded, arith::Call(p->dtype, WarpFoldName(u.op), {arith::Load(p, {t_})})});
        total = folded;
      }
      finish.push_back(
          ir::Store(u.buffer, u.index, Combine(u.op, arith::Load(u.buffer, u.index), total)));
    }
    for (size_t i = 0, n = 0; i < rewritten.size(); ++i) {
      if (rewritten[i]) continue;
      const Update& u = updates[n];
      const Buffer& p = partials[n++];
      rewritten[i] = ir::Store(p, {t_}, Combine(u.op, arith::Load(p, {t_}), u.operand));
    }
    PrimExpr step = arith::MakeVar("step");
    Stmt body = ir::IfThenElse(Lt(k, s->extent), ir::Seq(rewritten));
    body = ir::Let(k, step * I(threads_) + t_, body);
    init.push_back(Loop(step, CeilDiv(s->extent, threads_), ForKind::kSerial, body));
    std::vector<Stmt> phases = {Phase(ir::Seq(init))};
    for (int64_t half = threads_ / 2; half >= last && !updates.empty(); half /= 2) {
      std::vector<Stmt> fold;
      for (const Buffer& p : partials) {
        fold.push_back(ir::Store(p, {t_},
                                 Combine(updates[&p - partials.data()].op, arith::Load(p, {t_}),
                                         arith::Load(p, {t_ + I(half)}))));
      }
      phases.push_back(Phase(ir::IfThenElse(Lt(t_, I(half)), ir::Seq(fold))));
    }
    finish_ = std::move(finish);
    next_folds_ = std::move(folds);
    partials_.insert(partials_.end(), partials.begin(), partials.end());
    cooperative_ = cooperative_ || !updates.empty();
    return phases;
  }

  const int64_t threads_;
  PrimExpr t_ = arith::MakeVar("gpu_t");
  std::vector<Buffer> allocations_, partials_;
  std::vector<Stmt> finish_;  // the last Cooperative loop's combining stores, for thread 0
  // The warp folds those stores read, bound in every thread of the phase that runs them.
  std::vector<std::pair<PrimExpr, PrimExpr>> folds_, next_folds_;
  bool cooperative_ = false;
};

}  // namespace

std::optional<Stmt> ScheduleRowsForGpu(const std::vector<Axis>& rows,
                                       const std::vector<PrimExpr>& mins, const Stmt& row,
                                       const ir::Target& target) {
  int64_t threads = target.threads_per_block > 0 ? target.threads_per_block : 256;
  if ((threads & (threads - 1)) != 0) return std::nullopt;  // the tree halves it
  // A failed index check returns from the kernel; its thread would then miss the barriers.
  bool checks = false;
  ir::VisitExprs(row, [&](const PrimExpr& e) {
    if (e->kind == ExprKind::kCall && ir::intrinsic::IsCheckIndex(e->name)) checks = true;
  });
  if (checks) return std::nullopt;
  std::optional<Stmt> phases = RowScheduler(threads).Build(row);
  if (!phases) return std::nullopt;
  // One block per row: the row's loop variables are the digits of the block index.
  arith::Analyzer analyzer;
  PrimExpr block = arith::MakeVar("gpu_b");
  PrimExpr stride = I(1);
  Stmt body = *phases;
  for (size_t d = rows.size(); d-- > 0;) {
    PrimExpr digit = arith::FloorMod(arith::FloorDiv(block, stride), rows[d].extent);
    body = ir::Let(rows[d].var, analyzer.Simplify(mins[d] + digit), body);
    stride = analyzer.Simplify(stride * rows[d].extent);
  }
  return Loop(block, stride, ForKind::kGpuBlock, body);
}

}  // namespace kiln::schedule
