// The Winograd rule: F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015). Output tile Y (2x2) of the 4x4 input patch d and the 3x3 filter g:
//
//   Y = A^T [(G g G^T) . (B^T d B)] A     (. elementwise, over the 4x4 positions (xi, nu))
//
// so each (output channel, input channel, tile) takes 16 products instead of 36. Summed over
// the input channels, the 16 positions are 16 independent GEMMs:
//
//   at compile time: U[xi, nu][m, c] = (G g[m, c] G^T)[xi, nu], packed [16][M / L][C][L]
//   for task in [0, batch * tile blocks) parallel
//     n, t0 = the task's batch element and first tile; T tiles (the last block clamps)
//     allocate v[16][C][T]; v[xi, nu][c][t] = (B^T d B)[xi, nu], d the tile's 4x4 patch of
//       x[n, c] (input rows and columns 2 * tile - pad, zero outside the input)
//     allocate mm[16][T][M rounded to L]
//     for e in 16, ocb in M / L, register tiles of P tiles (the last moved back to end at T):
//       acc[P][L] = sum over c of v[e][c][tile] * U[e][ocb][c][lane]; stored to mm
//     for t < tiles in the block, oc < M: Y = A^T mm[.][t][oc] A; the epilogue stores each of
//       the 2x2 outputs inside the output plane
//
// acc is a register tile as in the conv rule (L = tile_vectors vectors of output channels
// in the lanes, P columns unrolled). Sums run in f32 in a different order than the direct
// conv's, and the transforms round too: results differ from it by a few ulps of the inputs'
// magnitude, well inside the tuner's tolerance (rtol 1e-4, atol 1e-5; the tests check it).
#include "compiler/schedule/winograd_rule.h"

#include <algorithm>
#include <array>

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
// two together within the ~1 MiB the rule may take on a thread's stack.
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

// The knobs (WinogradSpace):
//  - tiles_per_task (T): output tiles whose inputs one task transforms and multiplies; the
//    first of kTileChoices whose buffers fit kMaxLocalBytes, by default. Small blocks keep the
//    transformed input in L1 across the GEMMs (resnet18's 3x3 convs at 224 x 224 tuned to
//    8 tiles on most of them).
//  - tile_cols (P): tiles per register tile of the GEMM; 4 by default (dividing T: the last
//    register tile of a block moves back and repeats columns otherwise).
//  - tile_vectors: vectors of output channels per register tile (L = tile_vectors * lanes);
//    2 by default (P x 2 accumulators, the U vectors and a broadcast within AVX2's 16
//    registers up to P = 6).
struct Knobs {
  int64_t tiles_per_task = 8, tile_cols = 4, tile_vectors = 2;
};
constexpr int64_t kTileChoices[] = {8, 16, 12, 24, 32, 4, 64};

PrimExpr TilesW(const Conv3x3& conv) { return arith::FloorDiv(conv.out_w + I(1), I(2)); }
PrimExpr Tiles(const Conv3x3& conv) {
  return arith::Analyzer().Simplify(arith::FloorDiv(conv.out_h + I(1), I(2)) * TilesW(conv));
}

// At most `tiles` tiles, fewer when the plane has fewer (a static plane).
int64_t AtMostTiles(const Conv3x3& conv, int64_t tiles) {
  const PrimExpr all = Tiles(conv);
  if (all->kind != ExprKind::kIntImm) return tiles;
  return std::max<int64_t>(1, std::min(tiles, all->int_value));
}

// Output channels rounded up to whole blocks of `lanes`.
int64_t PaddedChannels(const Conv3x3& conv, int64_t lanes) {
  return (conv.channels + lanes - 1) / lanes * lanes;
}

// Whether a task of `tiles` tiles keeps each of its buffers within kMaxLocalBytes.
bool Fits(const Conv3x3& conv, int64_t tiles, int64_t lanes) {
  tiles = AtMostTiles(conv, tiles);
  return 16 * conv.cg * tiles * 4 <= kMaxLocalBytes &&
         16 * PaddedChannels(conv, lanes) * tiles * 4 <= kMaxLocalBytes;
}

std::vector<int64_t> TileChoices(const Conv3x3& conv, int64_t lanes) {
  std::vector<int64_t> choices;
  for (int64_t t : kTileChoices) {
    if (Fits(conv, t, lanes)) choices.push_back(t);
  }
  return choices;
}

// Values outside these get the default.
constexpr int64_t kMaxTileCols = 16;
constexpr int64_t kMaxTileVectors = 4;

std::optional<Knobs> KnobsOf(const Trace& trace, const Conv3x3& conv, const ir::Target& target) {
  const Trace none;
  const Trace& t = trace.rule == "winograd" ? trace : none;
  Knobs k;
  auto in_range = [](int64_t v, int64_t max, int64_t fallback) {
    return v >= 1 && v <= max ? v : fallback;
  };
  k.tile_cols = in_range(t.Get("tile_cols", k.tile_cols), kMaxTileCols, k.tile_cols);
  k.tile_vectors = in_range(t.Get("tile_vectors", k.tile_vectors), kMaxTileVectors, k.tile_vectors);
  const int64_t lanes = k.tile_vectors * VectorLanes(target);
  std::vector<int64_t> tiles = TileChoices(conv, lanes);
  if (tiles.empty()) return std::nullopt;
  const int64_t asked = t.Get("tiles_per_task", tiles[0]);
  k.tiles_per_task = std::find(tiles.begin(), tiles.end(), asked) != tiles.end() ? asked : tiles[0];
  return k;
}

// F(2x2, 3x3)'s matrices (Lavin & Gray, section 4.1).
constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

// B^T applied to the 4-vector `d` (a row or column of the patch).
std::array<PrimExpr, 4> ApplyBt(const std::array<PrimExpr, 4>& d) {
  return {d[0] - d[2], d[1] + d[2], d[2] - d[1], d[1] - d[3]};
}

// A^T applied to the 4-vector `m`.
std::array<PrimExpr, 2> ApplyAt(const std::array<PrimExpr, 4>& m) {
  return {m[0] + m[1] + m[2], m[1] - m[2] - m[3]};
}

// Whether an output extent may be odd: its last tile then has outputs past the plane.
bool MaybeOdd(const PrimExpr& extent) {
  return extent->kind != ExprKind::kIntImm || extent->int_value % 2 == 1;
}

class WinogradBuilder {
 public:
  WinogradBuilder(const Conv3x3& conv, const ir::Target& target, const ir::NDArray& weights,
                  const Knobs& knobs)
      : conv_(conv),
        weights_(weights),
        lanes_(knobs.tile_vectors * VectorLanes(target)),
        tiles_(AtMostTiles(conv, knobs.tiles_per_task)),
        cols_(std::min(knobs.tile_cols, tiles_)),
        channels_(PaddedChannels(conv, lanes_)) {}

  Stmt Build() const {
    const PrimExpr blocks = arith::Analyzer().Simplify(CeilDiv(Tiles(conv_), tiles_));
    Stmt body = ir::Allocate(
        v_, ir::Allocate(mm_, ir::Seq({InputTransform(), Gemms(), OutputTransform()})));
    body = ir::Let(t0_, arith::FloorMod(task_, blocks) * I(tiles_), body);
    body = ir::Let(conv_.n, arith::FloorDiv(task_, blocks), body);
    return Loop(task_, conv_.batch * blocks, ForKind::kParallel, body);
  }

  // U[e][ocb][c][lane] = (G g[oc, c] G^T)[e / 4, e % 4] for oc = ocb * L + lane, zero past M.
  PackedWeights Packed() const {
    const int64_t blocks = channels_ / lanes_, cg = conv_.cg;
    ir::NDArray data = ir::NDArray::Zeros(DataType::Float(32), {16, blocks, cg, lanes_});
    const float* w = weights_.data<float>();
    float* u = data.data<float>();
    for (int64_t oc = 0; oc < conv_.channels; ++oc) {
      for (int64_t c = 0; c < cg; ++c) {
        const float* g = w + (oc * cg + c) * 9;
        double gg[4][3] = {};  // G g
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 3; ++j) {
            for (int k = 0; k < 3; ++k) gg[i][j] += kG[i][k] * g[k * 3 + j];
          }
        }
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 4; ++j) {
            double v = 0;  // (G g G^T)[i, j]
            for (int k = 0; k < 3; ++k) v += gg[i][k] * kG[j][k];
            u[(((i * 4 + j) * blocks + oc / lanes_) * cg + c) * lanes_ + oc % lanes_] =
                static_cast<float>(v);
          }
        }
      }
    }
    return PackedWeights{conv_.w, u_, std::move(data)};
  }

 private:
  // The tile at block position t: clamped to the last, so a partial block repeats it.
  PrimExpr TileAt(const PrimExpr& t) const { return arith::Min(t0_ + t, Tiles(conv_) - I(1)); }

  // v[e][c][t] = (B^T d B)[e / 4, e % 4], d the 4x4 patch of tile t in channel c.
  Stmt InputTransform() const {
    const PrimExpr c = arith::MakeVar("wic"), t = arith::MakeVar("wit");
    const PrimExpr tile = TileAt(t);
    const PrimExpr ih0 = arith::FloorDiv(tile, TilesW(conv_)) * I(2) - I(conv_.pad_top);
    const PrimExpr iw0 = arith::FloorMod(tile, TilesW(conv_)) * I(2) - I(conv_.pad_left);
    // The patch, zero outside the input. Branch-free, so that the loop over tiles vectorizes
    // (a branch to an unchecked form for interior tiles measured 20% slower on resnet18).
    std::vector<Stmt> stmts;
    for (int64_t a = 0; a < 4; ++a) {
      for (int64_t b = 0; b < 4; ++b) {
        PrimExpr ih = ih0 + I(a), iw = iw0 + I(b);
        auto clamp = [](const PrimExpr& i, const PrimExpr& extent) {
          return arith::Min(arith::Max(i, I(0)), extent - I(1));
        };
        PrimExpr inside = arith::Binary(
            ExprKind::kAnd, arith::Binary(ExprKind::kAnd, Lt(ih, conv_.in_h), Lt(I(-1), ih)),
            arith::Binary(ExprKind::kAnd, Lt(iw, conv_.in_w), Lt(I(-1), iw)));
        PrimExpr x =
            arith::Load(conv_.x, {conv_.n, c, clamp(ih, conv_.in_h), clamp(iw, conv_.in_w)});
        stmts.push_back(
            ir::Store(patch_, {I(a * 4 + b)}, arith::Select(inside, x, arith::FloatImm(0))));
      }
    }
    std::array<std::array<PrimExpr, 4>, 4> rows;  // B^T d, by row then column
    for (int64_t b = 0; b < 4; ++b) {
      std::array<PrimExpr, 4> column;
      for (int64_t a = 0; a < 4; ++a) column[a] = arith::Load(patch_, {I(a * 4 + b)});
      std::array<PrimExpr, 4> bt = ApplyBt(column);
      for (int64_t i = 0; i < 4; ++i) rows[i][b] = bt[i];
    }
    for (int64_t i = 0; i < 4; ++i) {
      std::array<PrimExpr, 4> v = ApplyBt(rows[i]);  // (B^T d B)[i, :]
      for (int64_t j = 0; j < 4; ++j) stmts.push_back(ir::Store(v_, {I(i * 4 + j), c, t}, v[j]));
    }
    Stmt one = ir::Allocate(patch_, ir::Seq(stmts));
    return Loop(c, I(conv_.cg), ForKind::kSerial, Loop(t, I(tiles_), ForKind::kSerial, one));
  }

  // mm[e][t][oc] = sum over c of U[e][oc][c] * v[e][c][t], in register tiles of P tiles by L
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
    const PrimExpr product =
        arith::Load(v_, {e, c, first + p}) * arith::Load(u_, {e, ocb, c, lane});
    Stmt zero = over_tile(ir::Store(acc_, {p, lane}, arith::FloatImm(0)), ForKind::kUnrolled);
    Stmt sum = Loop(c, I(conv_.cg), ForKind::kSerial,
                    over_tile(ir::Store(acc_, {p, lane}, acc + product), ForKind::kVectorized));
    Stmt store =
        over_tile(ir::Store(mm_, {e, first + p, ocb * I(lanes_) + lane}, acc), ForKind::kUnrolled);
    Stmt tile = ir::Let(first, arith::Min(tt * I(cols_), I(tiles_ - cols_)),
                        ir::Allocate(acc_, ir::Seq({zero, sum, store})));
    return Loop(e, I(16), ForKind::kSerial,
                Loop(ocb, I(channels_ / lanes_), ForKind::kSerial,
                     Loop(tt, I((tiles_ + cols_ - 1) / cols_), ForKind::kSerial, tile)));
  }

  // Y = A^T mm[.][t][oc] A for the block's tiles, each output inside the plane finished by
  // the kernel's epilogue.
  Stmt OutputTransform() const {
    const PrimExpr t = arith::MakeVar("wot"), oc = arith::MakeVar("woc");
    const PrimExpr ty = arith::MakeVar("wty"), tx = arith::MakeVar("wtx");
    // A tile whose 2x2 outputs all lie inside the plane (all but the last row and column of
    // an odd plane) stores them unchecked, over vectors of output channels.
    PrimExpr whole = arith::Binary(ExprKind::kAnd, Lt(ty * I(2) + I(1), conv_.out_h),
                                   Lt(tx * I(2) + I(1), conv_.out_w));
    Stmt tile = ir::IfThenElse(
        whole, Loop(oc, I(conv_.channels), ForKind::kVectorized, TileOutputs(t, oc, ty, tx, false)),
        Loop(oc, I(conv_.channels), ForKind::kSerial, TileOutputs(t, oc, ty, tx, true)));
    tile = ir::Let(ty, arith::FloorDiv(t0_ + t, TilesW(conv_)),
                   ir::Let(tx, arith::FloorMod(t0_ + t, TilesW(conv_)), tile));
    return Loop(t, arith::Min(I(tiles_), Tiles(conv_) - t0_), ForKind::kSerial, tile);
  }

  // Y = A^T mm[.][t][oc] A of tile (ty, tx), each output finished by the epilogue; `checked`:
  // only those inside the plane.
  Stmt TileOutputs(const PrimExpr& t, const PrimExpr& oc, const PrimExpr& ty, const PrimExpr& tx,
                   bool checked) const {
    std::array<std::array<PrimExpr, 4>, 2> rows;  // A^T m
    for (int64_t b = 0; b < 4; ++b) {
      std::array<PrimExpr, 4> column;
      for (int64_t a = 0; a < 4; ++a) column[a] = arith::Load(mm_, {I(a * 4 + b), t, oc});
      std::array<PrimExpr, 2> at = ApplyAt(column);
      for (int64_t i = 0; i < 2; ++i) rows[i][b] = at[i];
    }
    std::vector<Stmt> stmts;
    for (int64_t i = 0; i < 2; ++i) {
      std::array<PrimExpr, 2> y = ApplyAt(rows[i]);
      for (int64_t j = 0; j < 2; ++j) {
        PrimExpr oh = ty * I(2) + I(i), ow = tx * I(2) + I(j);
        Stmt out = Epilogue(oc, oh, ow, arith::Cast(conv_.acc_t, y[j]));
        PrimExpr inside;
        if (checked && i == 1 && MaybeOdd(conv_.out_h)) inside = Lt(oh, conv_.out_h);
        if (checked && j == 1 && MaybeOdd(conv_.out_w)) {
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
  const ir::NDArray& weights_;
  const int64_t lanes_;     // L
  const int64_t tiles_;     // T
  const int64_t cols_;      // P
  const int64_t channels_;  // M rounded up to L
  const PrimExpr task_ = arith::MakeVar("task"), t0_ = arith::MakeVar("wt0");
  const Buffer u_ = arith::MakeBuffer("w_wino", DataType::Float(32),
                                      {I(16), I(channels_ / lanes_), I(conv_.cg), I(lanes_)});
  const Buffer v_ =
      arith::MakeBuffer("wino_v", DataType::Float(32), {I(16), I(conv_.cg), I(tiles_)});
  const Buffer mm_ =
      arith::MakeBuffer("wino_m", DataType::Float(32), {I(16), I(tiles_), I(channels_)});
  const Buffer acc_ = arith::MakeBuffer("acc", DataType::Float(32), {I(cols_), I(lanes_)});
  const Buffer patch_ = arith::MakeBuffer("wino_d", DataType::Float(32), {I(16)});
};

}  // namespace

std::optional<ScheduledKernel> ScheduleWinograd(const Stmt& body, const ir::Target& target,
                                                const ConstantOf& constant_of, const Trace& trace) {
  if (target.IsGpu()) return std::nullopt;
  std::optional<Conv3x3> conv = MatchConv3x3(body);
  if (!conv) return std::nullopt;
  const ir::NDArray* weights = WeightConstant(*conv, constant_of);
  if (!weights) return std::nullopt;
  std::optional<Knobs> knobs = KnobsOf(trace, *conv, target);
  if (!knobs) return std::nullopt;
  WinogradBuilder builder(*conv, target, *weights, *knobs);
  return ScheduledKernel{builder.Build(), builder.Packed()};
}

std::optional<SearchSpace> WinogradSpace(const Stmt& body, const ir::Target& target,
                                         const ConstantOf& constant_of) {
  if (target.IsGpu()) return std::nullopt;
  std::optional<Conv3x3> conv = MatchConv3x3(body);
  if (!conv || !WeightConstant(*conv, constant_of)) return std::nullopt;
  const Knobs defaults;
  std::vector<int64_t> tiles = TileChoices(*conv, defaults.tile_vectors * VectorLanes(target));
  if (tiles.empty()) return std::nullopt;
  // P x tile_vectors accumulators, the U vectors and one broadcast within the registers.
  std::vector<int64_t> cols = {defaults.tile_cols};
  for (int64_t p : {6, 8, 12, 14}) {
    if (p * defaults.tile_vectors + 3 <= target.VectorRegisters()) cols.push_back(p);
  }
  return SearchSpace{"winograd",
                     {{"tiles_per_task", tiles}, {"tile_cols", cols}, {"tile_vectors", {2, 1}}}};
}

}  // namespace kiln::schedule
