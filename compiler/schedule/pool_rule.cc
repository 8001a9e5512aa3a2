// The pool rule: legalize's max pool (PoolBody in transform/legalize_nn_conv.cc),
//
//   for n; for c; for oh; for ow:
//     acc = -inf
//     for kh; for kw: if the tap lies inside x: acc = max(acc, x[n, c, ih(oh, kh), iw(ow, kw)])
//     out[n, c, oh, ow] = acc
//
// which the generic rule leaves scalar, every tap checked, and parallel over the batch alone
// (one thread at batch 1; resnet18's 3x3 stride-2 pool took 1.3 ms against ORT's 0.25), as
//
//   for n; for (c, oh) pairs (parallel):
//     columns [0, lo) and [hi, OW): the kernel's own body, every tap checked
//     columns [lo, hi), where every tap's column lies inside x, in tiles of L (vectorized; the
//     last tile moved back to end at hi, storing a few columns again, the same values):
//       out = max(... max(max(-inf, x0), x1) ..., x_last), the taps unrolled in the kernel's
//             order; in a row where some taps' rows leave x, those taps read a row clamped
//             into x and count as -inf
//
// Along a row of stride 2 or more, a tap that reads the column another tap read one column
// before (a 3x3 stride-2 pool's x[2 ow - 1] is x[2 (ow - 1) + 1]) is carried from column to
// column in a tile-local slot instead of loaded, as the conv rule's row form does: loaded, it
// made LLVM's vectorizer keep a scalar remainder (a stride-2 group that reads only one of its
// two columns may not read past the row's last tap), so a tile of 16 columns ran 8 as a vector
// and 8 one at a time, resnet18's pool 0.8 ms against ORT's 0.1.
//
// The codegen's max picks `a` when it wins or is NaN, so max(a, -inf) is a for every a: each
// element is the kernel's own value bit for bit, NaN included.
#include "compiler/schedule/pool_rule.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "compiler/arith/analyzer.h"
#include "compiler/arith/check.h"
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

// Windows of more taps than this (past a 7 x 7 pool) are left to the generic rule: each
// vector tile holds every tap unrolled.
constexpr int64_t kMaxPoolTaps = 64;

// What the rule reads off legalize's max pool kernel.
struct MaxPool {
  std::vector<PrimExpr> vars, extents;  // n, c, oh, ow and their extents
  PrimExpr kh, kw;                      // the tap loops' variables
  int64_t taps_h = 0, taps_w = 0;
  Buffer x, out;
  std::vector<PrimExpr> x_indices;  // x[n, c, ih(oh, kh), iw(ow, kw)]
  AffineAxis rows{}, cols{};
  Stmt element;  // the kernel's body for one output element, as legalize wrote it
};

const StmtNode* ZeroBasedLoop(const Stmt& s) {
  if (!s || s->kind != StmtKind::kFor || !s->min->is_const_int(0)) return nullptr;
  return s.get();
}

bool IsMinusInfinity(const PrimExpr& e) {
  return e->kind == ExprKind::kFloatImm && std::isinf(e->float_value) && e->float_value < 0;
}

PrimExpr Ge(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kGE, a, b); }
PrimExpr Le(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kLE, a, b); }
PrimExpr And(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kAnd, a, b); }

// 0 <= i < extent, as legalize writes a tap's check along one axis.
PrimExpr InRange(const PrimExpr& i, const PrimExpr& extent) {
  return And(Ge(i, I(0)), Lt(i, extent));
}

// for kh { for kw { if (inside) acc[0] = max(acc[0], x[n, c, ih, iw]) } }, with `inside` the
// tap's check on both axes and ih, iw affine in (oh, kh) and (ow, kw).
bool MatchTaps(const Stmt& s, const Buffer& acc, MaxPool& pool) {
  const StmtNode* rows = ZeroBasedLoop(s);
  const StmtNode* cols = rows ? ZeroBasedLoop(rows->body) : nullptr;
  if (!cols || rows->extent->kind != ExprKind::kIntImm || cols->extent->kind != ExprKind::kIntImm) {
    return false;
  }
  pool.kh = rows->var;
  pool.kw = cols->var;
  pool.taps_h = rows->extent->int_value;
  pool.taps_w = cols->extent->int_value;
  const Stmt& check = cols->body;
  if (check->kind != StmtKind::kIfThenElse || check->else_case) return false;
  const Stmt& update = check->then_case;
  if (update->kind != StmtKind::kStore || update->buffer != acc) return false;
  const PrimExpr& max = update->value;
  if (max->kind != ExprKind::kMax || max->args[0]->kind != ExprKind::kLoad ||
      max->args[0]->buffer != acc || max->args[1]->kind != ExprKind::kLoad) {
    return false;
  }
  pool.x = max->args[1]->buffer;
  pool.x_indices = max->args[1]->args;
  if (pool.x->dtype != DataType::Float(32) || pool.x_indices.size() != 4) return false;
  if (!IsVar(pool.x_indices[0], pool.vars[0]) || !IsVar(pool.x_indices[1], pool.vars[1])) {
    return false;
  }
  std::optional<AffineAxis> r = AffineAxisOf(pool.x_indices[2], pool.vars[2], pool.kh);
  std::optional<AffineAxis> c = AffineAxisOf(pool.x_indices[3], pool.vars[3], pool.kw);
  if (!r || !c) return false;
  pool.rows = *r;
  pool.cols = *c;
  PrimExpr inside = And(InRange(pool.x_indices[2], pool.x->shape[2]),
                        InRange(pool.x_indices[3], pool.x->shape[3]));
  return arith::StructuralEqual(check->condition, inside);
}

// The element: allocations around { acc[0] = -inf; stores of constants into other scratch
// (the unused count); taps; out[n, c, oh, ow] = acc[0] }.
bool MatchElement(const Stmt& element, MaxPool& pool) {
  Stmt s = element;
  std::vector<Buffer> scratch;
  while (s->kind == StmtKind::kAllocate) {
    scratch.push_back(s->buffer);
    s = s->body;
  }
  if (s->kind != StmtKind::kSeq || s->seq.size() < 3 || scratch.empty()) return false;
  const Stmt& init = s->seq.front();
  const Stmt& store = s->seq.back();
  if (init->kind != StmtKind::kStore || !IsMinusInfinity(init->value)) return false;
  const Buffer acc = init->buffer;
  if (acc->dtype != DataType::Float(32) ||
      std::find(scratch.begin(), scratch.end(), acc) == scratch.end()) {
    return false;
  }
  for (size_t i = 1; i + 2 < s->seq.size(); ++i) {
    const Stmt& other = s->seq[i];
    bool constant = other->kind == StmtKind::kStore && other->value->kind == ExprKind::kFloatImm;
    if (!constant || other->buffer == acc ||
        std::find(scratch.begin(), scratch.end(), other->buffer) == scratch.end()) {
      return false;
    }
  }
  if (!MatchTaps(s->seq[s->seq.size() - 2], acc, pool)) return false;
  pool.out = store->buffer;
  if (store->kind != StmtKind::kStore || pool.out->dtype != DataType::Float(32) ||
      store->value->kind != ExprKind::kLoad || store->value->buffer != acc) {
    return false;
  }
  for (size_t d = 0; d < 4; ++d) {
    if (!IsVar(store->indices[d], pool.vars[d])) return false;
  }
  return true;
}

std::optional<MaxPool> MatchMaxPool(const Stmt& body) {
  MaxPool pool;
  Stmt s = body;
  for (int d = 0; d < 4; ++d) {
    const StmtNode* loop = ZeroBasedLoop(s);
    if (!loop) return std::nullopt;
    pool.vars.push_back(loop->var);
    pool.extents.push_back(loop->extent);
    s = loop->body;
  }
  pool.element = s;
  if (!MatchElement(s, pool) || pool.taps_h * pool.taps_w > kMaxPoolTaps) return std::nullopt;
  return pool;
}

class PoolTiler {
 public:
  PoolTiler(const MaxPool& pool, const ir::Target& target)
      : pool_(pool), lanes_(std::max(4, target.vector_bits / 32)) {}

  Stmt Build() const {
    const PrimExpr &n = pool_.vars[0], &c = pool_.vars[1], &oh = pool_.vars[2];
    const PrimExpr& height = pool_.extents[2];
    PrimExpr task = arith::MakeVar("task");
    Stmt pair = ir::Let(c, arith::FloorDiv(task, height),
                        ir::Let(oh, arith::FloorMod(task, height), Row()));
    return Loop(n, pool_.extents[0], ForKind::kSerial,
                Loop(task, pool_.extents[1] * height, ForKind::kParallel, pair));
  }

 private:
  const PrimExpr& Ow() const { return pool_.vars[3]; }
  const PrimExpr& Width() const { return pool_.extents[3]; }

  // The input row of tap kh, and whether it lies inside x.
  PrimExpr InputRow(int64_t kh) const {
    return pool_.vars[2] * I(pool_.rows.stride) + I(kh * pool_.rows.dilation + pool_.rows.base);
  }
  PrimExpr RowInside(int64_t kh) const { return InRange(InputRow(kh), pool_.x->shape[2]); }

  // The output row: edge columns as the kernel wrote them, the columns between them, whose
  // taps' columns all lie inside x (tap 0 at column 0 or right of it, the last one left of
  // W), in vector tiles.
  Stmt Row() const {
    const int64_t s = pool_.cols.stride, base = pool_.cols.base;
    const PrimExpr last =
        pool_.x->shape[3] - I(1 + base + (pool_.taps_w - 1) * pool_.cols.dilation);
    arith::Analyzer analyzer;
    PrimExpr first_inside = analyzer.Simplify(
        arith::Min(arith::Max(I(0), arith::FloorDiv(I(s - 1 - base), I(s))), Width()));
    PrimExpr end_inside =
        analyzer.Simplify(arith::Min(Width(), arith::FloorDiv(last, I(s)) + I(1)));
    PrimExpr rows_inside = And(RowInside(0), RowInside(pool_.taps_h - 1));
    auto checked = [&](const PrimExpr& begin, const PrimExpr& end) {
      return ir::For(Ow(), begin, end - begin, ForKind::kSerial, pool_.element);
    };
    // Rows clamped into x need a row to clamp to: x of no rows (all taps in the padding)
    // keeps the kernel's own columns.
    Stmt masked = ir::IfThenElse(Lt(I(0), pool_.x->shape[2]), Tiles(true), checked(lo_, hi_));
    Stmt row = ir::Seq({checked(I(0), lo_), ir::IfThenElse(rows_inside, Tiles(false), masked),
                        checked(hi_, Width())});
    return ir::Let(lo_, first_inside, ir::Let(hi_, arith::Max(end_inside, lo_), row));
  }

  // Columns [lo, hi) in tiles of L, the last one moved back to end at hi; fewer than L
  // columns take LLVM's vector loop. Each starts the carried taps at its first column.
  Stmt Tiles(bool masked_rows) const {
    PrimExpr lane = arith::MakeVar("lane"), tile = arith::MakeVar("owt"),
             col = arith::MakeVar("col");
    PrimExpr first = arith::Min(lo_ + tile * I(lanes_), hi_ - I(lanes_));
    Stmt vector = Loop(lane, I(lanes_), ForKind::kVectorized, Column(col + lane, masked_rows));
    Stmt tiles = Loop(tile, CeilDiv(hi_ - lo_, lanes_), ForKind::kSerial,
                      ir::Let(col, first, Carrying(col, masked_rows, vector)));
    Stmt narrow = ir::For(Ow(), lo_, hi_ - lo_, ForKind::kVectorized, Column(Ow(), masked_rows));
    return ir::IfThenElse(Le(I(lanes_), hi_ - lo_), tiles, Carrying(lo_, masked_rows, narrow));
  }

  // For each tap kw, the tap whose column at ow is tap kw's at ow + 1 (its base one stride
  // further right), if any: a stride-2 3x3's tap 0 is carried from tap 2.
  std::vector<std::optional<int64_t>> CarriedFrom() const {
    std::vector<std::optional<int64_t>> from(pool_.taps_w);
    const int64_t s = pool_.cols.stride, d = pool_.cols.dilation;
    for (int64_t kw = 0; s >= 2 && kw < pool_.taps_w; ++kw) {
      if (d > 0 && s % d == 0 && kw + s / d < pool_.taps_w) from[kw] = kw + s / d;
    }
    return from;
  }
  bool Carries() const {
    return std::ranges::any_of(CarriedFrom(), [](auto kw) { return kw.has_value(); });
  }
  PrimExpr Slot(int64_t kh, int64_t kw) const { return I(kh * pool_.taps_w + kw); }

  // `columns`, the carried taps' slots first set to their values at column `first`.
  Stmt Carrying(const PrimExpr& first, bool masked_rows, Stmt columns) const {
    if (!Carries()) return columns;
    std::vector<std::optional<int64_t>> from = CarriedFrom();
    std::vector<Stmt> init;
    for (int64_t kh = 0; kh < pool_.taps_h; ++kh) {
      for (int64_t kw = 0; kw < pool_.taps_w; ++kw) {
        if (from[kw])
          init.push_back(ir::Store(carry_, {Slot(kh, kw)}, Tap(first, kh, kw, masked_rows)));
      }
    }
    init.push_back(std::move(columns));
    return ir::Allocate(carry_, ir::Seq(init));
  }

  // Tap (kh, kw) at column `ow`; with `masked_rows`, a tap whose row leaves x reads a row
  // clamped into it and counts as -inf.
  PrimExpr Tap(const PrimExpr& ow, int64_t kh, int64_t kw, bool masked_rows) const {
    const PrimExpr minus_infinity = arith::FloatImm(-INFINITY, DataType::Float(32));
    std::vector<PrimExpr> at;
    for (const PrimExpr& i : pool_.x_indices) {
      at.push_back(Replace(i, {pool_.kh, pool_.kw, Ow()}, {I(kh), I(kw), ow}));
    }
    if (!masked_rows) return arith::Load(pool_.x, at);
    at[2] = arith::Min(arith::Max(at[2], I(0)), pool_.x->shape[2] - I(1));
    return arith::Select(RowInside(kh), arith::Load(pool_.x, at), minus_infinity);
  }

  // out at column `ow`: the max over the taps, the carried ones from their slots. Each slot
  // then takes its partner's value here, its own at the next column; in increasing kw, so
  // that a partner carried too is read before its slot changes.
  Stmt Column(const PrimExpr& ow, bool masked_rows) const {
    std::vector<std::optional<int64_t>> from = CarriedFrom();
    auto tap = [&](int64_t kh, int64_t kw) {
      return from[kw] ? arith::Load(carry_, {Slot(kh, kw)}) : Tap(ow, kh, kw, masked_rows);
    };
    std::vector<PrimExpr> taps;
    for (int64_t kh = 0; kh < pool_.taps_h; ++kh) {
      for (int64_t kw = 0; kw < pool_.taps_w; ++kw) taps.push_back(tap(kh, kw));
    }
    std::vector<PrimExpr> out = {pool_.vars[0], pool_.vars[1], pool_.vars[2], ow};
    std::vector<Stmt> stmts = {ir::Store(pool_.out, out, BalancedMax(std::move(taps)))};
    for (int64_t kh = 0; kh < pool_.taps_h; ++kh) {
      for (int64_t kw = 0; kw < pool_.taps_w; ++kw) {
        if (from[kw]) stmts.push_back(ir::Store(carry_, {Slot(kh, kw)}, tap(kh, *from[kw])));
      }
    }
    return ir::Seq(stmts);
  }

  // The max of `taps` (not empty) as a balanced tree of pairs. A max that propagates NaN is
  // a compare, a NaN check, a mask `or` and a blend on AVX-512, each waiting on the one
  // before; a chain over resnet18's 9 taps waited on 9 such maxes a vector, the tree waits on
  // 4 (the pool in about 0.8x the time). The max of a set is the same in any order, NaN
  // included.
  static PrimExpr BalancedMax(std::vector<PrimExpr> taps) {
    KILN_CHECK(!taps.empty());
    while (taps.size() > 1) {
      std::vector<PrimExpr> pairs;
      for (size_t i = 0; i + 1 < taps.size(); i += 2) {
        pairs.push_back(arith::Max(taps[i], taps[i + 1]));
      }
      if (taps.size() % 2) pairs.push_back(taps.back());
      taps = std::move(pairs);
    }
    return taps[0];
  }

  const MaxPool& pool_;
  const int64_t lanes_;  // L: one vector of f32
  // The columns whose taps all lie inside x: [lo, hi).
  const PrimExpr lo_ = arith::MakeVar("lo"), hi_ = arith::MakeVar("hi");
  // The carried taps' values (CarriedFrom), a slot per (kh, kw).
  const Buffer carry_ =
      arith::MakeBuffer("carry", DataType::Float(32), {I(pool_.taps_h * pool_.taps_w)});
};

}  // namespace

std::optional<ScheduledKernel> SchedulePool(const Stmt& body, const ir::Target& target) {
  std::optional<MaxPool> pool = MatchMaxPool(body);
  if (!pool) return std::nullopt;
  return ScheduledKernel{PoolTiler(*pool, target).Build(), std::nullopt};
}

}  // namespace kiln::schedule
