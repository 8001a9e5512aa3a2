// Linear-algebra and signal operators: det, dft, stft and mel_weight_matrix, as
// interp/reduce_signal.cc defines them.
// Both compute in double like the reference, so that compiled and reference results agree
// to the last few bits rather than to float precision.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

const DataType kF64 = DataType::Float(64);

// Det copies each matrix into a kernel-local buffer; codegen keeps those on the stack, so
// the matrix must be small enough for one (256 x 256 doubles).
constexpr int64_t kMaxLocalMatrixBytes = int64_t{1} << 19;

PrimExpr I(int64_t v) { return arith::IntImm(v); }
PrimExpr Cmp(ExprKind kind, PrimExpr a, PrimExpr b) { return arith::Binary(kind, a, b); }
PrimExpr Div(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kDiv, a, b); }
PrimExpr Abs(PrimExpr v) { return arith::Call(v->dtype, "fabs", {v}); }

Stmt Loop(const std::string& name, PrimExpr extent, const std::function<Stmt(PrimExpr)>& body) {
  PrimExpr v = arith::MakeVar(name);
  return ir::For(v, I(0), extent, ir::ForKind::kSerial, body(v));
}

// A kernel-local scalar: a one-element buffer that loops update.
struct Cell {
  Cell(const std::string& name, DataType t) : buf(arith::MakeBuffer(name, t, {I(1)})) {}
  PrimExpr Get() const { return arith::Load(buf, {I(0)}); }
  Stmt Set(PrimExpr v) const { return ir::Store(buf, {I(0)}, v); }
  Buffer buf;
};

// ---- det -------------------------------------------------------------------------------

// The reference's Determinant on the n x n matrix in `a`: Gaussian elimination with
// partial pivoting (the first row of largest magnitude wins), the determinant the product
// of the pivots with a sign flip per row swap, and 0 as soon as a pivot column is all zero.
// `live` stands for the reference's early return.
class Elimination {
 public:
  Elimination(Buffer a, int64_t n) : a_(std::move(a)), n_(n) {}

  Stmt Run() const {
    Stmt columns =
        Loop("col", I(n_), [&](PrimExpr col) { return ir::IfThenElse(Live(), Column(col)); });
    return ir::Seq({det_.Set(F(1)), live_.Set(I(1)), columns});
  }
  PrimExpr Determinant() const { return det_.Get(); }
  std::vector<Buffer> Scratch() const { return {det_.buf, live_.buf, pivot_.buf, factor_.buf}; }

 private:
  static PrimExpr F(double v) { return arith::FloatImm(v, kF64); }
  PrimExpr A(PrimExpr r, PrimExpr c) const { return arith::Load(a_, {r, c}); }
  PrimExpr Live() const { return Cmp(ExprKind::kEQ, live_.Get(), I(1)); }
  // Loops over the rows below `col`.
  Stmt BelowRows(PrimExpr col, const std::function<Stmt(PrimExpr)>& body) const {
    return Loop("r", I(n_) - col - I(1), [&](PrimExpr r) { return body(col + I(1) + r); });
  }

  Stmt Column(PrimExpr col) const {
    PrimExpr pivot_value = A(pivot_.Get(), col);
    Stmt singular = ir::Seq({det_.Set(F(0)), live_.Set(I(0))});
    Stmt eliminate = ir::Seq({SwapPivotRow(col), det_.Set(det_.Get() * A(col, col)),
                              BelowRows(col, [&](PrimExpr r) { return EliminateRow(col, r); })});
    return ir::Seq({FindPivot(col),
                    ir::IfThenElse(Cmp(ExprKind::kEQ, pivot_value, F(0)), singular, eliminate)});
  }

  Stmt FindPivot(PrimExpr col) const {
    Stmt pick = BelowRows(col, [&](PrimExpr r) {
      PrimExpr larger = Cmp(ExprKind::kGT, Abs(A(r, col)), Abs(A(pivot_.Get(), col)));
      return ir::IfThenElse(larger, pivot_.Set(r));
    });
    return ir::Seq({pivot_.Set(col), pick});
  }

  Stmt SwapPivotRow(PrimExpr col) const {
    PrimExpr pivot = pivot_.Get();
    Stmt swap = Loop("k", I(n_), [&](PrimExpr k) {
      PrimExpr held = arith::MakeVar("held", kF64);
      return ir::Let(
          held, A(col, k),
          ir::Seq({ir::Store(a_, {col, k}, A(pivot, k)), ir::Store(a_, {pivot, k}, held)}));
    });
    return ir::IfThenElse(Cmp(ExprKind::kNE, pivot, col),
                          ir::Seq({swap, det_.Set(F(0) - det_.Get())}));
  }

  // row r -= (a[r, col] / a[col, col]) * row col, from column col on; the factor is read
  // once, before the loop overwrites a[r, col].
  Stmt EliminateRow(PrimExpr col, PrimExpr r) const {
    Stmt update = Loop("k", I(n_) - col, [&](PrimExpr k) {
      PrimExpr kk = col + k;
      return ir::Store(a_, {r, kk}, A(r, kk) - factor_.Get() * A(col, kk));
    });
    return ir::Seq({factor_.Set(Div(A(r, col), A(col, col))), update});
  }

  Buffer a_;
  int64_t n_;
  Cell det_{"det", kF64}, live_{"live", DataType::Int()}, pivot_{"pivot", DataType::Int()},
      factor_{"factor", kF64};
};

Stmt Allocating(const std::vector<Buffer>& buffers, Stmt body) {
  for (size_t i = buffers.size(); i-- > 0;) body = ir::Allocate(buffers[i], body);
  return body;
}

// det(x [..., n, n]) -> [...]: each matrix is copied into a local double buffer and
// eliminated there.
absl::StatusOr<Stmt> DetBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  size_t rank = x->shape.size();
  if (rank < 2) return absl::InvalidArgumentError("op det: input must have rank >= 2");
  const PrimExpr& n_expr = x->shape[rank - 1];
  if (n_expr->kind != ExprKind::kIntImm) {
    return absl::UnimplementedError(
        "op det: the matrix size must be known at compile time (each matrix is eliminated in a "
        "kernel-local copy)");
  }
  int64_t n = n_expr->int_value;
  if (n * n * 8 > kMaxLocalMatrixBytes) {
    return absl::UnimplementedError(
        absl::StrCat("op det: ", n, " x ", n, " matrices are too large for a kernel-local copy"));
  }
  Buffer a = arith::MakeBuffer("a", kF64, {I(n), I(n)});
  Elimination elim(a, n);
  return LoopNest(k.out->shape, "m", [&](const Indices& m) {
    Stmt copy = LoopNest({I(n), I(n)}, "e", [&](const Indices& rc) {
      Indices at = m;
      at.insert(at.end(), rc.begin(), rc.end());
      return ir::Store(a, rc, CastIfNeeded(kF64, arith::Load(x, at)));
    });
    Stmt store = ir::Store(k.out, m, CastIfNeeded(k.out->dtype, elim.Determinant()));
    std::vector<Buffer> scratch = elim.Scratch();
    scratch.insert(scratch.begin(), a);
    return Allocating(scratch, ir::Seq({copy, elim.Run(), store}));
  });
}

// ---- dft -------------------------------------------------------------------------------

// The transform length: the dft_length operand (a constant; a value read at run time would
// leave the output shape unknown, which legalize rejects before this) or the axis extent.
absl::StatusOr<PrimExpr> DftLength(const KernelContext& k, PrimExpr axis_extent) {
  if (k.call.args.size() < 2 || ir::IsNone(k.call.args[1])) return axis_extent;
  auto length = IntsOperand(k.call, 1);
  if (!length || length->size() != 1) return NotConstant(k.call, 1, "dft_length");
  if ((*length)[0]->kind == ExprKind::kIntImm && (*length)[0]->int_value <= 0) {
    return absl::InvalidArgumentError("op dft: dft_length must be positive");
  }
  return (*length)[0];
}

// acc[0] + i acc[1] += (re + i im) e^(i angle), im null for a real input; f64 throughout.
Stmt AddRotated(const Buffer& acc, PrimExpr re, PrimExpr im, PrimExpr angle_value) {
  PrimExpr angle = arith::MakeVar("angle", kF64);
  PrimExpr c = arith::Call(kF64, "cos", {angle}), s = arith::Call(kF64, "sin", {angle});
  PrimExpr real = im ? re * c - im * s : re * c;
  PrimExpr imag = im ? re * s + im * c : re * s;
  PrimExpr sum_re = arith::Load(acc, {I(0)}), sum_im = arith::Load(acc, {I(1)});
  return ir::Let(
      angle, std::move(angle_value),
      ir::Seq({ir::Store(acc, {I(0)}, sum_re + real), ir::Store(acc, {I(1)}, sum_im + imag)}));
}

// out[..., m, ..., (re, im)] = sum_{k < min(n, n_in)} x[..., k, ...] e^(-+2 pi i m k / n),
// divided by n when inverse: the reference's naive transform of the zero-padded signal,
// with m*k reduced mod n first as it does. The sums run in a two-element local buffer.
absl::StatusOr<Stmt> DftBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  int64_t rank = x->shape.size();
  if (rank < 2) return absl::InvalidArgumentError("op dft: input must have rank >= 2");
  KILN_ASSIGN_OR_RETURN(
      int64_t axis, op::NormalizeAxis(k.call, op::GetIntAttr(k.call.attrs, "axis", 1), rank - 1));
  bool inverse = op::GetIntAttr(k.call.attrs, "inverse", 0) != 0;
  bool complex_input = x->shape.back()->is_const_int(2);
  PrimExpr n_in = x->shape[axis];
  KILN_ASSIGN_OR_RETURN(PrimExpr n, DftLength(k, n_in));
  PrimExpr taps = k.analyzer.Simplify(arith::Min(n, n_in));
  PrimExpr n_f = CastIfNeeded(kF64, n);
  std::vector<PrimExpr> positions(k.out->shape.begin(), k.out->shape.end() - 1);
  Buffer acc = arith::MakeBuffer("acc", kF64, {I(2)});
  auto sum = [&](int64_t part) { return arith::Load(acc, {I(part)}); };
  return LoopNest(positions, "i", [&](const Indices& idx) {
    Stmt accumulate = Loop("k", taps, [&](PrimExpr t) {
      Indices at = idx;
      at[axis] = t;
      at.push_back(I(0));
      PrimExpr re = CastIfNeeded(kF64, arith::Load(x, at));
      at.back() = I(1);
      PrimExpr im = complex_input ? CastIfNeeded(kF64, arith::Load(x, at)) : nullptr;
      PrimExpr angle_value = Div(DoubleImm((inverse ? 2 : -2) * M_PI) *
                                     arith::Cast(kF64, arith::FloorMod(idx[axis] * t, n)),
                                 n_f);
      return AddRotated(acc, re, im, angle_value);
    });
    std::vector<Stmt> body = {ir::Store(acc, {I(0)}, DoubleImm(0)),
                              ir::Store(acc, {I(1)}, DoubleImm(0)), accumulate};
    for (int64_t part = 0; part < 2; ++part) {
      Indices at = idx;
      at.push_back(I(part));
      PrimExpr v = inverse ? Div(sum(part), n_f) : sum(part);
      body.push_back(ir::Store(k.out, at, CastIfNeeded(k.out->dtype, v)));
    }
    return ir::Allocate(acc, ir::Seq(body));
  });
}

// ---- stft ------------------------------------------------------------------------------

// A frame size operand: a constant or the value the importer bound (ShapeExpr).
absl::StatusOr<PrimExpr> FrameOperand(const KernelContext& k, size_t i, const std::string& what) {
  auto v = IntsOperand(k.call, i);
  if (!v || v->size() != 1) return NotConstant(k.call, i, what);
  return (*v)[0];
}

// out[b, f, m, (re, im)] = sum_{t < frame} w[t] x[b, f * step + t] e^(-2 pi i m t / frame):
// the reference's naive transform of each windowed frame, m*t reduced mod frame first, in a
// two-element local buffer as dft.
absl::StatusOr<Stmt> StftBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  if (x->shape.size() != 3) return absl::InvalidArgumentError("op stft: signal must be 3-D");
  KILN_ASSIGN_OR_RETURN(PrimExpr step, FrameOperand(k, 1, "frame_step"));
  const Buffer* window = OptionalInput(k, 2);
  PrimExpr frame;
  if (k.call.args.size() > 3 && !ir::IsNone(k.call.args[3])) {
    KILN_ASSIGN_OR_RETURN(frame, FrameOperand(k, 3, "frame_length"));
  } else if (window && (*window)->shape.size() == 1) {
    frame = (*window)->shape[0];
  } else {
    return absl::InvalidArgumentError("op stft: needs frame_length or a 1-D window");
  }
  bool complex_input = x->shape[2]->is_const_int(2);
  PrimExpr frame_f = CastIfNeeded(kF64, frame);
  std::vector<PrimExpr> positions(k.out->shape.begin(), k.out->shape.end() - 1);
  Buffer acc = arith::MakeBuffer("acc", kF64, {I(2)});
  auto sum = [&](int64_t part) { return arith::Load(acc, {I(part)}); };
  return LoopNest(positions, "i", [&](const Indices& idx) {
    Stmt accumulate = Loop("t", frame, [&](PrimExpr t) {
      Indices at = {idx[0], idx[1] * step + t, I(0)};
      PrimExpr w = window ? CastIfNeeded(kF64, arith::Load(*window, {t})) : nullptr;
      PrimExpr re = CastIfNeeded(kF64, arith::Load(x, at));
      at.back() = I(1);
      PrimExpr im = complex_input ? CastIfNeeded(kF64, arith::Load(x, at)) : nullptr;
      if (w) {
        re = w * re;
        if (im) im = w * im;
      }
      PrimExpr angle_value = Div(
          DoubleImm(-2 * M_PI) * arith::Cast(kF64, arith::FloorMod(idx[2] * t, frame)), frame_f);
      return AddRotated(acc, re, im, angle_value);
    });
    std::vector<Stmt> body = {ir::Store(acc, {I(0)}, DoubleImm(0)),
                              ir::Store(acc, {I(1)}, DoubleImm(0)), accumulate};
    for (int64_t part = 0; part < 2; ++part) {
      Indices at = idx;
      at.push_back(I(part));
      body.push_back(ir::Store(k.out, at, CastIfNeeded(k.out->dtype, sum(part))));
    }
    return ir::Allocate(acc, ir::Seq(body));
  });
}

// ---- mel_weight_matrix -----------------------------------------------------------------

// out[j, i]: triangular filter i at spectrogram bin j, with the reference's band edges
// (float32 mel values, then double; interp/reduce_signal.cc). Each element is independent:
// the rising side on [left, center] (1 at center when left == center), overwritten by the
// falling side on [center, right). A filter that would touch a bin outside the output fails
// the call first, as the reference does ("mel band edge out of range").
absl::StatusOr<Stmt> MelWeightMatrixBody(const KernelContext& k) {
  const DataType f32 = DataType::Float(32), i64 = DataType::Int(64);
  PrimExpr bins = CastIfNeeded(i64, ScalarOperand(k, 0));
  PrimExpr dft_length = CastIfNeeded(i64, ScalarOperand(k, 1));
  PrimExpr rate = CastIfNeeded(i64, ScalarOperand(k, 2));
  auto f32_imm = [&](double v) { return arith::FloatImm(v, f32); };
  // 2595 log10(1 + hz / 700) in float32; log10 is rounded once from double.
  auto mel = [&](PrimExpr hz) {
    PrimExpr ratio = CastIfNeeded(kF64, f32_imm(1) + Div(CastIfNeeded(f32, hz), f32_imm(700)));
    PrimExpr log10 = Div(arith::Call(kF64, "log", {ratio}), DoubleImm(std::log(10.0)));
    return f32_imm(2595) * arith::Cast(f32, log10);
  };
  PrimExpr high = mel(ScalarOperand(k, 4));
  // `body` of filter i's edges (left, center, right), each bound once in fresh variables.
  auto with_edges = [&](PrimExpr i, const std::function<Stmt(PrimExpr, PrimExpr, PrimExpr)>& body) {
    PrimExpr low_var = arith::MakeVar("low", f32), step_var = arith::MakeVar("step", f32);
    PrimExpr step = Div(high - low_var, arith::Cast(f32, bins + I(2)));
    auto edge = [&](PrimExpr e) {
      PrimExpr exponent =
          Div(arith::Cast(kF64, e) * arith::Cast(kF64, step_var) + arith::Cast(kF64, low_var),
              DoubleImm(2595));
      PrimExpr hz =
          DoubleImm(700) * (arith::Call(kF64, "pow", {DoubleImm(10), exponent}) - DoubleImm(1));
      PrimExpr scaled = Div(arith::Cast(kF64, dft_length + I(1)) * hz, arith::Cast(kF64, rate));
      return arith::Cast(i64, arith::Call(kF64, "floor", {scaled}));
    };
    PrimExpr left = arith::MakeVar("left", i64), center = arith::MakeVar("center", i64),
             right = arith::MakeVar("right", i64);
    Stmt s = body(left, center, right);
    s = ir::Let(right, edge(i + I(2)), s);
    s = ir::Let(center, edge(i + I(1)), s);
    s = ir::Let(left, edge(i), s);
    s = ir::Let(step_var, step, s);
    return ir::Let(low_var, mel(ScalarOperand(k, 3)), s);
  };
  // The lowest and highest bins filter i touches; an out-of-range one is reported (as an index
  // the model computed), else 0 is checked.
  PrimExpr spectrogram_bins = k.out->shape[0];
  Stmt check_edges = Loop("i", k.out->shape[1], [&](PrimExpr i) {
    return with_edges(i, [&](PrimExpr left, PrimExpr center, PrimExpr right) {
      PrimExpr rises = Cmp(ExprKind::kLE, left, center), falls = Cmp(ExprKind::kLT, center, right);
      PrimExpr lowest = arith::Select(rises, left, center);
      PrimExpr highest = arith::Select(falls, right - I(1), center);
      PrimExpr outside = arith::Select(
          Cmp(ExprKind::kLT, lowest, I(0)), lowest,
          arith::Select(Cmp(ExprKind::kGE, highest, spectrogram_bins), highest, I(0)));
      PrimExpr touched = arith::Binary(ExprKind::kOr, rises, falls);
      return ir::Evaluate(CheckedIndex(k, k.call.args.size(), arith::Select(touched, outside, I(0)),
                                       spectrogram_bins,
                                       /*dim=*/-1, /*wrap=*/false));
    });
  });
  Stmt fill = LoopNest(k.out->shape, "e", [&](const Indices& idx) {
    PrimExpr j = idx[0], i = idx[1];
    return with_edges(i, [&](PrimExpr left, PrimExpr center, PrimExpr right) {
      auto ratio = [](PrimExpr num, PrimExpr den) {
        return Div(arith::Cast(kF64, num), arith::Cast(kF64, den));
      };
      PrimExpr rising =
          arith::Select(Cmp(ExprKind::kEQ, center, left),
                        arith::Select(Cmp(ExprKind::kEQ, j, center), DoubleImm(1), DoubleImm(0)),
                        arith::Select(arith::Binary(ExprKind::kAnd, Cmp(ExprKind::kLE, left, j),
                                                    Cmp(ExprKind::kLE, j, center)),
                                      ratio(j - left, center - left), DoubleImm(0)));
      PrimExpr value = arith::Select(arith::Binary(ExprKind::kAnd, Cmp(ExprKind::kLE, center, j),
                                                   Cmp(ExprKind::kLT, j, right)),
                                     ratio(right - j, right - center), rising);
      return ir::Store(k.out, idx, CastIfNeeded(k.out->dtype, value));
    });
  });
  return ir::Seq({check_edges, fill});
}

}  // namespace

void RegisterSignalKernelBuilders(KernelBuilderTable& table) {
  table["det"] = DetBody;
  table["dft"] = DftBody;
  table["stft"] = StftBody;
  table["mel_weight_matrix"] = MelWeightMatrixBody;
}

}  // namespace kiln::transform
