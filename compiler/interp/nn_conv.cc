// Reference kernels for convolutions: conv, conv_transpose, conv_integer, qlinear_conv. All
// accumulate in double (exact for the integer forms) over plain loops.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/nn_kernels.h"
#include "compiler/op/nn_window.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

using ConvResult = std::pair<Shape, std::vector<double>>;

// The concrete geometry of one call: output extents and leading pads per spatial dim.
struct ConvGeometry {
  Shape in, kernel, out, pad_begin, strides, dilations;
  std::vector<Index> taps;  // every kernel position, row-major
};

absl::StatusOr<ConvGeometry> Geometry(const ir::ExprNode& call, const Shape& x_shape,
                                      const Shape& w_shape, bool transpose) {
  if (x_shape.size() < 3 || w_shape.size() != x_shape.size()) {
    return KernelError(call, "input and weight must have the same rank >= 3");
  }
  ConvGeometry g;
  g.in.assign(x_shape.begin() + 2, x_shape.end());
  g.kernel.assign(w_shape.begin() + 2, w_shape.end());
  KILN_ASSIGN_OR_RETURN(op::Window win, op::ReadWindow(call, g.in.size(), g.kernel));
  arith::Analyzer analyzer;
  for (size_t d = 0; d < g.in.size(); ++d) {
    arith::PrimExpr in = arith::IntImm(g.in[d]);
    op::WindowDim dim = transpose ? op::ConvTransposeWindowDim(win, d, in, analyzer)
                                  : op::ConvWindowDim(win, d, in, analyzer);
    g.out.push_back(op::EvaluateDim(dim.out));
    if (g.out.back() < 0) {
      return KernelError(call, absl::StrCat("spatial dim ", d, " of extent ", g.in[d],
                                            " gives a negative output extent"));
    }
    g.pad_begin.push_back(op::EvaluateDim(dim.pad_begin));
  }
  g.strides = win.strides;
  g.dilations = win.dilations;
  ForEachIndex(g.kernel, [&](const Index& t) { g.taps.push_back(t); });
  return g;
}

// The offset in a plane of extents `extent` that position `base * stride - pad + tap * dil`
// reaches, or -1 when it falls outside.
int64_t TapOffset(const ConvGeometry& g, const Index& base, const Index& tap, const Shape& extent,
                  const Shape& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < base.size(); ++d) {
    int64_t i = base[d] * g.strides[d] - g.pad_begin[d] + tap[d] * g.dilations[d];
    if (i < 0 || i >= extent[d]) return -1;
    off += i * strides[d];
  }
  return off;
}

// y[n, m, o] = sum over the group's channels c and taps t of x[n, c, o * s - p + t * d] w[m, c, t].
std::vector<double> ConvForward(const ConvGeometry& g, const std::vector<double>& x,
                                const std::vector<double>& w, int64_t n_batch, int64_t c_in,
                                int64_t m_out, int64_t group) {
  int64_t cg = c_in / group, mg = m_out / group;
  int64_t in_plane = ir::ShapeProduct(g.in), k_plane = ir::ShapeProduct(g.kernel);
  int64_t out_plane = ir::ShapeProduct(g.out);
  Shape in_strides = Strides(g.in);
  std::vector<double> y(n_batch * m_out * out_plane, 0);
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t m = 0; m < m_out; ++m) {
      int64_t first_c = (m / mg) * cg, o = (n * m_out + m) * out_plane;
      ForEachIndex(g.out, [&](const Index& pos) {
        double acc = 0;
        for (size_t t = 0; t < g.taps.size(); ++t) {
          int64_t off = TapOffset(g, pos, g.taps[t], g.in, in_strides);
          if (off < 0) continue;
          for (int64_t c = 0; c < cg; ++c) {
            acc += x[(n * c_in + first_c + c) * in_plane + off] * w[(m * cg + c) * k_plane + t];
          }
        }
        y[o++] = acc;
      });
    }
  }
  return y;
}

// The transpose scatters each input element through the kernel:
// y[n, m, i * s - p + t * d] += x[n, c, i] w[c, m, t].
std::vector<double> ConvBackward(const ConvGeometry& g, const std::vector<double>& x,
                                 const std::vector<double>& w, int64_t n_batch, int64_t c_in,
                                 int64_t m_out, int64_t group) {
  int64_t cg = c_in / group, mg = m_out / group;
  int64_t in_plane = ir::ShapeProduct(g.in), k_plane = ir::ShapeProduct(g.kernel);
  int64_t out_plane = ir::ShapeProduct(g.out);
  Shape out_strides = Strides(g.out);
  std::vector<double> y(n_batch * m_out * out_plane, 0);
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t c = 0; c < c_in; ++c) {
      int64_t first_m = (c / cg) * mg, i = (n * c_in + c) * in_plane;
      ForEachIndex(g.in, [&](const Index& pos) {
        double xv = x[i++];
        for (size_t t = 0; t < g.taps.size(); ++t) {
          int64_t off = TapOffset(g, pos, g.taps[t], g.out, out_strides);
          if (off < 0) continue;
          for (int64_t m = 0; m < mg; ++m) {
            y[(n * m_out + first_m + m) * out_plane + off] += xv * w[(c * mg + m) * k_plane + t];
          }
        }
      });
    }
  }
  return y;
}

// Adds bias[m] to every element of output channel m.
void AddBias(const Shape& shape, const NDArray& bias, std::vector<double>& y) {
  int64_t plane = ir::ShapeProduct(Shape(shape.begin() + 2, shape.end()));
  for (size_t i = 0; i < y.size(); ++i) y[i] += bias.GetDouble((i / plane) % shape[1]);
}

NDArray ToArray(DataType dtype, const Shape& shape, const std::vector<double>& values) {
  NDArray out = NDArray::Zeros(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) out.SetDouble(i, values[i]);
  return out;
}

absl::StatusOr<Value> Conv(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* w, TensorArg(call, args, 1));
  bool transpose = call.name == "conv_transpose";
  KILN_ASSIGN_OR_RETURN(
      ConvResult y, ConvDoubles(call, ToDoubles(*x), x->shape, ToDoubles(*w), w->shape, transpose));
  if (args.size() > 2 && !args[2].is_none()) AddBias(y.first, args[2].tensor(), y.second);
  return Value(ToArray(x->dtype, y.first, y.second));
}

// conv_integer(x, w, x_zero_point, w_zero_point): w's zero point may be per output channel.
absl::StatusOr<Value> ConvInteger(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* w, TensorArg(call, args, 1));
  const NDArray* x_zp = args[2].is_none() ? nullptr : &args[2].tensor();
  const NDArray* w_zp = args[3].is_none() ? nullptr : &args[3].tensor();
  KILN_ASSIGN_OR_RETURN(ConvResult y, ConvDoubles(call, ToDoubles(*x, x_zp, 1), x->shape,
                                                  ToDoubles(*w, w_zp, 0), w->shape, false));
  return Value(ToArray(DataType::Int(32), y.first, y.second));
}

// qlinear_conv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias): the int32 bias adds
// to the accumulator; w's scale and zero point may be per output channel.
absl::StatusOr<Value> QLinearConv(const ir::ExprNode& call, const std::vector<Value>& args) {
  std::vector<const NDArray*> a;
  for (size_t i = 0; i < 8; ++i) {
    KILN_ASSIGN_OR_RETURN(const NDArray* t, TensorArg(call, args, i));
    a.push_back(t);
  }
  KILN_ASSIGN_OR_RETURN(ConvResult y, ConvDoubles(call, ToDoubles(*a[0], a[2], 1), a[0]->shape,
                                                  ToDoubles(*a[3], a[5], 0), a[3]->shape, false));
  if (args.size() > 8 && !args[8].is_none()) AddBias(y.first, args[8].tensor(), y.second);
  const Shape& shape = y.first;
  int64_t plane = ir::ShapeProduct(Shape(shape.begin() + 2, shape.end()));
  double x_scale = a[1]->GetDouble(0), y_scale = a[6]->GetDouble(0);
  double y_zp = a[7]->GetDouble(0);
  for (size_t i = 0; i < y.second.size(); ++i) {
    double w_scale = ParamAt(*a[4], (i / plane) % shape[1]);
    y.second[i] = QuantizeValue(y.second[i] * (x_scale * w_scale / y_scale) + y_zp, a[7]->dtype);
  }
  return Value(ToArray(a[7]->dtype, shape, y.second));
}

}  // namespace

absl::StatusOr<std::pair<Shape, std::vector<double>>> ConvDoubles(
    const ir::ExprNode& call, const std::vector<double>& x, const Shape& x_shape,
    const std::vector<double>& w, const Shape& w_shape, bool transpose) {
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, Geometry(call, x_shape, w_shape, transpose));
  int64_t group = op::GetIntAttr(call.attrs, "group", 1);
  int64_t n = x_shape[0], c = x_shape[1];
  int64_t m = transpose ? w_shape[1] * group : w_shape[0];
  int64_t c_per_group = transpose ? c / group : w_shape[1];
  if (group < 1 || c % group != 0 || m % group != 0 || c_per_group * group != c ||
      (transpose && w_shape[0] != c)) {
    return KernelError(call, absl::StrCat("channels do not fit: input ", c, ", weight dims ",
                                          w_shape[0], " x ", w_shape[1], ", group ", group));
  }
  Shape shape = {n, m};
  shape.insert(shape.end(), g.out.begin(), g.out.end());
  std::vector<double> y =
      transpose ? ConvBackward(g, x, w, n, c, m, group) : ConvForward(g, x, w, n, c, m, group);
  return std::make_pair(shape, std::move(y));
}

void RegisterNNConvKernels(KernelTable& table) {
  table["conv"] = Conv;
  table["conv_transpose"] = Conv;
  table["conv_integer"] = ConvInteger;
  table["qlinear_conv"] = QLinearConv;
}

}  // namespace kiln::interp
