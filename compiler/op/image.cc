// Image and index operators: resize, grid sampling, boxes, sorting and searching.
// Sampling ops (this file) keep the input's dims symbolic wherever the output size follows
// from them; sizes that come from run-time data leave the rank only.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/image_index.h"
#include "compiler/op/op_def.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

bool IsConst(const PrimExpr& e) { return e->kind == arith::ExprKind::kIntImm; }

// Dims that are both constants and differ can never match; symbolic ones are checked at run
// time by the kernel.
absl::Status CheckSameDim(const ir::ExprNode& call, const PrimExpr& a, const PrimExpr& b,
                          const std::string& what) {
  if (IsConst(a) && IsConst(b) && a->int_value != b->int_value) {
    return OpError(call, absl::StrCat(what, ": ", a->int_value, " vs ", b->int_value));
  }
  return absl::OkStatus();
}

// floor(dim * scale) as the kernel computes it, kept symbolic when the scale is integral.
std::optional<PrimExpr> ScaledDim(const PrimExpr& dim, double scale,
                                  const arith::Analyzer& analyzer) {
  if (IsConst(dim)) {
    return arith::IntImm(static_cast<int64_t>(scale * static_cast<double>(dim->int_value)));
  }
  if (scale != std::floor(scale)) return std::nullopt;
  return analyzer.Simplify(dim * arith::IntImm(static_cast<int64_t>(scale)));
}

// resize(x, roi, scales, sizes): sizes (or scales) give the output shape when known. Scales
// read at run time may come with sizes: the output shape they give, floor(in * scale), which
// the importer binds to symbolic variables (tensor_to_shape(scales, dims)); the scales still
// map the coordinates.
absl::StatusOr<StructInfo> InferResize(const ir::ExprNode& call, const arith::Analyzer& analyzer) {
  if (call.args.size() != 4) return OpError(call, "expects x, roi, scales and sizes");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  const ir::Expr& scales = call.args[2];
  const ir::Expr& sizes = call.args[3];
  if (ir::IsNone(scales) && ir::IsNone(sizes)) {
    return OpError(call, "scales or sizes must be given");
  }
  if (!ir::IsNone(scales) && !ir::IsNone(sizes) && scales->kind == ir::ExprKind::kConstant) {
    return OpError(call, "sizes come with scales only when those are read at run time");
  }
  if (!ir::IsNone(sizes)) {
    auto values = KnownIntValues(sizes);
    if (!values) return StructInfo::TensorRank(x->ndim, x->dtype);
    if (x->ndim >= 0 && static_cast<int>(values->size()) != x->ndim) {
      return OpError(call,
                     absl::StrCat("sizes has ", values->size(), " entries for rank ", x->ndim));
    }
    return StructInfo::Tensor(*values, x->dtype);
  }
  if (scales->kind != ir::ExprKind::kConstant || !x->shape) {
    return StructInfo::TensorRank(x->ndim, x->dtype);
  }
  const ir::NDArray& s = *scales->data;
  if (s.num_elements() != x->ndim) {
    return OpError(call,
                   absl::StrCat("scales has ", s.num_elements(), " entries for rank ", x->ndim));
  }
  std::vector<PrimExpr> out;
  for (int d = 0; d < x->ndim; ++d) {
    double scale = s.GetDouble(d);
    if (!(scale > 0)) return OpError(call, absl::StrCat("scale ", scale, " must be positive"));
    auto dim = ScaledDim((*x->shape)[d], scale, analyzer);
    if (!dim) return StructInfo::TensorRank(x->ndim, x->dtype);
    out.push_back(*dim);
  }
  return StructInfo::Tensor(std::move(out), x->dtype);
}

// grid_sample(x [N, C, H, W], grid [N, Ho, Wo, 2]) -> [N, C, Ho, Wo].
absl::StatusOr<StructInfo> InferGridSample(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 2));
  const auto& x = *args[0]->shape;
  const auto& grid = *args[1]->shape;
  if (x.size() != 4 || grid.size() != 4) {
    return OpError(call, absl::StrCat("expects 4-D input and grid, got ranks ", x.size(), " and ",
                                      grid.size()));
  }
  KILN_RETURN_IF_ERROR(CheckSameDim(call, grid[3], arith::IntImm(2), "grid's last dimension"));
  KILN_RETURN_IF_ERROR(CheckSameDim(call, x[0], grid[0], "batch of input and grid differ"));
  return StructInfo::Tensor({x[0], x[1], grid[1], grid[2]}, args[0]->dtype);
}

// roi_align(x [N, C, H, W], rois [R, 4], batch_indices [R]) -> [R, C, oh, ow].
absl::StatusOr<StructInfo> InferRoiAlign(const ir::ExprNode& call, const arith::Analyzer&) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 3));
  const auto& x = *args[0]->shape;
  const auto& rois = *args[1]->shape;
  const auto& indices = *args[2]->shape;
  if (x.size() != 4 || rois.size() != 2 || indices.size() != 1) {
    return OpError(call, "expects x [N, C, H, W], rois [R, 4] and batch_indices [R]");
  }
  KILN_RETURN_IF_ERROR(CheckSameDim(call, rois[1], arith::IntImm(4), "rois' last dimension"));
  KILN_RETURN_IF_ERROR(CheckSameDim(call, rois[0], indices[0], "rois and batch_indices differ"));
  int64_t oh = GetIntAttr(call.attrs, "output_height", 1);
  int64_t ow = GetIntAttr(call.attrs, "output_width", 1);
  if (oh <= 0 || ow <= 0) return OpError(call, "output_height and output_width must be positive");
  return StructInfo::Tensor({rois[0], x[1], arith::IntImm(oh), arith::IntImm(ow)}, args[0]->dtype);
}

absl::StatusOr<int64_t> Blocksize(const ir::ExprNode& call, const std::vector<PrimExpr>& x) {
  if (x.size() != 4) return OpError(call, absl::StrCat("expects a 4-D input, got rank ", x.size()));
  int64_t b = GetIntAttr(call.attrs, "blocksize", 0);
  if (b <= 0) return OpError(call, absl::StrCat("blocksize ", b, " must be positive"));
  return b;
}

// `dim` / `by`, which must divide it when it is known.
absl::StatusOr<PrimExpr> DivideDim(const ir::ExprNode& call, const PrimExpr& dim, int64_t by,
                                   const std::string& what, const arith::Analyzer& analyzer) {
  if (IsConst(dim) && dim->int_value % by != 0) {
    return OpError(call, absl::StrCat(what, " ", dim->int_value, " is not a multiple of ", by));
  }
  return analyzer.Simplify(arith::FloorDiv(dim, arith::IntImm(by)));
}

absl::StatusOr<StructInfo> InferDepthToSpace(const ir::ExprNode& call,
                                             const arith::Analyzer& analyzer) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 1));
  const auto& x = *args[0]->shape;
  KILN_ASSIGN_OR_RETURN(int64_t b, Blocksize(call, x));
  std::string mode = GetStringAttr(call.attrs, "mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return OpError(call, "mode must be DCR or CRD, got " + mode);
  KILN_ASSIGN_OR_RETURN(PrimExpr c, DivideDim(call, x[1], b * b, "channels", analyzer));
  PrimExpr scale = arith::IntImm(b);
  return StructInfo::Tensor(
      {x[0], c, analyzer.Simplify(x[2] * scale), analyzer.Simplify(x[3] * scale)}, args[0]->dtype);
}

absl::StatusOr<StructInfo> InferSpaceToDepth(const ir::ExprNode& call,
                                             const arith::Analyzer& analyzer) {
  KILN_ASSIGN_OR_RETURN(auto args, TensorArgs(call, 1));
  const auto& x = *args[0]->shape;
  KILN_ASSIGN_OR_RETURN(int64_t b, Blocksize(call, x));
  KILN_ASSIGN_OR_RETURN(PrimExpr h, DivideDim(call, x[2], b, "height", analyzer));
  KILN_ASSIGN_OR_RETURN(PrimExpr w, DivideDim(call, x[3], b, "width", analyzer));
  return StructInfo::Tensor({x[0], analyzer.Simplify(x[1] * arith::IntImm(b * b)), h, w},
                            args[0]->dtype);
}

}  // namespace

std::vector<OpDef> ImageOps() {
  std::vector<OpDef> ops = {
      {"resize", InferResize},
      {"grid_sample", InferGridSample},
      {"roi_align", InferRoiAlign},
      {"depth_to_space", InferDepthToSpace},
      {"space_to_depth", InferSpaceToDepth},
  };
  for (OpDef& def : ImageIndexOps()) ops.push_back(std::move(def));
  return ops;
}

}  // namespace kiln::op
