// Quantization: quantize_linear, dequantize_linear, matmul_integer and qlinear_matmul,
// following the reference kernels in interp/nn_quant.cc. Rounding is half to even ("round"
// is nearbyint under the default rounding mode) and results saturate to the integer type.
// Scales and zero points are per tensor (one element) or per slice along an axis.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {

void RegisterQuantKernelBuilders(KernelBuilderTable& table);

namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

const DataType kF64 = DataType::Float(64);

absl::Status Unimplemented(const KernelContext& k, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat("op ", k.call.name, ": ", why));
}

// The slice position of an element at idx along the quantization axis (0 for scalars).
absl::StatusOr<PrimExpr> AxisPosition(const KernelContext& k, const Buffer& x, const Indices& idx) {
  if (x->shape.empty()) return arith::IntImm(0);
  int64_t rank = x->shape.size();
  int64_t axis = op::GetIntAttr(k.call.attrs, "axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("op ", k.call.name, ": axis ", axis, " out of range for rank ", rank));
  }
  return idx[axis];
}

// y = saturate(round(x / scale) + zero_point); x / scale divides in x's type, as ONNX does.
absl::StatusOr<Stmt> QuantizeBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &scale = k.inputs[1];
  const Buffer* zp = OptionalInput(k, 2);
  if (!x->dtype.is_float()) return Unimplemented(k, "x must be a float tensor");
  KILN_RETURN_IF_ERROR(AxisPosition(k, x, Indices(x->shape.size(), arith::IntImm(0))).status());
  DataType out_t = k.out->dtype;
  if (!out_t.is_int()) return Unimplemented(k, "only integer results are compiled");
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr pos = *AxisPosition(k, x, idx);
    PrimExpr q = arith::Binary(ExprKind::kDiv, arith::Load(x, idx),
                               CastIfNeeded(x->dtype, ParamAt(scale, pos)));
    PrimExpr v = arith::Call(kF64, "round", {CastIfNeeded(kF64, q)});
    if (zp) v = v + CastIfNeeded(kF64, ParamAt(*zp, pos));
    return arith::Cast(out_t, Saturate(v, out_t));
  });
}

// y = (x - zero_point) * scale in double, rounded once to the scale's type.
absl::StatusOr<Stmt> DequantizeBody(const KernelContext& k) {
  const Buffer &x = k.inputs[0], &scale = k.inputs[1];
  const Buffer* zp = OptionalInput(k, 2);
  KILN_RETURN_IF_ERROR(AxisPosition(k, x, Indices(x->shape.size(), arith::IntImm(0))).status());
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr pos = *AxisPosition(k, x, idx);
    PrimExpr centered = CastIfNeeded(kF64, arith::Load(x, idx));
    if (zp) centered = centered - CastIfNeeded(kF64, ParamAt(*zp, pos));
    return CastIfNeeded(k.out->dtype, centered * CastIfNeeded(kF64, ParamAt(scale, pos)));
  });
}

// One operand of an integer matmul: its buffer and zero point (per row of a, per column of
// b, or per tensor).
struct MatmulOperand {
  Buffer buf;
  const Buffer* zero_point;
};

// operand[batch..., row, col] with numpy batch broadcasting, minus its zero point at `slice`.
PrimExpr LoadCentered(const MatmulOperand& m, const Indices& batch, PrimExpr row, PrimExpr col,
                      PrimExpr slice, DataType acc_t) {
  Indices at = batch;
  at.push_back(row);
  at.push_back(col);
  size_t offset = at.size() - m.buf->shape.size();
  Indices own;
  for (size_t d = 0; d < m.buf->shape.size(); ++d) {
    bool bcast = d + 2 < m.buf->shape.size() && m.buf->shape[d]->is_const_int(1);
    own.push_back(bcast ? arith::IntImm(0) : at[offset + d]);
  }
  PrimExpr v = CastIfNeeded(acc_t, arith::Load(m.buf, own));
  if (m.zero_point) v = v - CastIfNeeded(acc_t, ParamAt(*m.zero_point, slice));
  return v;
}

// For each output element: acc = sum_k (a - a_zp)(b - b_zp) in i64 (exact for 8-bit
// operands), then out = finish(acc, row, col).
using Finish = std::function<PrimExpr(PrimExpr acc, PrimExpr row, PrimExpr col)>;
absl::StatusOr<Stmt> IntegerMatmul(const KernelContext& k, const MatmulOperand& a,
                                   const MatmulOperand& b, const Finish& finish) {
  if (a.buf->shape.size() < 2 || b.buf->shape.size() < 2) {
    return Unimplemented(k, "operands must have rank >= 2");
  }
  DataType acc_t = DataType::Int();
  Buffer acc = arith::MakeBuffer("acc", acc_t, {arith::IntImm(1)});
  Indices zero = {arith::IntImm(0)};
  PrimExpr kdim = a.buf->shape.back();
  return LoopNest(k.out->shape, "i", [&](const Indices& idx) {
    size_t n = idx.size();
    Indices batch(idx.begin(), idx.end() - 2);
    PrimExpr row = idx[n - 2], col = idx[n - 1];
    PrimExpr kv = arith::MakeVar("k");
    PrimExpr prod =
        LoadCentered(a, batch, row, kv, row, acc_t) * LoadCentered(b, batch, kv, col, col, acc_t);
    Stmt body = ir::Seq({
        ir::Store(acc, zero, arith::IntImm(0)),
        ir::For(kv, arith::IntImm(0), kdim, ir::ForKind::kSerial,
                ir::Store(acc, zero, arith::Load(acc, zero) + prod)),
        ir::Store(k.out, idx, finish(arith::Load(acc, zero), row, col)),
    });
    return ir::Allocate(acc, body);
  });
}

absl::StatusOr<Stmt> MatmulIntegerBody(const KernelContext& k) {
  MatmulOperand a{k.inputs[0], OptionalInput(k, 2)}, b{k.inputs[1], OptionalInput(k, 3)};
  return IntegerMatmul(
      k, a, b, [&](PrimExpr acc, PrimExpr, PrimExpr) { return CastIfNeeded(k.out->dtype, acc); });
}

// qlinear_matmul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the integer product
// rescaled by a_scale * b_scale / y_scale, then quantized to y_zp's type.
absl::StatusOr<Stmt> QLinearMatmulBody(const KernelContext& k) {
  if (k.inputs.size() != 8) return Unimplemented(k, "expects 8 tensor operands");
  const std::vector<Buffer>& t = k.inputs;
  MatmulOperand a{t[0], &t[2]}, b{t[3], &t[5]};
  DataType out_t = k.out->dtype;
  return IntegerMatmul(k, a, b, [&](PrimExpr acc, PrimExpr row, PrimExpr col) {
    PrimExpr scale = arith::Binary(
        ExprKind::kDiv,
        CastIfNeeded(kF64, ParamAt(t[1], row)) * CastIfNeeded(kF64, ParamAt(t[4], col)),
        CastIfNeeded(kF64, ParamAt(t[6], arith::IntImm(0))));
    PrimExpr v =
        CastIfNeeded(kF64, acc) * scale + CastIfNeeded(kF64, ParamAt(t[7], arith::IntImm(0)));
    return arith::Cast(out_t, Saturate(v, out_t));
  });
}

}  // namespace

void RegisterQuantKernelBuilders(KernelBuilderTable& table) {
  table["quantize_linear"] = QuantizeBody;
  table["dequantize_linear"] = DequantizeBody;
  table["matmul_integer"] = MatmulIntegerBody;
  table["qlinear_matmul"] = QLinearMatmulBody;
}

}  // namespace kiln::transform
