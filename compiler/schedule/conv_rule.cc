// The conv rule: legalize's direct 2-D convolution over f32 (DirectConv in
// transform/legalize_nn_conv.cc, maybe with a fused epilogue), restructured as an implicit
// GEMM with output channels in the vector lanes:
//
//   for n
//     for ocb (blocks of OCB output channels: two vectors)
//       allocate wp[KH * KW * cg][OCB]; pack w[ocb block, c, kh, kw] into it, zero past M
//       for oh (parallel)
//         for owt (tiles of P output columns)
//           acc[P][OCB] = 0
//           for kh: if the input row is inside: for kw:
//             for c:
//               acc[p][lane] += x[n, ch, ih, iw(p)] * wp[kh, kw, c][lane]   (P x OCB, unrolled)
//           epilogue(acc[p][:]) stored to out[n, oc, oh, ow] (oc < M, ow < OW), lanes vectorized
//
// acc is unrolled to constant indices, and the channel loop, innermost, holds no branch, so
// LLVM keeps acc in vector registers across it: one broadcast of x and OCB / lanes vector
// FMAs per column. Weights packed at compile time are prefetched kPrefetchTaps rows ahead, and
// a pointwise conv's input kInputPrefetchChannels channels ahead. A tile
// whose every tap lies inside the input (most of them) reads x unchecked; in a border tile, a tap
// in the padding for its first or last column only leaves that column out, and otherwise the
// columns whose tap falls in the padding keep their sums (a select fixed for the channel loop). A
// tile may also span R rows (tile_rows), sharing each weight vector over R x P columns. A row ends
// with a narrower tile when few columns are left, and only a row narrower than a tile clamps its
// columns. Each output element sums its products in (kh, kw, c) order, in f32 as the matmul rule
// does, on one thread whatever the thread count.
//
// Pointwise convs take the matmul rule instead (PointwiseConv), or the tiler where their
// trace says so (ConvSpaces has both), and convs the tiler does not take (depthwise, small
// groups) the row form (RowConv), or its plane form, or for a depthwise conv on a narrow plane,
// channels in the vector lanes (LaneConv). A conv of few taps (a stem's) takes output columns
// in the vector lanes instead (ColumnConv), where the tiler would store through a transpose.
// The tile's shape, the input-channel blocks and the row form's parallel split are knobs
// (ConvKnobs, ConvSpaces), at the values described here by default, except that with weights
// packed at compile time the (ocb, oh) pairs form one parallel loop (always: see Build).
#include "compiler/schedule/conv_rule.h"

#include <cmath>
#include <functional>
#include <map>
#include <ranges>
#include <vector>

#include "compiler/arith/analyzer.h"
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

// Convolutions the row form takes with at most this many taps (channels x rows x columns)
// sum them unrolled, a depthwise 3x3 or 5x5 among them.
constexpr int64_t kMaxUnrolledTaps = 32;
// The narrowest register tile that keeps the FMA units busy: its 2 x columns accumulator
// chains cover the FMA latency (4 cycles, 2 per cycle).
constexpr int64_t kMinTileColumns = 4;
// The narrowest register tile of the row form's unrolled taps: a vector of 4 f32 (SSE, NEON).
constexpr int64_t kMinRowTile = 4;
// The plane form's band of padded input rows: 32 KiB, in L1 (48 KiB on the Xeons measured)
// beside the output row.
constexpr int64_t kPlaneFloats = 8192;
// The channel-lanes form's padded plane of a block of channels: 64 KiB, 29 x 29 positions of
// 16 lanes (a stride-2 conv from 28 x 28).
constexpr int64_t kLaneFloats = 16384;
// The column-lanes form's input rows of one output row: 32 KiB, in L1.
constexpr int64_t kColumnRowFloats = 8192;
// How far ahead (in rows of packed weights, one per tap and channel) the tiler prefetches
// weights packed at compile time: 8 KiB at two 16-lane vectors per row.
constexpr int64_t kPrefetchTaps = 64;
// How far ahead (in input channels) the tiler prefetches the input. Each step reads a new line of
// every tile row, one plane further on; on two threads half the plane was written by the other
// core, and the hardware's prefetchers, which stop at each 4 KiB page, left those reads a trip to
// the other core's cache each: mobilenet_v2's 576 -> 96 convs on 14 x 14 took 2.2x their one-thread
// samples on two threads (bench/RESULTS.md, twenty-sixth round). 32 steps of a 14-column tile are
// about 450 cycles of FMAs.
constexpr int64_t kInputPrefetchChannels = 32;
// Packed weights of one output-channel block must fit a kernel-local buffer comfortably.
constexpr int64_t kMaxPackedWeightBytes = int64_t{512} << 10;

PrimExpr Le(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kLE, a, b); }
PrimExpr And(PrimExpr a, PrimExpr b) {
  if (!a) return b;
  if (!b) return a;
  return arith::Binary(ExprKind::kAnd, a, b);
}

bool UsesAny(const PrimExpr& e, const std::vector<PrimExpr>& vars) {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    for (const PrimExpr& var : vars) {
      if (v.get() == var.get()) return true;
    }
  }
  return false;
}

PrimExpr StripCast(const PrimExpr& e) { return e->kind == ExprKind::kCast ? e->args[0] : e; }

// The terms of a conjunction.
void SplitAnd(const PrimExpr& e, std::vector<PrimExpr>& terms) {
  if (e->kind == ExprKind::kAnd) {
    SplitAnd(e->args[0], terms);
    SplitAnd(e->args[1], terms);
  } else {
    terms.push_back(e);
  }
}

// What the rule reads off legalize's conv kernel.
struct Conv {
  PrimExpr n, m, oh, ow;                    // output loop variables i0..i3
  PrimExpr batch, channels, height, width;  // their extents
  PrimExpr c, kh, kw;                       // reduction variables
  int64_t cg, taps_h, taps_w;               // their extents
  PrimExpr row_ok, col_ok;                  // the tap's bounds check, split by axis
  Buffer x, w, acc;
  std::vector<PrimExpr> x_indices;  // x[n, ch(m, c), ih(oh, kh), iw(ow, kw)]
  DataType acc_t;
  std::vector<Stmt> epilogue;  // stores to out[n, m, oh, ow] reading acc[0]
};

std::optional<int64_t> ConstExtent(const StmtNode& loop) {
  if (loop.extent->kind != ExprKind::kIntImm || !loop.min->is_const_int(0)) return {};
  return loop.extent->int_value;
}

// Every epilogue statement stores to out[n, m, oh, ow] (an element's own slot).
bool IsElementwiseEpilogue(const Stmt& s, const std::vector<PrimExpr>& idx) {
  if (s->kind != StmtKind::kStore || s->buffer->dtype != DataType::Float(32)) return false;
  if (s->indices.size() != idx.size()) return false;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (!IsVar(s->indices[d], idx[d])) return false;
  }
  return true;
}

// acc[0] = acc[0] + X * W, X = x[n, ch, ih, iw] and W = w[m, c, kh, kw] (maybe cast).
bool MatchUpdate(const StmtNode& update, Conv& conv) {
  if (update.kind != StmtKind::kStore || update.buffer != conv.acc) return false;
  const PrimExpr& sum = update.value;
  if (sum->kind != ExprKind::kAdd || sum->args[0]->kind != ExprKind::kLoad ||
      sum->args[0]->buffer != conv.acc || sum->args[1]->kind != ExprKind::kMul) {
    return false;
  }
  PrimExpr xl = StripCast(sum->args[1]->args[0]), wl = StripCast(sum->args[1]->args[1]);
  if (xl->kind != ExprKind::kLoad || wl->kind != ExprKind::kLoad) return false;
  if (xl->buffer->dtype != DataType::Float(32) || wl->buffer->dtype != DataType::Float(32)) {
    return false;
  }
  std::vector<PrimExpr> w_idx = {conv.m, conv.c, conv.kh, conv.kw};
  if (wl->args.size() != 4 || xl->args.size() != 4) return false;
  for (size_t d = 0; d < 4; ++d) {
    if (!IsVar(wl->args[d], w_idx[d])) return false;
  }
  if (!IsVar(xl->args[0], conv.n)) return false;
  conv.x = xl->buffer;
  conv.w = wl->buffer;
  conv.x_indices = xl->args;
  return true;
}

// Splits the tap's bounds check into its row part (oh, kh) and its column part (ow, kw).
bool SplitBoundsCheck(const PrimExpr& condition, Conv& conv) {
  std::vector<PrimExpr> terms;
  if (condition) SplitAnd(condition, terms);
  for (const PrimExpr& t : terms) {
    bool row = UsesAny(t, {conv.oh, conv.kh}), col = UsesAny(t, {conv.ow, conv.kw});
    if (UsesAny(t, {conv.n, conv.m, conv.c}) || (row && col)) return false;
    if (col) {
      conv.col_ok = And(conv.col_ok, t);
    } else {
      conv.row_ok = And(conv.row_ok, t);
    }
  }
  return true;
}

// for c { for kh { for kw { if (check) update } } }
bool MatchReduction(const Stmt& s, Conv& conv) {
  const StmtNode* loops[3];
  Stmt cur = s;
  for (const StmtNode*& loop : loops) {
    if (cur->kind != StmtKind::kFor || !ConstExtent(*cur)) return false;
    loop = cur.get();
    cur = cur->body;
  }
  conv.c = loops[0]->var;
  conv.kh = loops[1]->var;
  conv.kw = loops[2]->var;
  conv.cg = *ConstExtent(*loops[0]);
  conv.taps_h = *ConstExtent(*loops[1]);
  conv.taps_w = *ConstExtent(*loops[2]);
  PrimExpr condition;
  if (cur->kind == StmtKind::kIfThenElse) {
    if (cur->else_case) return false;
    condition = cur->condition;
    cur = cur->then_case;
  }
  return MatchUpdate(*cur, conv) && SplitBoundsCheck(condition, conv);
}

std::optional<Conv> MatchConv(const Stmt& body) {
  std::vector<const StmtNode*> loops;
  Stmt cur = body;
  while (cur->kind == StmtKind::kFor && cur->for_kind == ForKind::kSerial &&
         cur->min->is_const_int(0) && loops.size() < 4) {
    loops.push_back(cur.get());
    cur = cur->body;
  }
  if (loops.size() != 4 || cur->kind != StmtKind::kAllocate) return {};
  Conv conv;
  conv.n = loops[0]->var;
  conv.m = loops[1]->var;
  conv.oh = loops[2]->var;
  conv.ow = loops[3]->var;
  conv.batch = loops[0]->extent;
  conv.channels = loops[1]->extent;
  conv.height = loops[2]->extent;
  conv.width = loops[3]->extent;
  conv.acc = cur->buffer;
  conv.acc_t = conv.acc->dtype;
  if (!conv.acc_t.is_float() || conv.acc->shape.size() != 1) return {};
  const Stmt& seq = cur->body;
  if (seq->kind != StmtKind::kSeq || seq->seq.size() < 3) return {};
  const StmtNode& init = *seq->seq[0];
  if (init.kind != StmtKind::kStore || init.buffer != conv.acc ||
      init.value->kind != ExprKind::kFloatImm || init.value->float_value != 0) {
    return {};
  }
  if (!MatchReduction(seq->seq[1], conv)) return {};
  std::vector<PrimExpr> idx = {conv.n, conv.m, conv.oh, conv.ow};
  for (size_t s = 2; s < seq->seq.size(); ++s) {
    if (!IsElementwiseEpilogue(seq->seq[s], idx)) return {};
    conv.epilogue.push_back(seq->seq[s]);
  }
  return conv;
}

// A dense f32 constant of w's shape [M, cg, KH, KW], all constants.
bool IsWeightConstant(const Conv& conv, const ir::NDArray* weights) {
  if (weights == nullptr || weights->dtype != DataType::Float(32)) return false;
  std::vector<int64_t> shape;
  for (const PrimExpr& d : conv.w->shape) {
    if (d->kind != ExprKind::kIntImm) return false;
    shape.push_back(d->int_value);
  }
  return shape == weights->shape && shape.size() == 4 && shape[1] == conv.cg &&
         shape[2] == conv.taps_h && shape[3] == conv.taps_w;
}

// Output columns per register tile: at most `max_cols` (what the registers hold), fewer when
// that wastes less of the last tile on a narrow output (7 columns: one tile of 4 and one of 3
// columns computed as 4, not two of 6). The cost counts a tile's columns plus the two
// weight vectors it loads per step.
int64_t TileColumns(int64_t max_cols, const PrimExpr& width) {
  if (width->kind != ExprKind::kIntImm) return max_cols;
  int64_t best = max_cols, best_cost = INT64_MAX;
  for (int64_t cols = max_cols; cols >= std::max<int64_t>(1, max_cols / 2); --cols) {
    int64_t cost = (width->int_value + cols - 1) / cols * (cols + 2);
    if (cost < best_cost) best = cols, best_cost = cost;
  }
  return best;
}

// The widest register tile the target's vector registers hold: P x 2 accumulator vectors,
// plus two weight vectors and one broadcast of x.
int64_t MaxTileColumns(const ir::Target& target) { return target.VectorRegisters() >= 32 ? 14 : 6; }

int64_t VectorLanes(const ir::Target& target) { return std::max(4, target.vector_bits / 32); }

// The conv rule's knobs (see ConvSpaces); the defaults, each the first choice.
// The tiler's:
//  - tile_cols (P): output columns per register tile; TileColumns by default.
//  - tile_vectors: vectors of output channels per tile (OCB = tile_vectors * lanes); two
//    with P = 6 fill the 16 registers up to AVX2.
//  - tile_rows (R): output rows per register tile, R x P columns sharing each weight vector
//    loaded: a plane of 7 x 7 (resnet18's last stage) has rows of at most 7 columns, so one
//    row reuses a weight vector 7 times, two rows 14. A task takes R rows; where R does not
//    divide the height, its last tile moves back (recomputing rows, the same values again).
//    A tall tile takes at most as many accumulators as registers: fewer columns (KnobsOf).
//  - channel_block: input channels per reduction block, all taps summed over one block before
//    the next, so the block's input rows stay in L1 across the taps; 0 (all of them) by default.
//  The tiler's parallel split is no knob: tuning times a kernel on one thread (unless the
//  target names more), where a split that would starve a second thread costs nothing.
// The row form's:
//  - unroll_taps: sum a few taps (at most kMaxUnrolledTaps) unrolled, or in register tiles.
//  - row_vectors: vectors of output columns per register tile (L = row_vectors * lanes).
//  - parallel_rows: run (channel, row) pairs in parallel rather than channels.
//  - plane: with unrolled taps and channels in parallel, the plane form (see RowConv) where
//    it applies; the row form otherwise.
//  - channel_lanes: for a depthwise conv of whole blocks of vector-wide channels, the
//    channel-lanes form (LaneConv), by default on rows at most half a vector wide; read in
//    ScheduleConv, which knows the conv.
// The column-lanes form's (ColumnConv), for a conv the tiler takes:
//  - column_channels (T): output channels per register tile; 0 leaves the conv to the tiler.
//    By default a quarter of the vector registers for a conv of few taps that is no pointwise
//    one (ColumnChannelsByDefault); read in ScheduleConv.
//  - column_vectors: vectors of output columns per register tile.
struct ConvKnobs {
  int64_t tile_cols = 6;
  int64_t tile_vectors = 2;
  int64_t tile_rows = 1;
  int64_t channel_block = 0;
  bool unroll_taps = true;
  int64_t row_vectors = 2;
  bool parallel_rows = false;
  bool plane = true;
  int64_t column_channels = 0;
  int64_t column_vectors = 2;
};

// Values past these only spill registers or unroll without end; a trace that asks for them
// gets the default.
constexpr int64_t kMaxKnobTileColumns = 32;
constexpr int64_t kMaxKnobVectors = 8;
constexpr int64_t kMaxKnobTileRows = 8;
constexpr int64_t kMaxKnobColumnChannels = 32;

int64_t InRange(int64_t value, int64_t max, int64_t fallback) {
  return value >= 1 && value <= max ? value : fallback;
}

// A trace of another rule (the matmul rule's, for a pointwise conv) decides nothing here.
ConvKnobs KnobsOf(const Trace& trace, const ir::Target& target, const PrimExpr& width) {
  const Trace none;
  const Trace& t = trace.rule == "conv" ? trace : none;
  ConvKnobs k;
  int64_t cols = TileColumns(MaxTileColumns(target), width);
  k.tile_cols = InRange(t.Get("tile_cols", cols), kMaxKnobTileColumns, cols);
  k.tile_vectors = InRange(t.Get("tile_vectors", 2), kMaxKnobVectors, 2);
  k.tile_rows = InRange(t.Get("tile_rows", 1), kMaxKnobTileRows, 1);
  // A tall tile of more accumulators than registers only spills, and takes LLVM several
  // times as long to compile (14 x 2 x 2 on AVX-512: 25 s a conv, and never the fastest):
  // it takes as many columns as the registers hold.
  const int64_t per_column = k.tile_rows * k.tile_vectors;
  if (k.tile_rows > 1 && per_column * k.tile_cols > target.VectorRegisters()) {
    k.tile_cols = std::max<int64_t>(1, target.VectorRegisters() / per_column);
  }
  k.channel_block = std::max<int64_t>(0, t.Get("channel_block", 0));
  k.unroll_taps = t.Get("unroll_taps", 1) != 0;
  k.row_vectors = InRange(t.Get("row_vectors", 2), kMaxKnobVectors, 2);
  k.parallel_rows = t.Get("parallel_rows", 0) != 0;
  k.plane = t.Get("plane", 1) != 0;
  k.column_vectors = InRange(t.Get("column_vectors", 2), kMaxKnobVectors, 2);
  return k;
}

class ConvTiler {
 public:
  // `weights`: the weight constant, when the kernel's one call site passes one; the tiler
  // then packs it at compile time (PackedWeights) instead of in every call.
  ConvTiler(const Conv& conv, const ir::Target& target, const ir::NDArray* weights,
            const ConvKnobs& knobs)
      : conv_(conv),
        lanes_(knobs.tile_vectors * VectorLanes(target)),
        vector_lanes_(VectorLanes(target)),
        wide_vectors_(target.vector_bits >= 512),
        cols_(knobs.tile_cols),
        rows_(knobs.tile_rows),
        channel_block_(ChannelBlock(conv, knobs.channel_block)),
        weights_(IsWeightConstant(conv, weights) ? weights : nullptr) {
    // One row per tile: the task's row is the conv's own row variable.
    if (rows_ == 1) ohg_ = conv_.oh;
    acc_ = Accumulators(cols_);
  }

  // The channel of x that output channel block `ocb` reads at reduction channel c: the same
  // for every channel of the block when groups hold whole blocks. nullopt otherwise.
  std::optional<PrimExpr> BlockChannel(int64_t out_channels, int64_t in_channels) const {
    if (conv_.cg <= 0 || in_channels % conv_.cg != 0) return {};
    int64_t groups = in_channels / conv_.cg;
    if (out_channels % groups != 0) return {};
    int64_t per_group = out_channels / groups;
    if (groups != 1 && per_group % lanes_ != 0) return {};
    return Replace(conv_.x_indices[1], {conv_.m, conv_.c}, {ocb_ * I(lanes_), c_});
  }

  // Weights packed at compile time are a constant of any size; packed at run time, one
  // block's are a kernel-local buffer. (With 512-bit vectors, a 3x3 conv of 512 channels
  // packs 576 KiB per block: the bound must not send it to the row form, 12x slower.)
  bool Fits() const { return weights_ || Depth() * lanes_ * 4 <= kMaxPackedWeightBytes; }

  // Whether the tiler takes the conv: constant channel counts, groups of whole blocks, and,
  // packed at run time, one block's packed weights small enough.
  bool Takes() const {
    const PrimExpr& in_channels = conv_.x->shape[1];
    return conv_.channels->kind == ExprKind::kIntImm && Fits() &&
           in_channels->kind == ExprKind::kIntImm &&
           BlockChannel(conv_.channels->int_value, in_channels->int_value);
  }

  std::optional<Stmt> Build() {
    if (!Takes()) return {};
    channel_ = *BlockChannel(conv_.channels->int_value, conv_.x->shape[1]->int_value);
    PrimExpr blocks = CeilDiv(conv_.channels, lanes_);
    PrimExpr groups = rows_ == 1 ? conv_.height : CeilDiv(conv_.height, rows_);
    if (weights_) {
      // Weights packed at compile time: (block, row group) pairs form one parallel loop, task
      // t row group t % G of block t / G. More tasks on a small plane than rows, and one
      // parallel loop per conv, not one per block: resnet18's 7-row convs ran 2x faster on
      // two threads than on one, against 1.6x a block at a time (4 + 3 rows, 8 loops of 7
      // tasks); a 1x1 conv of 320 -> 1280 channels on a 7x7 plane (mobilenet_v2's last, 40
      // blocks) 2.7x faster than a block at a time, which on two threads ran slower than on
      // one. A block packed at run time is shared by its rows: a block at a time.
      PrimExpr task = arith::MakeVar("task");
      Stmt pair = ir::Let(ocb_, arith::FloorDiv(task, groups),
                          ir::Let(ohg_, arith::FloorMod(task, groups), Columns()));
      return Loop(conv_.n, conv_.batch, ForKind::kSerial,
                  Loop(task, blocks * groups, ForKind::kParallel, pair));
    }
    Stmt rows = Loop(ohg_, groups, ForKind::kParallel, Columns());
    Stmt block = ir::Allocate(packed_, ir::Seq({PackWeights(), rows}));
    return Loop(conv_.n, conv_.batch, ForKind::kSerial,
                Loop(ocb_, blocks, ForKind::kSerial, block));
  }

  // The weights packed at compile time, all blocks: packed_all[ocb, tap, lane] as PackWeights
  // would write packed_w[tap, lane] for block ocb.
  std::optional<PackedWeights> Packed() const {
    if (!weights_) return std::nullopt;
    int64_t m = conv_.channels->int_value, blocks = (m + lanes_ - 1) / lanes_;
    ir::NDArray data = ir::NDArray::Zeros(DataType::Float(32), {blocks, Depth(), lanes_});
    const float* w = weights_->data<float>();
    float* out = data.data<float>();
    for (int64_t oc = 0; oc < m; ++oc) {
      for (int64_t c = 0; c < conv_.cg; ++c) {
        for (int64_t kh = 0; kh < conv_.taps_h; ++kh) {
          for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
            int64_t tap = (kh * conv_.taps_w + kw) * conv_.cg + c;
            int64_t from = ((oc * conv_.cg + c) * conv_.taps_h + kh) * conv_.taps_w + kw;
            out[((oc / lanes_) * Depth() + tap) * lanes_ + oc % lanes_] = w[from];
          }
        }
      }
    }
    return PackedWeights{conv_.w, packed_all_, std::move(data)};
  }

 private:
  int64_t Depth() const { return conv_.cg * conv_.taps_h * conv_.taps_w; }

  // Input channels per reduction block: `asked` when it splits the channels into equal blocks
  // (so every block's channel loop has a constant extent), else all of them.
  static int64_t ChannelBlock(const Conv& conv, int64_t asked) {
    return asked > 0 && asked < conv.cg && conv.cg % asked == 0 ? asked : conv.cg;
  }

  PrimExpr M() const { return conv_.channels; }
  PrimExpr Oc() const { return ocb_ * I(lanes_) + lane_; }
  // The tile's first column: tile owt, or the last tile moved back to end at the row's end
  // (recomputing a few columns, the same values again) so that it is whole; a row narrower
  // than a tile starts it at 0 and clamps.
  PrimExpr First() const {
    if (first_) return first_;
    return arith::Min(owt_ * I(cols_), arith::Max(conv_.width - I(cols_), I(0)));
  }
  PrimExpr Ow() const { return First() + col_; }
  // The output row of row `row` of the tile: row group g's, the last group moved back to end
  // at the plane's last row; a plane lower than a tile clamps its rows.
  PrimExpr Oh() const {
    if (rows_ == 1) return conv_.oh;
    PrimExpr first = arith::Min(ohg_ * I(rows_), arith::Max(conv_.height - I(rows_), I(0)));
    if (ProvedRowsWhole()) return first + row_;
    return arith::Min(first + row_, conv_.height - I(1));
  }
  bool ProvedRowsWhole() const {
    return conv_.height->kind == ExprKind::kIntImm && conv_.height->int_value >= rows_;
  }
  // acc[row, col, lane], without the row index for tiles of one row.
  Buffer Accumulators(int64_t cols) const {
    std::vector<PrimExpr> shape = {I(cols), I(lanes_)};
    if (rows_ > 1) shape.insert(shape.begin(), I(rows_));
    return arith::MakeBuffer("acc", DataType::Float(32), shape);
  }
  std::vector<PrimExpr> AccAt() const {
    if (rows_ == 1) return {col_, lane_};
    return {row_, col_, lane_};
  }
  // The tap's row check at row `row` of the tile.
  PrimExpr RowOk(const PrimExpr& oh) const {
    return Replace(conv_.row_ok, {conv_.oh, conv_.kh}, {oh, kh_});
  }
  // The row of the packed weights: taps outermost, so the channel loop reads them in order.
  PrimExpr Tap(const PrimExpr& c, const PrimExpr& kh, const PrimExpr& kw) const {
    return (kh * I(conv_.taps_w) + kw) * I(conv_.cg) + c;
  }

  // wp[c, kh, kw][lane] = w[oc, c, kh, kw], zero past M.
  Stmt PackWeights() const {
    PrimExpr c = arith::MakeVar("pc"), kh = arith::MakeVar("pkh"), kw = arith::MakeVar("pkw");
    PrimExpr lane = arith::MakeVar("plane");
    PrimExpr oc = ocb_ * I(lanes_) + lane;
    PrimExpr w = arith::Load(conv_.w, {arith::Min(oc, M() - I(1)), c, kh, kw});
    Stmt store = ir::Store(packed_, {Tap(c, kh, kw), lane},
                           arith::Select(Lt(oc, M()), w, arith::FloatImm(0)));
    return Loop(kh, I(conv_.taps_h), ForKind::kSerial,
                Loop(kw, I(conv_.taps_w), ForKind::kSerial,
                     Loop(c, I(conv_.cg), ForKind::kSerial,
                          Loop(lane, I(lanes_), ForKind::kVectorized, store))));
  }

  // for row, col in [lo, hi) (all columns when hi = 0), lane (unrolled): body
  Stmt OverTile(Stmt body, ForKind lanes = ForKind::kUnrolled, int64_t lo = 0,
                int64_t hi = 0) const {
    if (hi == 0) hi = cols_;
    Stmt tile = ir::For(col_, I(lo), I(hi - lo), ForKind::kUnrolled,
                        Loop(lane_, I(lanes_), lanes, std::move(body)));
    return rows_ == 1 ? tile : Loop(row_, I(rows_), ForKind::kUnrolled, tile);
  }

  // The output column of column `col` of the tile; a partial tile (a row narrower than the
  // tile) clamps it into the row, repeating the row's last column.
  PrimExpr OwIn(bool partial) const {
    return partial ? arith::Min(Ow(), conv_.width - I(1)) : Ow();
  }

  // x at row `row` and column `col` of the tile and tap (c, kh, kw); a masked axis reads it
  // at an index clamped into the input (the tap is not added there).
  PrimExpr XValue(bool partial, bool masked_cols = false, bool masked_rows = false) const {
    PrimExpr iw = Replace(conv_.x_indices[3], {conv_.ow, conv_.kw}, {OwIn(partial), kw_});
    PrimExpr ih = Replace(conv_.x_indices[2], {conv_.oh, conv_.kh}, {Oh(), kh_});
    auto clamp = [](const PrimExpr& i, const PrimExpr& extent) {
      return arith::Min(arith::Max(i, I(0)), extent - I(1));
    };
    if (masked_cols) iw = clamp(iw, conv_.x->shape[3]);
    if (masked_rows) ih = clamp(ih, conv_.x->shape[2]);
    return arith::Load(conv_.x, {conv_.n, channel_, ih, iw});
  }

  // for c in the reduction block (all channels when there is one block).
  Stmt OverChannels(Stmt body) const {
    if (channel_block_ == conv_.cg) return Loop(c_, I(conv_.cg), ForKind::kSerial, body);
    return ir::For(c_, cb_ * I(channel_block_), I(channel_block_), ForKind::kSerial, body);
  }

  // One tap (kh, kw) over the channels. The channel loop is innermost and branch-free, so acc
  // stays in registers across it.
  // A tap that falls in the padding for some columns (masked_cols) or rows (masked_rows) of
  // the tile: those keep their sum (a select on a condition fixed for the loop), so the whole
  // tile still shares one channel loop.
  // Only columns [lo, hi) of the tile take the tap (hi = 0: all of them).
  Stmt Channels(bool partial, bool masked_cols, bool masked_rows, int64_t lo = 0,
                int64_t hi = 0) const {
    PrimExpr acc = arith::Load(acc_, AccAt());
    PrimExpr w = weights_ ? arith::Load(packed_all_, {ocb_, Tap(c_, kh_, kw_), lane_})
                          : arith::Load(packed_, {Tap(c_, kh_, kw_), lane_});
    PrimExpr x = XValue(partial, masked_cols, masked_rows);
    PrimExpr inside;
    if (masked_cols) inside = Replace(conv_.col_ok, {conv_.ow, conv_.kw}, {OwIn(partial), kw_});
    if (masked_rows) inside = And(inside, RowOk(Oh()));
    PrimExpr sum = acc + x * w;
    if (inside) sum = arith::Select(inside, sum, acc);
    std::vector<Stmt> step = PrefetchWeights();
    for (Stmt& prefetch : PrefetchInput(XValue(partial, masked_cols, masked_rows))) {
      step.push_back(std::move(prefetch));
    }
    step.push_back(OverTile(ir::Store(acc_, AccAt(), sum), ForKind::kVectorized, lo, hi));
    return OverChannels(ir::Seq(step));
  }

  // Weights packed at compile time come from memory, a block's worth (KH x KW x C x OCB
  // floats) per row of the output: each step asks for the packed row kPrefetchTaps further on,
  // as the matmul rule does, unclamped: past the block's last row it names the next block's
  // rows or memory past the weights (ir::intrinsic::kPrefetch). Clamped, resnet18 untuned ran
  // 1.04x as long on one thread.
  std::vector<Stmt> PrefetchWeights() const {
    std::vector<Stmt> out;
    if (!weights_) return out;
    PrimExpr ahead = Tap(c_, kh_, kw_) + I(kPrefetchTaps);
    for (int64_t lane = 0; lane < lanes_; lane += kLineFloats) {
      out.push_back(Prefetch(arith::Load(packed_all_, {ocb_, ahead, I(lane)})));
    }
    return out;
  }

  // The input `x` (the tile's load of it) kInputPrefetchChannels channels on, at the first and
  // the last column of each row of the tile, for a pointwise conv whose channel loop is twice
  // that or longer. A 3 x 3 conv reads each line for three taps or more, and its packed
  // weights, from memory, are most of its reads: with these prefetches resnet18's 14 x 14 and
  // 7 x 7 convs took 1.03-1.19x their samples on one thread, and the model no less time on two.
  // Past the last channel it names other memory, which a prefetch may (ir::intrinsic::kPrefetch).
  std::vector<Stmt> PrefetchInput(const PrimExpr& x) const {
    std::vector<Stmt> out;
    if (conv_.taps_h * conv_.taps_w > 1 || conv_.cg < 2 * kInputPrefetchChannels) return out;
    for (int64_t row = 0; row < rows_; ++row) {
      for (int64_t col : {int64_t{0}, cols_ - 1}) {
        out.push_back(Prefetch(
            Replace(x, {c_, row_, col_}, {c_ + I(kInputPrefetchChannels), I(row), I(col)})));
      }
    }
    return out;
  }

  // The taps kw of row kh. A border tile reads unchecked every tap that lies inside the input
  // for all its columns. One that misses only the first or only the last column (a padding
  // of 1) leaves that column out; any other is masked per column, which LLVM makes a branch
  // per column that reloads the weights. (Every tile of a plane 7 or 14 columns wide is a
  // border tile: resnet18's last stages.)
  Stmt Taps(bool border, bool partial, bool masked_rows) const {
    Stmt channels = Channels(partial, false, masked_rows);
    if (border && conv_.col_ok) {
      Stmt edges = Channels(partial, true, masked_rows);
      if (cols_ > 2) {
        edges = ir::IfThenElse(ColumnsInside(partial, 0, cols_ - 2),
                               Channels(partial, false, masked_rows, 0, cols_ - 1), edges);
        edges = ir::IfThenElse(ColumnsInside(partial, 1, cols_ - 1),
                               Channels(partial, false, masked_rows, 1, cols_), edges);
      }
      channels = ir::IfThenElse(ColumnsInside(partial, 0, cols_ - 1), channels, edges);
    }
    return Loop(kw_, I(conv_.taps_w), ForKind::kSerial, channels);
  }

  // Tap kw lies inside the input for columns first..last of the tile: it does at both (the
  // input column grows with the output column).
  PrimExpr ColumnsInside(bool partial, int64_t first, int64_t last) const {
    auto at = [&](int64_t col) {
      PrimExpr ow = Replace(OwIn(partial), {col_}, {I(col)});
      return Replace(conv_.col_ok, {conv_.ow, conv_.kw}, {ow, kw_});
    };
    return And(at(first), at(last));
  }

  // Row kh of the taps lies inside the input for every row of the tile: it does at the first
  // and the last row (the input row grows with the output row).
  PrimExpr RowsInside() const {
    PrimExpr first = Replace(Oh(), {row_}, {I(0)}), last = Replace(Oh(), {row_}, {I(rows_ - 1)});
    return And(RowOk(first), RowOk(last));
  }

  // A tile of one row skips the taps of a row kh in the padding; a taller one masks the rows
  // that row kh misses where it misses some.
  Stmt Reduce(bool border, bool partial) const {
    Stmt taps = Taps(border, partial, false);
    if (conv_.row_ok && rows_ == 1) taps = ir::IfThenElse(RowOk(Oh()), taps);
    if (conv_.row_ok && rows_ > 1) {
      taps = ir::IfThenElse(RowsInside(), taps, Taps(border, partial, true));
    }
    Stmt reduce = Loop(kh_, I(conv_.taps_h), ForKind::kSerial, taps);
    if (channel_block_ == conv_.cg) return reduce;
    return Loop(cb_, I(conv_.cg / channel_block_), ForKind::kSerial, reduce);
  }

  // Every tap of every column of the tile lies inside the input: the column check holds at
  // the first column's first tap and the last column's last tap (the input column grows with
  // both), and the tile ends inside the output.
  PrimExpr Interior() const {
    PrimExpr first = First();
    PrimExpr last = first + I(cols_ - 1);
    PrimExpr full = Whole();
    if (!conv_.col_ok) return full;
    return And(full, And(Replace(conv_.col_ok, {conv_.ow, conv_.kw}, {first, I(0)}),
                         Replace(conv_.col_ok, {conv_.ow, conv_.kw}, {last, I(conv_.taps_w - 1)})));
  }

  // The kernel's epilogue at (n, oc, oh, ow), reading the finished sum from acc.
  Stmt Epilogue() const {
    PrimExpr sum = arith::Cast(conv_.acc_t, arith::Load(acc_, AccAt()));
    std::vector<Stmt> stores;
    for (const Stmt& s : conv_.epilogue) {
      stores.push_back(ir::Store(s->buffer, At(s->buffer, s->indices), AtElement(s->value, sum)));
    }
    PrimExpr inside = And(ProvedWholeBlocks() ? PrimExpr() : Lt(Oc(), M()),
                          ProvedWhole() ? PrimExpr() : Lt(Ow(), conv_.width));
    return inside ? ir::IfThenElse(inside, ir::Seq(stores)) : ir::Seq(stores);
  }

  // Epilogue value `e` at element (n, oc, oh, ow) of the tile, the sum there `sum`. A load of
  // a buffer in `stored` at the element's own slot reads the value stored there before.
  // `lanes_scatter` as for At.
  PrimExpr AtElement(const PrimExpr& e, const PrimExpr& sum, bool lanes_scatter = true,
                     const std::map<const arith::BufferNode*, PrimExpr>& stored = {}) const {
    PrimExpr r = arith::Substitute(e, [&](const PrimExpr& x) -> PrimExpr {
      if (x->kind != ExprKind::kLoad) return nullptr;
      if (x->buffer == conv_.acc) return sum;
      auto it = stored.find(x->buffer.get());
      if (it != stored.end() && IsOwnSlot(x->args)) return it->second;
      return arith::Load(x->buffer, At(x->buffer, x->args, lanes_scatter));
    });
    return Replace(r, {conv_.m, conv_.oh, conv_.ow}, {Oc(), Oh(), Ow()});
  }
  bool IsOwnSlot(const std::vector<PrimExpr>& indices) const {
    const std::vector<PrimExpr> own = {conv_.n, conv_.m, conv_.oh, conv_.ow};
    bool own_slot = indices.size() == own.size();
    for (size_t d = 0; own_slot && d < own.size(); ++d) own_slot = IsVar(indices[d], own[d]);
    return own_slot;
  }

  // Output channels are the tile's lanes, but consecutive in memory are its columns: a vector
  // of channels is stored with a scatter, an element at a time. A tile of half a vector of
  // columns or more copies its sums to a stage ([row, col, lane] as acc, the columns whole
  // vectors) instead, transposes it by blocks of a vector's lanes in registers (kiln.transpose)
  // to [row, lane, col], and each output channel in turn reads its columns as one vector,
  // computes the epilogue's values there and stores them as one vector. The values are
  // computed at every column of the stage, so the epilogue must read nothing else at a column
  // (a residual add's input does): the stage's last columns may lie past the row's end.
  // mobilenet_v2's stem (3 -> 32 channels on 112 x 112, tiles of 14 columns) spent more than
  // half its time in the scatters; staged, it ran in 0.85x the time. Each channel then
  // gathered its columns across the stage: a fifth of resnet18's stem (147 products a sum),
  // which transposed runs in 0.86x the time. (AVX-512 only: on AVX2 the transposes won
  // nothing against the scatters.)
  bool StagesEpilogue() const {
    return wide_vectors_ && 2 * cols_ > vector_lanes_ && !EpilogueReadsColumns();
  }
  int64_t StageColumns() const {
    return (cols_ + vector_lanes_ - 1) / vector_lanes_ * vector_lanes_;
  }

  // Whether the epilogue reads a buffer at a position that varies with the output column,
  // other than an element it stored itself.
  bool EpilogueReadsColumns() const {
    std::map<const arith::BufferNode*, PrimExpr> stored;
    for (const Stmt& s : conv_.epilogue) stored[s->buffer.get()] = PrimExpr();
    bool reads = false;
    for (const Stmt& s : conv_.epilogue) {
      arith::Substitute(s->value, [&](const PrimExpr& x) -> PrimExpr {
        if (x->kind != ExprKind::kLoad || x->buffer == conv_.acc) return nullptr;
        if (stored.contains(x->buffer.get()) && IsOwnSlot(x->args)) return nullptr;
        reads = reads || UsesAny(x, {conv_.ow});
        return nullptr;
      });
    }
    return reads;
  }

  // acc copied to the stage and transposed to `channels`; then for row, lane (an output
  // channel inside M): each epilogue buffer's last value, every earlier statement's folded in,
  // computed at every column of the stage into a vector `values` (no condition: LLVM loads
  // what a condition guards with gathers, the bias and a clip's bounds too), and stored from
  // it at the tile's columns.
  Stmt StagedEpilogue() const {
    std::vector<PrimExpr> shape = {I(StageColumns()), I(lanes_)};
    std::vector<PrimExpr> transposed = {I(lanes_), I(StageColumns())};
    if (rows_ > 1) {
      shape.insert(shape.begin(), I(rows_));
      transposed.insert(transposed.begin(), I(rows_));
    }
    Buffer stage = arith::MakeBuffer("stage", DataType::Float(32), shape);
    Buffer channels_stage = arith::MakeBuffer("channels", DataType::Float(32), transposed);
    Stmt fill =
        OverTile(ir::Store(stage, AccAt(), arith::Load(acc_, AccAt())), ForKind::kVectorized);
    std::vector<PrimExpr> at = {lane_, col_};
    if (rows_ > 1) at.insert(at.begin(), row_);
    PrimExpr sum = arith::Cast(conv_.acc_t, arith::Load(channels_stage, at));
    std::map<const arith::BufferNode*, PrimExpr> stored;
    for (const Stmt& s : conv_.epilogue) {
      stored[s->buffer.get()] = AtElement(s->value, sum, false, stored);
    }
    std::vector<Stmt> compute, store;
    std::vector<Buffer> values;
    for (const Stmt& s : conv_.epilogue) {
      auto value = stored.find(s->buffer.get());
      if (value == stored.end()) continue;  // a buffer stored to before
      Buffer v =
          arith::MakeBuffer(s->buffer->name + "_values", s->buffer->dtype, {I(StageColumns())});
      values.push_back(v);
      compute.push_back(ir::Store(v, {col_}, value->second));
      store.push_back(
          ir::Store(s->buffer, At(s->buffer, s->indices, false), arith::Load(v, {col_})));
      stored.erase(value);
    }
    PrimExpr inside = ProvedWhole() ? PrimExpr() : Lt(Ow(), conv_.width);
    if (StageColumns() > cols_) inside = And(Lt(col_, I(cols_)), inside);
    auto columns = [&](Stmt body) {
      return Loop(col_, I(StageColumns()), ForKind::kVectorized, std::move(body));
    };
    Stmt channel =
        ir::Seq({columns(ir::Seq(compute)),
                 columns(inside ? ir::IfThenElse(inside, ir::Seq(store)) : ir::Seq(store))});
    for (const Buffer& v : values) channel = ir::Allocate(v, channel);
    PrimExpr channels = I(lanes_);
    if (!ProvedWholeBlocks()) channels = arith::Min(I(lanes_), M() - ocb_ * I(lanes_));
    Stmt tile = Loop(lane_, channels, ForKind::kSerial, channel);
    if (rows_ > 1) tile = Loop(row_, I(rows_), ForKind::kUnrolled, tile);
    Stmt transpose = Transpose(channels_stage, stage);
    return ir::Allocate(stage, ir::Allocate(channels_stage, ir::Seq({fill, transpose, tile})));
  }

  // to[row, lane, col] = from[row, col, lane], by blocks of a vector's lanes square.
  Stmt Transpose(const Buffer& to, const Buffer& from) const {
    const int64_t v = vector_lanes_;
    std::vector<Stmt> blocks;
    for (int64_t c = 0; c < StageColumns(); c += v) {
      for (int64_t l = 0; l < lanes_; l += v) {
        std::vector<PrimExpr> to_at = {I(l), I(c)}, from_at = {I(c), I(l)};
        if (rows_ > 1) {
          to_at.insert(to_at.begin(), row_);
          from_at.insert(from_at.begin(), row_);
        }
        blocks.push_back(
            ir::Evaluate(arith::Call(DataType::Int(32), ir::intrinsic::kTranspose,
                                     {arith::Load(to, to_at), arith::Load(from, from_at), I(v),
                                      I(StageColumns()), I(lanes_)})));
      }
    }
    Stmt all = ir::Seq(blocks);
    return rows_ > 1 ? Loop(row_, I(rows_), ForKind::kUnrolled, all) : all;
  }

  // The epilogue's access b[indices] at output element (n, oc, oh, ow). An element's own slot
  // b[n, oc, oh, ow] of a plane of constant size is addressed as b[n, ocb * OCB, oh,
  // ow + lane * plane], the same element: the lane's offset is then a constant vector, and the
  // vectorized store a scatter of 32-bit offsets from one base (from b[n, oc, oh, ow] LLVM kept
  // a chain of 64-bit vector multiplies, and split each 16-lane scatter in two).
  // `lanes_scatter`: the vector's lanes are output channels (no stage).
  std::vector<PrimExpr> At(const Buffer& b, const std::vector<PrimExpr>& indices,
                           bool lanes_scatter = true) const {
    if (lanes_scatter && IsOwnSlot(indices) && b->shape[2]->kind == ExprKind::kIntImm &&
        b->shape[3]->kind == ExprKind::kIntImm) {
      int64_t plane = b->shape[2]->int_value * b->shape[3]->int_value;
      return {conv_.n, ocb_ * I(lanes_), Oh(), Ow() + lane_ * I(plane)};
    }
    std::vector<PrimExpr> at;
    for (const PrimExpr& i : indices) {
      at.push_back(Replace(i, {conv_.m, conv_.oh, conv_.ow}, {Oc(), Oh(), Ow()}));
    }
    return at;
  }

  // Every block of output channels lies inside M. With the checks that always hold left out,
  // the stem conv's epilogue lost a compare per element against a spilled channel index, a
  // fifth of the kernel's time (3 -> 32 channels, 27 products a sum).
  bool ProvedWholeBlocks() const {
    return M()->kind == ExprKind::kIntImm && M()->int_value % lanes_ == 0;
  }

  // The tile ends inside the row (every tile does but in a row narrower than a tile).
  PrimExpr Whole() const { return Le(First() + I(cols_), conv_.width); }

  // The row's tiles of P columns. The r columns left over (r = W mod P) take one narrower
  // tile that ends at the row's end, the narrowest of kMinTileColumns and P / 2 columns that
  // covers them: 7 columns in tiles of 6 are 6 + 4 computed, not 12, and a row of 7 in tiles
  // of 14 (14 columns of 512-bit vectors, a symbolic width) is one tile of 7, not 14. When
  // neither covers them, the last P-column tile moves back to end at the row's end.
  Stmt Columns() const {
    PrimExpr all = CeilDiv(conv_.width, cols_);
    std::vector<int64_t> narrow_tiles;
    for (int64_t cols : {kMinTileColumns, cols_ / 2}) {
      bool wider = narrow_tiles.empty() || cols > narrow_tiles.back();
      if (cols < cols_ && wider) narrow_tiles.push_back(cols);
    }
    if (const auto& w = conv_.width; w->kind == ExprKind::kIntImm) {
      int64_t left = w->int_value % cols_;
      std::erase_if(narrow_tiles, [&](int64_t cols) { return cols < left; });
      if (left == 0 || narrow_tiles.empty()) return Loop(owt_, all, ForKind::kSerial, Tile());
      narrow_tiles.resize(1);
    }
    if (narrow_tiles.empty()) return Loop(owt_, all, ForKind::kSerial, Tile());
    // The if-chain tries the narrowest tile first: each covers up to its width of columns.
    PrimExpr left = arith::FloorMod(conv_.width, I(cols_));
    Stmt ends;
    for (int64_t cols : narrow_tiles | std::views::reverse) {
      ConvTiler end = *this;
      end.cols_ = cols;
      end.first_ = arith::Max(conv_.width - I(cols), I(0));
      end.acc_ = Accumulators(cols);
      ends = ir::IfThenElse(Le(left, I(cols)), end.Tile(), ends);
    }
    PrimExpr narrow = And(Lt(I(0), left), Le(left, I(narrow_tiles.back())));
    PrimExpr whole = arith::FloorDiv(conv_.width, I(cols_));
    return ir::Seq({Loop(owt_, arith::Select(narrow, whole, all), ForKind::kSerial, Tile()),
                    ir::IfThenElse(narrow, ends)});
  }

  // An interior tile reads every tap unchecked; a border tile masks the taps in the padding;
  // a partial tile also clamps its columns into the row, and only it, as the clamp costs each
  // column its own address. The epilogue runs on whole vectors of output channels: lane by
  // lane, LLVM kept each element's bias add and relu scalar on AVX-512, its address spilled
  // (the stem conv, 3 -> 32 channels, ran 1.3x slower).
  Stmt Tile() const {
    Stmt zero = OverTile(ir::Store(acc_, AccAt(), arith::FloatImm(0)));
    Stmt border = Reduce(true, false);
    if (!ProvedWhole()) border = ir::IfThenElse(Whole(), border, Reduce(true, true));
    Stmt reduce = ir::IfThenElse(Interior(), Reduce(false, false), border);
    Stmt epilogue =
        StagesEpilogue() ? StagedEpilogue() : OverTile(Epilogue(), ForKind::kVectorized);
    return ir::Allocate(acc_, ir::Seq({zero, reduce, epilogue}));
  }

  // A constant row at least a tile wide: every tile is whole, so every column of it inside
  // the row (First() moves the last tile back to end at the row's end).
  bool ProvedWhole() const {
    return conv_.width->kind == ExprKind::kIntImm && conv_.width->int_value >= cols_;
  }

  const Conv& conv_;
  const int64_t lanes_;         // OCB: output channels per block, tile_vectors vectors of f32
  const int64_t vector_lanes_;  // f32 per vector register
  const bool wide_vectors_;     // AVX-512: vectors of 16 f32, scatters and gathers
  int64_t cols_;                // P: output columns per register tile
  int64_t rows_;                // R: output rows per register tile
  int64_t channel_block_;       // input channels per reduction block
  PrimExpr first_;              // set for the one narrower tile that ends a row (Columns)
  PrimExpr channel_;
  PrimExpr ocb_ = arith::MakeVar("ocb"), owt_ = arith::MakeVar("owt"), cb_ = arith::MakeVar("cb");
  PrimExpr ohg_ = arith::MakeVar("ohg");  // the tile's row group (oh itself when R = 1)
  PrimExpr row_ = arith::MakeVar("row"), col_ = arith::MakeVar("col"),
           lane_ = arith::MakeVar("lane");
  PrimExpr c_ = arith::MakeVar("rc"), kh_ = arith::MakeVar("rkh"), kw_ = arith::MakeVar("rkw");
  const ir::NDArray* weights_;
  Buffer packed_ = arith::MakeBuffer("packed_w", DataType::Float(32), {I(Depth()), I(lanes_)});
  Buffer packed_all_ = arith::MakeBuffer("w_packed", DataType::Float(32),
                                         {CeilDiv(conv_.channels, lanes_), I(Depth()), I(lanes_)});
  Buffer acc_;
};

// Whether `b`'s plane (its last two dimensions) is provably the conv's output plane.
bool OnOutputPlane(const Conv& conv, const Buffer& b) {
  arith::Analyzer analyzer;
  return b->shape.size() == 4 && analyzer.ProveEqual(b->shape[2], conv.height) &&
         analyzer.ProveEqual(b->shape[3], conv.width);
}

// Whether the epilogue may run at flattened positions of the output plane, [n, m, 0, p] for
// [n, m, p / W, p % W]: every buffer it stores to, and every one it reads at the output's
// position (oh, ow), lies on the output plane, read at [.., .., oh, ow].
bool EpilogueOnOutputPlane(const Conv& conv) {
  bool ok = true;
  for (const Stmt& s : conv.epilogue) {
    ok = ok && OnOutputPlane(conv, s->buffer);
    ir::VisitExprs(s->value, [&](const PrimExpr& e) {
      if (e->kind != ExprKind::kLoad || !UsesAny(e, {conv.oh, conv.ow})) return;
      ok = ok && e->args.size() == 4 && IsVar(e->args[2], conv.oh) && IsVar(e->args[3], conv.ow) &&
           OnOutputPlane(conv, e->buffer);
    });
  }
  return ok;
}

// Pointwise convolutions (1x1, stride 1, no padding, one group) are matrix products,
// out[n, :, plane] = w[:, :] @ x[n, :, plane] over the flattened (H, W) plane, and take the
// matmul rule: output channels are its rows, positions its columns, input channels its
// reduction; the epilogue stores whole vectors of positions.
//
// Buffers are dense and row-major, so index [n, c, 0, p] with p < H * W addresses position
// p of the plane (row p / W, column p % W): x, out and every epilogue operand indexed by
// (oh, ow) share the plane's shape, which the rule proves.
class PointwiseConv {
 public:
  explicit PointwiseConv(const Conv& conv) : conv_(conv) {}

  // The conv as a matmul over the flattened plane, for one group and an epilogue that
  // stores to one output: C[n, m, 0, p] = sum_c w[m, c, 0, 0] * x[n, c, 0, p], where the
  // epilogue's first store reads the sum.
  std::optional<Matmul> AsMatmul() const {
    const PrimExpr& in_channels = conv_.x->shape[1];  // one group: the conv reads them all
    if (!IsPointwise() || !in_channels->is_const_int(conv_.cg) || conv_.epilogue.empty()) {
      return {};
    }
    const Buffer& out = conv_.epilogue[0]->buffer;
    for (size_t s = 0; s < conv_.epilogue.size(); ++s) {
      if (conv_.epilogue[s]->buffer != out || (s > 0 && ReadsAcc(conv_.epilogue[s]->value))) {
        return {};
      }
    }
    PrimExpr p = arith::MakeVar("p");
    Matmul m{.batch = {{conv_.n, conv_.batch}},
             .i = {conv_.m, conv_.channels},
             .j = {p, Plane()},
             .k = conv_.c,
             .depth = I(conv_.cg),
             .c = out,
             .c_flat_dims = 1,
             .a_load = arith::Load(conv_.w, {conv_.m, conv_.c, I(0), I(0)}),
             .b_load = arith::Load(conv_.x, {conv_.n, conv_.c, I(0), p}),
             .reads_b_in_place = true};
    std::vector<PrimExpr> at = {conv_.n, conv_.m, I(0), p};
    PrimExpr sum = arith::Cast(conv_.acc_t, arith::Load(out, at));
    for (const Stmt& s : conv_.epilogue) {
      PrimExpr value = arith::Substitute(s->value, [&](const PrimExpr& e) -> PrimExpr {
        if (e->kind == ExprKind::kLoad && e->buffer == conv_.acc) return sum;
        return nullptr;
      });
      m.epilogue.push_back(ir::Store(out, at, Replace(value, {conv_.oh, conv_.ow}, {I(0), p})));
    }
    return m;
  }

 private:
  PrimExpr Plane() const { return conv_.height * conv_.width; }

  bool IsPointwise() const {
    return conv_.taps_h == 1 && conv_.taps_w == 1 && SamePlane() && AlwaysInside(conv_.row_ok) &&
           AlwaysInside(conv_.col_ok);
  }

  bool ReadsAcc(const PrimExpr& value) const {
    bool reads = false;
    ir::VisitExprs(value, [&](const PrimExpr& e) {
      reads = reads || (e->kind == ExprKind::kLoad && e->buffer == conv_.acc);
    });
    return reads;
  }

  // x[n, c, oh, ow] is read at the output's own position, x's plane is the output's, and so
  // is every epilogue operand's that is indexed by position.
  bool SamePlane() const {
    arith::Analyzer analyzer;
    const std::vector<PrimExpr>& xi = conv_.x_indices;
    auto at_tap = [&](const PrimExpr& e) {
      return analyzer.Simplify(Replace(e, {conv_.c, conv_.kh, conv_.kw}, {I(0), I(0), I(0)}));
    };
    if (!IsVar(at_tap(xi[2]), conv_.oh) || !IsVar(at_tap(xi[3]), conv_.ow)) return false;
    if (!IsVar(analyzer.Simplify(Replace(xi[1], {conv_.m}, {I(0)})), conv_.c)) return false;
    return OnOutputPlane(conv_, conv_.x) && EpilogueOnOutputPlane(conv_);
  }

  // The tap's bounds check holds everywhere: each term is `oh >= 0`, `oh < H` (or the same for
  // ow and W), with the plane proved the same as x's.
  bool AlwaysInside(const PrimExpr& check) const {
    if (!check) return true;
    std::vector<PrimExpr> terms;
    SplitAnd(check, terms);
    arith::Analyzer analyzer;
    for (const PrimExpr& t : terms) {
      if (t->kind != ExprKind::kGE && t->kind != ExprKind::kLT) return false;
      PrimExpr index =
          analyzer.Simplify(Replace(t->args[0], {conv_.c, conv_.kh, conv_.kw}, {I(0), I(0), I(0)}));
      bool row = IsVar(index, conv_.oh);
      if (!row && !IsVar(index, conv_.ow)) return false;
      PrimExpr limit = t->kind == ExprKind::kGE ? I(0) : (row ? conv_.height : conv_.width);
      if (!analyzer.ProveEqual(t->args[1], limit)) return false;
    }
    return true;
  }

  const Conv& conv_;
};

// The conv's epilogue at row `oh`, column `ow` of channel m, with `sum` the finished sum.
Stmt ConvEpilogue(const Conv& conv, const PrimExpr& oh, const PrimExpr& ow, const PrimExpr& sum) {
  std::vector<Stmt> stores;
  for (const Stmt& s : conv.epilogue) {
    PrimExpr value = arith::Substitute(s->value, [&](const PrimExpr& x) -> PrimExpr {
      if (x->kind == ExprKind::kLoad && x->buffer == conv.acc) return sum;
      return nullptr;
    });
    value = Replace(value, {conv.oh, conv.ow}, {oh, ow});
    stores.push_back(ir::Store(s->buffer, {conv.n, conv.m, oh, ow}, value));
  }
  return ir::Seq(stores);
}

// The form for convolutions the tiler does not take (depthwise, small groups), one output row
// at a time:
//
//   for n; for m (parallel); for oh
//     the columns where every tap lies inside the input, in tiles of L (the last moved back):
//       acc[L] = 0
//       for c, kh: if the input row is inside: for kw:
//         acc[l] += x[n, ch, ih, ow(l) * s + base(kw)] * w[m, c, kh, kw]   (vectorized)
//       epilogue(acc[l]) stored to out[n, m, oh, ow(l)]
//     the other columns (edges, remainder) accumulate in out in place, one tap at a time over
//     the columns where that tap lies inside, a vector loop with no bounds check
//
// A conv with few taps (a depthwise 3x3) sums them unrolled instead (UnrolledRow), in tiles
// of L columns, the last ones narrower. With weights that are constants, all finite, such a
// conv takes the plane form, a channel at a time:
//
//   for n; for m (parallel):
//     if a row is at most one tile wide and pad holds the input rows of one output row
//     (else the row form, row by row):
//       for band (B output rows, as many as pad holds the input rows of):
//         the band's input rows copied into pad at their padded columns, zero in the padding
//         for oh in the band, in tiles of L columns, every tap unchecked:
//           acc[l] = sum of pad[c, row(oh, kh), ow(l) + kw * dw] * w[m, c, kh, kw]
//
// so no column checks a tap. On narrow rows, where the row form's edge columns and narrow
// tiles are most of a row, that took two thirds of the row form's time or less (depthwise
// 3x3, 384 channels of 14 x 14, 960 of 7 x 7); on wide ones copying the input cost more
// than it saved (32 channels of 112 x 112: 0.27 against 0.17 ms). A tap in the padding adds
// 0 * w, which leaves the sum as skipping it does because w is finite.
//
// A row narrower than a vector would take tiles of narrower vectors (a row of 7 two tiles of
// 4 lanes, with 16 to a vector). Such a band sums its taps flattened instead (BandSums): pad's
// rows are PW (the padded width) apart, so output row oh's column ow, at q = (oh - oh0) * sh *
// PW + ow, reads every tap at q plus a constant, and the whole band is one run of whole
// vectors, sums[q]; the columns between one output row's end and the next one's start are
// computed and dropped. The rows then take their sums from sums[] in their own tiles.
//
// Where the input plane is the output plane (stride 1, "same" padding), the epilogue's operands
// lie on it too and the copies below fit in L1, a plane of any width is summed flattened whole
// instead (FlatPlane), with no padded columns: position p = oh * W + ow reads tap (kh, kw) at
// p + (kh * dh + bh) * W + d, d = kw * dw + bw, in a copy of the plane with zero rows before
// and after it. A tap d columns to the side would wrap into the previous or next row at a row's
// end; in its copy the columns only such a read reaches (the last -d, or the first d) are zero.
// The epilogue then runs on whole vectors of positions, out[n, m, 0, p], and no row is stored in
// narrow tiles (mobilenet_v2, untuned, one thread: 0.95x the time; its depthwise convs on 14 x
// 14 and 7 x 7 planes). On 28 x 28 (192 channels) the rows, two tiles of 16 columns each, took
// 1.7x the flat form's time. (In bands of rows, planes too large for L1 lost in the model: 144
// channels of 56 x 56 took 1.5x the row form's time there, though 0.63x of it warm.)
//
// Each element sums its (c, kh, kw) products in order in every form.
class RowConv {
 public:
  // `weights`: the weight constant, when the kernel's one call site passes one.
  RowConv(const Conv& conv, const ir::Target& target, const ir::NDArray* weights,
          const ConvKnobs& knobs)
      : conv_(conv),
        lanes_(knobs.row_vectors * VectorLanes(target)),
        vector_lanes_(VectorLanes(target)),
        unroll_taps_(knobs.unroll_taps && UnrollsTaps(conv)),
        parallel_rows_(knobs.parallel_rows) {
    plane_ = knobs.plane && unroll_taps_ && !parallel_rows_ && TakesPlane(weights);
  }

  // Whether the unrolled form may take the conv: few enough taps.
  static bool UnrollsTaps(const Conv& conv) {
    return conv.cg * conv.taps_h * conv.taps_w <= kMaxUnrolledTaps;
  }

  bool Takes() { return !conv_.epilogue.empty() && StrideAndBase(); }
  // Whether Build gives the plane form (for the conv's smaller planes).
  bool TakesPlaneForm() { return Takes() && plane_; }

  // Columns where every tap lies inside the input take register tiles of L columns; the
  // columns at the edges (and a remainder shorter than a tile) accumulate in place, one tap
  // at a time over the columns where that tap lies inside.
  std::optional<Stmt> Build() {
    if (!Takes()) return {};
    PrimExpr lo = arith::Min(First(I(0)), conv_.width);
    PrimExpr hi = arith::Max(End(I(conv_.taps_w - 1)), lo);
    if (plane_) return OverPlanes(UnrolledRow(lo, hi));
    if (unroll_taps_) return OverRows(UnrolledRow(lo, hi));
    // L columns per tile, half as many on a narrow row, in place on a very narrow one.
    Stmt inside = ir::IfThenElse(
        Le(I(lanes_), hi - lo), Tiles(lo, hi, acc_),
        ir::IfThenElse(Le(I(lanes_ / 2), hi - lo), Tiles(lo, hi, half_), InPlace(lo, hi)));
    return OverRows(ir::Seq({InPlace(I(0), lo), inside, InPlace(hi, conv_.width)}));
  }

 private:
  // for n; for m (parallel); for oh: row. Or with parallel_rows, (m, oh) pairs in parallel:
  // task t is row t % H of channel t / H.
  Stmt OverRows(Stmt row) const {
    if (!parallel_rows_) {
      return Loop(conv_.n, conv_.batch, ForKind::kSerial,
                  Loop(conv_.m, conv_.channels, ForKind::kParallel,
                       Loop(conv_.oh, conv_.height, ForKind::kSerial, row)));
    }
    PrimExpr task = arith::MakeVar("task");
    Stmt pair = ir::Let(conv_.m, arith::FloorDiv(task, conv_.height),
                        ir::Let(conv_.oh, arith::FloorMod(task, conv_.height), row));
    return Loop(conv_.n, conv_.batch, ForKind::kSerial,
                Loop(task, conv_.channels * conv_.height, ForKind::kParallel, pair));
  }

  const Buffer& Out() const { return conv_.epilogue.front()->buffer; }
  std::vector<PrimExpr> At(const PrimExpr& ow) const { return {conv_.n, conv_.m, conv_.oh, ow}; }
  // for ow in [begin, end), vectorized (no iteration when end <= begin).
  Stmt Columns(const PrimExpr& begin, const PrimExpr& end, Stmt body) const {
    return ir::For(ow_, begin, end - begin, ForKind::kVectorized, std::move(body));
  }

  // The input column is ow * stride + base(kw): the stride a constant, base growing with kw
  // (so the first tap bounds the columns from the left and the last from the right).
  bool StrideAndBase() {
    const PrimExpr& iw = conv_.x_indices[3];
    arith::Analyzer analyzer;
    PrimExpr s =
        analyzer.Simplify(Replace(iw, {conv_.ow}, {I(1)}) - Replace(iw, {conv_.ow}, {I(0)}));
    if (s->kind != ExprKind::kIntImm || s->int_value < 1) return false;
    stride_ = s->int_value;
    PrimExpr d = analyzer.Simplify(Base(I(1)) - Base(I(0)));
    return conv_.taps_w == 1 || (d->kind == ExprKind::kIntImm && d->int_value >= 1);
  }
  PrimExpr Base(const PrimExpr& kw) const {
    return Replace(conv_.x_indices[3], {conv_.ow, conv_.kw}, {I(0), kw});
  }
  // The columns where tap kw reads inside the input, 0 <= ow * s + base < W: [First, End).
  PrimExpr First(const PrimExpr& kw) const {
    return arith::Max(I(0), arith::FloorDiv(I(stride_ - 1) - Base(kw), I(stride_)));
  }
  PrimExpr End(const PrimExpr& kw) const {
    PrimExpr last = arith::FloorDiv(conv_.x->shape[3] - I(1) - Base(kw), I(stride_));
    return arith::Min(conv_.width, last + I(1));
  }

  // x at output column `ow` and tap (c, kh, kw), times the tap's weight; with `clamp_row`,
  // x is read at the input row clamped into the input.
  PrimExpr Product(const PrimExpr& ow, bool clamp_row = false) const {
    return XAt(ow, clamp_row) * WeightAt();
  }
  PrimExpr XAt(const PrimExpr& ow, bool clamp_row) const {
    std::vector<PrimExpr> from = {conv_.ow, conv_.c, conv_.kh, conv_.kw};
    std::vector<PrimExpr> to = {ow, c_, kh_, kw_};
    std::vector<PrimExpr> at;
    for (const PrimExpr& i : conv_.x_indices) at.push_back(Replace(i, from, to));
    if (clamp_row) at[2] = arith::Min(arith::Max(at[2], I(0)), conv_.x->shape[2] - I(1));
    return arith::Load(conv_.x, at);
  }
  PrimExpr WeightAt() const { return arith::Load(conv_.w, {conv_.m, c_, kh_, kw_}); }

  // for c, kh: if the input row is inside: for kw: taps(kw)
  Stmt OverTaps(Stmt taps) const {
    taps = Loop(kw_, I(conv_.taps_w), ForKind::kSerial, std::move(taps));
    if (conv_.row_ok) taps = ir::IfThenElse(Replace(conv_.row_ok, {conv_.kh}, {kh_}), taps);
    return Loop(c_, I(conv_.cg), ForKind::kSerial,
                Loop(kh_, I(conv_.taps_h), ForKind::kSerial, taps));
  }

  // The kernel's epilogue at column `ow`, with `sum` the finished sum.
  Stmt Epilogue(const PrimExpr& ow, const PrimExpr& sum) const {
    return EpilogueAt(conv_.oh, ow, sum);
  }
  // The same at row `oh`; (0, p) is position p of the flattened plane where the epilogue runs
  // on the output plane (EpilogueOnOutputPlane).
  Stmt EpilogueAt(const PrimExpr& oh, const PrimExpr& ow, const PrimExpr& sum) const {
    return ConvEpilogue(conv_, oh, ow, sum);
  }

  // A row with few taps (a depthwise 3x3 has 9): every column sums its taps unrolled, in
  // register tiles of whole vectors where all its taps' columns lie inside the input; the edge
  // columns check each tap and run one column at a time. In a row where some taps' rows leave
  // the input (the first and last rows), the tiles keep only the taps whose row is inside (a
  // select fixed for the row).
  Stmt UnrolledRow(const PrimExpr& lo, const PrimExpr& hi) const {
    auto columns = [&](const PrimExpr& begin, const PrimExpr& end, ForKind kind, Stmt body) {
      return ir::For(ow_, begin, end - begin, kind, std::move(body));
    };
    auto row = [&](bool masked_rows) {
      auto unchecked = [&](const PrimExpr& ow) { return UncheckedColumn(ow, masked_rows); };
      TileCarry carry{[&](const PrimExpr& first) { return CarryInit(first, masked_rows); },
                      [&](const PrimExpr& ow) { return UncheckedColumn(ow, masked_rows, true); }};
      bool carries = std::ranges::any_of(CarriedFrom(), [](auto kw) { return kw.has_value(); });
      return ir::Seq({columns(I(0), lo, ForKind::kSerial, CheckedColumn()),
                      UnrolledTiles(lo, hi, unchecked, carries ? &carry : nullptr),
                      columns(hi, conv_.width, ForKind::kSerial, CheckedColumn())});
    };
    if (!conv_.row_ok) return row(false);
    PrimExpr rows_inside = And(Replace(conv_.row_ok, {conv_.kh}, {I(0)}),
                               Replace(conv_.row_ok, {conv_.kh}, {I(conv_.taps_h - 1)}));
    return ir::IfThenElse(rows_inside, row(false), row(true));
  }

  // Columns [lo, hi), each `column(ow)`, in tiles of L columns, then those left over in
  // tiles of L / 2, L / 4, ... (down to kMinRowTile): the narrowest that covers them in one
  // tile, or else the widest that fits the row, the last tile moved back to end at hi (recomputing
  // a few columns, the same values again). A vector loop of unknown length would leave them to a
  // scalar loop: with 16 lanes, most of a row of 28 and all of rows of 14 and 7. A row
  // narrower than every tile takes LLVM's vector loop.
  // With `carry`, each tile (and the vector loop) starts the taps carried from column to
  // column (CarriedFrom) at its first column and computes its columns with carry->column.
  struct TileCarry {
    std::function<Stmt(const PrimExpr&)> init, column;
  };
  Stmt UnrolledTiles(const PrimExpr& lo, const PrimExpr& hi,
                     const std::function<Stmt(const PrimExpr&)>& column,
                     const TileCarry* carry = nullptr) const {
    PrimExpr n = hi - lo;
    PrimExpr left = arith::FloorMod(n, I(lanes_));
    auto tile = [&](int64_t width, const PrimExpr& first) {
      if (!carry) return Loop(lane_, I(width), ForKind::kVectorized, column(first + lane_));
      Stmt lanes = Loop(lane_, I(width), ForKind::kVectorized, carry->column(first + lane_));
      return ir::Allocate(carry_, ir::Seq({carry->init(first), lanes}));
    };
    auto tiles = [&](int64_t width) {
      PrimExpr first = arith::Min(hi - left + t_ * I(width), hi - I(width));
      return Loop(t_, CeilDiv(left, width), ForKind::kSerial, tile(width, first));
    };
    std::vector<int64_t> widths;
    for (int64_t width = kMinRowTile; width < lanes_; width *= 2) widths.push_back(width);
    Stmt rest = ir::For(ow_, hi - left, left, ForKind::kVectorized,
                        carry ? carry->column(ow_) : column(ow_));
    if (carry) rest = ir::Allocate(carry_, ir::Seq({carry->init(hi - left), rest}));
    for (auto it = widths.rbegin(); it != widths.rend(); ++it) {
      int64_t width = *it;
      PrimExpr covers = arith::Binary(ExprKind::kOr, Le(left, I(width)), Lt(n, I(2 * width)));
      PrimExpr take = width == widths.back() ? Le(I(width), n) : And(Le(I(width), n), covers);
      rest = ir::IfThenElse(take, tiles(width), rest);
    }
    PrimExpr whole = arith::FloorDiv(n, I(lanes_));
    Stmt full = Loop(t_, whole, ForKind::kSerial, tile(lanes_, lo + t_ * I(lanes_)));
    return ir::Seq({full, ir::IfThenElse(Lt(I(0), left), rest)});
  }

  // A tap's x at column `ow` and its weight.
  PrimExpr TapX(const PrimExpr& ow, bool clamp_row, int64_t c, int64_t kh, int64_t kw) const {
    return Replace(XAt(ow, clamp_row), {c_, kh_, kw_}, {I(c), I(kh), I(kw)});
  }
  PrimExpr TapWeight(int64_t c, int64_t kh, int64_t kw) const {
    return Replace(WeightAt(), {c_, kh_, kw_}, {I(c), I(kh), I(kw)});
  }

  // Calls `tap(product, kh, kw)` for every tap at column `ow`, in (c, kh, kw) order.
  void ForEachTap(const PrimExpr& ow, bool clamp_row,
                  const std::function<void(PrimExpr, int64_t, int64_t)>& tap) const {
    for (int64_t c = 0; c < conv_.cg; ++c) {
      for (int64_t kh = 0; kh < conv_.taps_h; ++kh) {
        for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
          tap(TapX(ow, clamp_row, c, kh, kw) * TapWeight(c, kh, kw), kh, kw);
        }
      }
    }
  }

  // With a column stride of 2 or more, tap kw at column ow reads the input column that tap
  // CarriedFrom()[kw] (its base one stride further right) read at ow - 1: of a stride-2 3x3's
  // x[2 ow - 1], x[2 ow], x[2 ow + 1], the first is the last of the column before. Loaded, that
  // tap shares its phase with the last one, and LLVM gathered it (6 vgatherqps per 16-column
  // tile in mobilenet_v2's stride-2 depthwise convs); carried in carry_ from column to column
  // (a first-order recurrence) it becomes a lane shift of the vector the last tap loaded.
  std::vector<std::optional<int64_t>> CarriedFrom() const {
    std::vector<std::optional<int64_t>> from(conv_.taps_w);
    if (stride_ < 2) return from;
    arith::Analyzer analyzer;
    std::vector<PrimExpr> base;
    for (int64_t kw = 0; kw < conv_.taps_w; ++kw) base.push_back(analyzer.Simplify(Base(I(kw))));
    for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
      for (int64_t next = kw + 1; next < conv_.taps_w && !from[kw]; ++next) {
        PrimExpr step = analyzer.Simplify(base[next] - base[kw]);
        if (step->is_const_int(stride_)) from[kw] = next;
      }
    }
    return from;
  }
  int64_t CarrySlot(int64_t c, int64_t kh, int64_t kw) const {
    return (c * conv_.taps_h + kh) * conv_.taps_w + kw;
  }
  // The carried taps' x at a tile's first column, loaded.
  Stmt CarryInit(const PrimExpr& first, bool masked_rows) const {
    std::vector<std::optional<int64_t>> from = CarriedFrom();
    std::vector<Stmt> stmts;
    for (int64_t c = 0; c < conv_.cg; ++c) {
      for (int64_t kh = 0; kh < conv_.taps_h; ++kh) {
        for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
          if (!from[kw]) continue;
          stmts.push_back(
              ir::Store(carry_, {I(CarrySlot(c, kh, kw))}, TapX(first, masked_rows, c, kh, kw)));
        }
      }
    }
    return ir::Seq(stmts);
  }

  // Column `ow`, every tap's column inside the input; with `masked_rows`, only the taps whose
  // row is inside count (x read at a clamped row for the others, and not added). With
  // `carried`, the taps of CarriedFrom() take x from carry_, and each slot then takes the x
  // its tap reads at the next column: its partner's here.
  Stmt UncheckedColumn(const PrimExpr& ow, bool masked_rows, bool carried = false) const {
    std::vector<std::optional<int64_t>> from(conv_.taps_w);
    if (carried) from = CarriedFrom();
    auto x = [&](int64_t c, int64_t kh, int64_t kw) {
      if (from[kw]) return arith::Load(carry_, {I(CarrySlot(c, kh, kw))});
      return TapX(ow, masked_rows, c, kh, kw);
    };
    PrimExpr sum = arith::FloatImm(0);
    for (int64_t c = 0; c < conv_.cg; ++c) {
      for (int64_t kh = 0; kh < conv_.taps_h; ++kh) {
        for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
          PrimExpr product = x(c, kh, kw) * TapWeight(c, kh, kw);
          if (masked_rows) {
            PrimExpr row_inside = Replace(conv_.row_ok, {conv_.kh}, {I(kh)});
            product = arith::Select(row_inside, product, arith::FloatImm(0));
          }
          sum = sum + product;
        }
      }
    }
    std::vector<Stmt> stmts = {Epilogue(ow, arith::Cast(conv_.acc_t, sum))};
    // In increasing kw: a partner that is carried too is read before its own slot changes.
    for (int64_t c = 0; c < conv_.cg; ++c) {
      for (int64_t kh = 0; kh < conv_.taps_h; ++kh) {
        for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
          if (from[kw])
            stmts.push_back(ir::Store(carry_, {I(CarrySlot(c, kh, kw))}, x(c, kh, *from[kw])));
        }
      }
    }
    return ir::Seq(stmts);
  }

  Stmt CheckedColumn() const {
    PrimExpr acc = arith::Load(one_, {I(0)});
    std::vector<Stmt> stmts = {ir::Store(one_, {I(0)}, arith::FloatImm(0))};
    ForEachTap(ow_, false, [&](PrimExpr product, int64_t kh, int64_t kw) {
      PrimExpr inside =
          And(conv_.row_ok ? Replace(conv_.row_ok, {conv_.kh}, {I(kh)}) : nullptr,
              conv_.col_ok ? Replace(conv_.col_ok, {conv_.ow, conv_.kw}, {ow_, I(kw)}) : nullptr);
      Stmt add = ir::Store(one_, {I(0)}, acc + product);
      stmts.push_back(inside ? ir::IfThenElse(inside, add) : add);
    });
    stmts.push_back(Epilogue(ow_, arith::Cast(conv_.acc_t, acc)));
    return ir::Allocate(one_, ir::Seq(stmts));
  }

  // The plane form needs the weights as constants, all finite (a tap in the padding adds
  // 0 * w), and input rows and columns of constant stride, dilation and padding, the columns'
  // stride 1. (With a column stride of 2, copying each input row apart by column phase, so
  // that the taps read consecutive columns, cost more than the row form's gathers: 0.8
  // against 0.4 ms for 96 channels of 112 x 112.)
  bool TakesPlane(const ir::NDArray* weights) {
    if (!IsWeightConstant(conv_, weights)) return false;
    const float* w = weights->data<float>();
    for (int64_t i = 0; i < weights->num_elements(); ++i) {
      if (!std::isfinite(w[i])) return false;
    }
    rows_ = AffineAxisOf(conv_.x_indices[2], conv_.oh, conv_.kh);
    cols_ = AffineAxisOf(conv_.x_indices[3], conv_.ow, conv_.kw);
    if (!rows_ || !cols_ || cols_->stride != 1) return false;
    flat_ = rows_->stride == 1 && OnOutputPlane(conv_, conv_.x) && EpilogueOnOutputPlane(conv_);
    return true;
  }

  // Padded columns: the output's, and those the taps reach past them.
  PrimExpr PlaneWidth() const { return conv_.width + I((conv_.taps_w - 1) * cols_->dilation); }
  // The input rows one output row reads.
  int64_t Window() const { return (conv_.taps_h - 1) * rows_->dilation + 1; }

  // for n; for m (parallel): the plane form where a row is at most one tile wide and pad holds
  // the input rows of one output row (a padded row of every channel, `Window()` times), else
  // `row` row by row.
  Stmt OverPlanes(Stmt row) const {
    PrimExpr per_row = I(conv_.cg) * PlaneWidth();
    PrimExpr fits = And(Le(conv_.width, I(lanes_)), Le(I(Window()) * per_row, I(kPlaneFloats)));
    // B: as many output rows as pad holds the input rows of, (B - 1) * sh + Window().
    PrimExpr most =
        arith::FloorDiv(arith::FloorDiv(I(kPlaneFloats), per_row) - I(Window()), I(rows_->stride)) +
        I(1);
    PrimExpr bands = arith::FloorDiv(conv_.height + band_rows_ - I(1), band_rows_);
    Stmt band = ir::Let(oh0_, band_ * band_rows_, ir::Seq({FillBand(), BandRows()}));
    PrimExpr pad_rows = (band_rows_ - I(1)) * I(rows_->stride) + I(Window());
    Stmt plane =
        ir::Let(pw_, PlaneWidth(),
                ir::Let(band_rows_, arith::Min(conv_.height, most),
                        ir::Let(pad_rows_, pad_rows, Loop(band_, bands, ForKind::kSerial, band))));
    Stmt rows = Loop(conv_.oh, conv_.height, ForKind::kSerial, std::move(row));
    Stmt channel = ir::IfThenElse(fits, ir::Allocate(pad_, ir::Allocate(sums_, plane)), rows);
    if (flat_) {
      // Decided here where the plane's size is a constant.
      PrimExpr flat_fits = arith::Analyzer().Simplify(FlatFits());
      Stmt flat = ir::Allocate(flat_plane_, FlatPlane());
      if (flat_fits->kind != ExprKind::kIntImm) {
        channel = ir::IfThenElse(flat_fits, flat, channel);
      } else if (flat_fits->int_value != 0) {
        channel = flat;
      }
    }
    return Loop(conv_.n, conv_.batch, ForKind::kSerial,
                Loop(conv_.m, conv_.channels, ForKind::kParallel, channel));
  }

  // The flat form: the plane's positions p = oh * W + ow in whole vectors, tap (kh, kw) read at
  // p + Offset(kh, kw) in the copy of its column offset, with the rows above and below the
  // plane zero, Front() and Back() of them.
  PrimExpr Plane() const { return conv_.height * conv_.width; }
  int64_t ColumnOffset(int64_t kw) const { return kw * cols_->dilation + cols_->base; }
  PrimExpr Offset(int64_t kh, int64_t kw) const {
    return I(kh * rows_->dilation + rows_->base) * conv_.width + I(ColumnOffset(kw));
  }
  PrimExpr Front() const { return arith::Max(I(0), I(0) - Offset(0, 0)); }
  PrimExpr Back() const { return arith::Max(I(0), Offset(conv_.taps_h - 1, conv_.taps_w - 1)); }
  // Each copy starts on a cache line, and so does its position 0: split, the copies' stores
  // cost 384 channels of 14 x 14 1.05x the time.
  PrimExpr FlatFront() const { return CeilDiv(Front(), kLineFloats) * I(kLineFloats); }
  PrimExpr CopySize() const {
    return CeilDiv(FlatFront() + Plane() + Back(), kLineFloats) * I(kLineFloats);
  }

  // Copies of every tap column's (taps_w per channel) in flat_plane_, and every column offset
  // within a row (a wrapped read lands in the next or previous row).
  PrimExpr FlatFits() const {
    int64_t widest = 0;
    for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
      widest = std::max(widest, std::abs(ColumnOffset(kw)));
    }
    PrimExpr copies = I(conv_.taps_w * conv_.cg) * CopySize();
    return And(Lt(I(widest), conv_.width), Le(copies, I(kPlaneFloats)));
  }

  // flat_plane_[kw, c, j]: position j of channel c's copy for tap column kw, j in [-front,
  // copy_size - front).
  std::vector<PrimExpr> FlatAt(int64_t kw, int64_t c, const PrimExpr& j) const {
    return {I(kw * conv_.cg + c) * copy_size_ + front_ + j};
  }

  // One channel m: its copies filled, then its positions in tiles of whole vectors, each
  // summing its taps in (c, kh, kw) order and running the epilogue at [n, m, 0, p].
  Stmt FlatPlane() const {
    auto position = [&](const PrimExpr& p) {
      PrimExpr sum = arith::FloatImm(0);
      for (int64_t c = 0; c < conv_.cg; ++c) {
        for (int64_t kh = 0; kh < conv_.taps_h; ++kh) {
          for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
            PrimExpr x = arith::Load(flat_plane_, FlatAt(kw, c, p + Offset(kh, kw)));
            sum = sum + x * TapWeight(c, kh, kw);
          }
        }
      }
      return EpilogueAt(I(0), p, arith::Cast(conv_.acc_t, sum));
    };
    Stmt plane = ir::Seq({FillFlat(), UnrolledTiles(I(0), Plane(), position)});
    return ir::Let(front_, FlatFront(), ir::Let(copy_size_, CopySize(), plane));
  }

  // Each copy: the plane (x[n, ch, 0, j] is position j), zero rows before and after it, and
  // the columns that only a wrapped read of its tap column reaches zeroed in every row: a tap
  // d = ColumnOffset(kw) columns to the side reads past a row's end at its last -d columns
  // (d < 0), or its first d (d > 0), the previous or next row's other end. A tap in the
  // padding adds 0 * w, which leaves the sum as skipping it does because w is finite.
  Stmt FillFlat() const {
    // One pass over the positions stores every copy's element, sharing the load of x.
    auto every_copy = [&](const std::function<PrimExpr(int64_t c)>& value, const PrimExpr& j) {
      std::vector<Stmt> stores;
      for (int64_t c = 0; c < conv_.cg; ++c) {
        for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
          stores.push_back(ir::Store(flat_plane_, FlatAt(kw, c, j), value(c)));
        }
      }
      return ir::Seq(stores);
    };
    auto zero = [&](const PrimExpr& j) {
      return every_copy([](int64_t) { return arith::FloatImm(0); }, j);
    };
    auto copy = [&](const PrimExpr& j) {
      auto x = [&](int64_t c) {
        PrimExpr channel = Replace(conv_.x_indices[1], {conv_.c}, {I(c)});
        return arith::Load(conv_.x, {conv_.n, channel, I(0), j});
      };
      return every_copy(x, j);
    };
    std::vector<Stmt> wrapped;
    for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
      int64_t d = ColumnOffset(kw);
      for (int64_t i = 0; i < std::abs(d); ++i) {
        PrimExpr column = d < 0 ? conv_.width + I(d + i) : I(i);
        for (int64_t c = 0; c < conv_.cg; ++c) {
          wrapped.push_back(
              ir::Store(flat_plane_, FlatAt(kw, c, r_ * conv_.width + column), arith::FloatImm(0)));
        }
      }
    }
    return ir::Seq({UnrolledTiles(I(0) - front_, I(0), zero), UnrolledTiles(I(0), Plane(), copy),
                    UnrolledTiles(Plane(), copy_size_ - front_, zero),
                    Loop(r_, conv_.height, ForKind::kSerial, ir::Seq(wrapped))});
  }

  // pad[c, r, j]: channel c's row r of the band, column j.
  std::vector<PrimExpr> PadAt(int64_t c, const PrimExpr& r, const PrimExpr& j) const {
    return {(I(c) * pad_rows_ + r) * pw_ + j};
  }

  // Row r of the band: where its input row lies inside the input, copied from it (padded
  // column j is input column j + base) in tiles of whole vectors, the columns in the padding
  // zeroed; a row in the padding zeroed whole.
  Stmt FillBand() const {
    PrimExpr ih = oh0_ * I(rows_->stride) + r_ + I(rows_->base);
    const int64_t base = cols_->base;
    // The columns inside the input, [first, end).
    const int64_t first = std::max<int64_t>(0, -base);
    PrimExpr end = arith::Max(I(0), arith::Min(pw_, conv_.x->shape[3] - I(base)));
    auto range = [&](const PrimExpr& begin, const PrimExpr& stop, ForKind kind, Stmt body) {
      return ir::For(j_, begin, stop - begin, kind, std::move(body));
    };
    std::vector<Stmt> inside, outside;
    for (int64_t c = 0; c < conv_.cg; ++c) {
      PrimExpr channel = Replace(conv_.x_indices[1], {conv_.c}, {I(c)});
      auto copy = [&](const PrimExpr& j) {
        PrimExpr x = arith::Load(conv_.x, {conv_.n, channel, ih, j + I(base)});
        return ir::Store(pad_, PadAt(c, r_, j), x);
      };
      Stmt zero = ir::Store(pad_, PadAt(c, r_, j_), arith::FloatImm(0));
      inside.push_back(range(I(0), arith::Min(I(first), pw_), ForKind::kSerial, zero));
      inside.push_back(UnrolledTiles(I(first), arith::Max(I(first), end), copy));
      inside.push_back(range(end, pw_, ForKind::kSerial, zero));
      outside.push_back(range(I(0), pw_, ForKind::kVectorized, zero));
    }
    PrimExpr row_inside = And(Le(I(0), ih), Lt(ih, conv_.x->shape[2]));
    return Loop(r_, pad_rows_, ForKind::kSerial,
                ir::IfThenElse(row_inside, ir::Seq(inside), ir::Seq(outside)));
  }

  // The sum of every tap, in (c, kh, kw) order, of the output element whose tap (0, 0) reads
  // row `row` of the band at column `col`.
  PrimExpr PadSum(const PrimExpr& row, const PrimExpr& col) const {
    PrimExpr sum = arith::FloatImm(0);
    for (int64_t c = 0; c < conv_.cg; ++c) {
      for (int64_t kh = 0; kh < conv_.taps_h; ++kh) {
        PrimExpr r = row + I(kh * rows_->dilation);
        for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
          PrimExpr x = arith::Load(pad_, PadAt(c, r, col + I(kw * cols_->dilation)));
          sum = sum + x * arith::Load(conv_.w, {conv_.m, I(c), I(kh), I(kw)});
        }
      }
    }
    return sum;
  }

  // The distance in pad (and in sums) from one output row of the band to the next.
  PrimExpr RowPitch() const { return I(rows_->stride) * pw_; }

  // The band's sums, flattened: sums[q] for q in [0, (B - 1) * sh * PW + OW), q = (oh - oh0) *
  // sh * PW + ow for output column ow of row oh. Its last read, at the band's last column and
  // tap, is pad's last padded column of its last row.
  Stmt BandSums() const {
    // Row 0 at column q is row q / PW at column q % PW: pad's rows are PW apart.
    auto column = [&](const PrimExpr& q) { return ir::Store(sums_, {q}, PadSum(I(0), q)); };
    PrimExpr rows = arith::Min(band_rows_, conv_.height - oh0_);
    return UnrolledTiles(I(0), (rows - I(1)) * RowPitch() + conv_.width, column);
  }

  // The band's output rows, each in tiles of L columns. Rows narrower than a vector take their
  // sums from BandSums, whose tiles are whole vectors (1.3x as fast on 576 channels of 14 x 14
  // and 960 of 7 x 7 at 512 bits); wider ones sum their taps in their own tiles, whose vectors
  // are whole already (flattened, 192 channels of 28 x 28 ran no faster: the sums' round trip
  // through memory costs what the band's dropped columns save).
  Stmt BandRows() const {
    PrimExpr row = (conv_.oh - oh0_) * I(rows_->stride);
    auto summed = [&](const PrimExpr& ow) {
      PrimExpr sum = arith::Load(sums_, {row * pw_ + ow});
      return Epilogue(ow, arith::Cast(conv_.acc_t, sum));
    };
    auto summing = [&](const PrimExpr& ow) {
      return Epilogue(ow, arith::Cast(conv_.acc_t, PadSum(row, ow)));
    };
    auto rows = [&](const std::function<Stmt(const PrimExpr&)>& column) {
      return ir::For(conv_.oh, oh0_, arith::Min(band_rows_, conv_.height - oh0_), ForKind::kSerial,
                     UnrolledTiles(I(0), conv_.width, column));
    };
    Stmt flat = ir::Seq({BandSums(), rows(summed)});
    if (conv_.width->kind == ExprKind::kIntImm) {
      return conv_.width->int_value < vector_lanes_ ? flat : rows(summing);
    }
    return ir::IfThenElse(Lt(conv_.width, I(vector_lanes_)), flat, rows(summing));
  }

  // Columns [begin, end) accumulated in out, in place (every epilogue statement stores to
  // the element it reads).
  Stmt InPlace(const PrimExpr& begin, const PrimExpr& end) const {
    Stmt zero = Columns(begin, end, ir::Store(Out(), At(ow_), arith::FloatImm(0)));
    PrimExpr sum = arith::Load(Out(), At(ow_)) + Product(ow_);
    Stmt taps = Columns(arith::Max(First(kw_), begin), arith::Min(End(kw_), end),
                        ir::Store(Out(), At(ow_), sum));
    PrimExpr done = arith::Cast(conv_.acc_t, arith::Load(Out(), At(ow_)));
    return ir::Seq({zero, OverTaps(taps), Columns(begin, end, Epilogue(ow_, done))});
  }

  // Columns [lo, hi), every tap inside, at least one tile wide, in tiles of L = acc's size
  // that stay in registers; the last tile moves back to end at hi, recomputing a few columns
  // (the same values again).
  Stmt Tiles(const PrimExpr& lo, const PrimExpr& hi, const Buffer& acc_buffer) const {
    int64_t lanes = acc_buffer->shape[0]->int_value;
    PrimExpr ow = arith::Min(lo + t_ * I(lanes), hi - I(lanes)) + lane_;
    PrimExpr acc = arith::Load(acc_buffer, {lane_});
    auto over_lanes = [&](Stmt body) {
      return Loop(lane_, I(lanes), ForKind::kVectorized, std::move(body));
    };
    Stmt zero = over_lanes(ir::Store(acc_buffer, {lane_}, arith::FloatImm(0)));
    Stmt taps = over_lanes(ir::Store(acc_buffer, {lane_}, acc + Product(ow)));
    Stmt epilogue = over_lanes(Epilogue(ow, arith::Cast(conv_.acc_t, acc)));
    Stmt tile = ir::Allocate(acc_buffer, ir::Seq({zero, OverTaps(taps), epilogue}));
    return Loop(t_, CeilDiv(hi - lo, lanes), ForKind::kSerial, tile);
  }

  const Conv& conv_;
  const int64_t lanes_;         // L: columns per register tile, row_vectors vectors of f32
  const int64_t vector_lanes_;  // f32 per vector register
  const bool unroll_taps_, parallel_rows_;
  bool plane_ = false;
  bool flat_ = false;  // whether the plane form may take the flat form (TakesPlane)
  std::optional<AffineAxis> rows_, cols_;  // the plane form's input rows and columns
  int64_t stride_ = 1;
  PrimExpr ow_ = arith::MakeVar("ow"), t_ = arith::MakeVar("owt"), lane_ = arith::MakeVar("lane");
  PrimExpr c_ = arith::MakeVar("rc"), kh_ = arith::MakeVar("rkh"), kw_ = arith::MakeVar("rkw");
  Buffer acc_ = arith::MakeBuffer("acc", DataType::Float(32), {I(lanes_)});
  Buffer half_ = arith::MakeBuffer("acc", DataType::Float(32), {I(lanes_ / 2)});
  Buffer one_ = arith::MakeBuffer("acc", DataType::Float(32), {I(1)});
  // The carried taps' x (CarriedFrom), a slot per (c, kh, kw).
  Buffer carry_ =
      arith::MakeBuffer("carry", DataType::Float(32), {I(conv_.cg * conv_.taps_h * conv_.taps_w)});
  // The plane form's band of padded input rows, its columns and rows, and its output rows.
  Buffer pad_ = arith::MakeBuffer("pad", DataType::Float(32), {I(kPlaneFloats)});
  // The band's sums (BandSums), at most as many as pad's floats.
  Buffer sums_ = arith::MakeBuffer("sums", DataType::Float(32), {I(kPlaneFloats)});
  // The flat form's copies of the plane.
  Buffer flat_plane_ = arith::MakeBuffer("flat", DataType::Float(32), {I(kPlaneFloats)});
  PrimExpr pw_ = arith::MakeVar("pw"), pad_rows_ = arith::MakeVar("pad_rows");
  PrimExpr band_ = arith::MakeVar("band"), band_rows_ = arith::MakeVar("band_rows");
  PrimExpr oh0_ = arith::MakeVar("oh0"), r_ = arith::MakeVar("r"), j_ = arith::MakeVar("j");
  PrimExpr front_ = arith::MakeVar("front"), copy_size_ = arith::MakeVar("copy_size");
};

// Depthwise convs on small planes, with channels in the vector lanes (what ORT's NCHWc
// layout does across a network, here inside one kernel):
//
//   for n; for b (a block of L channels, parallel):
//     wt[k, l] = w[b * L + l, 0, kh, kw] for every tap k = (kh, kw)
//     pad = 0; pad[r, j, l] = x[n, b * L + l, r + base_h, j + base_w] where that is inside x
//     for oh; for ow; for l (vectorized):
//       sum of pad[oh * sh + kh * dh, ow * sw + kw * dw, l] * wt[k, l] in (kh, kw) order
//       epilogue at [n, b * L + l, oh, ow]   (AVX-512: through a transpose, see Sums)
//
// Every load of the sums is a whole vector at any stride and plane width; the row form's
// vectors are positions of a row, of which a row of 7 fills 7 of 16 lanes and a column
// stride of 2 shuffles. The copy into pad gathers (a lane per channel plane) and the
// epilogue's stores scatter, once an element each, but on AVX-512, where both go through
// transposes in registers (Fill, Sums); so the form pays where the sums' vectors are what the
// row form loses: rows at most half a vector wide (LanesByDefault). A tap in the padding adds
// 0 * w, which leaves the sum as skipping it does because w is finite (the plane form's
// condition).
class LaneConv {
 public:
  LaneConv(const Conv& conv, const ir::Target& target, const ir::NDArray* weights)
      : conv_(conv), lanes_(VectorLanes(target)) {
    takes_ = Matches(weights);
  }

  // Whether the form takes the conv: one input channel per output channel (its own), whole
  // blocks of L channels, constant finite weights, affine rows and columns.
  bool Takes() const { return takes_; }

  // By default where the row form's vectors are emptiest, on output rows at most half a vector
  // wide (3x3 depthwise, AVX-512, alone: 960 channels of 7 x 7 in 0.74x the row form's time,
  // 576 of 14 -> 7 at stride 2 in 0.57x; but 384 of 14 x 14 in 1.2x, 192 of 28 -> 14 at
  // stride 2 in 1.1x). A symbolic width decides at run time (Build).
  bool LanesByDefault() const {
    if (!takes_) return false;
    return conv_.width->kind != ExprKind::kIntImm || 2 * conv_.width->int_value <= lanes_;
  }

  // The form where pad holds the padded plane of a block (and, with a symbolic width, the rows
  // are at most half a vector wide), `other` (the row form) elsewhere.
  Stmt Build(Stmt other) const {
    PrimExpr fits = Le(PadRows() * PadColumns() * I(lanes_), I(kLaneFloats));
    if (conv_.width->kind != ExprKind::kIntImm) {
      fits = And(fits, Le(I(2) * conv_.width, I(lanes_)));
    }
    Stmt block = ir::Allocate(pad_, ir::Seq({Weights(), Fill(), Sums()}));
    block = ir::Allocate(wt_, Wide() ? ir::Allocate(stage_, block) : block);
    Stmt blocks = Loop(
        conv_.n, conv_.batch, ForKind::kSerial,
        Loop(b_, arith::FloorDiv(conv_.channels, I(lanes_)), ForKind::kParallel, std::move(block)));
    return ir::IfThenElse(fits, blocks, std::move(other));
  }

 private:
  bool Matches(const ir::NDArray* weights) {
    if (conv_.cg != 1 || conv_.taps_h * conv_.taps_w > kMaxUnrolledTaps || conv_.epilogue.empty() ||
        !IsWeightConstant(conv_, weights)) {
      return false;
    }
    if (conv_.channels->kind != ExprKind::kIntImm || conv_.channels->int_value % lanes_ != 0) {
      return false;
    }
    const float* w = weights->data<float>();
    for (int64_t i = 0; i < weights->num_elements(); ++i) {
      if (!std::isfinite(w[i])) return false;
    }
    arith::Analyzer analyzer;
    PrimExpr channel = analyzer.Simplify(Replace(conv_.x_indices[1], {conv_.c}, {I(0)}));
    if (!IsVar(channel, conv_.m)) return false;
    rows_ = AffineAxisOf(conv_.x_indices[2], conv_.oh, conv_.kh);
    cols_ = AffineAxisOf(conv_.x_indices[3], conv_.ow, conv_.kw);
    return rows_ && cols_;
  }

  // The padded plane: input rows (columns) base .. base + PadRows() - 1, those the taps reach.
  static PrimExpr Reach(const PrimExpr& out, const AffineAxis& axis, int64_t taps) {
    return (out - I(1)) * I(axis.stride) + I((taps - 1) * axis.dilation + 1);
  }
  PrimExpr PadRows() const { return Reach(conv_.height, *rows_, conv_.taps_h); }
  PrimExpr PadColumns() const { return Reach(conv_.width, *cols_, conv_.taps_w); }
  // pad[r, j, l]
  PrimExpr PadAt(const PrimExpr& r, const PrimExpr& j) const {
    return (r * PadColumns() + j) * I(lanes_) + lane_;
  }
  PrimExpr Channel() const { return b_ * I(lanes_) + lane_; }
  Stmt OverLanes(Stmt body) const { return Loop(lane_, I(lanes_), ForKind::kVectorized, body); }

  // The block's weights, a vector per tap.
  Stmt Weights() const {
    std::vector<Stmt> taps;
    for (int64_t kh = 0; kh < conv_.taps_h; ++kh) {
      for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
        PrimExpr w = arith::Load(conv_.w, {Channel(), I(0), I(kh), I(kw)});
        taps.push_back(OverLanes(ir::Store(wt_, {I(Tap(kh, kw) * lanes_) + lane_}, w)));
      }
    }
    return ir::Seq(taps);
  }
  int64_t Tap(int64_t kh, int64_t kw) const { return kh * conv_.taps_w + kw; }

  // pad zeroed, then the input rows and columns it holds copied in, a vector of channels per
  // input element: gathered, a lane per channel plane, or on AVX-512, where the plane holds a
  // vector's lanes of positions and `stage` all of them, transposed in registers from the
  // block's planes to `stage` [p, l] (p = ih * IW + iw) first and copied as whole vectors.
  Stmt Fill() const {
    PrimExpr floats = PadRows() * PadColumns() * I(lanes_);
    Stmt zero =
        ir::For(j_, I(0), floats, ForKind::kVectorized, ir::Store(pad_, {j_}, arith::FloatImm(0)));
    auto inside = [](const PrimExpr& extent, const AffineAxis& axis, const PrimExpr& reach) {
      PrimExpr first = arith::Max(I(0), I(axis.base));
      return std::pair{first, arith::Max(first, arith::Min(extent, reach + I(axis.base)))};
    };
    auto [row0, row_end] = inside(conv_.x->shape[2], *rows_, PadRows());
    auto [col0, col_end] = inside(conv_.x->shape[3], *cols_, PadColumns());
    auto copy = [&](const PrimExpr& x) {
      Stmt store = ir::Store(pad_, {PadAt(ih_ - I(rows_->base), iw_ - I(cols_->base))}, x);
      return ir::For(ih_, row0, row_end - row0, ForKind::kSerial,
                     ir::For(iw_, col0, col_end - col0, ForKind::kSerial, OverLanes(store)));
    };
    Stmt gathered = ir::Seq({zero, copy(arith::Load(conv_.x, {conv_.n, Channel(), ih_, iw_}))});
    if (!Wide()) return gathered;
    const PrimExpr& width = conv_.x->shape[3];
    PrimExpr positions = conv_.x->shape[2] * width;
    PrimExpr p0 = arith::Min(t_ * I(lanes_), positions - I(lanes_));
    PrimExpr transpose = arith::Call(DataType::Int(32), ir::intrinsic::kTranspose,
                                     {arith::Load(stage_, {p0 * I(lanes_)}),
                                      arith::Load(conv_.x, {conv_.n, b_ * I(lanes_), I(0), p0}),
                                      I(lanes_), I(lanes_), positions});
    Stmt transposes =
        Loop(t_, CeilDiv(positions, lanes_), ForKind::kSerial, ir::Evaluate(transpose));
    Stmt staged = ir::Seq(
        {zero, transposes, copy(arith::Load(stage_, {(ih_ * width + iw_) * I(lanes_) + lane_}))});
    PrimExpr fits = And(Le(I(lanes_), positions), Le(positions * I(lanes_), I(kLaneFloats)));
    return ir::IfThenElse(fits, staged, gathered);
  }
  // AVX-512: blocks of 16 x 16 transposed in registers cost less than their gathers and
  // scatters. (On AVX2 the tiler's transposes won nothing against its scatters.)
  bool Wide() const { return lanes_ >= 16; }

  // Each output element's taps summed in (kh, kw) order, a vector of the block's channels.
  PrimExpr Sum() const {
    PrimExpr sum = arith::FloatImm(0);
    for (int64_t kh = 0; kh < conv_.taps_h; ++kh) {
      for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
        PrimExpr r = conv_.oh * I(rows_->stride) + I(kh * rows_->dilation);
        PrimExpr j = conv_.ow * I(cols_->stride) + I(kw * cols_->dilation);
        PrimExpr w = arith::Load(wt_, {I(Tap(kh, kw) * lanes_) + lane_});
        sum = sum + arith::Load(pad_, {PadAt(r, j)}) * w;
      }
    }
    return sum;
  }
  Stmt OverPlane(Stmt element) const {
    return Loop(conv_.oh, conv_.height, ForKind::kSerial,
                Loop(conv_.ow, conv_.width, ForKind::kSerial, OverLanes(std::move(element))));
  }

  // The sums and the epilogue at channel m. Its stores to out[n, m, oh, ow] with channels in
  // the lanes are scatters, an element at a time: 960 channels on 7 x 7 took twice ORT's time
  // (bench/RESULTS.md, thirty-fourth round). Where the plane holds a vector's lanes of positions
  // and the epilogue runs at flattened positions, the sums go to `stage` [q, l] (q = oh * OW +
  // ow) as whole vectors instead, are transposed in registers to `channels` [l, q], and each
  // channel's epilogue then runs over its positions in whole vectors (AVX-512 only: Wide).
  Stmt Sums() const {
    Stmt scattered = OverPlane(
        ir::Let(conv_.m, Channel(),
                ConvEpilogue(conv_, conv_.oh, conv_.ow, arith::Cast(conv_.acc_t, Sum()))));
    if (!Wide() || !EpilogueOnOutputPlane(conv_)) return scattered;
    PrimExpr positions = conv_.height * conv_.width;
    PrimExpr q = conv_.oh * conv_.width + conv_.ow;
    Stmt to_stage = OverPlane(ir::Store(stage_, {q * I(lanes_) + lane_}, Sum()));
    PrimExpr sum = arith::Cast(conv_.acc_t, arith::Load(channels_, {lane_ * I(ChannelRow()) + q_}));
    Stmt channel = Loop(q_, positions, ForKind::kVectorized, ConvEpilogue(conv_, I(0), q_, sum));
    Stmt epilogues = Loop(lane_, I(lanes_), ForKind::kSerial, ir::Let(conv_.m, Channel(), channel));
    Stmt staged = ir::Allocate(channels_, ir::Seq({to_stage, Transposes(positions), epilogues}));
    return ir::IfThenElse(Le(I(lanes_), positions), staged, scattered);
  }

  // channels[l, q] = stage[q, l] by blocks of L positions, the last moved back to end at the
  // plane's end (transposing a few positions again).
  Stmt Transposes(const PrimExpr& positions) const {
    PrimExpr q0 = arith::Min(t_ * I(lanes_), positions - I(lanes_));
    PrimExpr transpose =
        arith::Call(DataType::Int(32), ir::intrinsic::kTranspose,
                    {arith::Load(channels_, {q0}), arith::Load(stage_, {q0 * I(lanes_)}), I(lanes_),
                     I(ChannelRow()), I(lanes_)});
    return Loop(t_, CeilDiv(positions, lanes_), ForKind::kSerial, ir::Evaluate(transpose));
  }
  // A row of `channels`: the most positions pad's bound allows (its floats over L), and a
  // vector more, so that the rows of a transposed block are not a multiple of 4 KiB
  // apart (they would share the L1's sets).
  int64_t ChannelRow() const { return kLaneFloats / lanes_ + lanes_; }

  const Conv& conv_;
  const int64_t lanes_;  // L: channels per block, f32 per vector register
  bool takes_ = false;
  std::optional<AffineAxis> rows_, cols_;
  PrimExpr b_ = arith::MakeVar("cb"), lane_ = arith::MakeVar("lane"), j_ = arith::MakeVar("j");
  PrimExpr ih_ = arith::MakeVar("ih"), iw_ = arith::MakeVar("iw");
  PrimExpr q_ = arith::MakeVar("q"), t_ = arith::MakeVar("qt");
  Buffer wt_ = arith::MakeBuffer("wt", DataType::Float(32), {I(kMaxUnrolledTaps * lanes_)});
  Buffer pad_ = arith::MakeBuffer("pad", DataType::Float(32), {I(kLaneFloats)});
  // The staged input (Fill), then the staged sums (Sums): the output plane's positions are at
  // most pad's, so fit its floats.
  Buffer stage_ = arith::MakeBuffer("stage", DataType::Float(32), {I(kLaneFloats)});
  Buffer channels_ = arith::MakeBuffer("channels", DataType::Float(32), {I(lanes_ * ChannelRow())});
};

// The column-lanes form, for a dense conv of few taps (mobilenet_v2's stem: 3 -> 32 channels,
// 3x3 at stride 2): output columns in the vector lanes, and a register tile of T output
// channels x V vectors of columns, so that each vector of input serves T channels. The tiler
// keeps output channels in its lanes, so its tiles leave through a transpose to NCHW (a gather
// per channel); with 27 taps that transpose costs as much as the multiply-adds. Here the lanes
// are stored as they are. Each output row first copies its input rows into `rows`, zero where
// the taps reach past the input, and split by phase for a column stride s (phase p holds the
// input columns j * s + p), so that every tap reads whole vectors at consecutive columns:
//
//   for n
//     for oh (parallel)
//       rows[c, kh, p][j] = x[n, c, ih(oh, kh), (j + f0) * s + p], zero outside the input
//       for ocb (blocks of T output channels), owt (tiles of V * lanes columns, the last
//       moved back to end at the row's end)
//         acc[t][lane] = sum over c, kh, kw of
//                        rows[c, kh, p(kw)][col + f(kw) - f0] * w[m_t, c, kh, kw]
//         epilogue(acc[t][lane]) stored to out[n, m_t, oh, col]      (col = ow0 + lane)
//
// where tap kw reads input column col * s + q(kw), q = kw * dilation + base = f * s + p. Each
// output element sums its products in (c, kh, kw) order.
class ColumnConv {
 public:
  ColumnConv(const Conv& conv, const ir::Target& target, const ConvKnobs& knobs)
      : conv_(conv),
        tile_channels_(knobs.column_channels),
        tile_cols_(knobs.column_vectors * VectorLanes(target)) {
    takes_ = Matches();
  }

  // Whether the form takes the conv: a register tile asked for, one group, constant channel
  // counts, affine rows and columns.
  bool Takes() const { return takes_; }

  // The form where `rows` holds the row's input rows and the row holds a whole tile, `other`
  // elsewhere.
  Stmt Build(Stmt other) const {
    PrimExpr fits =
        And(Le(I(RowCount()) * RowLength(), I(kColumnRowFloats)), Le(I(tile_cols_), conv_.width));
    Stmt row = ir::Allocate(rows_, ir::Seq({Fill(), Blocks()}));
    Stmt all = Loop(conv_.n, conv_.batch, ForKind::kSerial,
                    Loop(conv_.oh, conv_.height, ForKind::kParallel, std::move(row)));
    return ir::IfThenElse(fits, std::move(all), std::move(other));
  }

 private:
  bool Matches() {
    if (tile_channels_ < 1 || conv_.cg * conv_.taps_h * conv_.taps_w > kMaxUnrolledTaps ||
        conv_.channels->kind != ExprKind::kIntImm || conv_.x->shape[1]->kind != ExprKind::kIntImm ||
        conv_.x->shape[1]->int_value != conv_.cg) {
      return false;
    }
    arith::Analyzer analyzer;
    if (!IsVar(analyzer.Simplify(conv_.x_indices[1]), conv_.c)) return false;
    row_axis_ = AffineAxisOf(conv_.x_indices[2], conv_.oh, conv_.kh);
    col_axis_ = AffineAxisOf(conv_.x_indices[3], conv_.ow, conv_.kw);
    return row_axis_ && col_axis_;
  }

  int64_t Stride() const { return col_axis_->stride; }
  // Tap kw reads input column ow * s + Q(kw), Q = F * s + P with 0 <= P < s.
  int64_t Q(int64_t kw) const { return kw * col_axis_->dilation + col_axis_->base; }
  int64_t F(int64_t kw) const { return FloorDivConst(Q(kw), Stride()); }
  int64_t P(int64_t kw) const { return Q(kw) - F(kw) * Stride(); }
  // rows[c, kh, p] spans j in [0, W + F(last) - F(0)), input column (j + F(0)) * s + p.
  PrimExpr RowLength() const { return conv_.width + I(F(conv_.taps_w - 1) - F(0)); }
  int64_t RowCount() const { return conv_.cg * conv_.taps_h * Stride(); }
  PrimExpr RowAt(const PrimExpr& c, const PrimExpr& kh, int64_t p, const PrimExpr& j) const {
    return ((c * I(conv_.taps_h) + kh) * I(Stride()) + I(p)) * RowLength() + j;
  }
  static int64_t FloorDivConst(int64_t a, int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
  }

  // rows for every (c, kh): the input row's phases where it lies inside the input (the
  // columns every phase holds inside it copied as vectors, the others one at a time, zero
  // past the input), zero where it does not.
  Stmt Fill() const {
    const int64_t s = Stride();
    PrimExpr ih =
        conv_.oh * I(row_axis_->stride) + kh_ * I(row_axis_->dilation) + I(row_axis_->base);
    PrimExpr in_w = conv_.x->shape[3];
    auto x_at = [&](const PrimExpr& col) { return arith::Load(conv_.x, {conv_.n, c_, ih, col}); };
    auto column = [&](int64_t p) { return (j_ + I(F(0))) * I(s) + I(p); };
    // Every phase's column lies inside for j in [lo, hi).
    PrimExpr lo = I(std::max<int64_t>(0, -F(0)));
    PrimExpr hi = arith::Max(lo, arith::Min(RowLength(), arith::FloorDiv(in_w, I(s)) - I(F(0))));
    std::vector<Stmt> inside, edge, zero;
    for (int64_t p = 0; p < s; ++p) {
      PrimExpr at = RowAt(c_, kh_, p, j_);
      inside.push_back(ir::Store(rows_, {at}, x_at(column(p))));
      PrimExpr in = And(Le(I(0), column(p)), Lt(column(p), in_w));
      edge.push_back(ir::IfThenElse(in, ir::Store(rows_, {at}, x_at(column(p))),
                                    ir::Store(rows_, {at}, arith::FloatImm(0))));
      zero.push_back(ir::Store(rows_, {at}, arith::FloatImm(0)));
    }
    Stmt copy = ir::Seq({
        ir::For(j_, I(0), lo, ForKind::kSerial, ir::Seq(edge)),
        ir::For(j_, lo, hi - lo, ForKind::kVectorized, ir::Seq(inside)),
        ir::For(j_, hi, RowLength() - hi, ForKind::kSerial, ir::Seq(edge)),
    });
    PrimExpr row_inside = And(Le(I(0), ih), Lt(ih, conv_.x->shape[2]));
    Stmt row = ir::IfThenElse(row_inside, copy,
                              Loop(j_, RowLength(), ForKind::kVectorized, ir::Seq(zero)));
    return Loop(c_, I(conv_.cg), ForKind::kSerial,
                Loop(kh_, I(conv_.taps_h), ForKind::kSerial, row));
  }

  // Output channel t of block ocb, the last block's past M clamped to M - 1 (the same values
  // stored again).
  PrimExpr Channel(int64_t t) const {
    return arith::Min(ocb_ * I(tile_channels_) + I(t), conv_.channels - I(1));
  }
  PrimExpr AccAt(int64_t t) const { return I(t * tile_cols_) + lane_; }
  Stmt OverLanes(Stmt body) const { return Loop(lane_, I(tile_cols_), ForKind::kVectorized, body); }

  Stmt Blocks() const {
    PrimExpr first = arith::Min(owt_ * I(tile_cols_), conv_.width - I(tile_cols_));
    Stmt tile = ir::Let(ow0_, first, ir::Allocate(acc_, ir::Seq({Zero(), Taps(), Epilogue()})));
    return Loop(ocb_, CeilDiv(conv_.channels, tile_channels_), ForKind::kSerial,
                Loop(owt_, CeilDiv(conv_.width, tile_cols_), ForKind::kSerial, tile));
  }
  Stmt Zero() const {
    std::vector<Stmt> zero;
    for (int64_t t = 0; t < tile_channels_; ++t) {
      zero.push_back(ir::Store(acc_, {AccAt(t)}, arith::FloatImm(0)));
    }
    return OverLanes(ir::Seq(zero));
  }
  // for c, kh: for kw (unrolled): for lane: for t (unrolled): acc[t][lane] += x * w
  Stmt Taps() const {
    std::vector<Stmt> taps;
    for (int64_t kw = 0; kw < conv_.taps_w; ++kw) {
      PrimExpr x = arith::Load(rows_, {RowAt(c_, kh_, P(kw), ow0_ + lane_ + I(F(kw) - F(0)))});
      std::vector<Stmt> channels;
      for (int64_t t = 0; t < tile_channels_; ++t) {
        PrimExpr w = arith::Load(conv_.w, {Channel(t), c_, kh_, I(kw)});
        channels.push_back(ir::Store(acc_, {AccAt(t)}, arith::Load(acc_, {AccAt(t)}) + x * w));
      }
      taps.push_back(OverLanes(ir::Seq(channels)));
    }
    return Loop(c_, I(conv_.cg), ForKind::kSerial,
                Loop(kh_, I(conv_.taps_h), ForKind::kSerial, ir::Seq(taps)));
  }
  // A loop per channel: in one loop the T channels' stores (a plane apart, and the same where
  // the last block is clamped) took LLVM's runtime alias checks, whose scalar fallback indexes
  // acc by a variable, and acc then stayed in memory instead of registers.
  Stmt Epilogue() const {
    std::vector<Stmt> channels;
    for (int64_t t = 0; t < tile_channels_; ++t) {
      PrimExpr sum = arith::Cast(conv_.acc_t, arith::Load(acc_, {AccAt(t)}));
      channels.push_back(OverLanes(
          ir::Let(conv_.m, Channel(t), ConvEpilogue(conv_, conv_.oh, ow0_ + lane_, sum))));
    }
    return ir::Seq(channels);
  }

  const Conv& conv_;
  const int64_t tile_channels_;  // T
  const int64_t tile_cols_;      // V * lanes
  bool takes_ = false;
  std::optional<AffineAxis> row_axis_, col_axis_;
  PrimExpr c_ = arith::MakeVar("c"), kh_ = arith::MakeVar("kh"), j_ = arith::MakeVar("j");
  PrimExpr ocb_ = arith::MakeVar("ocb"), owt_ = arith::MakeVar("owt");
  PrimExpr ow0_ = arith::MakeVar("ow0"), lane_ = arith::MakeVar("lane");
  Buffer rows_ = arith::MakeBuffer("rows", DataType::Float(32), {I(kColumnRowFloats)});
  Buffer acc_ = arith::MakeBuffer("acc", DataType::Float(32), {I(tile_channels_ * tile_cols_)});
};

// The column-lanes form's channels per tile by default: a quarter of the vector registers
// (tiles of 2 vectors of columns) for a conv of few taps, where the tiler's transpose costs as
// much as its multiply-adds (mobilenet_v2's stem, 27 taps: about 0.55x the tiler's time
// alone); none for a pointwise conv (a matmul by default) or one of more taps, where the
// transpose is paid once for many multiply-adds (resnet18's stem, 147 taps: 0.93-0.96x the
// tiler's time alone, not yet measured in the model).
int64_t ColumnChannelsByDefault(const Conv& conv, const ir::Target& target) {
  if (conv.taps_h * conv.taps_w == 1 || conv.cg * conv.taps_h * conv.taps_w > kMaxUnrolledTaps) {
    return 0;
  }
  return target.VectorRegisters() / 4;
}

}  // namespace

namespace {

// Any conv of one group as an implicit GEMM, for the GPU tiler: rows are output channels,
// columns the output plane's positions p (oh = p / OW, ow = p % OW), and the reduction k runs
// over (c, kh, kw) in the kernel's own order; B[k, p] is the input at the tap (clamped to the
// input, zero where the tap is in the padding), computed as the tiles load. It sums in f32,
// as the CPU's conv and matmul rules do.
std::optional<Matmul> ConvAsImplicitGemm(const Conv& conv) {
  arith::Analyzer analyzer;
  const std::vector<PrimExpr>& xi = conv.x_indices;
  // One group: the input channel is c, whatever the output channel (m < channels).
  if (conv.channels->kind == ExprKind::kIntImm) {
    analyzer.Bind(conv.m, {0, conv.channels->int_value - 1});
  }
  if (!conv.x->shape[1]->is_const_int(conv.cg) || conv.epilogue.empty() ||
      !IsVar(analyzer.Simplify(xi[1]), conv.c)) {
    return std::nullopt;
  }
  const Buffer& out = conv.epilogue[0]->buffer;
  bool ok = true;
  for (size_t s = 0; s < conv.epilogue.size(); ++s) {
    const Stmt& store = conv.epilogue[s];
    ok = ok && store->buffer == out;
    ir::VisitExprs(store->value, [&](const PrimExpr& e) {
      if (e->kind != ExprKind::kLoad) return;
      if (s > 0 && e->buffer == conv.acc) ok = false;
      if (!UsesAny(e, {conv.oh, conv.ow})) return;
      // Indexed by position on a plane of the output's shape: [.., .., 0, p] is the same slot.
      ok = ok && e->args.size() == 4 && IsVar(e->args[2], conv.oh) && IsVar(e->args[3], conv.ow) &&
           analyzer.ProveEqual(e->buffer->shape[2], conv.height) &&
           analyzer.ProveEqual(e->buffer->shape[3], conv.width);
    });
  }
  if (!ok) return std::nullopt;
  PrimExpr k = arith::MakeVar("k"), p = arith::MakeVar("p");
  const int64_t taps = conv.taps_h * conv.taps_w;
  std::vector<PrimExpr> from = {conv.c, conv.kh, conv.kw, conv.oh, conv.ow};
  std::vector<PrimExpr> to = {arith::FloorDiv(k, I(taps)),
                              arith::FloorMod(arith::FloorDiv(k, I(conv.taps_w)), I(conv.taps_h)),
                              arith::FloorMod(k, I(conv.taps_w)), arith::FloorDiv(p, conv.width),
                              arith::FloorMod(p, conv.width)};
  auto at = [&](const PrimExpr& e) { return Replace(e, from, to); };
  auto clamp = [&](const PrimExpr& e, const PrimExpr& extent) {
    return arith::Max(arith::Min(at(e), extent - I(1)), I(0));
  };
  PrimExpr x = arith::Load(
      conv.x, {conv.n, to[0], clamp(xi[2], conv.x->shape[2]), clamp(xi[3], conv.x->shape[3])});
  PrimExpr inside = conv.row_ok && conv.col_ok ? And(conv.row_ok, conv.col_ok)
                                               : (conv.row_ok ? conv.row_ok : conv.col_ok);
  if (inside) x = arith::Select(at(inside), x, arith::FloatImm(0, x->dtype));
  Matmul m{.batch = {{conv.n, conv.batch}},
           .i = {conv.m, conv.channels},
           .j = {p, conv.height * conv.width},
           .k = k,
           .depth = I(conv.cg * taps),
           .c = out,
           .c_flat_dims = 1,
           .a_load = arith::Load(conv.w, {conv.m, to[0], to[1], to[2]}),
           .b_load = x};
  std::vector<PrimExpr> slot = {conv.n, conv.m, I(0), p};
  PrimExpr sum = arith::Cast(conv.acc_t, arith::Load(out, slot));
  for (const Stmt& s : conv.epilogue) {
    PrimExpr value = arith::Substitute(s->value, [&](const PrimExpr& e) -> PrimExpr {
      if (e->kind == ExprKind::kLoad && e->buffer == conv.acc) return sum;
      return nullptr;
    });
    m.epilogue.push_back(ir::Store(out, slot, Replace(value, {conv.oh, conv.ow}, {I(0), p})));
  }
  return m;
}

}  // namespace

std::optional<Matmul> MatchConvAsMatmul(const Stmt& body) {
  std::optional<Conv> conv = MatchConv(body);
  if (!conv) return std::nullopt;
  if (std::optional<Matmul> m = PointwiseConv(*conv).AsMatmul()) return m;
  return ConvAsImplicitGemm(*conv);
}

std::optional<ScheduledKernel> ScheduleConv(const Stmt& body, const ir::Target& target,
                                            const ConstantOf& constant_of, const Trace& trace) {
  std::optional<Conv> conv = MatchConv(body);
  if (!conv) return std::nullopt;
  // A pointwise conv is a matmul unless its trace asks for the tiler (its second space).
  std::optional<Matmul> m = PointwiseConv(*conv).AsMatmul();
  if (m && trace.rule != "conv") {
    return TileMatmul(*m, target, constant_of, trace.rule == "matmul" ? trace : Trace{});
  }
  ConvKnobs knobs = KnobsOf(trace, target, conv->width);
  ConvTiler tiler(*conv, target, constant_of ? constant_of(conv->w) : nullptr, knobs);
  std::optional<Stmt> tiled = tiler.Build();
  if (tiled) {
    const int64_t by_default = ColumnChannelsByDefault(*conv, target);
    knobs.column_channels =
        trace.rule == "conv" ? trace.Get("column_channels", by_default) : by_default;
    knobs.column_channels = std::clamp<int64_t>(knobs.column_channels, 0, kMaxKnobColumnChannels);
    ColumnConv columns(*conv, target, knobs);
    if (columns.Takes()) {
      // The other form reads the kernel's own weights (the columns' do), packing them per call.
      std::optional<Stmt> other = ConvTiler(*conv, target, nullptr, knobs).Build();
      if (other) return ScheduledKernel{columns.Build(*other), std::nullopt};
    }
    return ScheduledKernel{*tiled, tiler.Packed()};
  }
  if (m) return TileMatmul(*m, target, constant_of, Trace{});
  const ir::NDArray* weights = constant_of ? constant_of(conv->w) : nullptr;
  std::optional<Stmt> row = RowConv(*conv, target, weights, knobs).Build();
  if (!row) return std::nullopt;
  LaneConv lanes(*conv, target, weights);
  const bool lanes_default = lanes.LanesByDefault();
  if (lanes.Takes() &&
      (trace.rule == "conv" ? trace.Get("channel_lanes", lanes_default) != 0 : lanes_default)) {
    return ScheduledKernel{lanes.Build(*row), std::nullopt};
  }
  return ScheduledKernel{*row, std::nullopt};
}

namespace {

// `first`, then those of `more` that differ from it and pass `keep`.
std::vector<int64_t> Choices(int64_t first, std::initializer_list<int64_t> more,
                             const std::function<bool(int64_t)>& keep) {
  std::vector<int64_t> choices = {first};
  for (int64_t c : more) {
    if (c != first && keep(c)) choices.push_back(c);
  }
  return choices;
}

// The tiler's knobs for a conv it takes with the default knobs; every choice keeps it taking
// the conv.
SearchSpace TilerSpace(const Conv& conv, const ir::Target& target, const ir::NDArray* weights) {
  ConvKnobs knobs = KnobsOf({}, target, conv.width);
  auto takes = [&](int64_t vectors) {
    ConvKnobs k = knobs;
    k.tile_vectors = vectors;
    return ConvTiler(conv, target, weights, k).Takes();
  };
  // One vector of output channels leaves registers for up to regs - 2 columns.
  auto fits = [&](int64_t cols) { return cols <= target.VectorRegisters() - 2; };
  auto splits = [&](int64_t block) { return block < conv.cg && conv.cg % block == 0; };
  SearchSpace space = {"conv",
                       {{"tile_cols", Choices(knobs.tile_cols, {4, 6, 8, 2, 12, 14}, fits)},
                        {"tile_vectors", Choices(2, {1, 4}, takes)},
                        {"tile_rows", {1, 2}},
                        {"channel_block", Choices(0, {16, 32, 64, 8}, splits)}}};
  knobs.column_channels = ColumnChannelsByDefault(conv, target);
  if (ColumnConv(conv, target, knobs).Takes()) {
    auto any = [](int64_t) { return true; };
    space.knobs.push_back({"column_channels", Choices(knobs.column_channels, {0, 4, 8, 16}, any)});
    space.knobs.push_back({"column_vectors", {2, 1, 3}});
  }
  return space;
}

// The row form's knobs: whether few taps are unrolled, the register tile's width, the
// parallel split, and the plane form where the conv takes it.
SearchSpace RowSpace(const Conv& conv, const ir::Target& target, const ir::NDArray* weights) {
  std::vector<Knob> knobs;
  if (RowConv::UnrollsTaps(conv)) knobs.push_back({"unroll_taps", {1, 0}});
  knobs.push_back({"row_vectors", {2, 1, 4}});
  knobs.push_back({"parallel_rows", {0, 1}});
  if (RowConv(conv, target, weights, KnobsOf({}, target, conv.width)).TakesPlaneForm()) {
    knobs.push_back({"plane", {1, 0}});
  }
  LaneConv lanes(conv, target, weights);
  if (lanes.Takes()) {
    const int64_t by_default = lanes.LanesByDefault();
    knobs.push_back({"channel_lanes", {by_default, 1 - by_default}});
  }
  return {"conv", std::move(knobs)};
}

}  // namespace

std::vector<SearchSpace> ConvSpaces(const Stmt& body, const ir::Target& target,
                                    const ConstantOf& constant_of) {
  std::optional<Conv> conv = MatchConv(body);
  if (!conv) return {};
  ConvKnobs defaults = KnobsOf({}, target, conv->width);
  const ir::NDArray* weights = constant_of ? constant_of(conv->w) : nullptr;
  const bool tiler = ConvTiler(*conv, target, weights, defaults).Takes();
  if (std::optional<Matmul> m = PointwiseConv(*conv).AsMatmul()) {
    std::optional<int64_t> rows, depth;  // the output and input channels
    if (m->i.extent->kind == ExprKind::kIntImm) rows = m->i.extent->int_value;
    if (m->depth->kind == ExprKind::kIntImm) depth = m->depth->int_value;
    std::vector<SearchSpace> spaces = {
        MatmulSpace(target, false, /*reads_b_in_place=*/true, rows, depth)};
    if (tiler) spaces.push_back(TilerSpace(*conv, target, weights));
    return spaces;
  }
  if (tiler) return {TilerSpace(*conv, target, weights)};
  if (RowConv(*conv, target, weights, defaults).Takes()) return {RowSpace(*conv, target, weights)};
  return {};
}

}  // namespace kiln::schedule
