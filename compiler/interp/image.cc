// Reference kernels for image and index operators. This file: resampling (resize,
// grid_sample, roi_align) and block rearrangement (depth_to_space, space_to_depth);
// image_index.cc: sorting, searching, scans, boxes and n-grams.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/image_index.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// ---- resize ----------------------------------------------------------------------------

struct ResizeParams {
  std::string mode;          // nearest, linear, cubic
  std::string transform;     // coordinate_transformation_mode
  std::string nearest_mode;  // round_prefer_floor, round_prefer_ceil, floor, ceil, simple
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

// One input element that contributes to an output element along one axis.
struct Tap {
  int64_t index;
  double weight;
};

// How one output coordinate samples one axis: its taps, or outside the crop (the
// extrapolation value, tf_crop_and_resize only).
struct AxisSample {
  bool outside = false;
  std::vector<Tap> taps;
};

// The source coordinate of output coordinate x (coordinate_transformation_mode). `out_len`
// is the output length as the ONNX reference sees it: scale * in when scales are given,
// which need not be a whole number.
double SourceCoordinate(const ResizeParams& p, double x, double scale, double in, double out_len,
                        double roi_lo, double roi_hi) {
  const std::string& t = p.transform;
  if (t == "align_corners") return out_len == 1 ? 0 : x * (in - 1) / (out_len - 1);
  if (t == "asymmetric") return x / scale;
  if (t == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (t == "pytorch_half_pixel") return out_len == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (t == "tf_crop_and_resize") {
    double start = roi_lo * (in - 1);
    if (out_len == 1) return (roi_hi - roi_lo) * (in - 1) / 2 + start;
    return x * (roi_hi - roi_lo) * (in - 1) / (out_len - 1) + start;
  }
  return (x + 0.5) / scale - 0.5;  // half_pixel
}

// Interpolation weights for the taps at floor(x) - 1 .. floor(x) + 2 (cubic) or floor(x),
// floor(x) + 1 (linear, nearest), `ratio` being x - floor(x) in (0, 1]: a whole x counts as
// ratio 1 of the cell to its left, as the ONNX reference does.
std::vector<double> Coefficients(const ResizeParams& p, double ratio, double scale) {
  if (p.mode == "cubic") {
    double a = p.cubic_a, r = ratio, s = 1 - ratio;
    return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
  }
  if (p.mode == "linear") return {1 - ratio, ratio};
  bool ceil = ratio == 1;
  if (!ceil) {
    const std::string& m = p.nearest_mode;
    if (m == "round_prefer_ceil")
      ceil = ratio >= 0.5;
    else if (m == "floor")
      ceil = false;
    else if (m == "ceil")
      ceil = true;
    else if (m == "simple")
      ceil = scale < 1;  // opsets before 11, see the importer
    else
      ceil = ratio > 0.5;  // round_prefer_floor
  }
  return {ceil ? 0.0 : 1.0, ceil ? 1.0 : 0.0};
}

AxisSample SampleAxis(const ResizeParams& p, double x_ori, double scale, int64_t in) {
  AxisSample s;
  if (p.transform == "tf_crop_and_resize" && (x_ori < 0 || x_ori > in - 1)) {
    s.outside = true;
    return s;
  }
  double base = std::floor(x_ori), ratio = x_ori - base;
  if (ratio == 0) base -= 1, ratio = 1;
  std::vector<double> coeffs = Coefficients(p, ratio, scale);
  int64_t first = static_cast<int64_t>(base) - (coeffs.size() == 4 ? 1 : 0);
  double sum = 0;
  for (size_t i = 0; i < coeffs.size(); ++i) {
    int64_t idx = first + static_cast<int64_t>(i);
    if (p.exclude_outside && (idx < 0 || idx >= in)) coeffs[i] = 0;
    sum += coeffs[i];
  }
  for (size_t i = 0; i < coeffs.size(); ++i) {
    double w = p.exclude_outside ? coeffs[i] / sum : coeffs[i];
    // Zero weights are skipped so that a batch or channel axis costs one tap, not four.
    if (w == 0) continue;
    int64_t idx = std::clamp<int64_t>(first + static_cast<int64_t>(i), 0, in - 1);
    s.taps.push_back({idx, w});
  }
  return s;
}

ResizeParams GetResizeParams(const ir::ExprNode& call) {
  ResizeParams p;
  p.mode = op::GetStringAttr(call.attrs, "mode", "nearest");
  p.transform = op::GetStringAttr(call.attrs, "coordinate_transformation_mode", "half_pixel");
  p.nearest_mode = op::GetStringAttr(call.attrs, "nearest_mode", "round_prefer_floor");
  p.cubic_a = op::GetFloatAttr(call.attrs, "cubic_coeff_a", -0.75);
  p.exclude_outside = op::GetIntAttr(call.attrs, "exclude_outside", 0) != 0;
  p.extrapolation = op::GetFloatAttr(call.attrs, "extrapolation_value", 0);
  return p;
}

// Output shape, per-axis scale and output length (see SourceCoordinate) from scales or sizes.
struct ResizeGeometry {
  Shape out;
  std::vector<double> scale, out_len, roi;
};

absl::StatusOr<ResizeGeometry> GetResizeGeometry(const ir::ExprNode& call,
                                                 const std::vector<Value>& args, const Shape& in) {
  size_t rank = in.size();
  ResizeGeometry g;
  g.roi.assign(2 * rank, 0);
  std::fill(g.roi.begin() + rank, g.roi.end(), 1.0);
  if (!args[1].is_none() && args[1].tensor().num_elements() > 0) {
    const NDArray& roi = args[1].tensor();
    if (roi.num_elements() != static_cast<int64_t>(2 * rank)) {
      return KernelError(call,
                         absl::StrCat("roi has ", roi.num_elements(), " entries for rank ", rank));
    }
    for (size_t i = 0; i < 2 * rank; ++i) g.roi[i] = roi.GetDouble(i);
  }
  // Sizes given with scales are the shape those scales give (op/image.cc): scales decide.
  const bool by_sizes = args[2].is_none();
  const NDArray& given = by_sizes ? args[3].tensor() : args[2].tensor();
  if (given.num_elements() != static_cast<int64_t>(rank)) {
    return KernelError(call, absl::StrCat(by_sizes ? "sizes" : "scales", " has ",
                                          given.num_elements(), " entries for rank ", rank));
  }
  for (size_t d = 0; d < rank; ++d) {
    double in_d = static_cast<double>(in[d]);
    if (by_sizes) {
      int64_t size = given.GetInt(d);
      if (size < 0) return KernelError(call, absl::StrCat("size ", size, " is negative"));
      g.out.push_back(size);
      g.scale.push_back(static_cast<double>(size) / in_d);
      g.out_len.push_back(static_cast<double>(size));
    } else {
      double scale = given.GetDouble(d);
      if (!(scale > 0))
        return KernelError(call, absl::StrCat("scale ", scale, " must be positive"));
      g.out.push_back(static_cast<int64_t>(scale * in_d));
      if (!args[3].is_none() && args[3].tensor().GetInt(d) != g.out.back()) {
        return KernelError(call, absl::StrCat("sizes[", d, "] is ", args[3].tensor().GetInt(d),
                                              ", the scales give ", g.out.back()));
      }
      g.scale.push_back(scale);
      g.out_len.push_back(scale * in_d);
    }
  }
  return g;
}

// Sums the products of per-axis taps (separable interpolation) for one output element.
double Interpolate(const NDArray& x, const Shape& strides,
                   const std::vector<const AxisSample*>& samples, size_t d, int64_t offset,
                   double weight) {
  if (d == samples.size()) return weight * x.GetDouble(offset);
  double sum = 0;
  for (const Tap& t : samples[d]->taps) {
    sum +=
        Interpolate(x, strides, samples, d + 1, offset + t.index * strides[d], weight * t.weight);
  }
  return sum;
}

// resize(x, roi, scales, sizes), as the ONNX reference: each output coordinate maps back to
// a source coordinate per axis, and the taps around it are weighted by the mode's kernel.
absl::StatusOr<Value> Resize(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  if (args.size() != 4 || (args[2].is_none() && args[3].is_none())) {
    return KernelError(call, "scales or sizes must be given");
  }
  ResizeParams p = GetResizeParams(call);
  KILN_ASSIGN_OR_RETURN(ResizeGeometry g, GetResizeGeometry(call, args, x->shape));
  size_t rank = x->shape.size();
  for (int64_t d : x->shape) {
    if (d == 0) return KernelError(call, "cannot resize an empty tensor");
  }
  // samples[d][i]: how output coordinate i samples axis d.
  std::vector<std::vector<AxisSample>> samples(rank);
  for (size_t d = 0; d < rank; ++d) {
    for (int64_t i = 0; i < g.out[d]; ++i) {
      double x_ori =
          SourceCoordinate(p, static_cast<double>(i), g.scale[d], static_cast<double>(x->shape[d]),
                           g.out_len[d], g.roi[d], g.roi[rank + d]);
      samples[d].push_back(SampleAxis(p, x_ori, g.scale[d], x->shape[d]));
    }
  }
  NDArray out = NDArray::Zeros(x->dtype, g.out);
  Shape strides = Strides(x->shape);
  std::vector<const AxisSample*> at(rank);
  int64_t o = 0;
  ForEachIndex(g.out, [&](const Index& idx) {
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) {
      at[d] = &samples[d][idx[d]];
      outside = outside || at[d]->outside;
    }
    out.SetDouble(o++, outside ? p.extrapolation : Interpolate(*x, strides, at, 0, 0, 1.0));
  });
  return Value(std::move(out));
}

// ---- depth_to_space, space_to_depth ----------------------------------------------------

void CopyElement(const NDArray& from, int64_t src, NDArray& to, int64_t dst) {
  int64_t bytes = from.dtype.bytes();
  std::memcpy(to.bytes.data() + dst * bytes, from.bytes.data() + src * bytes, bytes);
}

// out[n, c, h*b + i, w*b + j] = x[n, channel(c, i, j), h, w]; DCR puts the block offset
// outermost in the channel, CRD innermost.
absl::StatusOr<Value> DepthToSpace(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  int64_t b = op::GetIntAttr(call.attrs, "blocksize", 0);
  bool crd = op::GetStringAttr(call.attrs, "mode", "DCR") == "CRD";
  if (x->shape.size() != 4 || b <= 0 || x->shape[1] % (b * b) != 0) {
    return KernelError(call, "expects a 4-D input whose channels are a multiple of blocksize^2");
  }
  int64_t c_out = x->shape[1] / (b * b);
  Shape out_shape = {x->shape[0], c_out, x->shape[2] * b, x->shape[3] * b};
  NDArray out = NDArray::Zeros(x->dtype, out_shape);
  Shape in_strides = Strides(x->shape);
  int64_t o = 0;
  ForEachIndex(out_shape, [&](const Index& idx) {
    int64_t i = idx[2] % b, j = idx[3] % b;
    int64_t c = crd ? idx[1] * b * b + i * b + j : (i * b + j) * c_out + idx[1];
    CopyElement(*x, Offset({idx[0], c, idx[2] / b, idx[3] / b}, in_strides), out, o++);
  });
  return Value(std::move(out));
}

// out[n, (i*b + j)*C + c, h, w] = x[n, c, h*b + i, w*b + j].
absl::StatusOr<Value> SpaceToDepth(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  int64_t b = op::GetIntAttr(call.attrs, "blocksize", 0);
  if (x->shape.size() != 4 || b <= 0 || x->shape[2] % b != 0 || x->shape[3] % b != 0) {
    return KernelError(call,
                       "expects a 4-D input whose height and width are multiples of blocksize");
  }
  int64_t c_in = x->shape[1];
  Shape out_shape = {x->shape[0], c_in * b * b, x->shape[2] / b, x->shape[3] / b};
  NDArray out = NDArray::Zeros(x->dtype, out_shape);
  Shape in_strides = Strides(x->shape);
  int64_t o = 0;
  ForEachIndex(out_shape, [&](const Index& idx) {
    int64_t block = idx[1] / c_in, c = idx[1] % c_in;
    int64_t i = block / b, j = block % b;
    CopyElement(*x, Offset({idx[0], c, idx[2] * b + i, idx[3] * b + j}, in_strides), out, o++);
  });
  return Value(std::move(out));
}

}  // namespace

void RegisterImageKernels(KernelTable& table) {
  table["resize"] = Resize;
  table["depth_to_space"] = DepthToSpace;
  table["space_to_depth"] = SpaceToDepth;
  RegisterImageSamplingKernels(table);
  RegisterImageIndexKernels(table);
}

}  // namespace kiln::interp
