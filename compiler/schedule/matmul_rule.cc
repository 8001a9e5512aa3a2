// The matmul rule: C[b.., i, j] = sum_k A[.., i, k] * B[.., k, j], tiled as in GotoBLAS
// (Goto and van de Geijn, "Anatomy of high-performance matrix multiplication", 2008):
//
//   for (b.., jc, group) (batch elements x blocks of kBlockCols columns x groups of row
//                         tiles, parallel)
//     allocate Bp[panels][kBlockDepth][NR]
//     for kc (blocks of kBlockDepth of the reduction)
//       pack B[kc block, jc block] into NR-wide panels, zero past N (panels wholly past N
//         are skipped; with pack_b off, only the panel crossing N: the others read B in place)
//       for it (the group's tiles of MR rows)
//         for jp (panels; the one that crosses N in one tile of the vectors that reach N)
//           acc[MR][NR] = C tile (0 for the first kc block)
//           for kk: acc[ii][jj] += A[row ii, kk] * Bp[jp][kk][jj]   (MR x NR, unrolled)
//           C tile = acc (rows < M, columns < N); after the last kc block, each element
//             then gets the fused epilogue, if any (C = relu(C + bias), ...)
//     with A packed at compile time, the columns past N's last whole vector (the strip):
//       for it, jj: C[rows of tile it, jj] = sum over k of Ap[it][k][:] * B[k, jj]   (rows in
//         the vector lanes), then the epilogue
//
// acc is unrolled to constant indices, so it lives in vector registers; the update is one
// broadcast of A and NR / lanes vector FMAs per row. Rows past M read row M - 1 (clamped),
// columns past N read zeros from the packed panel; neither is ever stored. Each C element
// still sums k in order, one block after another, as the interpreter does. A constant B
// (weights) is packed into panels at compile time instead (PackConstantB), and the kernel
// reads them with no packing step; so is a constant A (a pointwise conv's weights) that the
// kernel would pack (PackConstantA). Weights packed at compile time come from memory in every
// call, so the kk loop prefetches them kPrefetchRows rows ahead; B's rows read in place,
// kPrefetchInputRows rows ahead, or in a shallow product in the next panel.
//
// The row tiles of a column block are split into groups of equal size (within one tile), no
// larger than group_tiles tiles and, where the call has few tasks otherwise, as many as give
// it about kTaskTiles / group_tiles tasks (4 at the default) of group_tiles / 16 tiles or more:
// a pointwise conv on a 7x7 plane (160 rows, 49 columns) is one column block and was one task
// of 27 tiles, now 4 of 6-7. Where B is read in place and the last column block is short, there
// are two groups or more, so that two threads get the same work (Groups).
// Every task packs its own B block into its own buffer, so the batch loops fold into the
// parallel loop for free: BERT's attention matmuls (8 heads, 1 column block of 22 tiles each)
// are one call of 8 tasks, not 8 calls of 1.
//
// One row (M = 1, single-token decode) is a matrix-vector product: the tile would waste
// MR - 1 of its rows and packing B would copy it once to read it once. It gets its own form:
//
//   for (b.., jc) (batch elements x blocks of kBlockCols columns, parallel)
//     for jp (NR-wide panels; the last one as wide as what is left of N)
//       acc[NR] = 0
//       for k: acc[jj] += A[0, k] * B[k, col]   (B read in place, contiguous in j, or its
//                                                 compile-time panels: one stream)
//       C[0, col] = acc[jj], then the fused epilogue on that element
//
// Each C element still sums k in order. A symbolic M picks the form at run time (M == 1).
#include <functional>

#include "compiler/arith/analyzer.h"
#include "compiler/arith/check.h"
#include "compiler/ir/stmt_functor.h"
#include "compiler/schedule/rules.h"
#include "compiler/schedule/schedule_util.h"
#include "compiler/schedule/trace.h"

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

// The matmul rule's knobs (see MatmulSpace); the defaults, each the first choice:
//  - block_depth: reduction elements per packed block; a panel of 256 x NR floats stays in L1.
//  - block_cols: columns per parallel task; their packed block (256 x 128 floats, 128 KiB)
//    stays in L2 while every row tile of A passes over it. A shallower product takes as many
//    more columns as keep the block that size, up to 512 (DefaultBlockCols).
//  - group_tiles: row tiles per parallel task at most; a group of 32 x MR rows shares one
//    packed block of B. A call with few tasks splits its rows finer, for about
//    kTaskTiles / group_tiles tasks of group_tiles / 16 tiles or more: smaller groups balance
//    the threads better, larger ones pack B less often (each group packs its own copy). 128
//    only lets a tall C keep fewer, larger groups: at M = 1024 (74 tiles) one group packs
//    each block once where groups of 32 packed it three times (0.97x the time on one thread,
//    0.93x on two); a call still aims for 2 tasks or more, as with 64.
//  - tile_rows (MR): MR x tile_vectors accumulator vectors, plus tile_vectors for B and one
//    for A, fit the vector registers (MaxTileRows): with two vectors, 16 on x86-64 up to AVX2
//    (MR = 6), 32 with AVX-512 (MR = 14); fewer where a constant M leaves less of the last
//    tile unused (DefaultTileRows). Rows past what the registers hold are cut to it, so the
//    choices of tile_rows stay valid for every tile_vectors.
//  - tile_vectors: vectors of f32 per register tile row; NR = tile_vectors * lanes. Three
//    vectors (9 x 48 at AVX-512) load a row of B and 9 broadcasts of A per 27 FMAs, where
//    14 x 32 loads 16 per 28; on a 7 x 7 plane (N = 49) one tile covers 48 columns, where 32
//    columns left a crossing panel of 17.
//  - pack_a: copy the MR rows of A's depth block first, into rows in different L1 sets; pays
//    when MR rows outnumber the ways of L1 (8-12 on current x86-64). A constant A is packed
//    at compile time instead.
//  - pack_b: copy B's block into panels in every task, or read B's rows in place where they
//    are contiguous in j (a pointwise conv's input plane: the panels' copies were a third of
//    the time of mobilenet_v2's 576 -> 96 conv on a 14 x 14 plane, each of its two row
//    groups copying the same block); then only a panel that crosses N is copied (zeros past
//    N). A knob of pointwise convs only (Matmul::reads_b_in_place), read in place by default:
//    0.8-0.99x the time of every one of mobilenet_v2's measured alone (Zen 5), 112 x 112
//    planes included (in the model about even so far: bench/RESULTS.md, seventeenth round).
//    Other products pack B: a 128 x 1024 x 1024 product of two inputs took
//    1.02x as long in place, each row of a panel in another page.
//  - matvec_vectors: vectors of f32 per panel of the one-row form when it reads B in place.
//    Panels of 2-8 vectors keep their sums in registers but read a few cache lines of each
//    row of B, rows N apart; panels of 16-64 keep them in L1 and stream each row's run.
struct MatmulKnobs {
  int64_t block_depth = 256;
  int64_t block_cols = 128;
  int64_t group_tiles = 32;
  int64_t tile_rows = 6;
  int64_t cols = 16;  // NR
  bool pack_a = false;
  bool pack_b = true;
  int64_t matvec_cols = 16;
  int64_t lanes = 16;  // f32 per vector register (the target's, not a knob)
};

// Tasks per call the tiled form aims for, times group_tiles: 4 at the default, so that two
// threads get two tasks each of one size (the thread count is known only at run time). Every
// task packs its own B block: 8 tasks measured 4% slower on one thread (mobilenet_v2) and no
// faster on two.
constexpr int64_t kTaskTiles = 4 * 32;
// The largest group_tiles that sets the tasks a call aims for: 2 tasks or more.
constexpr int64_t kMaxAimTiles = kTaskTiles / 2;

// The strip's row tiles and columns a step (MatmulTiler::Strip): 8 sums in flight, enough for
// the FMA latency (4 cycles, 2 a cycle).
constexpr int64_t kStripTiles = 2;
constexpr int64_t kStripColumns = 4;

// How far ahead (in rows of the reduction) packed weights are prefetched: 8 KiB of a 32-column
// panel, a few hundred cycles of the tile's work, about one trip to memory.
constexpr int64_t kPrefetchRows = 64;
// How far ahead (in rows of the reduction) a tile that reads B's rows in place prefetches them:
// each row is another line, a row of B further on, and the hardware's prefetchers stop at each
// 4 KiB page. On two threads the rows another core wrote were a trip to its cache each
// (mobilenet_v2's pointwise convs; bench/RESULTS.md, twenty-sixth round). The pack loop
// prefetches nothing: with the same prefetches mobilenet_v2 ran no faster (1.00), and a
// 1024 x 4096 x 4096 product with B an input 1.01-1.02x as long.
constexpr int64_t kPrefetchInputRows = 32;

int64_t Lanes(const ir::Target& target) { return std::max(4, target.vector_bits / 32); }

}  // namespace

int64_t MaxTileRows(const ir::Target& target, int64_t vectors) {
  vectors = std::max<int64_t>(vectors, 1);
  return std::max<int64_t>(1, (target.VectorRegisters() - vectors - 1) / vectors);
}

// As many rows as the registers hold, or, for a constant row count, fewer where that wastes
// less of the last tile: at least half as many, the cost counting a tile's rows plus the
// vectors of B it loads per step. 16 rows (a 1x1 conv of 32 -> 16 channels) in tiles of 14
// computed 28 of them; two tiles of 8 compute 16.
int64_t DefaultTileRows(const ir::Target& target, std::optional<int64_t> rows, int64_t vectors) {
  const int64_t most = MaxTileRows(target, vectors);
  if (!rows || *rows < 1) return most;
  auto cost = [&](int64_t r) { return (*rows + r - 1) / r * (r + vectors); };
  int64_t best = most;
  for (int64_t r = most - 1; 2 * r >= most; --r) {
    if (cost(r) < cost(best)) best = r;
  }
  return best;
}

// A task's columns are strips of each of C's rows: with 128 of them, a strip is 512 bytes,
// and a C larger than L2 is written 8 cache lines at a time in each of M rows. mobilenet_v2's
// 16 -> 96 conv on 112 x 112 (K = 16, C 4.8 MB) took 0.73x the time with 512 columns (one
// thread, alone; 0.95x the whole model's); with K = 24 and 32 (C within L2) the same time.
int64_t DefaultBlockCols(std::optional<int64_t> depth) {
  constexpr int64_t kBlockFloats = 256 * 128, kMinCols = 128, kMaxCols = 512;
  if (!depth || *depth < 1) return kMinCols;
  int64_t cols = kMinCols;
  while (cols < kMaxCols && 2 * cols * *depth <= kBlockFloats) cols *= 2;
  return cols;
}

namespace {

std::optional<int64_t> ConstantRows(const Matmul& m) {
  if (m.i.extent->kind != ExprKind::kIntImm) return std::nullopt;
  return m.i.extent->int_value;
}

std::optional<int64_t> ConstantDepth(const Matmul& m) {
  if (m.depth->kind != ExprKind::kIntImm) return std::nullopt;
  return m.depth->int_value;
}

// The greatest multiple of `multiple` (>= 1) no larger than `value`, and at least `multiple`.
int64_t RoundDown(int64_t value, int64_t multiple) {
  return std::max<int64_t>(1, value / multiple) * multiple;
}

MatmulKnobs KnobsOf(const Trace& trace, const ir::Target& target, const Matmul& m) {
  MatmulKnobs k;
  const int64_t vectors = std::max<int64_t>(1, trace.Get("tile_vectors", 2));
  k.tile_rows = std::min(trace.Get("tile_rows", DefaultTileRows(target, ConstantRows(m), vectors)),
                         MaxTileRows(target, vectors));
  k.cols = vectors * Lanes(target);
  k.block_depth = trace.Get("block_depth", k.block_depth);
  // Whole panels, no more columns than asked: a block of 128 columns is two panels of 48. Up
  // to the next whole panel, 512 x 512 blocks of 48-column panels (528 columns) passed the
  // 1 MiB a kernel-local buffer may hold.
  k.block_cols = RoundDown(trace.Get("block_cols", DefaultBlockCols(ConstantDepth(m))), k.cols);
  k.group_tiles = trace.Get("group_tiles", k.group_tiles);
  k.pack_a = trace.Get("pack_a", k.tile_rows > 8) != 0;
  k.pack_b = trace.Get("pack_b", !m.reads_b_in_place) != 0;
  k.matvec_cols = trace.Get("matvec_vectors", 2) * Lanes(target);
  k.lanes = Lanes(target);
  return k;
}

bool UsesVar(const PrimExpr& e, const PrimExpr& var) {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    if (v.get() == var.get()) return true;
  }
  return false;
}

bool IsZero(const PrimExpr& e) { return e->kind == ExprKind::kFloatImm && e->float_value == 0; }

bool AtLoopVars(const std::vector<PrimExpr>& indices, const std::vector<const StmtNode*>& loops) {
  if (indices.size() != loops.size()) return false;
  for (size_t d = 0; d < loops.size(); ++d) {
    if (!IsVar(indices[d], loops[d]->var)) return false;
  }
  return true;
}

// C[b.., i, j] = f(...) where f reads C only at [b.., i, j]: each element's epilogue needs
// only its own finished sum, so it may run after the whole tiled product.
bool IsElementwiseEpilogue(const StmtNode& s, const Buffer& c,
                           const std::vector<const StmtNode*>& loops) {
  if (s.kind != StmtKind::kStore || s.buffer != c || !AtLoopVars(s.indices, loops)) return false;
  bool ok = true;
  std::function<void(const PrimExpr&)> check = [&](const PrimExpr& e) {
    if (e->kind == ExprKind::kLoad && e->buffer == c) ok &= AtLoopVars(e->args, loops);
    for (const PrimExpr& arg : e->args) check(arg);
  };
  check(s.value);
  return ok;
}

}  // namespace

// for b.. { for i { for j { C[b.., i, j] = 0; for k { C[..] = C[..] + X * Y }; epilogue } } },
// with X free of j and Y free of i.
std::optional<Matmul> MatchMatmul(const Stmt& body) {
  std::vector<const StmtNode*> loops;
  Stmt cur = body;
  while (cur->kind == StmtKind::kFor && cur->for_kind == ForKind::kSerial &&
         cur->min->is_const_int(0)) {
    loops.push_back(cur.get());
    cur = cur->body;
  }
  if (loops.size() < 2 || cur->kind != StmtKind::kSeq || cur->seq.size() < 2) return {};
  const StmtNode& init = *cur->seq[0];
  const StmtNode& reduce = *cur->seq[1];
  if (init.kind != StmtKind::kStore || !IsZero(init.value)) return {};
  if (init.buffer->dtype != DataType::Float(32) || init.indices.size() != loops.size()) return {};
  for (size_t d = 0; d < loops.size(); ++d) {
    if (!IsVar(init.indices[d], loops[d]->var)) return {};
  }
  if (reduce.kind != StmtKind::kFor || !reduce.min->is_const_int(0)) return {};
  const StmtNode& update = *reduce.body;
  if (update.kind != StmtKind::kStore || update.buffer != init.buffer) return {};
  for (size_t d = 0; d < loops.size(); ++d) {
    if (!IsVar(update.indices[d], loops[d]->var)) return {};
  }
  const PrimExpr& sum = update.value;
  if (sum->kind != ExprKind::kAdd || sum->args[0]->kind != ExprKind::kLoad ||
      sum->args[0]->buffer != init.buffer || sum->args[1]->kind != ExprKind::kMul) {
    return {};
  }
  Matmul m;
  for (size_t d = 0; d + 2 < loops.size(); ++d) {
    m.batch.push_back({loops[d]->var, loops[d]->extent});
  }
  m.i = {loops[loops.size() - 2]->var, loops[loops.size() - 2]->extent};
  m.j = {loops.back()->var, loops.back()->extent};
  m.k = reduce.var;
  m.depth = reduce.extent;
  m.c = init.buffer;
  m.a_load = sum->args[1]->args[0];
  m.b_load = sum->args[1]->args[1];
  for (const PrimExpr& load : {m.a_load, m.b_load}) {
    if (load->kind != ExprKind::kLoad || load->buffer == m.c) return {};
  }
  if (UsesVar(m.a_load, m.j.var) || UsesVar(m.b_load, m.i.var)) return {};
  for (size_t s = 2; s < cur->seq.size(); ++s) {
    if (!IsElementwiseEpilogue(*cur->seq[s], m.c, loops)) return {};
    m.epilogue.push_back(cur->seq[s]);
  }
  return m;
}

namespace {

PrimExpr And(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kAnd, a, b); }

// ceil(a / b) for a >= 0, b >= 1.
PrimExpr CeilDivBy(const PrimExpr& a, const PrimExpr& b) {
  return arith::FloorDiv(a + b - I(1), b);
}

// The number of batch elements: the product of the batch extents (1 without batch dims).
PrimExpr Elements(const Matmul& m) {
  PrimExpr n = I(1);
  for (const Axis& b : m.batch) n = n * b.extent;
  return n;
}

}  // namespace

// C's indices at (b.., row, col).
std::vector<PrimExpr> CIndices(const Matmul& m, PrimExpr row, PrimExpr col) {
  std::vector<PrimExpr> at;
  for (const Axis& b : m.batch) at.push_back(b.var);
  at.push_back(std::move(row));
  for (int64_t d = 0; d < m.c_flat_dims; ++d) at.push_back(I(0));
  at.push_back(std::move(col));
  return at;
}

// C[b.., row, col] = value, then the fused element-wise stores on that element.
Stmt StoreAndFinish(const Matmul& m, const PrimExpr& row, const PrimExpr& col, PrimExpr value) {
  std::vector<Stmt> stmts = {ir::Store(m.c, CIndices(m, row, col), std::move(value))};
  for (const Stmt& s : m.epilogue) {
    stmts.push_back(ir::SubstituteStmt(s, [&](const PrimExpr& x) -> PrimExpr {
      if (x.get() == m.i.var.get()) return row;
      if (x.get() == m.j.var.get()) return col;
      return nullptr;
    }));
  }
  return ir::Seq(stmts);
}

namespace {

class MatmulTiler {
 public:
  MatmulTiler(const Matmul& m, const MatmulKnobs& knobs)
      : m_(m), k_(knobs), panel_cols_(knobs.cols), cols_(knobs.cols), rows_(knobs.tile_rows) {}

  // Tasks are (column block, row group) pairs: a tall C with few columns (a pointwise conv
  // on a 7x7 plane: 960 rows, 49 columns) still gives every thread work. Consecutive tasks
  // take the column blocks of one row group, so that a thread's contiguous range of tasks
  // holds full and partial blocks alike: a 14 x 14 plane is a block of 128 columns and one of
  // 68, and with the blocks outermost the first of two threads got both full ones (576 -> 96
  // channels ran 1.2x as long on two threads; mobilenet_v2 untuned 1.04x).
  PrimExpr Tasks() const { return ColBlocks() * groups_; }
  const PrimExpr& task() const { return task_; }

  // Task `task` of one batch element; the batch loops' variables are free in it. Each task
  // packs its own B block into its own buffer.
  Stmt Task() const {
    Stmt block = m_.b_packed ? ComputeTiles() : ir::Seq({PackB(), ComputeTiles()});
    Stmt blocks = Loop(kc_, CeilDiv(K(), k_.block_depth), ForKind::kSerial, block);
    if (pack_a_ && !m_.a_packed) blocks = ir::Allocate(packed_a_, blocks);
    if (!m_.b_packed) blocks = ir::Allocate(packed_, blocks);
    if (strips_) {
      // The strip's columns lie in the last column block.
      PrimExpr last_block = arith::Binary(ExprKind::kEQ, jc_, ColBlocks() - I(1));
      blocks = ir::Seq({blocks, ir::IfThenElse(And(last_block, Lt(N(), Columns())), Strip())});
    }
    PrimExpr blocks_count = arith::Analyzer().Simplify(ColBlocks());
    Stmt task = ir::Let(jc_, arith::FloorMod(task_, blocks_count),
                        ir::Let(group_, arith::FloorDiv(task_, blocks_count), blocks));
    return ir::Let(groups_var_, groups_, task);
  }

 private:
  PrimExpr M() const { return m_.i.extent; }
  // C's columns, and those the register tiles compute: all of them, or with a strip those
  // before it.
  PrimExpr Columns() const { return m_.j.extent; }
  PrimExpr N() const {
    return strips_ ? arith::FloorDiv(Columns(), I(k_.lanes)) * I(k_.lanes) : Columns();
  }
  PrimExpr K() const { return m_.depth; }
  PrimExpr ColBlocks() const { return CeilDiv(Columns(), k_.block_cols); }
  PrimExpr RowTiles() const { return CeilDiv(M(), rows_); }

  // Row groups per column block: enough for about kTaskTiles / group_tiles tasks over all
  // batch elements and column blocks, while each keeps group_tiles / 16 tiles; never more
  // than group_tiles tiles each. At least 1.
  PrimExpr Groups() const {
    arith::Analyzer analyzer;
    PrimExpr tiles = RowTiles();
    PrimExpr fewest = CeilDiv(tiles, k_.group_tiles);
    PrimExpr others = arith::Max(Elements(m_) * ColBlocks(), I(1));
    // Groups larger than kMaxAimTiles only cap the tiles a group may hold: the records are
    // timed on one thread, and a call of one task would leave the second thread idle.
    const int64_t group_tiles = std::min(k_.group_tiles, kMaxAimTiles);
    PrimExpr aim = I(std::max<int64_t>(1, kTaskTiles / group_tiles));
    PrimExpr most = arith::FloorDiv(tiles, I(std::max<int64_t>(1, group_tiles / 16)));
    PrimExpr wanted = arith::Min(CeilDivBy(aim, others), arith::Max(most, I(1)));
    PrimExpr groups = arith::Max(fewest, wanted);
    if (in_place_) {
      // A last column block shorter than the others leaves a thread's half of the blocks
      // lighter (a 14 x 14 plane in blocks of 64 columns: 64, 64, 64, 4); with two groups each
      // of two threads takes every block of half the rows (mobilenet_v2 on two threads: 0.95-0.96
      // of the time, bench/RESULTS.md, twenty-seventh round).
      PrimExpr short_last =
          And(Lt(I(1), ColBlocks()), Lt(I(0), arith::FloorMod(Columns(), I(k_.block_cols))));
      PrimExpr two = arith::Max(groups, I(2));
      groups = arith::Select(And(short_last, Lt(I(1), most)), two, groups);
    }
    return analyzer.Simplify(groups);
  }

  int64_t panels() const { return k_.block_cols / panel_cols_; }
  PrimExpr Col(const PrimExpr& jp, const PrimExpr& jj) const {
    return jc_ * I(k_.block_cols) + jp * I(panel_cols_) + jj;
  }
  PrimExpr Col() const { return Col(jp_, jj_); }
  PrimExpr Row() const { return it_ * I(rows_) + ii_; }
  PrimExpr Depth(const PrimExpr& kk) const { return kc_ * I(k_.block_depth) + kk; }
  PrimExpr BlockDepth() const {
    return arith::Min(I(k_.block_depth), K() - kc_ * I(k_.block_depth));
  }

  std::vector<PrimExpr> CIndices(PrimExpr row, PrimExpr col) const {
    return schedule::CIndices(m_, std::move(row), std::move(col));
  }

  // C[b.., row, col] with row and col clamped into the matrix (for reads).
  PrimExpr ClampedC() const {
    return arith::Load(m_.c,
                       CIndices(arith::Min(Row(), M() - I(1)), arith::Min(Col(), N() - I(1))));
  }

  // Whether the tile lies wholly inside C: all tiles but the last row and column.
  PrimExpr Interior() const { return And(Lt(it_ * I(rows_) + I(rows_ - 1), M()), WholeColumns()); }
  // Whether the tile's columns all lie inside C: all tiles but the last column.
  PrimExpr WholeColumns() const { return Lt(Col(jp_, I(cols_ - 1)), N()); }

  // The A rows of row tile `it` in the kc block, copied row by row: packed_a[ii, kk]. Its rows
  // lie block_depth + kLineFloats apart, in different L1 sets, where MR rows K apart share
  // one set when K is a power of two and evict each other once they outnumber the ways of L1
  // (8-12 on current x86-64). A row-interleaved copy (packed_a[kk, ii], one stream) became
  // scatters: a quarter of the kernel's time at M = 1024 (Zen 5); a row copy is whole vectors.
  // Packing is repeated for every column block.
  Stmt PackA() const {
    PrimExpr ii = arith::MakeVar("pii"), kk = arith::MakeVar("pakk");
    PrimExpr row = arith::Min(it_ * I(rows_) + ii, M() - I(1));
    PrimExpr a = Replace(m_.a_load, {m_.i.var, m_.k}, {row, Depth(kk)});
    return Loop(ii, I(rows_), ForKind::kSerial,
                Loop(kk, BlockDepth(), ForKind::kVectorized, ir::Store(packed_a_, {ii, kk}, a)));
  }

  // Its own loop variables: each variable is bound by one loop.
  Stmt PackB() const {
    PrimExpr jp = arith::MakeVar("pjp"), kk = arith::MakeVar("pkk"), jj = arith::MakeVar("pjj");
    PrimExpr col = Col(jp, jj);
    PrimExpr b = Replace(m_.b_load, {m_.k, m_.j.var}, {Depth(kk), col});
    PrimExpr clamped =
        Replace(m_.b_load, {m_.k, m_.j.var}, {Depth(kk), arith::Min(col, N() - I(1))});
    // Panels inside B copy rows as whole vectors; the clamp on the last one would make the
    // loads a gather.
    auto pack = [&](PrimExpr value) {
      return Loop(
          kk, BlockDepth(), ForKind::kSerial,
          Loop(jj, I(panel_cols_), ForKind::kVectorized, ir::Store(packed_, {jp, kk, jj}, value)));
    };
    Stmt edge = ir::IfThenElse(Lt(Col(jp, I(0)), N()),
                               pack(arith::Select(Lt(col, N()), clamped, arith::FloatImm(0))));
    PrimExpr whole = Lt(Col(jp, I(panel_cols_ - 1)), N());
    // Read in place, only the panel that crosses N is copied.
    Stmt panel = in_place_ ? ir::IfThenElse(Lt(N() - I(1), Col(jp, I(panel_cols_ - 1))), edge)
                           : ir::IfThenElse(whole, pack(b), edge);
    return Loop(jp, I(panels()), ForKind::kSerial, panel);
  }

  // Whether B's rows are read in place: asked for (pack_b off), B not packed at compile time,
  // and B[.., k, j] contiguous in j (its last index j itself, no other index using j).
  bool ReadsBInPlace() const {
    if (k_.pack_b || m_.b_packed) return false;
    const std::vector<PrimExpr>& at = m_.b_load->args;
    if (at.empty() || at.back().get() != m_.j.var.get()) return false;
    for (size_t d = 0; d + 1 < at.size(); ++d) {
      if (UsesVar(at[d], m_.j.var)) return false;
    }
    return true;
  }

  // for ii, jj (unrolled): body
  Stmt OverTile(Stmt body, ForKind columns = ForKind::kUnrolled) const {
    return Loop(ii_, I(rows_), ForKind::kUnrolled, Loop(jj_, I(cols_), columns, std::move(body)));
  }

  // One register tile. Interior tiles load and store C as whole vectors; edge tiles read a
  // clamped row and zeros past N, and store only what lies inside C. After the last depth
  // block each element gets its fused epilogue as it is stored, from registers. With B read
  // in place, a tile of whole columns reads B's rows, the one crossing N its panel's copy.
  Stmt Tile() const {
    if (!in_place_) return Tile(PackedB());
    PrimExpr in_place = Replace(m_.b_load, {m_.k, m_.j.var}, {Depth(kk_), Col()});
    return ir::IfThenElse(WholeColumns(), Tile(in_place), Tile(PackedB()));
  }

  // B at (kk, jj) of panel jp in its packed form: the compile-time panels or the task's.
  PrimExpr PackedB() const {
    return m_.b_packed ? arith::Load(m_.b_packed, {jc_ * I(panels()) + jp_, Depth(kk_), jj_})
                       : arith::Load(packed_, {jp_, kk_, jj_});
  }

  // The tile reading B at (kk, jj) as `b`.
  Stmt Tile(const PrimExpr& b) const {
    PrimExpr acc = arith::Load(acc_, {ii_, jj_});
    PrimExpr a = m_.a_packed ? arith::Load(m_.a_packed, {it_, Depth(kk_), ii_})
                 : pack_a_   ? arith::Load(packed_a_, {ii_, kk_})
                             : Replace(m_.a_load, {m_.i.var, m_.k},
                                       {arith::Min(Row(), M() - I(1)), Depth(kk_)});
    Stmt fma = OverTile(ir::Store(acc_, {ii_, jj_}, acc + a * b), ForKind::kVectorized);
    std::vector<Stmt> step = PrefetchWeights();
    // B read in place, not its packed copy.
    if (b->kind == ExprKind::kLoad && b->buffer == m_.b_load->buffer) {
      std::vector<Stmt> ahead =
          Shallow() ? PrefetchNextPanel(b, jj_, jp_, cols_) : PrefetchRowsAhead(b, kk_, jj_, cols_);
      step.insert(step.end(), ahead.begin(), ahead.end());
    }
    step.push_back(fma);
    Stmt update = Loop(kk_, BlockDepth(), ForKind::kSerial, ir::Seq(step));
    return ir::Allocate(acc_, ir::Seq({LoadTile(), update, StoreTile(acc)}));
  }

  // Weights packed at compile time are read once per call, from memory: the step at depth kk
  // asks for their row kPrefetchRows further on. The hardware's prefetchers stop at each 4 KiB
  // page, every 32-64 rows of a panel. Measured at one thread: 12 chained 128 x 512 x 2048
  // layers (48 MiB of weights) went from 120 to 135 GFLOP/s, and BERT's time fell by about 7%.
  // Past a panel's last row the row is the next panel's, or after the last panel memory past
  // the weights, which a prefetch may name (ir::intrinsic::kPrefetch): clamped to the last
  // row, the clamp took 7 instructions of a step's 56 (BERT 4% slower on one thread).
  std::vector<Stmt> PrefetchWeights() const {
    std::vector<Stmt> out;
    PrimExpr ahead = Depth(kk_) + I(kPrefetchRows);
    for (int64_t c = 0; m_.b_packed && c < cols_; c += kLineFloats) {
      out.push_back(Prefetch(arith::Load(m_.b_packed, {jc_ * I(panels()) + jp_, ahead, I(c)})));
    }
    for (int64_t r = 0; m_.a_packed && r < rows_; r += kLineFloats) {
      out.push_back(Prefetch(arith::Load(m_.a_packed, {it_, ahead, I(r)})));
    }
    return out;
  }

  // A reduction too short for kPrefetchInputRows: K known to be under twice that.
  bool Shallow() const {
    return K()->kind == ExprKind::kIntImm && K()->int_value < 2 * kPrefetchInputRows;
  }

  // `load` (B at depth step kk and column jj) kPrefetchInputRows steps on, a line of each
  // kLineFloats of the panel's `cols` columns. Past B's last row it names other memory, which
  // a prefetch may (ir::intrinsic::kPrefetch). At K = 32 (mobilenet_v2's 32 -> 16 conv on
  // 112 x 112) every one of them did, where the other thread was writing: the conv took 1.56x
  // the samples on two threads.
  static std::vector<Stmt> PrefetchRowsAhead(const PrimExpr& load, const PrimExpr& kk,
                                             const PrimExpr& jj, int64_t cols) {
    std::vector<Stmt> out;
    for (int64_t c = 0; c < cols; c += kLineFloats) {
      out.push_back(Prefetch(Replace(load, {kk, jj}, {kk + I(kPrefetchInputRows), I(c)})));
    }
    return out;
  }

  // For a shallow product read in place: `load` (B at column jj of panel jp) in the next panel,
  // which the tile reads next, K steps on. On two threads that 32 -> 16 conv took 0.79x the
  // samples it took without, and mobilenet_v2 0.97x the time.
  static std::vector<Stmt> PrefetchNextPanel(const PrimExpr& load, const PrimExpr& jj,
                                             const PrimExpr& jp, int64_t cols) {
    std::vector<Stmt> out;
    for (int64_t c = 0; c < cols; c += kLineFloats) {
      out.push_back(Prefetch(Replace(load, {jj, jp}, {I(c), jp + I(1)})));
    }
    return out;
  }

  // An edge tile of whole columns (the last row tile, where MR does not divide M) reads its
  // rows past M from row M - 1 as whole vectors; one past N, element by element.
  Stmt LoadTile() const {
    auto load = [&](PrimExpr value, ForKind columns) {
      return OverTile(ir::Store(acc_, {ii_, jj_}, std::move(value)), columns);
    };
    PrimExpr clamped_row = arith::Load(m_.c, CIndices(arith::Min(Row(), M() - I(1)), Col()));
    Stmt edge = ir::IfThenElse(WholeColumns(), load(clamped_row, ForKind::kVectorized),
                               load(ClampedC(), ForKind::kUnrolled));
    Stmt from_c = ir::IfThenElse(
        Interior(), load(arith::Load(m_.c, CIndices(Row(), Col())), ForKind::kVectorized), edge);
    return ir::IfThenElse(arith::Binary(ExprKind::kEQ, kc_, I(0)),
                          load(arith::FloatImm(0), ForKind::kVectorized), from_c);
  }

  // A tile of whole columns stores its rows inside M as whole vectors, so the last row tile
  // (where MR does not divide M) runs its epilogue vectorized too: element by element, BERT's
  // GELU (erf) on the last 8 of 128 rows took about a third of the kernel. One vectorized
  // copy serves interior and edge tiles: a second made LLVM spill accumulators in the
  // product. The tile that crosses N copies acc to a stage, and each row inside M stores its
  // columns inside N from there in a vector loop (a loop of unknown length over acc would
  // keep acc in memory); element by element, with a check each, it made a pointwise conv on
  // a 7 x 7 plane (320 -> 1280 channels) 1.04x as slow.
  Stmt StoreTile(const PrimExpr& acc) const {
    PrimExpr staged = arith::Load(stage_, {ii_, jj_});
    auto store = [&](const std::function<Stmt(const PrimExpr&)>& element) {
      Stmt rows_inside = Loop(
          ii_, I(rows_), ForKind::kUnrolled,
          ir::IfThenElse(Lt(Row(), M()), Loop(jj_, I(cols_), ForKind::kVectorized, element(acc))));
      PrimExpr inside_n = arith::Min(I(cols_), N() - Col(jp_, I(0)));
      Stmt rows_from_stage =
          Loop(ii_, I(rows_), ForKind::kUnrolled,
               ir::IfThenElse(Lt(Row(), M()),
                              ir::For(jj_, I(0), inside_n, ForKind::kVectorized, element(staged))));
      Stmt fill = OverTile(ir::Store(stage_, {ii_, jj_}, acc), ForKind::kVectorized);
      return ir::IfThenElse(WholeColumns(), rows_inside,
                            ir::Allocate(stage_, ir::Seq({fill, rows_from_stage})));
    };
    Stmt partial = store(
        [&](const PrimExpr& value) { return ir::Store(m_.c, CIndices(Row(), Col()), value); });
    if (m_.epilogue.empty()) return partial;
    PrimExpr last_block = Lt(K(), (kc_ + I(1)) * I(k_.block_depth) + I(1));
    Stmt finished =
        store([&](const PrimExpr& value) { return StoreAndFinish(m_, Row(), Col(), value); });
    return ir::IfThenElse(last_block, finished, partial);
  }

  // The row tiles of this task's group: groups split the tiles evenly, the first tile of
  // group g being floor(g * tiles / groups).
  Stmt ComputeTiles() const {
    Stmt in_matrix = ir::IfThenElse(Lt(Col(jp_, I(panel_cols_ - 1)), N()), Tile(),
                                    ir::IfThenElse(Lt(Col(jp_, I(0)), N()), CrossingTiles()));
    Stmt tile_row = pack_a_ && !m_.a_packed
                        ? ir::Seq({PackA(), Loop(jp_, I(panels()), ForKind::kSerial, in_matrix)})
                        : Loop(jp_, I(panels()), ForKind::kSerial, in_matrix);
    arith::Analyzer analyzer;
    return ir::For(it_, FirstTile(), analyzer.Simplify(EndTile() - FirstTile()), ForKind::kSerial,
                   tile_row);
  }
  // The panel that crosses N, in one tile of as many vectors as reach N: a full tile would
  // compute all NR columns (32 at 512 bits) for the 17 of a 7 x 7 plane past its first 32,
  // and tiles of one vector each load the rows of A again (a 6 x 4 tile on a 7 x 7 plane,
  // its 48 columns as three 6 x 1 tiles, ran 2x as long as one 9 x 3 tile). A tile that
  // crosses N stores through its stage (StoreTile).
  Stmt CrossingTiles() const {
    const int64_t vectors = cols_ / k_.lanes;
    PrimExpr needed = CeilDiv(N() - Col(jp_, I(0)), k_.lanes);
    Stmt tiles = Tile();
    for (int64_t v = vectors - 1; v >= 1; --v) {
      MatmulTiler narrow = *this;
      narrow.cols_ = v * k_.lanes;
      narrow.acc_ = arith::MakeBuffer("acc", DataType::Float(32), {I(rows_), I(narrow.cols_)});
      narrow.stage_ = arith::MakeBuffer("stage", DataType::Float(32), {I(rows_), I(narrow.cols_)});
      tiles = ir::IfThenElse(Lt(needed, I(v + 1)), narrow.Tile(), tiles);
    }
    return tiles;
  }

  PrimExpr FirstTile() const {
    return arith::Analyzer().Simplify(arith::FloorDiv(group_ * RowTiles(), groups_var_));
  }
  PrimExpr EndTile() const {
    return arith::Analyzer().Simplify(arith::FloorDiv((group_ + I(1)) * RowTiles(), groups_var_));
  }

  // With A packed at compile time, the columns past the last whole vector, fewer than a
  // vector, are a strip computed with rows in the vector lanes instead: a register tile would
  // spend MR x NR products per step on them (the 49th column of a pointwise conv on a 7 x 7
  // plane, a quarter of its products), the strip one vector per tile and column. A vector of
  // the strip holds a row tile's MR rows for one column, from the packed tile (V lanes, MR
  // rounded up to whole vectors: the lanes past MR read the next depth's rows, or the zero
  // tile PackConstantA appends, and are never stored), times a broadcast of B; kStripTiles
  // tiles and kStripColumns columns a step keep that many independent sums in flight. Each
  // element sums k in order, as the tiles do. The sums go through a stage to the epilogue,
  // element by element (a handful of columns).
  bool Strips() const {
    if (!m_.a_packed || m_.b_packed || m_.depth->kind != ExprKind::kIntImm) return false;
    const PrimExpr& n = Columns();
    if (n->kind == ExprKind::kIntImm && n->int_value % k_.lanes == 0) return false;
    return StripLanes() - rows_ <= m_.depth->int_value * rows_;  // within the zero tile
  }
  int64_t StripLanes() const { return (rows_ + k_.lanes - 1) / k_.lanes * k_.lanes; }

  Stmt Strip() const {
    const int64_t lanes = StripLanes(), slots = kStripTiles * kStripColumns;
    PrimExpr step = arith::MakeVar("sq"), chunk = arith::MakeVar("sc"), k = arith::MakeVar("sk");
    PrimExpr slot = arith::MakeVar("ss"), lane = arith::MakeVar("sl"), ii = arith::MakeVar("sii");
    // Slot s: tile s / kStripColumns of the step (the group's last repeated past its end),
    // column s % kStripColumns of the chunk (N - 1 repeated past C's end).
    auto tile = [&](const PrimExpr& s) {
      return arith::Min(FirstTile() + step * I(kStripTiles) + arith::FloorDiv(s, I(kStripColumns)),
                        EndTile() - I(1));
    };
    auto column = [&](const PrimExpr& s) {
      return N() + chunk * I(kStripColumns) + arith::FloorMod(s, I(kStripColumns));
    };
    Buffer acc = arith::MakeBuffer("strip_acc", DataType::Float(32), {I(slots), I(lanes)});
    Buffer stage = arith::MakeBuffer("strip_stage", DataType::Float(32), {I(slots), I(lanes)});
    auto over_slots = [&](const PrimExpr& s, Stmt body) {
      return Loop(s, I(slots), ForKind::kUnrolled,
                  Loop(lane, I(lanes), ForKind::kVectorized, body));
    };
    PrimExpr a = arith::Load(m_.a_packed, {tile(slot), k, lane});
    PrimExpr b =
        Replace(m_.b_load, {m_.k, m_.j.var}, {k, arith::Min(column(slot), Columns() - I(1))});
    PrimExpr sum = arith::Load(acc, {slot, lane});
    Stmt zero = over_slots(slot, ir::Store(acc, {slot, lane}, arith::FloatImm(0)));
    Stmt product =
        Loop(k, K(), ForKind::kSerial, over_slots(slot, ir::Store(acc, {slot, lane}, sum + a * b)));
    Stmt fill = over_slots(slot, ir::Store(stage, {slot, lane}, sum));
    PrimExpr row = tile(slot) * I(rows_) + ii;
    Stmt element =
        ir::IfThenElse(And(Lt(row, M()), Lt(column(slot), Columns())),
                       StoreAndFinish(m_, row, column(slot), arith::Load(stage, {slot, ii})));
    Stmt finish =
        Loop(slot, I(slots), ForKind::kSerial, Loop(ii, I(rows_), ForKind::kSerial, element));
    Stmt chunk_body =
        ir::Allocate(acc, ir::Allocate(stage, ir::Seq({zero, product, fill, finish})));
    PrimExpr steps = CeilDiv(EndTile() - FirstTile(), kStripTiles);
    PrimExpr chunks = CeilDiv(Columns() - N(), kStripColumns);
    return Loop(step, steps, ForKind::kSerial, Loop(chunk, chunks, ForKind::kSerial, chunk_body));
  }

  const Matmul& m_;
  const MatmulKnobs k_;
  const int64_t panel_cols_;  // NR
  int64_t cols_;              // the tile's columns: NR, or fewer vectors in the crossing panel
  const int64_t rows_;        // MR
  const bool pack_a_ = k_.pack_a;
  const bool in_place_ = ReadsBInPlace();
  const bool strips_ = Strips();
  PrimExpr jc_ = arith::MakeVar("jc"), kc_ = arith::MakeVar("kc"), jp_ = arith::MakeVar("jp");
  PrimExpr kk_ = arith::MakeVar("kk"), jj_ = arith::MakeVar("jj"), it_ = arith::MakeVar("it");
  PrimExpr ii_ = arith::MakeVar("ii");
  PrimExpr task_ = arith::MakeVar("task"), group_ = arith::MakeVar("group");
  const PrimExpr groups_ = Groups();  // row groups per column block; bound to groups_var_
  PrimExpr groups_var_ = arith::MakeVar("groups");
  Buffer packed_ = arith::MakeBuffer("packed_b", DataType::Float(32),
                                     {I(k_.block_cols / cols_), I(k_.block_depth), I(cols_)});
  Buffer packed_a_ = arith::MakeBuffer("packed_a", DataType::Float(32),
                                       {I(rows_), I(k_.block_depth + kLineFloats)});
  Buffer acc_ = arith::MakeBuffer("acc", DataType::Float(32), {I(rows_), I(cols_)});
  Buffer stage_ = arith::MakeBuffer("stage", DataType::Float(32), {I(rows_), I(cols_)});
};

// The one-row form (see the header comment): B read in place (or from its compile-time
// panels), one panel of NR columns at a time, no packing and no row tile.
class MatvecTiler {
 public:
  // Compile-time panels of B have the tile's width; B read in place, the knob's.
  MatvecTiler(const Matmul& m, const MatmulKnobs& knobs)
      : m_(m),
        cols_(m.b_packed ? knobs.cols : knobs.matvec_cols),
        block_cols_((knobs.block_cols + cols_ - 1) / cols_ * cols_) {}

  // A task is a column block.
  PrimExpr Tasks() const { return CeilDiv(N(), block_cols_); }
  const PrimExpr& task() const { return jc_; }

  // Column block `jc` of one batch element; the batch loops' variables are free in it.
  Stmt Task() const {
    PrimExpr base = jc_ * I(block_cols_) + jp_ * I(cols_);
    Stmt panel = ir::IfThenElse(Lt(base + I(cols_ - 1), N()), Panel(base, I(cols_)),
                                Panel(base, N() - base));
    return Loop(jp_, I(block_cols_ / cols_), ForKind::kSerial,
                ir::IfThenElse(Lt(base, N()), panel));
  }

 private:
  PrimExpr N() const { return m_.j.extent; }

  // Columns [base, base + width): width is NR (constant, so acc lives in registers) or the
  // remainder of N. Fresh loop variables and acc per call: each is bound by one loop.
  Stmt Panel(const PrimExpr& base, const PrimExpr& width) const {
    PrimExpr k = arith::MakeVar("mvk");
    PrimExpr zj = arith::MakeVar("mvz"), uj = arith::MakeVar("mvj"), sj = arith::MakeVar("mvs");
    Buffer acc = arith::MakeBuffer("acc", DataType::Float(32), {I(cols_)});
    PrimExpr a = Replace(m_.a_load, {m_.i.var, m_.k}, {I(0), k});
    PrimExpr b = Replace(m_.b_load, {m_.k, m_.j.var}, {k, base + uj});
    PrimExpr panel = jc_ * I(block_cols_ / cols_) + jp_;
    if (m_.b_packed) b = arith::Load(m_.b_packed, {panel, k, uj});
    PrimExpr sum = arith::Load(acc, {uj}) + a * b;
    Stmt zero = Loop(zj, width, ForKind::kVectorized, ir::Store(acc, {zj}, arith::FloatImm(0)));
    // Compile-time panels are prefetched as in the tiled form.
    std::vector<Stmt> step;
    PrimExpr ahead = k + I(kPrefetchRows);  // unclamped, as in the tiled form
    for (int64_t c = 0; m_.b_packed && c < cols_; c += kLineFloats) {
      step.push_back(Prefetch(arith::Load(m_.b_packed, {panel, ahead, I(c)})));
    }
    step.push_back(Loop(uj, width, ForKind::kVectorized, ir::Store(acc, {uj}, sum)));
    Stmt update = Loop(k, m_.depth, ForKind::kSerial, ir::Seq(step));
    Stmt store = Loop(sj, width, ForKind::kVectorized,
                      StoreAndFinish(m_, I(0), base + sj, arith::Load(acc, {sj})));
    return ir::Allocate(acc, ir::Seq({zero, update, store}));
  }

  const Matmul& m_;
  const int64_t cols_;        // panel width
  const int64_t block_cols_;  // a multiple of it
  PrimExpr jc_ = arith::MakeVar("jc"), jp_ = arith::MakeVar("jp");
};

// B's constant in panels (Matmul::b_packed), when B is a constant f32 [K, N] or [N, K] read
// at [k, j] or [j, k]. Packed at compile time, the kernel packs nothing: packing BERT's
// weight matrices took about a tenth of its matmuls' CPU time.
std::optional<PackedWeights> PackConstantB(const Matmul& m, int64_t cols, const ir::NDArray& b) {
  const PrimExpr& load = m.b_load;
  if (load->args.size() != 2 || b.dtype != DataType::Float(32) || b.shape.size() != 2) return {};
  if (m.depth->kind != ExprKind::kIntImm || m.j.extent->kind != ExprKind::kIntImm) return {};
  int64_t k = m.depth->int_value, n = m.j.extent->int_value;
  bool k_major = IsVar(load->args[0], m.k) && IsVar(load->args[1], m.j.var);
  bool n_major = IsVar(load->args[0], m.j.var) && IsVar(load->args[1], m.k);
  if (!(k_major && b.shape == std::vector<int64_t>{k, n}) &&
      !(n_major && b.shape == std::vector<int64_t>{n, k})) {
    return {};
  }
  int64_t panels = (n + cols - 1) / cols;
  ir::NDArray data = ir::NDArray::Zeros(DataType::Float(32), {panels, k, cols});
  const float* from = b.data<float>();
  float* to = data.data<float>();
  for (int64_t row = 0; row < k; ++row) {
    for (int64_t col = 0; col < n; ++col) {
      to[(col / cols * k + row) * cols + col % cols] =
          from[k_major ? row * n + col : col * k + row];
    }
  }
  Buffer packed = arith::MakeBuffer(load->buffer->name + "_packed", DataType::Float(32),
                                    {I(panels), I(k), I(cols)});
  return PackedWeights{load->buffer, packed, std::move(data)};
}

bool Reads(const Stmt& s, const Buffer& buffer) {
  bool reads = false;
  ir::VisitExprs(s, [&](const PrimExpr& e) {
    if (e->kind == ExprKind::kLoad && e->buffer == buffer) reads = true;
  });
  return reads;
}

// A's constant in row tiles (Matmul::a_packed), when A is a constant f32 [M, K] read at
// [i, k] (a pointwise conv's weights [M, K, 1, 1] at [i, k, 0, 0]), M > 1 (one row takes the
// matvec form, which reads A in place) and nothing else reads it: the stream PackA copies at
// run time, once per column block and row tile. Packing mobilenet_v2's pointwise weights
// that way copied each of them one float at a time in every call.
std::optional<PackedWeights> PackConstantA(const Matmul& m, int64_t rows, const ir::NDArray& a) {
  const PrimExpr& load = m.a_load;
  if (a.dtype != DataType::Float(32) || load->args.size() < 2) return {};
  if (m.depth->kind != ExprKind::kIntImm || m.i.extent->kind != ExprKind::kIntImm) return {};
  int64_t rows_m = m.i.extent->int_value, k = m.depth->int_value;
  if (rows_m < 2 || !IsVar(load->args[0], m.i.var) || !IsVar(load->args[1], m.k)) return {};
  if (a.shape.size() != load->args.size() || a.shape[0] != rows_m || a.shape[1] != k) return {};
  for (size_t d = 2; d < load->args.size(); ++d) {
    if (!load->args[d]->is_const_int(0) || a.shape[d] != 1) return {};
  }
  if (m.b_load->buffer == load->buffer) return {};
  for (const Stmt& s : m.epilogue) {
    if (Reads(s, load->buffer)) return {};
  }
  // One tile of zeros past the last: the strip reads whole vectors of a tile's rows.
  int64_t tiles = (rows_m + rows - 1) / rows;
  ir::NDArray data = ir::NDArray::Zeros(DataType::Float(32), {tiles + 1, k, rows});
  const float* from = a.data<float>();
  float* to = data.data<float>();
  for (int64_t t = 0; t < tiles; ++t) {
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t ii = 0; ii < rows; ++ii) {
        to[(t * k + kk) * rows + ii] = from[std::min(t * rows + ii, rows_m - 1) * k + kk];
      }
    }
  }
  Buffer packed = arith::MakeBuffer(load->buffer->name + "_packed", DataType::Float(32),
                                    {I(tiles + 1), I(k), I(rows)});
  return PackedWeights{load->buffer, packed, std::move(data)};
}

// One parallel loop over every batch element's tasks: the tiler's task variable and the
// batch loops' variables are digits of its index (the task fastest). Tasks share nothing but
// C, where each stores its own elements.
template <typename Tiler>
Stmt ParallelTasks(const Matmul& m, const Tiler& tiler) {
  arith::Analyzer analyzer;
  PrimExpr tasks = analyzer.Simplify(tiler.Tasks());
  if (m.batch.empty()) return Loop(tiler.task(), tasks, ForKind::kParallel, tiler.Task());
  PrimExpr index = arith::MakeVar("btask");
  std::vector<std::pair<PrimExpr, PrimExpr>> lets = {{tiler.task(), arith::FloorMod(index, tasks)}};
  PrimExpr rest = arith::FloorDiv(index, tasks), count = tasks;
  for (size_t d = m.batch.size(); d-- > 0;) {
    const Axis& b = m.batch[d];
    lets.push_back({b.var, d == 0 ? rest : arith::FloorMod(rest, b.extent)});
    rest = arith::FloorDiv(rest, b.extent);
    count = count * b.extent;
  }
  Stmt body = tiler.Task();
  for (const auto& [var, value] : lets) body = ir::Let(var, analyzer.Simplify(value), body);
  return Loop(index, analyzer.Simplify(count), ForKind::kParallel, body);
}

// The product over all batch elements: one row by the matvec form, several by the tiled one,
// and a symbolic M by whichever fits at run time.
Stmt BuildProduct(const Matmul& m, const MatmulKnobs& knobs) {
  const PrimExpr& rows = m.i.extent;
  if (rows->is_const_int(1)) return ParallelTasks(m, MatvecTiler(m, knobs));
  Stmt tiled = ParallelTasks(m, MatmulTiler(m, knobs));
  if (rows->kind == ExprKind::kIntImm) return tiled;
  return ir::IfThenElse(arith::Binary(ExprKind::kEQ, rows, I(1)),
                        ParallelTasks(m, MatvecTiler(m, knobs)), tiled);
}

}  // namespace

std::optional<ScheduledKernel> ScheduleMatmul(const Stmt& body, const ir::Target& target,
                                              const ConstantOf& constant_of, const Trace& trace) {
  std::optional<Matmul> m = MatchMatmul(body);
  if (!m) return std::nullopt;
  return TileMatmul(*m, target, constant_of, trace);
}

ScheduledKernel TileMatmul(const Matmul& m, const ir::Target& target, const ConstantOf& constant_of,
                           const Trace& trace) {
  MatmulKnobs knobs = KnobsOf(trace, target, m);
  auto constant = [&](const PrimExpr& load) -> const ir::NDArray* {
    return constant_of ? constant_of(load->buffer) : nullptr;
  };
  Matmul tiled = m;
  std::optional<PackedWeights> packed;
  if (const ir::NDArray* b = constant(m.b_load)) packed = PackConstantB(m, knobs.cols, *b);
  if (packed) {
    tiled.b_packed = packed->packed;
  } else if (const ir::NDArray* a = constant(m.a_load); a != nullptr && knobs.pack_a) {
    packed = PackConstantA(m, knobs.tile_rows, *a);
    if (packed) tiled.a_packed = packed->packed;
  }
  return {BuildProduct(tiled, knobs), std::move(packed)};
}

namespace {

// Seeds of the matmul space (SearchSpace::seeds): the default's tile at 3 and at 4 vectors
// (9 x 3 and 6 x 4 at AVX-512), reading A in place. Their rows fit a 12-way L1 without the
// copy, and on a tall product they beat the default: 1024 x 4096 x 4096 with B an input took
// 0.89-0.90 of the default's time on Zen 5, where 9 x 3 with A packed took 0.95 (bench/
// RESULTS.md, twenty-ninth round). A random search changes one or two knobs at a time, so 32
// or 64 trials did not reliably find the pair. Only with 32 registers (with 16, three vectors
// leave tiles of 4 rows) and where more than a few tiles of rows are to be had; not for
// pointwise convs (their A, the weights, is packed at compile time; not measured with these).
std::vector<Trace> WideTileSeeds(const SearchSpace& space, const ir::Target& target,
                                 std::optional<int64_t> constant_rows) {
  constexpr int64_t kMinSeedRows = 64;
  if (target.VectorRegisters() < 32 || (constant_rows && *constant_rows < kMinSeedRows)) return {};
  std::vector<Trace> seeds;
  for (int64_t vectors : {3, 4}) {
    Trace seed = space.Default();
    for (Decision& d : seed.decisions) {
      if (d.knob == "tile_vectors") d.value = vectors;
      if (d.knob == "pack_a") d.value = 0;
    }
    if (seed != space.Default()) seeds.push_back(std::move(seed));
  }
  return seeds;
}

}  // namespace

SearchSpace MatmulSpace(const ir::Target& target, bool matvec_reads_b, bool reads_b_in_place,
                        std::optional<int64_t> constant_rows,
                        std::optional<int64_t> constant_depth) {
  const int64_t rows = DefaultTileRows(target, constant_rows);
  std::vector<int64_t> tile_rows = {rows};
  // Rows past what the registers hold with the trace's tile_vectors are cut to it (KnobsOf):
  // 12 rows are 12 x 1 and 12 x 2 as asked, 9 x 3 and 6 x 4 at AVX-512.
  for (int64_t r : {DefaultTileRows(target, std::nullopt), int64_t{4}, int64_t{8}, int64_t{2},
                    int64_t{12}, int64_t{1}}) {
    if (r != rows && r + 3 <= target.VectorRegisters()) tile_rows.push_back(r);
  }
  const int64_t cols = DefaultBlockCols(constant_depth);
  std::vector<int64_t> block_cols = {cols};
  for (int64_t c : {128, 64, 256, 512}) {
    if (c != cols) block_cols.push_back(c);
  }
  SearchSpace space{"matmul",
                    {{"tile_rows", tile_rows},
                     {"tile_vectors", {2, 1, 3, 4}},
                     {"block_depth", {256, 128, 512, 64}},
                     {"block_cols", block_cols},
                     {"group_tiles", {32, 8, 16, 64, 128}},
                     {"pack_a", {rows > 8, rows <= 8}}}};
  if (reads_b_in_place) space.knobs.push_back({"pack_b", {0, 1}});
  if (matvec_reads_b) space.knobs.push_back({"matvec_vectors", {2, 4, 8, 1, 16, 64}});
  if (!reads_b_in_place) space.seeds = WideTileSeeds(space, target, constant_rows);
  return space;
}

}  // namespace kiln::schedule
