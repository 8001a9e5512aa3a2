// Operators whose result is a tuple of tensors: one kernel writes every field, each into its
// own output buffer (KernelContext::outs). The definitions follow the reference kernels in
// interp/elementwise.cc (dropout), interp/tensor_slice.cc (split), interp/image_index.cc
// (top_k) and interp/nn_quant.cc (dynamic_quantize_linear). Layer-norm statistics and
// batch_normalization_training live with the other normalizations in legalize_reduce.cc,
// rnn/gru/lstm in legalize_rnn.cc.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

absl::Status CheckOutputCount(const KernelContext& k, size_t count) {
  if (k.outs.size() == count) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("op ", k.call.name, ": expected ", count, " results, got ", k.outs.size()));
}

// Inference: (x unchanged, a mask of all true).
absl::StatusOr<Stmt> DropoutBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(CheckOutputCount(k, 2));
  return ir::Seq({
      Compute(k.outs[0], [&](const Indices& at) { return arith::Load(k.inputs[0], at); }),
      Compute(k.outs[1], [](const Indices&) { return arith::IntImm(1, DataType::Bool()); }),
  });
}

// Each part copies its slice of the axis; a part starts where the parts before it end.
absl::StatusOr<Stmt> SplitBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        op::NormalizeAxis(k.call, op::GetIntAttr(k.call.attrs, "axis", 0),
                                          static_cast<int64_t>(x->shape.size())));
  std::vector<Stmt> copies;
  PrimExpr begin = arith::IntImm(0);
  for (const Buffer& part : k.outs) {
    copies.push_back(Compute(part, [&](const Indices& at) {
      Indices from = at;
      from[axis] = k.analyzer.Simplify(at[axis] + begin);
      return arith::Load(x, from);
    }));
    begin = k.analyzer.Simplify(begin + part->shape[axis]);
  }
  return ir::Seq(copies);
}

// Whether x[m] comes before x[j] in top_k's order: larger (or smaller) first, and among equal
// values the lower index first, as the reference's stable sort orders them.
PrimExpr ComesBefore(PrimExpr xm, PrimExpr xj, PrimExpr m, PrimExpr j, bool largest) {
  PrimExpr better = arith::Binary(largest ? ExprKind::kGT : ExprKind::kLT, xm, xj);
  PrimExpr tie = arith::Binary(ExprKind::kAnd, arith::Binary(ExprKind::kEQ, xm, xj),
                               arith::Binary(ExprKind::kLT, m, j));
  return arith::Binary(ExprKind::kOr, better, tie);
}

// (values, indices) of the k first elements of each line along `axis`. Each element's rank is
// how many elements of its line come before it; those ranked below k are written at their
// rank. O(n^2) per line, which is fine for the small n of top_k in models.
// TODO: a sort (or a library routine through call_extern) for long lines.
absl::StatusOr<Stmt> TopKBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(CheckOutputCount(k, 2));
  const Buffer& x = k.inputs[0];
  const Buffer &values = k.outs[0], &indices = k.outs[1];
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        op::NormalizeAxis(k.call, op::GetIntAttr(k.call.attrs, "axis", -1),
                                          static_cast<int64_t>(x->shape.size())));
  bool largest = op::GetIntAttr(k.call.attrs, "largest", 1) != 0;
  PrimExpr n = x->shape[axis], count = values->shape[axis];
  std::vector<PrimExpr> lines = x->shape;
  lines[axis] = arith::IntImm(1);
  Buffer rank = arith::MakeBuffer("rank", DataType::Int(), {arith::IntImm(1)});
  PrimExpr zero = arith::IntImm(0);
  return LoopNest(lines, "o", [&](const Indices& line) {
    PrimExpr j = arith::MakeVar("j"), m = arith::MakeVar("m");
    Indices at_j = line, at_m = line;
    at_j[axis] = j;
    at_m[axis] = m;
    PrimExpr before = ComesBefore(arith::Load(x, at_m), arith::Load(x, at_j), m, j, largest);
    Stmt count_before = ir::For(
        m, zero, n, ir::ForKind::kSerial,
        ir::Store(rank, {zero}, arith::Load(rank, {zero}) + arith::Cast(DataType::Int(), before)));
    Indices out_at = line;
    out_at[axis] = arith::Load(rank, {zero});
    Stmt write =
        ir::IfThenElse(arith::Binary(ExprKind::kLT, arith::Load(rank, {zero}), count),
                       ir::Seq({ir::Store(values, out_at, arith::Load(x, at_j)),
                                ir::Store(indices, out_at, arith::Cast(indices->dtype, j))}));
    Stmt per_element = ir::Seq({ir::Store(rank, {zero}, zero), count_before, write});
    return ir::Allocate(rank, ir::For(j, zero, n, ir::ForKind::kSerial, per_element));
  });
}

// round half to even, then clamp to [0, 255], in f32.
PrimExpr SaturateU8(PrimExpr v) {
  DataType f32 = DataType::Float(32);
  PrimExpr r = arith::Call(f32, "round", {v});
  return arith::Min(arith::Max(r, arith::FloatImm(0, f32)), arith::FloatImm(255, f32));
}

// (y u8, scale f32 scalar, zero_point u8 scalar): the range [min(0, min x), max(0, max x)]
// maps onto [0, 255]; computed in f32 as interp/nn_quant.cc does.
absl::StatusOr<Stmt> DynamicQuantizeBody(const KernelContext& k) {
  KILN_RETURN_IF_ERROR(CheckOutputCount(k, 3));
  const Buffer& x = k.inputs[0];
  const Buffer &y = k.outs[0], &scale_out = k.outs[1], &zp_out = k.outs[2];
  if (!x->dtype.is_float()) {
    return absl::UnimplementedError(absl::StrCat("op ", k.call.name, ": x must be float"));
  }
  DataType f32 = DataType::Float(32);
  PrimExpr zero = arith::IntImm(0), fzero = arith::FloatImm(0, f32);
  Buffer range = arith::MakeBuffer("range", f32, {arith::IntImm(2)});  // lo, hi
  PrimExpr lo = arith::Load(range, {zero}), hi = arith::Load(range, {arith::IntImm(1)});
  auto as_f32 = [&](PrimExpr v) { return v->dtype == f32 ? v : arith::Cast(f32, v); };
  Stmt find_range = LoopNest(x->shape, "i", [&](const Indices& at) {
    PrimExpr v = as_f32(arith::Load(x, at));
    // A NaN never wins, as with std::min / std::max in the reference.
    auto pick = [&](ExprKind better, PrimExpr cur) {
      return arith::Select(arith::Binary(better, v, cur), v, cur);
    };
    return ir::Seq({ir::Store(range, {zero}, pick(ExprKind::kLT, lo)),
                    ir::Store(range, {arith::IntImm(1)}, pick(ExprKind::kGT, hi))});
  });
  PrimExpr scale = arith::Load(scale_out, {});
  PrimExpr is_zero = arith::Binary(ExprKind::kEQ, scale, fzero);
  PrimExpr zp =
      arith::Select(is_zero, fzero, SaturateU8(fzero - arith::Binary(ExprKind::kDiv, lo, scale)));
  PrimExpr zp_value = arith::Cast(f32, arith::Load(zp_out, {}));
  Stmt quantize = Compute(y, [&](const Indices& at) {
    PrimExpr q = arith::Select(
        is_zero, fzero,
        arith::Call(f32, "round",
                    {arith::Binary(ExprKind::kDiv, as_f32(arith::Load(x, at)), scale)}));
    return arith::Cast(y->dtype, SaturateU8(q + zp_value));
  });
  Stmt body = ir::Seq({
      ir::Store(range, {zero}, fzero),
      ir::Store(range, {arith::IntImm(1)}, fzero),
      find_range,
      ir::Store(scale_out, {}, arith::Binary(ExprKind::kDiv, hi - lo, arith::FloatImm(255, f32))),
      ir::Store(zp_out, {}, arith::Cast(zp_out->dtype, zp)),
      quantize,
  });
  return ir::Allocate(range, body);
}

}  // namespace

void RegisterMultiOutputKernelBuilders(KernelBuilderTable& table) {
  table["dropout"] = DropoutBody;
  table["split"] = SplitBody;
  table["top_k"] = TopKBody;
  table["dynamic_quantize_linear"] = DynamicQuantizeBody;
}

}  // namespace kiln::transform
