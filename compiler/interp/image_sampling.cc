// Reference kernels for sampling at arbitrary points: grid_sample (as PyTorch's
// grid_sampler_2d, whose outputs the ONNX suite records) and roi_align (as the
// Detectron/onnxruntime RoIAlign).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/image_index.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// ---- grid_sample -----------------------------------------------------------------------

struct GridParams {
  std::string mode;     // bilinear, nearest, bicubic
  std::string padding;  // zeros, border, reflection
  bool align_corners = false;
};

// Grid coordinates run from -1 to 1 across the image: the centers of the corner pixels with
// align_corners, their outer edges without.
double Unnormalize(double coord, int64_t size, bool align_corners) {
  if (align_corners) return (coord + 1) / 2 * static_cast<double>(size - 1);
  return ((coord + 1) * static_cast<double>(size) - 1) / 2;
}

// Mirrors v into [twice_low / 2, twice_high / 2].
double Reflect(double v, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0;
  double low = twice_low / 2, span = (twice_high - twice_low) / 2;
  v = std::fabs(v - low);
  double extra = std::fmod(v, span);
  int64_t flips = static_cast<int64_t>(std::floor(v / span));
  return flips % 2 == 0 ? extra + low : span - extra + low;
}

// Applies padding_mode to a source coordinate; "zeros" leaves it (reads outside give 0).
double PadCoordinate(double v, int64_t size, const GridParams& p) {
  double high = static_cast<double>(size - 1);
  if (p.padding == "border") return std::clamp(v, 0.0, high);
  if (p.padding == "reflection") {
    v = p.align_corners ? Reflect(v, 0, 2 * high) : Reflect(v, -1, 2 * high + 1);
    return std::clamp(v, 0.0, high);
  }
  return v;
}

// One image plane [H, W] of the input; reads outside it are 0.
struct Plane {
  const NDArray* x;
  int64_t base, h, w;
  double At(int64_t y, int64_t xi) const {
    if (y < 0 || y >= h || xi < 0 || xi >= w) return 0;
    return x->GetDouble(base + y * w + xi);
  }
};

double Cubic(double v0, double v1, double v2, double v3, double t) {
  const double a = -0.75;
  auto near = [&](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
  auto far = [&](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
  return v0 * far(t + 1) + v1 * near(t) + v2 * near(1 - t) + v3 * far(2 - t);
}

// Bicubic pads each of the 16 taps, not the sample point.
double SampleBicubic(const Plane& plane, double gx, double gy, const GridParams& p) {
  double ix = Unnormalize(gx, plane.w, p.align_corners);
  double iy = Unnormalize(gy, plane.h, p.align_corners);
  double x0 = std::floor(ix), y0 = std::floor(iy);
  auto tap = [&](double y, double x) {
    return plane.At(static_cast<int64_t>(PadCoordinate(y, plane.h, p)),
                    static_cast<int64_t>(PadCoordinate(x, plane.w, p)));
  };
  double rows[4];
  for (int i = 0; i < 4; ++i) {
    double y = y0 - 1 + i;
    rows[i] = Cubic(tap(y, x0 - 1), tap(y, x0), tap(y, x0 + 1), tap(y, x0 + 2), ix - x0);
  }
  return Cubic(rows[0], rows[1], rows[2], rows[3], iy - y0);
}

double SamplePoint(const Plane& plane, double gx, double gy, const GridParams& p) {
  if (p.mode == "bicubic") return SampleBicubic(plane, gx, gy, p);
  double ix = PadCoordinate(Unnormalize(gx, plane.w, p.align_corners), plane.w, p);
  double iy = PadCoordinate(Unnormalize(gy, plane.h, p.align_corners), plane.h, p);
  if (p.mode == "nearest") {
    // Half-way points round to even, as std::nearbyint in PyTorch.
    return plane.At(static_cast<int64_t>(std::nearbyint(iy)),
                    static_cast<int64_t>(std::nearbyint(ix)));
  }
  double x0 = std::floor(ix), y0 = std::floor(iy);
  double tx = ix - x0, ty = iy - y0;
  int64_t xi = static_cast<int64_t>(x0), yi = static_cast<int64_t>(y0);
  return plane.At(yi, xi) * (1 - tx) * (1 - ty) + plane.At(yi, xi + 1) * tx * (1 - ty) +
         plane.At(yi + 1, xi) * (1 - tx) * ty + plane.At(yi + 1, xi + 1) * tx * ty;
}

// grid_sample(x [N, C, H, W], grid [N, Ho, Wo, 2]): grid[..., 0] is x (width), [..., 1] y.
absl::StatusOr<Value> GridSample(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* grid, TensorArg(call, args, 1));
  const Shape& xs = x->shape;
  const Shape& gs = grid->shape;
  if (xs.size() != 4 || gs.size() != 4 || gs[3] != 2 || gs[0] != xs[0]) {
    return KernelError(call, "expects x [N, C, H, W] and grid [N, Ho, Wo, 2]");
  }
  GridParams p{op::GetStringAttr(call.attrs, "mode", "bilinear"),
               op::GetStringAttr(call.attrs, "padding_mode", "zeros"),
               op::GetIntAttr(call.attrs, "align_corners", 0) != 0};
  Shape out_shape = {xs[0], xs[1], gs[1], gs[2]};
  NDArray out = NDArray::Zeros(x->dtype, out_shape);
  int64_t o = 0;
  ForEachIndex(out_shape, [&](const Index& idx) {
    Plane plane{x, (idx[0] * xs[1] + idx[1]) * xs[2] * xs[3], xs[2], xs[3]};
    int64_t g = ((idx[0] * gs[1] + idx[2]) * gs[2] + idx[3]) * 2;
    out.SetDouble(o++, SamplePoint(plane, grid->GetDouble(g), grid->GetDouble(g + 1), p));
  });
  return Value(std::move(out));
}

// ---- roi_align -------------------------------------------------------------------------

struct RoiParams {
  std::string mode;  // avg, max
  int64_t out_h, out_w, sampling_ratio;
  double spatial_scale;
  bool half_pixel;
};

// Bilinear taps of one sample point as RoIAlign defines them: points up to one pixel
// outside the map clamp to its edge, farther ones contribute nothing.
std::vector<std::pair<int64_t, double>> RoiTaps(double y, double x, int64_t h, int64_t w) {
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return {};
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= h - 1) {
    y_high = y_low = h - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= w - 1) {
    x_high = x_low = w - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  double ly = y - y_low, lx = x - x_low, hy = 1 - ly, hx = 1 - lx;
  return {{y_low * w + x_low, hy * hx},
          {y_low * w + x_high, hy * lx},
          {y_high * w + x_low, ly * hx},
          {y_high * w + x_high, ly * lx}};
}

// One output bin of one roi: the average (or max) over a grid of bilinear samples.
double PoolBin(const NDArray& x, int64_t base, int64_t h, int64_t w, const double roi[4],
               int64_t ph, int64_t pw, const RoiParams& p) {
  double offset = p.half_pixel ? 0.5 : 0;
  double x0 = roi[0] * p.spatial_scale - offset, y0 = roi[1] * p.spatial_scale - offset;
  double rw = roi[2] * p.spatial_scale - offset - x0, rh = roi[3] * p.spatial_scale - offset - y0;
  if (!p.half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
  double bin_h = rh / static_cast<double>(p.out_h), bin_w = rw / static_cast<double>(p.out_w);
  int64_t grid_h = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(bin_h));
  int64_t grid_w = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(bin_w));
  double sum = 0, max = 0;
  bool first = true;
  for (int64_t iy = 0; iy < grid_h; ++iy) {
    double y = y0 + ph * bin_h + (iy + 0.5) * bin_h / grid_h;
    for (int64_t ix = 0; ix < grid_w; ++ix) {
      double xx = x0 + pw * bin_w + (ix + 0.5) * bin_w / grid_w;
      double value_max = 0;
      for (const auto& [offset_hw, weight] : RoiTaps(y, xx, h, w)) {
        double v = weight * x.GetDouble(base + offset_hw);
        sum += v;
        value_max = std::max(value_max, v);
      }
      max = first ? value_max : std::max(max, value_max);
      first = false;
    }
  }
  if (p.mode == "max") return max;
  return sum / static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
}

absl::StatusOr<Value> RoiAlign(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* rois, TensorArg(call, args, 1));
  KILN_ASSIGN_OR_RETURN(const NDArray* batch, TensorArg(call, args, 2));
  const Shape& xs = x->shape;
  if (xs.size() != 4 || rois->shape.size() != 2 || rois->shape[1] != 4 ||
      batch->shape != Shape{rois->shape[0]}) {
    return KernelError(call, "expects x [N, C, H, W], rois [R, 4] and batch_indices [R]");
  }
  RoiParams p{op::GetStringAttr(call.attrs, "mode", "avg"),
              op::GetIntAttr(call.attrs, "output_height", 1),
              op::GetIntAttr(call.attrs, "output_width", 1),
              op::GetIntAttr(call.attrs, "sampling_ratio", 0),
              op::GetFloatAttr(call.attrs, "spatial_scale", 1.0),
              op::GetStringAttr(call.attrs, "coordinate_transformation_mode", "half_pixel") ==
                  "half_pixel"};
  Shape out_shape = {rois->shape[0], xs[1], p.out_h, p.out_w};
  NDArray out = NDArray::Zeros(x->dtype, out_shape);
  int64_t o = 0;
  for (int64_t r = 0; r < out_shape[0]; ++r) {
    int64_t n = batch->GetInt(r);
    if (n < 0 || n >= xs[0]) {
      return KernelError(call, absl::StrCat("batch index ", n, " out of range for batch ", xs[0]));
    }
    double roi[4];
    for (int i = 0; i < 4; ++i) roi[i] = rois->GetDouble(r * 4 + i);
    for (int64_t c = 0; c < xs[1]; ++c) {
      int64_t base = (n * xs[1] + c) * xs[2] * xs[3];
      for (int64_t ph = 0; ph < p.out_h; ++ph) {
        for (int64_t pw = 0; pw < p.out_w; ++pw) {
          out.SetDouble(o++, PoolBin(*x, base, xs[2], xs[3], roi, ph, pw, p));
        }
      }
    }
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterImageSamplingKernels(KernelTable& table) {
  table["grid_sample"] = GridSample;
  table["roi_align"] = RoiAlign;
}

}  // namespace kiln::interp
