// Sampling at positions computed at run time: grid_sample and roi_align, as
// interp/image_sampling.cc defines them (PyTorch's grid_sampler_2d, onnxruntime's RoIAlign),
// and max_unpool, which writes to positions read at run time (interp/nn_pool.cc). All three
// compute in double like the reference. A position outside the input reads 0 or is skipped
// as the reference does; every load's indices are clamped into the buffer, so a bad grid or
// roi can never read or write out of bounds; an index read from a tensor (roi_align's batch
// entry, max_unpool's positions) is checked, and out of range fails the call.
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/nn_window.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {

void RegisterImageSamplingKernelBuilders(KernelBuilderTable& table);

namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

const DataType kF64 = DataType::Float(64);

PrimExpr I(int64_t v) { return arith::IntImm(v); }
PrimExpr F(double v) { return DoubleImm(v); }
PrimExpr ToF64(PrimExpr v) { return CastIfNeeded(kF64, v); }
PrimExpr ToInt(PrimExpr v) { return CastIfNeeded(DataType::Int(), v); }
PrimExpr Cmp(ExprKind kind, PrimExpr a, PrimExpr b) { return arith::Binary(kind, a, b); }
PrimExpr And(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kAnd, a, b); }
PrimExpr Or(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kOr, a, b); }
PrimExpr Div(PrimExpr a, PrimExpr b) { return arith::Binary(ExprKind::kDiv, a, b); }
PrimExpr Floor(PrimExpr v) { return arith::Call(kF64, "floor", {v}); }
PrimExpr Clamp(PrimExpr v, PrimExpr lo, PrimExpr hi) { return arith::Min(arith::Max(v, lo), hi); }
PrimExpr InRange(PrimExpr v, PrimExpr extent) {
  return And(Cmp(ExprKind::kGE, v, I(0)), Cmp(ExprKind::kLT, v, extent));
}

// Names the intermediate values of one output element: each Bind becomes a Let around the
// statement that Wrap is given, so a value used several times is computed once and the
// expressions stay readable when printed.
class Lets {
 public:
  PrimExpr Bind(const std::string& name, PrimExpr value) {
    PrimExpr var = arith::MakeVar(name, value->dtype);
    lets_.push_back({var, std::move(value)});
    return var;
  }
  Stmt Wrap(Stmt body) const {
    for (size_t i = lets_.size(); i-- > 0;) body = ir::Let(lets_[i].first, lets_[i].second, body);
    return body;
  }

 private:
  std::vector<std::pair<PrimExpr, PrimExpr>> lets_;
};

// ---- grid_sample -----------------------------------------------------------------------

struct GridParams {
  std::string mode;     // bilinear, nearest, bicubic
  std::string padding;  // zeros, border, reflection
  bool align_corners = false;
};

// Grid coordinates run from -1 to 1 across the image: the centers of the corner pixels with
// align_corners, their outer edges without.
PrimExpr Unnormalize(PrimExpr coord, PrimExpr size, bool align_corners) {
  if (align_corners) return Div(coord + F(1), F(2)) * (size - F(1));
  return Div((coord + F(1)) * size - F(1), F(2));
}

// Mirrors v into [twice_low / 2, twice_high / 2] (twice_low < twice_high).
PrimExpr Reflect(Lets& lets, PrimExpr v, PrimExpr twice_low, PrimExpr twice_high) {
  PrimExpr low = Div(twice_low, F(2)), span = Div(twice_high - twice_low, F(2));
  PrimExpr dist = lets.Bind("dist", arith::Call(kF64, "fabs", {v - low}));
  PrimExpr flips = lets.Bind("flips", Floor(Div(dist, span)));
  PrimExpr extra = lets.Bind("extra", arith::FloorMod(dist, span));
  PrimExpr even = Cmp(ExprKind::kEQ, arith::FloorMod(flips, F(2)), F(0));
  return arith::Select(even, extra + low, span - extra + low);
}

// Applies padding_mode to a source coordinate; "zeros" leaves it (reads outside give 0).
PrimExpr PadCoordinate(Lets& lets, PrimExpr v, PrimExpr size, const GridParams& p) {
  PrimExpr high = size - F(1);
  if (p.padding == "border") return Clamp(v, F(0), high);
  if (p.padding != "reflection") return v;
  if (p.align_corners) {
    // A one-pixel axis reflects everything onto its only pixel.
    PrimExpr mirrored = Reflect(lets, v, F(0), F(2) * high);
    v = arith::Select(Cmp(ExprKind::kEQ, high, F(0)), F(0), mirrored);
  } else {
    v = Reflect(lets, v, F(-1), F(2) * high + F(1));
  }
  return Clamp(v, F(0), high);
}

// One image plane x[n, c] of the input; reads outside it are 0.
struct Plane {
  Buffer x;
  PrimExpr n, c;
  PrimExpr At(PrimExpr y, PrimExpr xi) const {
    PrimExpr h = x->shape[2], w = x->shape[3];
    PrimExpr inside = And(InRange(y, h), InRange(xi, w));
    PrimExpr v = arith::Load(x, {n, c, Clamp(y, I(0), h - I(1)), Clamp(xi, I(0), w - I(1))});
    return arith::Select(inside, ToF64(v), F(0));
  }
};

// The four cubic convolution weights (A = -0.75) of taps at distances t + 1, t, 1 - t, 2 - t.
std::vector<PrimExpr> CubicWeights(Lets& lets, const std::string& axis, PrimExpr t) {
  PrimExpr a = F(-0.75);
  auto near = [&](PrimExpr d) { return ((a + F(2)) * d - (a + F(3))) * d * d + F(1); };
  auto far = [&](PrimExpr d) { return ((a * d - F(5) * a) * d + F(8) * a) * d - F(4) * a; };
  std::vector<PrimExpr> w = {far(t + F(1)), near(t), near(F(1) - t), far(F(2) - t)};
  for (size_t i = 0; i < w.size(); ++i) w[i] = lets.Bind(absl::StrCat("w", axis, i), w[i]);
  return w;
}

PrimExpr Cubic(const std::vector<PrimExpr>& v, const std::vector<PrimExpr>& w) {
  return v[0] * w[0] + v[1] * w[1] + v[2] * w[2] + v[3] * w[3];
}

// Bicubic pads each of the 16 taps, not the sample point; padding is per axis, so the four
// padded rows and columns are computed once each.
PrimExpr SampleBicubic(Lets& lets, const Plane& plane, PrimExpr ix, PrimExpr iy, PrimExpr h,
                       PrimExpr w, const GridParams& p) {
  PrimExpr x0 = lets.Bind("x0", Floor(ix)), y0 = lets.Bind("y0", Floor(iy));
  std::vector<PrimExpr> wx = CubicWeights(lets, "x", ix - x0);
  std::vector<PrimExpr> wy = CubicWeights(lets, "y", iy - y0);
  std::vector<PrimExpr> cols, rows;
  for (int i = 0; i < 4; ++i) {
    PrimExpr xt = PadCoordinate(lets, x0 + F(i - 1), w, p);
    cols.push_back(lets.Bind(absl::StrCat("col", i), arith::Cast(DataType::Int(), xt)));
    PrimExpr yt = PadCoordinate(lets, y0 + F(i - 1), h, p);
    rows.push_back(lets.Bind(absl::StrCat("row", i), arith::Cast(DataType::Int(), yt)));
  }
  std::vector<PrimExpr> row_values;
  for (int i = 0; i < 4; ++i) {
    std::vector<PrimExpr> taps;
    for (int j = 0; j < 4; ++j) taps.push_back(plane.At(rows[i], cols[j]));
    row_values.push_back(Cubic(taps, wx));
  }
  return Cubic(row_values, wy);
}

PrimExpr SampleBilinear(Lets& lets, const Plane& plane, PrimExpr ix, PrimExpr iy) {
  PrimExpr x0 = lets.Bind("x0", Floor(ix)), y0 = lets.Bind("y0", Floor(iy));
  PrimExpr tx = lets.Bind("tx", ix - x0), ty = lets.Bind("ty", iy - y0);
  PrimExpr xi = lets.Bind("xi", arith::Cast(DataType::Int(), x0));
  PrimExpr yi = lets.Bind("yi", arith::Cast(DataType::Int(), y0));
  PrimExpr ux = F(1) - tx, uy = F(1) - ty;
  return plane.At(yi, xi) * ux * uy + plane.At(yi, xi + I(1)) * tx * uy +
         plane.At(yi + I(1), xi) * ux * ty + plane.At(yi + I(1), xi + I(1)) * tx * ty;
}

// out[n, c, ho, wo] samples x[n, c] at grid[n, ho, wo] = (x, y) in [-1, 1].
Stmt GridSampleAt(const KernelContext& k, const GridParams& p, const Indices& idx) {
  const Buffer &x = k.inputs[0], &grid = k.inputs[1];
  PrimExpr h = ToF64(x->shape[2]), w = ToF64(x->shape[3]);
  Plane plane{x, idx[0], idx[1]};
  Lets lets;
  PrimExpr gx = lets.Bind("gx", ToF64(arith::Load(grid, {idx[0], idx[2], idx[3], I(0)})));
  PrimExpr gy = lets.Bind("gy", ToF64(arith::Load(grid, {idx[0], idx[2], idx[3], I(1)})));
  PrimExpr ix = lets.Bind("ix", Unnormalize(gx, w, p.align_corners));
  PrimExpr iy = lets.Bind("iy", Unnormalize(gy, h, p.align_corners));
  PrimExpr value;
  if (p.mode == "bicubic") {
    value = SampleBicubic(lets, plane, ix, iy, h, w, p);
  } else {
    ix = lets.Bind("px", PadCoordinate(lets, ix, w, p));
    iy = lets.Bind("py", PadCoordinate(lets, iy, h, p));
    if (p.mode == "nearest") {
      // Half-way points round to even, as std::nearbyint in PyTorch.
      auto nearest = [](PrimExpr v) {
        return arith::Cast(DataType::Int(), arith::Call(kF64, "round", {v}));
      };
      value = plane.At(nearest(iy), nearest(ix));
    } else {
      value = SampleBilinear(lets, plane, ix, iy);
    }
  }
  return lets.Wrap(ir::Store(k.out, idx, CastIfNeeded(k.out->dtype, value)));
}

absl::StatusOr<Stmt> GridSampleBody(const KernelContext& k) {
  if (k.inputs.size() != 2 || k.inputs[0]->shape.size() != 4) {
    return absl::InvalidArgumentError("op grid_sample: expects x [N, C, H, W] and a grid");
  }
  GridParams p{op::GetStringAttr(k.call.attrs, "mode", "bilinear"),
               op::GetStringAttr(k.call.attrs, "padding_mode", "zeros"),
               op::GetIntAttr(k.call.attrs, "align_corners", 0) != 0};
  if (p.mode != "bilinear" && p.mode != "nearest" && p.mode != "bicubic") {
    return absl::UnimplementedError("op grid_sample: unknown mode " + p.mode);
  }
  return LoopNest(k.out->shape, "i", [&](const Indices& idx) { return GridSampleAt(k, p, idx); });
}

// ---- roi_align -------------------------------------------------------------------------

struct RoiParams {
  bool max = false;  // mode max, else avg
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  double spatial_scale = 1;
  bool half_pixel = true;
};

// The running results of one output bin: the sum of the weighted taps (avg) and their
// maximum, which starts at 0 as the reference's does (max).
struct BinAcc {
  Buffer sum = arith::MakeBuffer("sum", kF64, {I(1)});
  Buffer max = arith::MakeBuffer("max", kF64, {I(1)});
  PrimExpr Sum() const { return arith::Load(sum, {I(0)}); }
  PrimExpr Max() const { return arith::Load(max, {I(0)}); }
};

// One axis of a sample point's bilinear taps as RoIAlign defines them: clamped below at 0,
// and at the last pixel both taps are that pixel.
struct TapAxis {
  PrimExpr low, high, frac;  // indices, and the weight of `high`
};

TapAxis RoiTapAxis(Lets& lets, const std::string& name, PrimExpr v, PrimExpr extent) {
  PrimExpr pos = lets.Bind(name, arith::Max(v, F(0)));
  PrimExpr truncated = arith::Cast(DataType::Int(), pos);
  PrimExpr at_edge = lets.Bind(name + "_edge", Cmp(ExprKind::kGE, truncated, extent - I(1)));
  PrimExpr low = lets.Bind(name + "_low", arith::Select(at_edge, extent - I(1), truncated));
  PrimExpr high = arith::Select(at_edge, low, low + I(1));
  PrimExpr frac = arith::Select(at_edge, F(0), pos - ToF64(low));
  return {low, lets.Bind(name + "_high", high), lets.Bind(name + "_frac", frac)};
}

// Adds the four bilinear taps of sample point (y, x) to the bin's sum and max; a point more
// than one pixel outside the map adds nothing.
Stmt AccumulateSample(const Buffer& x, PrimExpr n, PrimExpr c, PrimExpr y, PrimExpr xx,
                      const BinAcc& acc) {
  PrimExpr h = x->shape[2], w = x->shape[3];
  PrimExpr outside = Or(Or(Cmp(ExprKind::kLT, y, F(-1)), Cmp(ExprKind::kGT, y, ToF64(h))),
                        Or(Cmp(ExprKind::kLT, xx, F(-1)), Cmp(ExprKind::kGT, xx, ToF64(w))));
  Lets lets;
  TapAxis ty = RoiTapAxis(lets, "y", y, h), tx = RoiTapAxis(lets, "x", xx, w);
  PrimExpr ly = ty.frac, lx = tx.frac, hy = F(1) - ly, hx = F(1) - lx;
  std::vector<std::pair<PrimExpr, PrimExpr>> taps = {
      {ty.low, tx.low}, {ty.low, tx.high}, {ty.high, tx.low}, {ty.high, tx.high}};
  std::vector<PrimExpr> weights = {hy * hx, hy * lx, ly * hx, ly * lx};
  std::vector<Stmt> adds;
  for (size_t i = 0; i < taps.size(); ++i) {
    PrimExpr v = weights[i] * ToF64(arith::Load(x, {n, c, taps[i].first, taps[i].second}));
    PrimExpr term = arith::MakeVar("term", kF64);
    adds.push_back(ir::Let(term, v,
                           ir::Seq({ir::Store(acc.sum, {I(0)}, acc.Sum() + term),
                                    ir::Store(acc.max, {I(0)}, arith::Max(acc.Max(), term))})));
  }
  return ir::IfThenElse(arith::Not(outside), lets.Wrap(ir::Seq(adds)));
}

// out[r, c, ph, pw]: the average (or max) over a grid of sample points in bin (ph, pw) of
// roi r, on the feature map of batch entry batch_indices[r], which is checked (an entry out
// of range is the reference's error).
Stmt RoiAlignAt(const KernelContext& k, const RoiParams& p, const Indices& idx) {
  const Buffer &x = k.inputs[0], &rois = k.inputs[1], &batch = k.inputs[2];
  PrimExpr r = idx[0], c = idx[1], ph = idx[2], pw = idx[3];
  Lets lets;
  PrimExpr n = lets.Bind("n", CheckedIndex(k, 2, arith::Load(batch, {r}), x->shape[0], 0, false));
  double offset = p.half_pixel ? 0.5 : 0;
  auto corner = [&](int64_t i) {
    return ToF64(arith::Load(rois, {r, I(i)})) * F(p.spatial_scale) - F(offset);
  };
  PrimExpr x0 = lets.Bind("x0", corner(0)), y0 = lets.Bind("y0", corner(1));
  PrimExpr rw = corner(2) - x0, rh = corner(3) - y0;
  if (!p.half_pixel) rw = arith::Max(rw, F(1)), rh = arith::Max(rh, F(1));
  PrimExpr bin_h = lets.Bind("bin_h", Div(rh, F(p.out_h)));
  PrimExpr bin_w = lets.Bind("bin_w", Div(rw, F(p.out_w)));
  auto grid_extent = [&](const std::string& name, PrimExpr bin) {
    if (p.sampling_ratio > 0) return I(p.sampling_ratio);
    return lets.Bind(name, arith::Cast(DataType::Int(), arith::Call(kF64, "ceil", {bin})));
  };
  PrimExpr grid_h = grid_extent("grid_h", bin_h), grid_w = grid_extent("grid_w", bin_w);
  BinAcc acc;
  PrimExpr iy = arith::MakeVar("iy"), ix = arith::MakeVar("ix");
  PrimExpr y = y0 + ToF64(ph) * bin_h + Div((ToF64(iy) + F(0.5)) * bin_h, ToF64(grid_h));
  PrimExpr xx = x0 + ToF64(pw) * bin_w + Div((ToF64(ix) + F(0.5)) * bin_w, ToF64(grid_w));
  Stmt samples = ir::For(
      iy, I(0), grid_h, ir::ForKind::kSerial,
      ir::For(ix, I(0), grid_w, ir::ForKind::kSerial, AccumulateSample(x, n, c, y, xx, acc)));
  PrimExpr count = ToF64(arith::Max(grid_h * grid_w, I(1)));
  PrimExpr result = p.max ? acc.Max() : Div(acc.Sum(), count);
  Stmt bin = ir::Seq({ir::Store(acc.sum, {I(0)}, F(0)), ir::Store(acc.max, {I(0)}, F(0)), samples,
                      ir::Store(k.out, idx, CastIfNeeded(k.out->dtype, result))});
  return lets.Wrap(ir::Allocate(acc.sum, ir::Allocate(acc.max, bin)));
}

absl::StatusOr<Stmt> RoiAlignBody(const KernelContext& k) {
  if (k.inputs.size() != 3 || k.inputs[0]->shape.size() != 4) {
    return absl::InvalidArgumentError(
        "op roi_align: expects x [N, C, H, W], rois [R, 4] and batch_indices [R]");
  }
  RoiParams p;
  p.max = op::GetStringAttr(k.call.attrs, "mode", "avg") == "max";
  p.out_h = op::GetIntAttr(k.call.attrs, "output_height", 1);
  p.out_w = op::GetIntAttr(k.call.attrs, "output_width", 1);
  p.sampling_ratio = op::GetIntAttr(k.call.attrs, "sampling_ratio", 0);
  p.spatial_scale = op::GetFloatAttr(k.call.attrs, "spatial_scale", 1.0);
  p.half_pixel = op::GetStringAttr(k.call.attrs, "coordinate_transformation_mode", "half_pixel") ==
                 "half_pixel";
  return LoopNest(k.out->shape, "i", [&](const Indices& idx) { return RoiAlignAt(k, p, idx); });
}

// ---- max_unpool ------------------------------------------------------------------------

// Scatters x into the shape max_pool's input had (indices are flat in that shape), placed
// at the start of the output, as the reference does. The output starts at 0; an index
// outside that shape is checked (the reference's error), and a position outside the output
// (which the reference rejects before it runs) is dropped. The scatter stores at run-time
// positions, so the scheduler keeps it serial: duplicates resolve in order.
absl::StatusOr<Stmt> MaxUnpoolBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  Buffer indices = OperandBuffer(k, 1);
  size_t rank = x->shape.size();
  if (rank < 3 || !indices || indices->shape.size() != rank) {
    return absl::InvalidArgumentError("op max_unpool: x must have rank >= 3 and indices its shape");
  }
  KILN_ASSIGN_OR_RETURN(op::Window win, op::ReadWindow(k.call, rank - 2));
  std::vector<PrimExpr> unpooled = {x->shape[0], x->shape[1]};
  for (size_t d = 0; d < win.rank(); ++d) {
    PrimExpr extent = (x->shape[d + 2] - I(1)) * I(win.strides[d]) + I(win.kernel[d]) -
                      I(win.pads[d]) - I(win.pads[d + win.rank()]);
    unpooled.push_back(k.analyzer.Simplify(extent));
  }
  PrimExpr total = I(1);
  for (const PrimExpr& d : unpooled) total = total * d;
  Stmt zero = Compute(k.out, [&](const Indices&) { return Zero(k.out->dtype); });
  Stmt scatter = LoopNest(x->shape, "u", [&](const Indices& idx) {
    Lets lets;
    PrimExpr flat = lets.Bind("flat", CheckedIndex(k, 1, arith::Load(indices, idx),
                                                   k.analyzer.Simplify(total), -1, false));
    PrimExpr inside;
    Indices at(rank);
    PrimExpr stride = I(1);
    for (size_t d = rank; d-- > 0;) {
      at[d] = arith::FloorMod(arith::FloorDiv(flat, k.analyzer.Simplify(stride)), unpooled[d]);
      PrimExpr fits = Cmp(ExprKind::kLT, at[d], k.out->shape[d]);
      inside = inside ? And(inside, fits) : fits;
      stride = stride * unpooled[d];
    }
    return lets.Wrap(ir::IfThenElse(inside, ir::Store(k.out, at, arith::Load(x, idx))));
  });
  return ir::Seq({zero, scatter});
}

}  // namespace

void RegisterImageSamplingKernelBuilders(KernelBuilderTable& table) {
  table["grid_sample"] = GridSampleBody;
  table["roi_align"] = RoiAlignBody;
  table["max_unpool"] = MaxUnpoolBody;
}

}  // namespace kiln::transform
