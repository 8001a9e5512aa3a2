// The Winograd rules: F(m x m, 3x3) for m = 2 and 4 (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2015). Output tile Y (m x m) of the a x a input patch d
// (a = m + 2) and the 3x3 filter g:
//
//   Y = A^T [(G g G^T) . (B^T d B)] A     (. elementwise, over the a x a positions (xi, nu))
//
// so each (output channel, input channel, tile) takes a^2 products instead of 9 m^2: 16
// instead of 36 for m = 2, 36 instead of 144 for m = 4. Summed over the input channels, the
// a^2 positions are a^2 independent GEMMs:
//
//   at compile time: U[xi, nu][m, c] = (G g[m, c] G^T)[xi, nu], packed [a^2][M / L][C][L]
//   groups = 2 where the call has one block of tiles (and M / L is even), else 1
//   for task in [0, batch * tile blocks * groups) parallel
//     n, g, t0 = the task's batch element, group of output channels and first tile; T tiles
//       (the last block clamps)
//     allocate v[a^2][T][C]; for t < T:
//       d[.][c] = the tile's a x a patch of x[n, c] for every c (input rows and columns
//         m * tile - pad, zero outside the input)
//       v[xi, nu][t][c] = (B^T d[.][c] B)[xi, nu], over vectors of c
//     allocate mm[a^2][T][M rounded to L]
//     for e in a^2, ocb in group g's M / L / groups blocks, register tiles of P tiles (the
//       last moved back to end at T):
//       acc[P][L] = sum over c of v[e][tile][c] * U[e][ocb][c][lane]; stored to mm
//     for t < tiles in the block:
//       y[i][oc][j] = (A^T mm[.][t][oc] A)[i, j], over vectors of group g's output channels
//       for oc < M in group g: the epilogue stores each of the m x m outputs y[.][oc][.] inside
//         the output plane
//
// acc is a register tile as in the conv rule (L = tile_vectors vectors of output channels
// in the lanes, P columns unrolled). Sums run in f32 in a different order than the direct
// conv's, and the transforms round too: results differ from it by a few ulps of the inputs'
// magnitude for m = 2 and about seven times that for m = 4 (kAlgorithms), inside the tuner's
// tolerance (tune::FloatsAgree; the tests check it).
// Larger tiles do fewer products but transform more per output and waste more of a plane
// that is no multiple of m (14 x 14 in tiles of 4 is 16 x 16): the tuner measures both.
#include "compiler/schedule/winograd_rule.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "compiler/arith/analyzer.h"
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

// Each task-local buffer (the transformed input, the GEMMs' output) stays within this; the
// two together within the ~1 MiB the rule may take on a thread's stack. The other two are
// smaller: a tile's patches (a^2 C, of v's a^2 T C) and outputs (m^2 M, of mm's a^2 T M).
constexpr int64_t kMaxLocalBytes = int64_t{512} << 10;
// Fewer input channels leave each of the 16 GEMMs a reduction too short to pay for the
// transforms (a network's first conv, over 3 colour channels, among them).
constexpr int64_t kMinInputChannels = 8;

// What the rule reads off legalize's conv kernel (DirectConv in legalize_nn_conv.cc). This
// duplicates the part of conv_rule.cc's matcher that a 3x3 stride-1 conv needs.
struct Conv3x3 {
  PrimExpr n, m, oh, ow;                     // output loop variables
  PrimExpr batch, out_h, out_w, in_h, in_w;  // N, OH, OW, H, W: maybe symbolic
  int64_t channels = 0, cg = 0;              // M, C
  int64_t pad_top = 0, pad_left = 0;
  Buffer x, w, acc;
  DataType acc_t;
  std::vector<Stmt> epilogue;  // stores to out[n, m, oh, ow] reading acc[0]
};

std::optional<int64_t> ConstExtent(const StmtNode& loop) {
  if (loop.kind != StmtKind::kFor || loop.extent->kind != ExprKind::kIntImm ||
      !loop.min->is_const_int(0)) {
    return std::nullopt;
  }
  return loop.extent->int_value;
}

PrimExpr StripCast(const PrimExpr& e) { return e->kind == ExprKind::kCast ? e->args[0] : e; }

bool OnlyUses(const PrimExpr& e, const std::vector<PrimExpr>& vars) {
  for (const PrimExpr& v : arith::FreeVars(e)) {
    if (std::none_of(vars.begin(), vars.end(), [&](const PrimExpr& x) { return IsVar(v, x); })) {
      return false;
    }
  }
  return true;
}

// The input position `index` (of output position `out` and tap `tap`) as out + tap - pad:
// stride and dilation 1. nullopt otherwise.
std::optional<int64_t> Pad(const PrimExpr& index, const PrimExpr& out, const PrimExpr& tap) {
  if (!OnlyUses(index, {out, tap})) return std::nullopt;
  auto at = [&](int64_t o, int64_t t) -> std::optional<int64_t> {
    absl::StatusOr<int64_t> v = arith::EvaluateInt(index, [&](const arith::ExprNode& e) {
      if (&e == out.get()) return std::optional<int64_t>(o);
      if (&e == tap.get()) return std::optional<int64_t>(t);
      return std::optional<int64_t>();
    });
    if (!v.ok()) return std::nullopt;
    return *v;
  };
  std::optional<int64_t> base = at(0, 0), down = at(1, 0), right = at(0, 1), far = at(5, 2);
  if (!base || !down || !right || !far || *down != *base + 1 || *right != *base + 1 ||
      *far != *base + 7) {
    return std::nullopt;
  }
  return -*base;
}

// acc[0] = acc[0] + x[n, c, ih, iw] * w[m, c, kh, kw], under a bounds check or none.
bool MatchUpdate(const Stmt& body, const PrimExpr& c, const PrimExpr& kh, const PrimExpr& kw,
                 Conv3x3& conv) {
  Stmt update = body;
  if (update->kind == StmtKind::kIfThenElse) {
    if (update->else_case) return false;
    update = update->then_case;
  }
  if (update->kind != StmtKind::kStore || update->buffer != conv.acc) return false;
  const PrimExpr& sum = update->value;
  if (sum->kind != ExprKind::kAdd || sum->args[0]->kind != ExprKind::kLoad ||
      sum->args[0]->buffer != conv.acc || sum->args[1]->kind != ExprKind::kMul) {
    return false;
  }
  PrimExpr xl = StripCast(sum->args[1]->args[0]), wl = StripCast(sum->args[1]->args[1]);
  if (xl->kind != ExprKind::kLoad || wl->kind != ExprKind::kLoad || xl->args.size() != 4 ||
      wl->args.size() != 4 || xl->buffer->dtype != DataType::Float(32) ||
      wl->buffer->dtype != DataType::Float(32)) {
    return false;
  }
  const std::vector<PrimExpr> w_idx = {conv.m, c, kh, kw};
  for (size_t d = 0; d < 4; ++d) {
    if (!IsVar(wl->args[d], w_idx[d])) return false;
  }
  conv.x = xl->buffer;
  conv.w = wl->buffer;
  const std::vector<PrimExpr>& xi = xl->args;
  // One group: the input channel is c whatever the output channel.
  arith::Analyzer analyzer;
  analyzer.Bind(conv.m, {0, conv.channels - 1});
  if (!IsVar(xi[0], conv.n) || !IsVar(analyzer.Simplify(xi[1]), c)) return false;
  std::optional<int64_t> top = Pad(xi[2], conv.oh, kh), left = Pad(xi[3], conv.ow, kw);
  if (!top || !left) return false;
  conv.pad_top = *top;
  conv.pad_left = *left;
  return true;
}

std::optional<int64_t> ConstDim(const Buffer& b, size_t d) {
  if (b->shape.size() <= d || b->shape[d]->kind != ExprKind::kIntImm) return std::nullopt;
  return b->shape[d]->int_value;
}

std::optional<Conv3x3> MatchConv3x3(const Stmt& body) {
  std::vector<const StmtNode*> loops;
  Stmt cur = body;
  while (cur->kind == StmtKind::kFor && cur->for_kind == ForKind::kSerial &&
         cur->min->is_const_int(0) && loops.size() < 4) {
    loops.push_back(cur.get());
    cur = cur->body;
  }
  if (loops.size() != 4 || cur->kind != StmtKind::kAllocate) return std::nullopt;
  std::optional<int64_t> channels = ConstExtent(*loops[1]);
  if (!channels) return std::nullopt;
  Conv3x3 conv{.n = loops[0]->var,
               .m = loops[1]->var,
               .oh = loops[2]->var,
               .ow = loops[3]->var,
               .batch = loops[0]->extent,
               .out_h = loops[2]->extent,
               .out_w = loops[3]->extent,
               .channels = *channels,
               .acc = cur->buffer,
               .acc_t = cur->buffer->dtype};
  if (!conv.acc_t.is_float() || conv.acc->shape.size() != 1) return std::nullopt;
  const Stmt& seq = cur->body;
  if (seq->kind != StmtKind::kSeq || seq->seq.size() < 3) return std::nullopt;
  const StmtNode& init = *seq->seq[0];
  if (init.kind != StmtKind::kStore || init.buffer != conv.acc ||
      init.value->kind != ExprKind::kFloatImm || init.value->float_value != 0) {
    return std::nullopt;
  }
  // for c { for kh < 3 { for kw < 3 { update } } }
  const Stmt& over_c = seq->seq[1];
  std::optional<int64_t> cg = ConstExtent(*over_c);
  if (!cg) return std::nullopt;
  const Stmt& over_kh = over_c->body;
  if (ConstExtent(*over_kh) != 3 || ConstExtent(*over_kh->body) != 3) return std::nullopt;
  conv.cg = *cg;
  if (!MatchUpdate(over_kh->body->body, over_c->var, over_kh->var, over_kh->body->var, conv)) {
    return std::nullopt;
  }
  if (ConstDim(conv.x, 1) != conv.cg || conv.cg < kMinInputChannels || conv.pad_top < 0 ||
      conv.pad_left < 0) {
    return std::nullopt;
  }
  // The padding at the bottom and right is whatever makes the output's extent: the transform
  // reads zeros outside the input and stores no output outside the plane.
  conv.in_h = conv.x->shape[2];
  conv.in_w = conv.x->shape[3];
  const std::vector<PrimExpr> idx = {conv.n, conv.m, conv.oh, conv.ow};
  for (size_t s = 2; s < seq->seq.size(); ++s) {
    const Stmt& store = seq->seq[s];
    if (store->kind != StmtKind::kStore || store->buffer->dtype != DataType::Float(32) ||
        store->indices.size() != 4) {
      return std::nullopt;
    }
    for (size_t d = 0; d < 4; ++d) {
      if (!IsVar(store->indices[d], idx[d])) return std::nullopt;
    }
    conv.epilogue.push_back(store);
  }
  return conv;
}

// The weight constant, when it is the dense f32 [M, C, 3, 3] the kernel reads.
const ir::NDArray* WeightConstant(const Conv3x3& conv, const ConstantOf& constant_of) {
  const ir::NDArray* weights = constant_of ? constant_of(conv.w) : nullptr;
  if (weights == nullptr || weights->dtype != DataType::Float(32)) return nullptr;
  if (weights->shape != std::vector<int64_t>{conv.channels, conv.cg, 3, 3}) return nullptr;
  return weights;
}

int64_t VectorLanes(const ir::Target& target) { return std::max(4, target.vector_bits / 32); }

// F(m x m, 3x3)'s matrices, each stored in the top-left corner of its array: B^T a x a, G
// a x 3 and A^T m x a (a = m + 2), from the interpolation points as in Lavin & Gray.
struct Algorithm {
  std::string_view rule;
  int64_t m;  // the output tile's side
  double bt[6][6], g[6][3], at[4][6];
  int64_t a() const { return m + 2; }
  int64_t positions() const { return a() * a(); }  // the GEMMs
};

constexpr Algorithm kAlgorithms[] = {
    {.rule = "winograd",
     .m = 2,
     .bt = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
     .g = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
     .at = {{1, 1, 1, 0}, {0, 1, -1, -1}}},
    // Interpolation points 0, 1, -1, 2, -1/2 and infinity rather than the paper's 0, +-1,
    // +-2: simulated in f32 on 64 -> 64 channels of uniform inputs and weights, the largest
    // error fell from 1.1e-4 to 5.0e-5 (F(2x2, 3x3) 7e-6), the outputs' scale 33 (Barabasz
    // et al., "Error analysis and improving the accuracy of Winograd convolution", 2020).
    {.rule = "winograd4",
     .m = 4,
     .bt = {{1, 1.5, -2, -1.5, 1, 0},
            {0, -1, -2.5, -0.5, 1, 0},
            {0, 1, 0.5, -2.5, 1, 0},
            {0, -0.5, -1, 0.5, 1, 0},
            {0, 2, -1, -2, 1, 0},
            {0, 1, 1.5, -2, -1.5, 1}},
     .g = {{1, 0, 0},
           {-1.0 / 3, -1.0 / 3, -1.0 / 3},
           {1.0 / 3, -1.0 / 3, 1.0 / 3},
           {1.0 / 15, 2.0 / 15, 4.0 / 15},
           {-16.0 / 15, 8.0 / 15, -4.0 / 15},
           {0, 0, 1}},
     .at = {{1, 1, 1, 1, 1, 0},
            {0, 1, -1, 2, -0.5, 0},
            {0, 1, 1, 4, 0.25, 0},
            {0, 1, -1, 8, -0.125, 1}}},
};

const Algorithm* AlgorithmOf(std::string_view rule) {
  for (const Algorithm& alg : kAlgorithms) {
    if (alg.rule == rule) return &alg;
  }
  return nullptr;
}

// `row` (as long as v) times v: products by 0 dropped, those by 1 and -1 as adds.
PrimExpr Dot(const double* row, const std::vector<PrimExpr>& v) {
  PrimExpr sum;
  for (bool positive : {true, false}) {  // a positive term first: no negation to start
    for (size_t k = 0; k < v.size(); ++k) {
      const double c = row[k];
      if (c == 0 || (c > 0) != positive) continue;
      PrimExpr term = std::fabs(c) == 1 ? v[k] : arith::FloatImm(std::fabs(c)) * v[k];
      if (!sum) {
        sum = positive ? term : arith::FloatImm(0) - term;
      } else {
        sum = positive ? sum + term : sum - term;
      }
    }
  }
  return sum;
}

// The first `rows` rows of `matrix` times v.
template <size_t N>
std::vector<PrimExpr> Apply(const double (&matrix)[N][6], int64_t rows,
                            const std::vector<PrimExpr>& v) {
  std::vector<PrimExpr> out;
  for (int64_t i = 0; i < rows; ++i) out.push_back(Dot(matrix[i], v));
  return out;
}

// The knobs (WinogradSpaces):
//  - tiles_per_task (T): output tiles whose inputs one task transforms and multiplies; the
//    first of kTileChoices whose buffers fit kMaxLocalBytes, by default. Small blocks keep the
//    transformed input in L1 across the GEMMs (resnet18's 3x3 convs at 224 x 224 tuned to
//    8 tiles on most of them).
//  - tile_cols (P): tiles per register tile of the GEMM, dividing T (the last register tile
//    of a block moves back and repeats columns otherwise): 8 by default where the registers
//    hold its 16 accumulators (AVX-512: 0.74-0.99x the time of 4 on resnet18's 3x3 convs,
//    56 x 56 to 14 x 14, both transforms), else 4.
//  - tile_vectors: vectors of output channels per register tile (L = tile_vectors * lanes);
//    2 by default (P x 2 accumulators, the U vectors and a broadcast within AVX2's 16
//    registers up to P = 6).
struct Knobs {
  int64_t tiles_per_task = 8, tile_cols = 4, tile_vectors = 2;
};

// P x tile_vectors accumulators, the U vectors and one broadcast within the registers.
bool TileFits(int64_t tile_cols, int64_t tile_vectors, const ir::Target& target) {
  return tile_cols * tile_vectors + 3 <= target.VectorRegisters();
}

// The knobs' defaults on `target`.
Knobs DefaultKnobs(const ir::Target& target) {
  Knobs k;
  if (TileFits(8, k.tile_vectors, target)) k.tile_cols = 8;
  return k;
}
constexpr int64_t kTileChoices[] = {8, 16, 12, 24, 32, 4, 64};

PrimExpr TilesW(const Conv3x3& conv, int64_t m) {
  return arith::FloorDiv(conv.out_w + I(m - 1), I(m));
}
PrimExpr Tiles(const Conv3x3& conv, int64_t m) {
  return arith::Analyzer().Simplify(arith::FloorDiv(conv.out_h + I(m - 1), I(m)) * TilesW(conv, m));
}

// At most `tiles` tiles, fewer when the plane has fewer (a static plane).
int64_t AtMostTiles(const Conv3x3& conv, int64_t m, int64_t tiles) {
  const PrimExpr all = Tiles(conv, m);
  if (all->kind != ExprKind::kIntImm) return tiles;
  return std::max<int64_t>(1, std::min(tiles, all->int_value));
}

// Output channels rounded up to whole blocks of `lanes`.
int64_t PaddedChannels(const Conv3x3& conv, int64_t lanes) {
  return (conv.channels + lanes - 1) / lanes * lanes;
}

// Whether a task of `tiles` tiles keeps each of its buffers within kMaxLocalBytes.
bool Fits(const Conv3x3& conv, const Algorithm& alg, int64_t tiles, int64_t lanes) {
  tiles = AtMostTiles(conv, alg.m, tiles);
  return alg.positions() * conv.cg * tiles * 4 <= kMaxLocalBytes &&
         alg.positions() * PaddedChannels(conv, lanes) * tiles * 4 <= kMaxLocalBytes;
}

std::vector<int64_t> TileChoices(const Conv3x3& conv, const Algorithm& alg, int64_t lanes) {
  std::vector<int64_t> choices;
  for (int64_t t : kTileChoices) {
    if (Fits(conv, alg, t, lanes)) choices.push_back(t);
  }
  return choices;
}

// Values outside these get the default.
constexpr int64_t kMaxTileCols = 16;
constexpr int64_t kMaxTileVectors = 4;

std::optional<Knobs> KnobsOf(const Trace& trace, const Conv3x3& conv, const Algorithm& alg,
                             const ir::Target& target) {
  const Trace none;
  const Trace& t = trace.rule == alg.rule ? trace : none;
  Knobs k = DefaultKnobs(target);
  auto in_range = [](int64_t v, int64_t max, int64_t fallback) {
    return v >= 1 && v <= max ? v : fallback;
  };
  k.tile_cols = in_range(t.Get("tile_cols", k.tile_cols), kMaxTileCols, k.tile_cols);
  k.tile_vectors = in_range(t.Get("tile_vectors", k.tile_vectors), kMaxTileVectors, k.tile_vectors);
  const int64_t lanes = k.tile_vectors * VectorLanes(target);
  std::vector<int64_t> tiles = TileChoices(conv, alg, lanes);
  if (tiles.empty()) return std::nullopt;
  const int64_t asked = t.Get("tiles_per_task", tiles[0]);
  k.tiles_per_task = std::find(tiles.begin(), tiles.end(), asked) != tiles.end() ? asked : tiles[0];
  return k;
}

// Whether an output extent may be no multiple of m: its last tiles then have outputs past
// the plane.
bool MaybeRagged(const PrimExpr& extent, int64_t m) {
  return extent->kind != ExprKind::kIntImm || extent->int_value % m != 0;
}

class WinogradBuilder {
 public:
  WinogradBuilder(const Conv3x3& conv, const Algorithm& alg, const ir::Target& target,
                  const ir::NDArray& weights, const Knobs& knobs)
      : conv_(conv),
        alg_(alg),
        weights_(weights),
        lanes_(knobs.tile_vectors * VectorLanes(target)),
        tiles_(AtMostTiles(conv, alg.m, knobs.tiles_per_task)),
        cols_(std::min(knobs.tile_cols, tiles_)),
        channels_(PaddedChannels(conv, lanes_)) {}

  Stmt Build() const {
    const PrimExpr blocks = arith::Analyzer().Simplify(CeilDiv(Tiles(conv_, alg_.m), tiles_));
    Stmt body = ir::Allocate(
        v_, ir::Allocate(mm_, ir::Seq({InputTransform(), Gemms(), OutputTransform()})));
    body = ir::Let(t0_, arith::FloorMod(task_, blocks) * I(tiles_), body);
    if (!Splits()) {
      body = ir::Let(conv_.n, arith::FloorDiv(task_, blocks), body);
      return Loop(task_, conv_.batch * blocks, ForKind::kParallel, body);
    }
    // A call of one block splits its output channels in two tasks, so that two threads
    // share it, each reading half the weights. Three of resnet18's 7 x 7 convs over 512
    // channels, 16 tiles a task, took 0.55-0.87 of one task's time on two threads and
    // 1.07-1.25 on one, which transforms the input twice (bench/RESULTS.md, thirty-first
    // round).
    const PrimExpr groups = arith::Select(Lt(conv_.batch * blocks, I(2)), I(2), I(1));
    const PrimExpr per_n = blocks * groups_;
    body = ir::Let(group_blocks_, arith::FloorDiv(I(OutputBlocks()), groups_), body);
    body = ir::Let(group_, arith::FloorDiv(arith::FloorMod(task_, per_n), blocks), body);
    body = ir::Let(conv_.n, arith::FloorDiv(task_, per_n), body);
    body = Loop(task_, conv_.batch * per_n, ForKind::kParallel, body);
    return ir::Let(groups_, groups, body);
  }

  // The blocks of L output channels.
  int64_t OutputBlocks() const { return channels_ / lanes_; }
  // Whether a call of one block of tiles splits its blocks of output channels in two groups:
  // where they are even in number.
  bool Splits() const { return OutputBlocks() % 2 == 0; }

  // U[e][ocb][c][lane] = (G g[oc, c] G^T)[e / a, e % a] for oc = ocb * L + lane, zero past M.
  PackedWeights Packed() const {
    const int64_t blocks = channels_ / lanes_, cg = conv_.cg, a = alg_.a();
    ir::NDArray data = ir::NDArray::Zeros(DataType::Float(32), {a * a, blocks, cg, lanes_});
    const float* w = weights_.data<float>();
    float* u = data.data<float>();
    for (int64_t oc = 0; oc < conv_.channels; ++oc) {
      for (int64_t c = 0; c < cg; ++c) {
        const float* g = w + (oc * cg + c) * 9;
        double gg[6][3] = {};  // G g
        for (int64_t i = 0; i < a; ++i) {
          for (int j = 0; j < 3; ++j) {
            for (int k = 0; k < 3; ++k) gg[i][j] += alg_.g[i][k] * g[k * 3 + j];
          }
        }
        for (int64_t i = 0; i < a; ++i) {
          for (int64_t j = 0; j < a; ++j) {
            double v = 0;  // (G g G^T)[i, j]
            for (int k = 0; k < 3; ++k) v += gg[i][k] * alg_.g[j][k];
            u[(((i * a + j) * blocks + oc / lanes_) * cg + c) * lanes_ + oc % lanes_] =
                static_cast<float>(v);
          }
        }
      }
    }
    return PackedWeights{conv_.w, u_, std::move(data)};
  }

 private:
  // The tile at block position t: clamped to the last, so a partial block repeats it.
  PrimExpr TileAt(const PrimExpr& t) const {
    return arith::Min(t0_ + t, Tiles(conv_, alg_.m) - I(1));
  }

  // v[e][t][c] = (B^T d B)[e / a, e % a], d the a x a patch of tile t in channel c. Two
  // loops a tile: the patches of every channel copied into d[e][c] (an interior tile's
  // unchecked, an edge tile's clamped and zero outside the input), then the transform over
  // vectors of channels. Transformed over vectors of tiles, every lane clamped its own
  // indices, and the transform took 30% of a 64 -> 64 conv's samples on 56 x 56
  // (bench/RESULTS.md, twenty-ninth and thirty-third rounds). LLVM vectorizes the copy over
  // channels with gathers; kept scalar, it measured the same.
  Stmt InputTransform() const {
    const PrimExpr c = arith::MakeVar("wic"), t = arith::MakeVar("wit");
    const PrimExpr tile = TileAt(t);
    const int64_t m = alg_.m, a = alg_.a();
    const PrimExpr ih0 = arith::MakeVar("wih"), iw0 = arith::MakeVar("wiw");
    auto copy = [&](bool checked) {
      std::vector<Stmt> stmts;
      for (int64_t i = 0; i < a; ++i) {
        for (int64_t j = 0; j < a; ++j) {
          PrimExpr ih = ih0 + I(i), iw = iw0 + I(j), x;
          if (!checked) {
            x = arith::Load(conv_.x, {conv_.n, c, ih, iw});
          } else {
            auto clamp = [](const PrimExpr& v, const PrimExpr& extent) {
              return arith::Min(arith::Max(v, I(0)), extent - I(1));
            };
            PrimExpr inside = arith::Binary(
                ExprKind::kAnd, arith::Binary(ExprKind::kAnd, Lt(ih, conv_.in_h), Lt(I(-1), ih)),
                arith::Binary(ExprKind::kAnd, Lt(iw, conv_.in_w), Lt(I(-1), iw)));
            x = arith::Select(
                inside,
                arith::Load(conv_.x, {conv_.n, c, clamp(ih, conv_.in_h), clamp(iw, conv_.in_w)}),
                arith::FloatImm(0));
          }
          stmts.push_back(ir::Store(patch_, {I(i * a + j), c}, x));
        }
      }
      return Loop(c, I(conv_.cg), ForKind::kSerial, ir::Seq(stmts));
    };
    PrimExpr interior = arith::Binary(
        ExprKind::kAnd,
        arith::Binary(ExprKind::kAnd, Lt(I(-1), ih0), Lt(ih0 + I(a - 1), conv_.in_h)),
        arith::Binary(ExprKind::kAnd, Lt(I(-1), iw0), Lt(iw0 + I(a - 1), conv_.in_w)));
    std::vector<std::vector<PrimExpr>> rows(a, std::vector<PrimExpr>(a));  // B^T d
    for (int64_t j = 0; j < a; ++j) {
      std::vector<PrimExpr> column;
      for (int64_t i = 0; i < a; ++i) column.push_back(arith::Load(patch_, {I(i * a + j), c}));
      std::vector<PrimExpr> bt = Apply(alg_.bt, a, column);
      for (int64_t i = 0; i < a; ++i) rows[i][j] = bt[i];
    }
    std::vector<Stmt> stores;
    for (int64_t i = 0; i < a; ++i) {
      std::vector<PrimExpr> v = Apply(alg_.bt, a, rows[i]);  // (B^T d B)[i, :]
      for (int64_t j = 0; j < a; ++j) stores.push_back(ir::Store(v_, {I(i * a + j), t, c}, v[j]));
    }
    Stmt transform = Loop(c, I(conv_.cg), ForKind::kVectorized, ir::Seq(stores));
    Stmt one = ir::Seq({ir::IfThenElse(interior, copy(false), copy(true)), transform});
    one = ir::Let(
        ih0, arith::FloorDiv(tile, TilesW(conv_, m)) * I(m) - I(conv_.pad_top),
        ir::Let(iw0, arith::FloorMod(tile, TilesW(conv_, m)) * I(m) - I(conv_.pad_left), one));
    return ir::Allocate(patch_, Loop(t, I(tiles_), ForKind::kSerial, one));
  }

  // mm[e][t][oc] = sum over c of U[e][oc][c] * v[e][t][c], in register tiles of P tiles by L
  // output channels; the last tile moves back to end at T (the same values again).
  Stmt Gemms() const {
    const PrimExpr e = arith::MakeVar("we"), ocb = arith::MakeVar("wocb");
    const PrimExpr tt = arith::MakeVar("wtt"), first = arith::MakeVar("wfirst");
    const PrimExpr c = arith::MakeVar("wgc"), p = arith::MakeVar("wp");
    const PrimExpr lane = arith::MakeVar("wlane");
    auto over_tile = [&](Stmt body, ForKind lanes) {
      return Loop(p, I(cols_), ForKind::kUnrolled, Loop(lane, I(lanes_), lanes, std::move(body)));
    };
    const PrimExpr acc = arith::Load(acc_, {p, lane});
    const PrimExpr block = Splits() ? group_ * group_blocks_ + ocb : ocb;
    const PrimExpr product =
        arith::Load(v_, {e, first + p, c}) * arith::Load(u_, {e, block, c, lane});
    Stmt zero = over_tile(ir::Store(acc_, {p, lane}, arith::FloatImm(0)), ForKind::kUnrolled);
    Stmt sum = Loop(c, I(conv_.cg), ForKind::kSerial,
                    over_tile(ir::Store(acc_, {p, lane}, acc + product), ForKind::kVectorized));
    Stmt store = over_tile(ir::Store(mm_, {e, first + p, block * I(lanes_) + lane}, acc),
                           ForKind::kUnrolled);
    Stmt tile = ir::Let(first, arith::Min(tt * I(cols_), I(tiles_ - cols_)),
                        ir::Allocate(acc_, ir::Seq({zero, sum, store})));
    return Loop(e, I(alg_.positions()), ForKind::kSerial,
                Loop(ocb, Splits() ? group_blocks_ : I(OutputBlocks()), ForKind::kSerial,
                     Loop(tt, I((tiles_ + cols_ - 1) / cols_), ForKind::kSerial, tile)));
  }

  // Y = A^T mm[.][t][oc] A for the block's tiles, each output inside the plane finished by
  // the kernel's epilogue. Two loops a tile: the transform over vectors of this task's
  // output channels into y[i][oc][j], then the epilogue a channel at a time, each row's m
  // outputs read and stored side by side. (y[i * m + j][oc], read a float at a time by the
  // epilogue, measured 1.02-1.03x as long on resnet18.) Transformed and stored in one loop
  // over channels, the stores to NCHW did not vectorize, so the transform ran a channel at a
  // time: 36% of a 64 -> 64 conv's samples on 56 x 56 with F(4x4) (bench/RESULTS.md,
  // thirty-third round).
  Stmt OutputTransform() const {
    const PrimExpr t = arith::MakeVar("wot"), oc = arith::MakeVar("woc");
    const PrimExpr ty = arith::MakeVar("wty"), tx = arith::MakeVar("wtx");
    const int64_t m = alg_.m;
    // A tile whose outputs all lie inside the plane (all but the last row and column of tiles
    // of a plane no multiple of m) stores them unchecked.
    PrimExpr whole = arith::Binary(ExprKind::kAnd, Lt(ty * I(m) + I(m - 1), conv_.out_h),
                                   Lt(tx * I(m) + I(m - 1), conv_.out_w));
    // This task's output channels: all of them, or group g's blocks, the last group ending
    // at M. `padded`: whole blocks of L, reading mm's zeros past M.
    auto over_channels = [&](ForKind kind, bool padded, Stmt body) {
      if (!Splits()) return Loop(oc, I(padded ? channels_ : conv_.channels), kind, body);
      const PrimExpr first_oc = group_ * group_blocks_ * I(lanes_);
      const PrimExpr count =
          padded ? group_blocks_ * I(lanes_)
                 : arith::Min(group_blocks_ * I(lanes_), I(conv_.channels) - first_oc);
      const PrimExpr j = arith::MakeVar("woj");
      return Loop(j, count, kind, ir::Let(oc, first_oc + j, body));
    };
    Stmt transform = over_channels(ForKind::kVectorized, true, TransformTile(t, oc));
    Stmt stores = ir::IfThenElse(
        whole, over_channels(ForKind::kSerial, false, TileOutputs(oc, ty, tx, false)),
        over_channels(ForKind::kSerial, false, TileOutputs(oc, ty, tx, true)));
    Stmt tile = ir::Let(
        ty, arith::FloorDiv(t0_ + t, TilesW(conv_, m)),
        ir::Let(tx, arith::FloorMod(t0_ + t, TilesW(conv_, m)), ir::Seq({transform, stores})));
    return ir::Allocate(
        y_, Loop(t, arith::Min(I(tiles_), Tiles(conv_, m) - t0_), ForKind::kSerial, tile));
  }

  // y[i][oc][j] = (A^T mm[.][t][oc] A)[i, j].
  Stmt TransformTile(const PrimExpr& t, const PrimExpr& oc) const {
    const int64_t m = alg_.m, a = alg_.a();
    std::vector<std::vector<PrimExpr>> rows(m, std::vector<PrimExpr>(a));  // A^T mm
    for (int64_t j = 0; j < a; ++j) {
      std::vector<PrimExpr> column;
      for (int64_t i = 0; i < a; ++i) column.push_back(arith::Load(mm_, {I(i * a + j), t, oc}));
      std::vector<PrimExpr> at = Apply(alg_.at, m, column);
      for (int64_t i = 0; i < m; ++i) rows[i][j] = at[i];
    }
    std::vector<Stmt> stmts;
    for (int64_t i = 0; i < m; ++i) {
      std::vector<PrimExpr> y = Apply(alg_.at, m, rows[i]);
      for (int64_t j = 0; j < m; ++j) stmts.push_back(ir::Store(y_, {I(i), oc, I(j)}, y[j]));
    }
    return ir::Seq(stmts);
  }

  // The m x m outputs y[.][oc][.] of tile (ty, tx), each finished by the epilogue; `checked`:
  // only those inside the plane.
  Stmt TileOutputs(const PrimExpr& oc, const PrimExpr& ty, const PrimExpr& tx, bool checked) const {
    const int64_t m = alg_.m;
    std::vector<Stmt> stmts;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        PrimExpr oh = ty * I(m) + I(i), ow = tx * I(m) + I(j);
        PrimExpr y = arith::Load(y_, {I(i), oc, I(j)});
        Stmt out = Epilogue(oc, oh, ow, arith::Cast(conv_.acc_t, y));
        PrimExpr inside;
        if (checked && i > 0 && MaybeRagged(conv_.out_h, m)) inside = Lt(oh, conv_.out_h);
        if (checked && j > 0 && MaybeRagged(conv_.out_w, m)) {
          PrimExpr col = Lt(ow, conv_.out_w);
          inside = inside ? arith::Binary(ExprKind::kAnd, inside, col) : col;
        }
        stmts.push_back(inside ? ir::IfThenElse(inside, out) : out);
      }
    }
    return ir::Seq(stmts);
  }

  // The kernel's epilogue at (n, oc, oh, ow) with the sum `sum`.
  Stmt Epilogue(const PrimExpr& oc, const PrimExpr& oh, const PrimExpr& ow,
                const PrimExpr& sum) const {
    const std::vector<PrimExpr> from = {conv_.m, conv_.oh, conv_.ow}, to = {oc, oh, ow};
    std::vector<Stmt> stores;
    for (const Stmt& s : conv_.epilogue) {
      PrimExpr value = arith::Substitute(s->value, [&](const PrimExpr& x) -> PrimExpr {
        if (x->kind == ExprKind::kLoad && x->buffer == conv_.acc) return sum;
        return nullptr;
      });
      std::vector<PrimExpr> at;
      for (const PrimExpr& i : s->indices) at.push_back(Replace(i, from, to));
      stores.push_back(ir::Store(s->buffer, at, Replace(value, from, to)));
    }
    return ir::Seq(stores);
  }

  const Conv3x3& conv_;
  const Algorithm& alg_;
  const ir::NDArray& weights_;
  const int64_t lanes_;     // L
  const int64_t tiles_;     // T
  const int64_t cols_;      // P
  const int64_t channels_;  // M rounded up to L
  // Where the call splits: its groups (1 or 2), this task's group and the group's blocks of
  // output channels.
  const PrimExpr groups_ = arith::MakeVar("wgroups"), group_ = arith::MakeVar("wg");
  const PrimExpr group_blocks_ = arith::MakeVar("wgblocks");
  const PrimExpr task_ = arith::MakeVar("task"), t0_ = arith::MakeVar("wt0");
  const Buffer u_ =
      arith::MakeBuffer("w_wino", DataType::Float(32),
                        {I(alg_.positions()), I(channels_ / lanes_), I(conv_.cg), I(lanes_)});
  const Buffer v_ = arith::MakeBuffer("wino_v", DataType::Float(32),
                                      {I(alg_.positions()), I(tiles_), I(conv_.cg)});
  const Buffer mm_ = arith::MakeBuffer("wino_m", DataType::Float(32),
                                       {I(alg_.positions()), I(tiles_), I(channels_)});
  const Buffer acc_ = arith::MakeBuffer("acc", DataType::Float(32), {I(cols_), I(lanes_)});
  const Buffer patch_ =
      arith::MakeBuffer("wino_d", DataType::Float(32), {I(alg_.positions()), I(conv_.cg)});
  const Buffer y_ =
      arith::MakeBuffer("wino_y", DataType::Float(32), {I(alg_.m), I(channels_), I(alg_.m)});
};

}  // namespace

bool IsWinogradRule(std::string_view rule) { return AlgorithmOf(rule) != nullptr; }

std::optional<ScheduledKernel> ScheduleWinograd(const Stmt& body, const ir::Target& target,
                                                const ConstantOf& constant_of, const Trace& trace) {
  if (target.IsGpu()) return std::nullopt;
  std::optional<Conv3x3> conv = MatchConv3x3(body);
  if (!conv) return std::nullopt;
  const ir::NDArray* weights = WeightConstant(*conv, constant_of);
  if (!weights) return std::nullopt;
  const Algorithm* alg = AlgorithmOf(trace.rule);
  if (!alg) alg = &kAlgorithms[0];
  std::optional<Knobs> knobs = KnobsOf(trace, *conv, *alg, target);
  if (!knobs) return std::nullopt;
  WinogradBuilder builder(*conv, *alg, target, *weights, *knobs);
  return ScheduledKernel{builder.Build(), builder.Packed()};
}

std::vector<SearchSpace> WinogradSpaces(const Stmt& body, const ir::Target& target,
                                        const ConstantOf& constant_of) {
  if (target.IsGpu()) return {};
  std::optional<Conv3x3> conv = MatchConv3x3(body);
  if (!conv || !WeightConstant(*conv, constant_of)) return {};
  const Knobs defaults = DefaultKnobs(target);
  std::vector<int64_t> cols = {defaults.tile_cols};
  for (int64_t p : {4, 6, 8, 12, 14}) {
    if (p != defaults.tile_cols && TileFits(p, defaults.tile_vectors, target)) cols.push_back(p);
  }
  std::vector<SearchSpace> spaces;
  for (const Algorithm& alg : kAlgorithms) {
    std::vector<int64_t> tiles =
        TileChoices(*conv, alg, defaults.tile_vectors * VectorLanes(target));
    if (tiles.empty()) continue;
    spaces.push_back(
        SearchSpace{std::string(alg.rule),
                    {{"tiles_per_task", tiles}, {"tile_cols", cols}, {"tile_vectors", {2, 1}}}});
  }
  return spaces;
}

}  // namespace kiln::schedule
