#include "compiler/op/nn_window.h"

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"

namespace kiln::op {

using arith::IntImm;
using arith::PrimExpr;

namespace {

// An ints attr of `size` entries, or `size` copies of `fallback` when absent.
absl::StatusOr<std::vector<int64_t>> ReadInts(const ir::ExprNode& call, const std::string& name,
                                              size_t size, int64_t fallback) {
  if (!HasAttr(call.attrs, name)) return std::vector<int64_t>(size, fallback);
  std::vector<int64_t> v = GetIntsAttr(call.attrs, name);
  if (v.size() != size) {
    return OpError(call, absl::StrCat(name, " has ", v.size(), " entries, expected ", size));
  }
  return v;
}

// Splits `total` padding between begin and end; the odd one goes to the end unless
// `extra_at_begin`.
void SplitPadding(const PrimExpr& total, bool extra_at_begin, const arith::Analyzer& analyzer,
                  WindowDim& dim) {
  PrimExpr half = arith::FloorDiv(total, IntImm(2));
  PrimExpr small = analyzer.Simplify(half);
  PrimExpr large = analyzer.Simplify(total - half);
  dim.pad_begin = extra_at_begin ? large : small;
  dim.pad_end = extra_at_begin ? small : large;
}

// a >= b as an int (1/0), decided by the analyzer when it can be, else a select.
PrimExpr GreaterEqual(const PrimExpr& a, const PrimExpr& b, const arith::Analyzer& analyzer) {
  if (analyzer.ProveGE(a, b)) return IntImm(1);
  if (analyzer.ProveGE(b - IntImm(1), a)) return IntImm(0);
  return arith::Select(arith::Binary(arith::ExprKind::kGE, a, b), IntImm(1), IntImm(0));
}

}  // namespace

absl::StatusOr<Window> ReadWindow(const ir::ExprNode& call, size_t spatial,
                                  std::vector<int64_t> kernel) {
  Window w;
  if (kernel.empty()) {
    kernel = GetIntsAttr(call.attrs, "kernel_shape");
    if (kernel.size() != spatial) {
      return OpError(call, absl::StrCat("kernel_shape has ", kernel.size(), " entries for ",
                                        spatial, " spatial dims"));
    }
  }
  w.kernel = std::move(kernel);
  KILN_ASSIGN_OR_RETURN(w.strides, ReadInts(call, "strides", spatial, 1));
  KILN_ASSIGN_OR_RETURN(w.dilations, ReadInts(call, "dilations", spatial, 1));
  KILN_ASSIGN_OR_RETURN(w.pads, ReadInts(call, "pads", 2 * spatial, 0));
  KILN_ASSIGN_OR_RETURN(w.output_padding, ReadInts(call, "output_padding", spatial, 0));
  w.output_shape = GetIntsAttr(call.attrs, "output_shape");
  // output_shape may name the batch and channel dims too; only the spatial ones matter.
  if (w.output_shape.size() == spatial + 2)
    w.output_shape.erase(w.output_shape.begin(), w.output_shape.begin() + 2);
  if (!w.output_shape.empty() && w.output_shape.size() != spatial) {
    return OpError(call, absl::StrCat("output_shape has ", w.output_shape.size(), " entries for ",
                                      spatial, " spatial dims"));
  }
  w.auto_pad = GetStringAttr(call.attrs, "auto_pad", "NOTSET");
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" &&
      w.auto_pad != "VALID") {
    return OpError(call, "unknown auto_pad " + w.auto_pad);
  }
  w.ceil_mode = GetIntAttr(call.attrs, "ceil_mode", 0) != 0;
  for (size_t d = 0; d < spatial; ++d) {
    if (w.kernel[d] < 1 || w.strides[d] < 1 || w.dilations[d] < 1) {
      return OpError(call,
                     absl::StrCat("kernel, strides and dilations must be positive in dim ", d));
    }
  }
  return w;
}

WindowDim ConvWindowDim(const Window& w, size_t d, const PrimExpr& in,
                        const arith::Analyzer& analyzer) {
  PrimExpr stride = IntImm(w.strides[d]);
  PrimExpr extent = IntImm(w.dilations[d] * (w.kernel[d] - 1) + 1);
  WindowDim dim;
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
    dim.out = analyzer.Simplify(arith::FloorDiv(in + stride - IntImm(1), stride));
    PrimExpr total =
        analyzer.Simplify(arith::Max(IntImm(0), (dim.out - IntImm(1)) * stride + extent - in));
    SplitPadding(total, w.auto_pad == "SAME_LOWER", analyzer, dim);
    return dim;
  }
  bool valid = w.auto_pad == "VALID";
  dim.pad_begin = IntImm(valid ? 0 : w.pads[d]);
  dim.pad_end = IntImm(valid ? 0 : w.pads[d + w.rank()]);
  PrimExpr span = in + dim.pad_begin + dim.pad_end - extent;
  if (!w.ceil_mode) {
    dim.out = analyzer.Simplify(arith::FloorDiv(span, stride) + IntImm(1));
    return dim;
  }
  PrimExpr out = analyzer.Simplify(arith::FloorDiv(span + stride - IntImm(1), stride) + IntImm(1));
  // A last window that would start inside the end padding is dropped (as PyTorch does).
  // Since (out - 1) * stride <= span + stride - 1, that needs pad_end + stride > extent.
  int64_t extent_v = w.dilations[d] * (w.kernel[d] - 1) + 1;
  if (w.pads[d + w.rank()] + w.strides[d] <= extent_v) {
    dim.out = out;
    return dim;
  }
  PrimExpr past_end = GreaterEqual(analyzer.Simplify((out - IntImm(1)) * stride),
                                   analyzer.Simplify(in + dim.pad_begin), analyzer);
  dim.out = analyzer.Simplify(out - past_end);
  return dim;
}

WindowDim ConvTransposeWindowDim(const Window& w, size_t d, const PrimExpr& in,
                                 const arith::Analyzer& analyzer) {
  PrimExpr stride = IntImm(w.strides[d]);
  PrimExpr full = (in - IntImm(1)) * stride + IntImm(w.output_padding[d]) +
                  IntImm(w.dilations[d] * (w.kernel[d] - 1) + 1);
  WindowDim dim;
  bool same = w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER";
  if (!w.output_shape.empty() || same) {
    dim.out = w.output_shape.empty() ? analyzer.Simplify(in * stride) : IntImm(w.output_shape[d]);
    SplitPadding(analyzer.Simplify(full - dim.out), w.auto_pad != "SAME_UPPER", analyzer, dim);
    return dim;
  }
  bool valid = w.auto_pad == "VALID";
  dim.pad_begin = IntImm(valid ? 0 : w.pads[d]);
  dim.pad_end = IntImm(valid ? 0 : w.pads[d + w.rank()]);
  dim.out = analyzer.Simplify(full - dim.pad_begin - dim.pad_end);
  return dim;
}

int64_t EvaluateDim(const PrimExpr& e) {
  auto v = arith::EvaluateInt(
      e, [](const arith::ExprNode&) -> std::optional<int64_t> { return std::nullopt; });
  KILN_CHECK(v.ok()) << "dim " << arith::ToString(e) << " is not constant: " << v.status();
  return *v;
}

}  // namespace kiln::op
