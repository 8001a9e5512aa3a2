// Linear algebra and signal processing, as in ONNX opset 17:
//   det(x)                                   [*, M, M] -> [*]
//   dft(input, dft_length?) {axis, inverse, onesided}; axis counts from 0 and never names the
//       last (real/imaginary) dim
//   stft(signal, frame_step, window?, frame_length?) {onesided}
//   hann_window / hamming_window / blackman_window(size) {periodic, dtype}
//   mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
//       upper_edge_hertz) {dtype}
// `dtype` is a DataType name ("f32"). Sizes that are run-time values leave only the rank known.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/reduce_internal.h"

namespace kiln::op {
namespace {

using arith::PrimExpr;
using ir::StructInfo;

// The scalar integer value of argument i when it is a constant.
std::optional<int64_t> ConstantInt(const ir::ExprNode& call, size_t i) {
  if (i >= call.args.size()) return std::nullopt;
  const ir::Expr& arg = call.args[i];
  if (arg->kind != ir::ExprKind::kConstant || arg->data->num_elements() != 1) return std::nullopt;
  return arg->data->GetInt(0);
}

// The scalar integer value of argument i when it is known: a constant, or a ShapeExpr of
// one value (read at run time and bound to a symbolic variable by the importer).
PrimExpr KnownInt(const ir::ExprNode& call, size_t i) {
  if (std::optional<int64_t> v = ConstantInt(call, i)) return arith::IntImm(*v);
  if (i >= call.args.size()) return nullptr;
  const ir::Expr& arg = call.args[i];
  if (arg->kind != ir::ExprKind::kShapeExpr || arg->values.size() != 1) return nullptr;
  return arg->values[0];
}

bool IsNonPositive(const PrimExpr& v) {
  return v->kind == arith::ExprKind::kIntImm && v->int_value <= 0;
}

absl::StatusOr<arith::DataType> DTypeAttr(const ir::ExprNode& call) {
  auto dtype = arith::DataType::Parse(GetStringAttr(call.attrs, "dtype", "f32"));
  if (!dtype.ok()) return OpError(call, std::string(dtype.status().message()));
  return *dtype;
}

absl::StatusOr<StructInfo> InferDet(const ir::ExprNode& call, const arith::Analyzer& an) {
  if (call.args.size() != 1) return OpError(call, "expects 1 argument");
  KILN_ASSIGN_OR_RETURN(const StructInfo* info, TensorArg(call, 0));
  if (!info->dtype.is_float()) return OpError(call, "input must be a float tensor");
  if (info->ndim >= 0 && info->ndim < 2) return OpError(call, "input must have rank >= 2");
  if (!info->shape) {
    return StructInfo::TensorRank(info->ndim < 0 ? -1 : info->ndim - 2, info->dtype);
  }
  const std::vector<PrimExpr>& x = *info->shape;
  if (!an.ProveEqual(x[x.size() - 1], x[x.size() - 2])) {
    return OpError(
        call, absl::StrCat("matrices must be square, got ", arith::ToString(x[x.size() - 2]), " x ",
                           arith::ToString(x[x.size() - 1])));
  }
  return StructInfo::Tensor({x.begin(), x.end() - 2}, info->dtype);
}

// Checks that every argument is an integer or float scalar (when its shape is known), or a
// ShapeExpr of one value.
absl::Status CheckScalars(const ir::ExprNode& call, size_t count) {
  if (call.args.size() != count) {
    return OpError(call, absl::StrCat("expects ", count, " arguments"));
  }
  for (size_t i = 0; i < count; ++i) {
    if (KnownInt(call, i) && call.args[i]->kind == ir::ExprKind::kShapeExpr) continue;
    KILN_ASSIGN_OR_RETURN(const StructInfo* info, TensorArg(call, i));
    if (info->ndim > 0 && !(info->ndim == 1 && info->shape && (*info->shape)[0]->is_const_int(1))) {
      return OpError(call, absl::StrCat("argument ", i, " must be a scalar"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StructInfo> InferDFT(const ir::ExprNode& call, const arith::Analyzer& an) {
  if (call.args.size() != 2) return OpError(call, "expects input and dft_length (or none)");
  KILN_ASSIGN_OR_RETURN(const StructInfo* x, TensorArg(call, 0));
  if (!x->dtype.is_float()) return OpError(call, "input must be a float tensor");
  if (!x->shape) return StructInfo::TensorRank(x->ndim, x->dtype);
  std::vector<PrimExpr> out = *x->shape;
  int64_t rank = out.size();
  if (rank < 2) return OpError(call, "input must have rank >= 2");
  const PrimExpr& last = out.back();
  if (!last->is_const_int(1) && !last->is_const_int(2)) {
    return OpError(call, "the last dimension must be 1 (real) or 2 (complex)");
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 1), rank - 1));
  bool onesided = GetIntAttr(call.attrs, "onesided", 0) != 0;
  if (onesided && GetIntAttr(call.attrs, "inverse", 0) != 0) {
    return OpError(call, "onesided and inverse cannot both be set");
  }
  PrimExpr n = out[axis];
  if (!ir::IsNone(call.args[1])) {
    std::optional<int64_t> length = ConstantInt(call, 1);
    if (!length) return StructInfo::TensorRank(rank, x->dtype);
    if (*length <= 0) return OpError(call, "dft_length must be positive");
    n = arith::IntImm(*length);
  }
  out[axis] = onesided ? an.Simplify(arith::FloorDiv(n, arith::IntImm(2)) + arith::IntImm(1)) : n;
  out.back() = arith::IntImm(2);
  return StructInfo::Tensor(std::move(out), x->dtype);
}

absl::StatusOr<StructInfo> InferSTFT(const ir::ExprNode& call, const arith::Analyzer& an) {
  if (call.args.size() != 4) {
    return OpError(call,
                   "expects signal, frame_step, window and frame_length (none where omitted)");
  }
  KILN_ASSIGN_OR_RETURN(const StructInfo* signal, TensorArg(call, 0));
  if (!signal->dtype.is_float()) return OpError(call, "signal must be a float tensor");
  if (signal->ndim >= 0 && signal->ndim != 3) return OpError(call, "signal must be 3-D");
  StructInfo unknown = StructInfo::TensorRank(4, signal->dtype);
  PrimExpr step = KnownInt(call, 1), length = KnownInt(call, 3);
  const StructInfo& window = call.args[2]->struct_info;
  if (!length && !ir::IsNone(call.args[2]) && window.shape && window.ndim == 1) {
    length = (*window.shape)[0];
  }
  if (!signal->shape || !step || !length) return unknown;
  if (IsNonPositive(step)) return OpError(call, "frame_step must be positive");
  const std::vector<PrimExpr>& s = *signal->shape;
  PrimExpr frames = an.Simplify(arith::FloorDiv(s[1] - length, step) + arith::IntImm(1));
  bool onesided = GetIntAttr(call.attrs, "onesided", 1) != 0;
  PrimExpr bins =
      onesided ? an.Simplify(arith::FloorDiv(length, arith::IntImm(2)) + arith::IntImm(1)) : length;
  return StructInfo::Tensor({s[0], frames, bins, arith::IntImm(2)}, signal->dtype);
}

// *_window(size): size is a scalar tensor, or a ShapeExpr of one value (read at run time and
// bound to a symbolic variable by the importer).
absl::StatusOr<StructInfo> InferWindow(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() == 1 && call.args[0]->kind == ir::ExprKind::kShapeExpr &&
      call.args[0]->values.size() == 1) {
    KILN_ASSIGN_OR_RETURN(arith::DataType dtype, DTypeAttr(call));
    return StructInfo::Tensor({call.args[0]->values[0]}, dtype);
  }
  KILN_RETURN_IF_ERROR(CheckScalars(call, 1));
  if (!call.args[0]->struct_info.dtype.is_int()) return OpError(call, "size must be an integer");
  KILN_ASSIGN_OR_RETURN(arith::DataType dtype, DTypeAttr(call));
  std::optional<int64_t> size = ConstantInt(call, 0);
  if (!size) return StructInfo::TensorRank(1, dtype);
  return StructInfo::Tensor({arith::IntImm(*size)}, dtype);
}

// num_mel_bins and dft_length may be ShapeExprs of one value (bound by the importer).
absl::StatusOr<StructInfo> InferMelWeightMatrix(const ir::ExprNode& call,
                                                const arith::Analyzer& an) {
  KILN_RETURN_IF_ERROR(CheckScalars(call, 5));
  KILN_ASSIGN_OR_RETURN(arith::DataType dtype, DTypeAttr(call));
  PrimExpr bins = KnownInt(call, 0), dft_length = KnownInt(call, 1);
  if (!bins || !dft_length) return StructInfo::TensorRank(2, dtype);
  if (IsNonPositive(bins) || IsNonPositive(dft_length)) {
    return OpError(call, "num_mel_bins and dft_length must be positive");
  }
  PrimExpr spectrogram_bins =
      an.Simplify(arith::FloorDiv(dft_length, arith::IntImm(2)) + arith::IntImm(1));
  return StructInfo::Tensor({spectrogram_bins, bins}, dtype);
}

}  // namespace

std::vector<OpDef> SignalOps() {
  return {
      {"det", InferDet},
      {"dft", InferDFT},
      {"stft", InferSTFT},
      {"hann_window", InferWindow},
      {"hamming_window", InferWindow},
      {"blackman_window", InferWindow},
      {"mel_weight_matrix", InferMelWeightMatrix},
  };
}

}  // namespace kiln::op
