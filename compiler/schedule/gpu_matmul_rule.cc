// The GPU matmul rule (rules.h, ScheduleMatmulForGpu): C in blocks of 64 x 64 elements, the
// reduction in steps of 16 through shared memory, as in the classic CUDA SGEMM:
//
//   for gpu_b (batch x row tiles x column tiles) gpu_block
//     shared As[64 * 16], Bs[16 * 64], Acc[TM * TN * threads]
//     gpu_thread t: Acc[.., t] = 0
//     for k0 (steps of 16)
//       gpu_thread t: As = A[tile rows, k0 step], Bs = B[k0 step, tile columns]   (zero outside)
//       gpu_thread t: for kk: Acc[r, c, t] += As[row r of t, kk] * Bs[kk, column c of t]
//     gpu_thread t: C[row, col] = Acc[r, c, t], then the epilogue   (inside C only)
//
// Each thread owns TM x TN elements (TN = 4 neighbouring columns); their accumulators are in
// shared memory only so that they outlive the barriers, and the compute phase keeps them in
// registers over its kk loop (constant, unaliased addresses). Tile loads read in-bounds
// addresses only (clamped) and store zeros outside A and B. Each element sums k in order,
// as the interpreter does.
#include "compiler/arith/analyzer.h"
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

constexpr int64_t kTile = 64;  // rows and columns of C per block
constexpr int64_t kStep = 16;  // reduction elements per shared-memory step
constexpr int64_t kThreadCols = 4;

PrimExpr And(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kAnd, a, b); }

class GpuMatmulTiler {
 public:
  GpuMatmulTiler(const Matmul& m, int64_t threads)
      : m_(m), threads_(threads), thread_rows_(kTile * kTile / (threads * kThreadCols)) {}

  Stmt Build() {
    PrimExpr tiles_m = CeilDiv(m_.i.extent, kTile), tiles_n = CeilDiv(m_.j.extent, kTile);
    PrimExpr blocks = tiles_m * tiles_n;
    for (const Axis& b : m_.batch) blocks = blocks * b.extent;
    Stmt body = ir::Seq({Phase(ZeroAccumulators()),
                         Loop(k0_, CeilDiv(m_.depth, kStep), ForKind::kSerial,
                              ir::Seq({Phase(LoadTiles()), Phase(Accumulate())})),
                         Phase(StoreResults())});
    body = ir::Allocate(a_tile_, ir::Allocate(b_tile_, ir::Allocate(acc_, body)));
    // Block b: column tile fastest, then row tile, then the batch dims, innermost first.
    PrimExpr rest = block_;
    std::vector<std::pair<PrimExpr, PrimExpr>> lets = {{tile_n_, arith::FloorMod(rest, tiles_n)}};
    rest = arith::FloorDiv(rest, tiles_n);
    lets.push_back({tile_m_, arith::FloorMod(rest, tiles_m)});
    rest = arith::FloorDiv(rest, tiles_m);
    for (size_t d = m_.batch.size(); d-- > 0;) {
      lets.push_back({m_.batch[d].var, arith::FloorMod(rest, m_.batch[d].extent)});
      rest = arith::FloorDiv(rest, m_.batch[d].extent);
    }
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
      body = ir::Let(it->first, analyzer_.Simplify(it->second), body);
    }
    return Loop(block_, analyzer_.Simplify(blocks), ForKind::kGpuBlock, body);
  }

 private:
  Stmt Phase(Stmt body) { return Loop(t_, I(threads_), ForKind::kGpuThread, body); }

  // Acc[(r * TN + c) * threads + t]: neighbouring threads on neighbouring words.
  PrimExpr AccIndex(const PrimExpr& r, const PrimExpr& c) {
    return (r * I(kThreadCols) + c) * I(threads_) + t_;
  }

  // for r, c (unrolled) over the thread's sub-tile.
  Stmt OverSubTile(const PrimExpr& r, const PrimExpr& c, Stmt body) {
    return Loop(r, I(thread_rows_), ForKind::kUnrolled,
                Loop(c, I(kThreadCols), ForKind::kUnrolled, body));
  }

  // `body` with the thread's column and row of sub-tiles (tx, ty) bound.
  Stmt WithThreadPosition(Stmt body) {
    return ir::Let(tx_, arith::FloorMod(t_, I(kTile / kThreadCols)),
                   ir::Let(ty_, arith::FloorDiv(t_, I(kTile / kThreadCols)), body));
  }

  Stmt ZeroAccumulators() {
    PrimExpr q = arith::MakeVar("q");
    PrimExpr zero = arith::FloatImm(0, acc_->dtype);
    return Loop(q, I(thread_rows_ * kThreadCols), ForKind::kSerial,
                ir::Store(acc_, {q * I(threads_) + t_}, zero));
  }

  // One tile element per thread per round: element e = q * threads + t of the row-major tile.
  Stmt LoadTile(const Buffer& tile, int64_t cols, const PrimExpr& load, bool is_a) {
    PrimExpr q = arith::MakeVar("q"), e = arith::MakeVar("e");
    PrimExpr row = arith::FloorDiv(e, I(cols)), col = arith::FloorMod(e, I(cols));
    // A: rows of C by steps of k; B: steps of k by columns of C.
    PrimExpr outer = is_a ? tile_m_ * I(kTile) + row : k0_ * I(kStep) + row;
    PrimExpr inner = is_a ? k0_ * I(kStep) + col : tile_n_ * I(kTile) + col;
    PrimExpr outer_extent = is_a ? m_.i.extent : m_.depth;
    PrimExpr inner_extent = is_a ? m_.depth : m_.j.extent;
    PrimExpr outer_var = is_a ? m_.i.var : m_.k, inner_var = is_a ? m_.k : m_.j.var;
    PrimExpr clamped =
        Replace(load, {outer_var, inner_var},
                {arith::Min(outer, outer_extent - I(1)), arith::Min(inner, inner_extent - I(1))});
    PrimExpr inside = And(Lt(outer, outer_extent), Lt(inner, inner_extent));
    Stmt store = ir::Store(tile, {e},
                           arith::Select(analyzer_.Simplify(inside), analyzer_.Simplify(clamped),
                                         arith::FloatImm(0, tile->dtype)));
    int64_t rounds = kTile * kStep / threads_;
    return Loop(q, I(rounds), ForKind::kSerial, ir::Let(e, q * I(threads_) + t_, store));
  }

  Stmt LoadTiles() {
    return ir::Seq(
        {LoadTile(a_tile_, kStep, m_.a_load, true), LoadTile(b_tile_, kTile, m_.b_load, false)});
  }

  Stmt Accumulate() {
    PrimExpr kk = arith::MakeVar("kk"), r = arith::MakeVar("r"), c = arith::MakeVar("c");
    PrimExpr a = arith::Load(a_tile_, {(ty_ * I(thread_rows_) + r) * I(kStep) + kk});
    PrimExpr b = arith::Load(b_tile_, {kk * I(kTile) + tx_ * I(kThreadCols) + c});
    PrimExpr at = AccIndex(r, c);
    Stmt update = ir::Store(acc_, {at}, arith::Load(acc_, {at}) + a * b);
    // Per kk, TM loads of A and TN of B feed TM x TN products; the accumulators' addresses
    // do not change over kk, so they stay in registers.
    return WithThreadPosition(Loop(kk, I(kStep), ForKind::kSerial, OverSubTile(r, c, update)));
  }

  Stmt StoreResults() {
    PrimExpr r = arith::MakeVar("r"), c = arith::MakeVar("c");
    PrimExpr row = arith::MakeVar("row"), col = arith::MakeVar("col");
    Stmt store = ir::IfThenElse(And(Lt(row, m_.i.extent), Lt(col, m_.j.extent)),
                                StoreAndFinish(m_, row, col, arith::Load(acc_, {AccIndex(r, c)})));
    store = ir::Let(row, tile_m_ * I(kTile) + ty_ * I(thread_rows_) + r,
                    ir::Let(col, tile_n_ * I(kTile) + tx_ * I(kThreadCols) + c, store));
    return WithThreadPosition(OverSubTile(r, c, store));
  }

  const Matmul& m_;
  const int64_t threads_, thread_rows_;
  arith::Analyzer analyzer_;
  PrimExpr block_ = arith::MakeVar("gpu_b"), t_ = arith::MakeVar("gpu_t");
  PrimExpr tile_m_ = arith::MakeVar("tile_m"), tile_n_ = arith::MakeVar("tile_n");
  PrimExpr tx_ = arith::MakeVar("tx"), ty_ = arith::MakeVar("ty");
  PrimExpr k0_ = arith::MakeVar("k0");
  Buffer a_tile_ = arith::MakeBuffer("a_tile", m_.a_load->dtype, {I(kTile * kStep)});
  Buffer b_tile_ = arith::MakeBuffer("b_tile", m_.b_load->dtype, {I(kStep * kTile)});
  Buffer acc_ = arith::MakeBuffer("acc", m_.c->dtype, {I(kTile * kTile)});
};

}  // namespace

std::optional<Stmt> ScheduleMatmulForGpu(const Matmul& m, const ir::Target& target) {
  int64_t threads = target.threads_per_block > 0 ? target.threads_per_block : 256;
  // Whole sub-tiles of four columns per thread, whole tile loads per round.
  if ((kTile * kTile) % (threads * kThreadCols) != 0 || threads * kThreadCols > kTile * kTile ||
      (kTile * kStep) % threads != 0) {
    return std::nullopt;
  }
  int64_t shared_bytes = (2 * kTile * kStep + kTile * kTile) * 4;
  if (target.shared_memory > 0 && shared_bytes > target.shared_memory) return std::nullopt;
  // One row (a matrix-vector product) wastes a tile: one thread per element does better.
  if (m.i.extent->is_const_int(1)) return std::nullopt;
  for (const PrimExpr& load : {m.a_load, m.b_load}) {
    if (load->dtype != DataType::Float(32)) return std::nullopt;
  }
  return GpuMatmulTiler(m, threads).Build();
}

}  // namespace kiln::schedule
