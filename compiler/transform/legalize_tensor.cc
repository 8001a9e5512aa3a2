// Shape and data-movement operators: transpose, reshape, squeeze, unsqueeze, expand, tile,
// concat, slice, pad. Index operators and tensor makers live in legalize_tensor_index.cc.
#include "absl/strings/str_cat.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

Stmt TransposeBody(const KernelContext& k) {
  std::vector<int64_t> perm = op::GetIntsAttr(k.call.attrs, "perm");
  return Compute(k.out, [&](const Indices& idx) {
    Indices at(idx.size());
    for (size_t d = 0; d < perm.size(); ++d) at[perm[d]] = idx[d];
    return arith::Load(k.inputs[0], at);
  });
}

// Reshape copies in row-major order: the output's linear index, re-split by input extents.
// Squeeze and unsqueeze are reshapes too: their axes are already in the output's shape.
Stmt ReshapeBody(const KernelContext& k) {
  const Buffer& in = k.inputs[0];
  return Compute(k.out, [&](const Indices& idx) {
    PrimExpr linear = arith::IntImm(0);
    for (size_t d = 0; d < idx.size(); ++d) linear = linear * k.out->shape[d] + idx[d];
    Indices at(in->shape.size());
    for (size_t d = in->shape.size(); d-- > 0;) {
      at[d] = k.analyzer.Simplify(arith::FloorMod(linear, in->shape[d]));
      linear = arith::FloorDiv(linear, in->shape[d]);
    }
    return arith::Load(in, at);
  });
}

// Tile reads every output position modulo the input's extents; the repeats are already in
// the output's shape, so they need not be constant.
Stmt TileBody(const KernelContext& k) {
  const Buffer& in = k.inputs[0];
  return Compute(k.out, [&](const Indices& idx) {
    Indices at;
    for (size_t d = 0; d < idx.size(); ++d) at.push_back(arith::FloorMod(idx[d], in->shape[d]));
    return arith::Load(in, at);
  });
}

// One loop nest per input, each writing its block of the output at a running offset: no
// select, so no load ever reads outside an input.
Stmt ConcatBody(const KernelContext& k) {
  int64_t rank = k.out->shape.size();
  int64_t axis = op::GetIntAttr(k.call.attrs, "axis", 0);
  if (axis < 0) axis += rank;
  std::vector<Stmt> parts;
  PrimExpr offset = arith::IntImm(0);
  for (const Buffer& in : k.inputs) {
    parts.push_back(LoopNest(in->shape, "i", [&](const Indices& idx) {
      Indices at = idx;
      at[axis] = k.analyzer.Simplify(idx[axis] + offset);
      return ir::Store(k.out, at, arith::Load(in, idx));
    }));
    offset = k.analyzer.Simplify(offset + in->shape[axis]);
  }
  return ir::Seq(parts);
}

PrimExpr Clamp(PrimExpr v, PrimExpr lo, PrimExpr hi) { return arith::Min(arith::Max(v, lo), hi); }

// Where a sliced axis starts, as the reference's SliceAxis: a negative start counts from
// the end (below -dim it is below every bound), then clamps; a negative step starts at most
// at dim - 1.
PrimExpr SliceStart(PrimExpr start, PrimExpr dim, PrimExpr step) {
  PrimExpr zero = arith::IntImm(0);
  PrimExpr from_end = arith::Max(start + dim, arith::IntImm(-1));
  PrimExpr v = arith::Select(arith::Binary(ExprKind::kLT, start, zero), from_end, start);
  PrimExpr up = Clamp(v, zero, dim), down = Clamp(v, zero, dim - arith::IntImm(1));
  if (step->kind == ExprKind::kIntImm) return step->int_value > 0 ? up : down;
  // A step read at run time (checked non-zero by the host).
  return arith::Select(arith::Binary(ExprKind::kGT, step, zero), up, down);
}

absl::StatusOr<Stmt> SliceBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  int64_t rank = x->shape.size();
  std::vector<std::vector<PrimExpr>> v;
  for (size_t i = 1; i <= 4; ++i) {
    auto values = IntsOperand(k.call, i);
    if (!values) return NotConstant(k.call, i, "starts, ends, axes and steps");
    v.push_back(*values);
  }
  std::vector<PrimExpr> starts(rank, arith::IntImm(0)), steps(rank, arith::IntImm(1));
  for (size_t i = 0; i < v[0].size(); ++i) {
    if (v[2][i]->kind != ExprKind::kIntImm) return NotConstant(k.call, 3, "axes");
    int64_t axis = v[2][i]->int_value < 0 ? v[2][i]->int_value + rank : v[2][i]->int_value;
    steps[axis] = v[3][i];
    starts[axis] = k.analyzer.Simplify(SliceStart(v[0][i], x->shape[axis], steps[axis]));
  }
  return Compute(k.out, [&](const Indices& idx) {
    Indices at;
    for (int64_t d = 0; d < rank; ++d) {
      at.push_back(k.analyzer.Simplify(starts[d] + idx[d] * steps[d]));
    }
    return arith::Load(x, at);
  });
}

// The source coordinate of padded coordinate c (input coordinates) in a border mode, as
// the reference's PadSource; constant mode clamps too so that its load stays in bounds
// (the value is selected away).
PrimExpr PadSource(PrimExpr c, PrimExpr dim, const std::string& mode) {
  PrimExpr zero = arith::IntImm(0), one = arith::IntImm(1);
  if (mode == "wrap") return arith::FloorMod(c, dim);
  if (mode != "reflect") return Clamp(c, zero, dim - one);
  // max(.., 1) keeps the modulus non-zero for dim 1, whose select picks 0 anyway.
  PrimExpr period = arith::Max(arith::IntImm(2) * (dim - one), one);
  PrimExpr m = arith::FloorMod(c, period);
  PrimExpr r = arith::Select(arith::Binary(ExprKind::kLT, m, dim), m, period - m);
  return arith::Select(arith::Binary(ExprKind::kEQ, dim, one), zero, r);
}

absl::StatusOr<Stmt> PadBody(const KernelContext& k) {
  const Buffer& x = k.inputs[0];
  size_t rank = x->shape.size();
  auto pads = IntsOperand(k.call, 1);
  if (!pads || pads->size() != 2 * rank) return NotConstant(k.call, 1, "pads");
  std::string mode = op::GetStringAttr(k.call.attrs, "mode", "constant");
  PrimExpr value = ScalarOperand(k, 2);
  return Compute(k.out, [&](const Indices& idx) {
    Indices at;
    PrimExpr inside;
    for (size_t d = 0; d < rank; ++d) {
      PrimExpr c = k.analyzer.Simplify(idx[d] - (*pads)[d]);
      at.push_back(PadSource(c, x->shape[d], mode));
      PrimExpr in_d =
          arith::Binary(ExprKind::kAnd, arith::Binary(ExprKind::kGE, c, arith::IntImm(0)),
                        arith::Binary(ExprKind::kLT, c, x->shape[d]));
      inside = inside ? arith::Binary(ExprKind::kAnd, inside, in_d) : in_d;
    }
    PrimExpr load = arith::Load(x, at);
    if (mode != "constant" || !inside) return load;
    return arith::Select(inside, load, value);
  });
}

}  // namespace

void RegisterTensorKernelBuilders(KernelBuilderTable& table) {
  auto always = [](Stmt (*body)(const KernelContext&)) {
    return [body](const KernelContext& k) -> absl::StatusOr<Stmt> { return body(k); };
  };
  table["transpose"] = always(TransposeBody);
  table["reshape"] = always(ReshapeBody);
  table["squeeze"] = always(ReshapeBody);
  table["unsqueeze"] = always(ReshapeBody);
  table["expand"] = always([](const KernelContext& k) {
    return Compute(k.out, [&](const Indices& idx) { return LoadBroadcast(k.inputs[0], idx); });
  });
  table["tile"] = always(TileBody);
  table["concat"] = always(ConcatBody);
  table["slice"] = SliceBody;
  table["pad"] = PadBody;
  RegisterTensorIndexKernelBuilders(table);
  RegisterEinsumKernelBuilders(table);
  RegisterScatterKernelBuilders(table);
}

}  // namespace kiln::transform
