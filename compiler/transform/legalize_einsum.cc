// einsum as one loop nest: a loop per output label, and inside it a loop per summed label
// accumulating the product of the operands' elements, as the reference kernel
// (interp/nn_einsum.cc) does: floats in double, integers in i64 (wrapping).
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/nn_einsum.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::DataType;
using arith::PrimExpr;
using ir::Stmt;

bool IsOne(const PrimExpr& e) { return e->kind == arith::ExprKind::kIntImm && e->int_value == 1; }

// The extent of each label: an operand dim with that label that is not a broadcast 1, else 1.
std::vector<PrimExpr> LabelExtents(const op::EinsumSpec& spec, const std::vector<Buffer>& in) {
  std::vector<PrimExpr> extent(spec.num_labels, arith::IntImm(1));
  for (size_t i = 0; i < in.size(); ++i) {
    for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
      PrimExpr& e = extent[spec.inputs[i][d]];
      if (IsOne(e) && !IsOne(in[i]->shape[d])) e = in[i]->shape[d];
    }
  }
  return extent;
}

absl::StatusOr<Stmt> EinsumBody(const KernelContext& k) {
  std::vector<int64_t> ranks;
  for (const Buffer& b : k.inputs) ranks.push_back(b->shape.size());
  KILN_ASSIGN_OR_RETURN(
      op::EinsumSpec spec,
      op::ParseEinsum(k.call, op::GetStringAttr(k.call.attrs, "equation", ""), ranks));
  std::vector<PrimExpr> extent = LabelExtents(spec, k.inputs);
  std::vector<bool> in_output(spec.num_labels, false);
  for (int label : spec.output) in_output[label] = true;
  std::vector<int> summed;
  for (const std::vector<int>& labels : spec.inputs) {
    for (int label : labels) {
      bool seen = false;
      for (int s : summed) seen |= s == label;
      if (!in_output[label] && !seen) summed.push_back(label);
    }
  }
  DataType t = k.out->dtype;
  DataType acc_type = t.is_float() ? DataType::Float(64) : DataType::Int();
  Buffer acc = arith::MakeBuffer("acc", acc_type, {arith::IntImm(1)});
  Indices at = {arith::IntImm(0)};
  return LoopNest(k.out->shape, "i", [&](const Indices& idx) {
    std::vector<PrimExpr> value(spec.num_labels);
    for (size_t d = 0; d < spec.output.size(); ++d) value[spec.output[d]] = idx[d];
    std::vector<PrimExpr> sum_vars;
    for (int label : summed) {
      sum_vars.push_back(arith::MakeVar(absl::StrCat("r", sum_vars.size())));
      value[label] = sum_vars.back();
    }
    PrimExpr product;
    for (size_t i = 0; i < k.inputs.size(); ++i) {
      Indices pos;
      for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
        pos.push_back(IsOne(k.inputs[i]->shape[d]) ? arith::IntImm(0) : value[spec.inputs[i][d]]);
      }
      PrimExpr x = arith::Cast(acc_type, arith::Load(k.inputs[i], pos));
      product = product ? product * x : x;
    }
    Stmt update = ir::Store(acc, at, arith::Load(acc, at) + product);
    for (size_t s = summed.size(); s-- > 0;) {
      update =
          ir::For(sum_vars[s], arith::IntImm(0), extent[summed[s]], ir::ForKind::kSerial, update);
    }
    return ir::Allocate(acc,
                        ir::Seq({ir::Store(acc, at, Zero(acc_type)), update,
                                 ir::Store(k.out, idx, arith::Cast(t, arith::Load(acc, at)))}));
  });
}

}  // namespace

void RegisterEinsumKernelBuilders(KernelBuilderTable& table) { table["einsum"] = EinsumBody; }

}  // namespace kiln::transform
