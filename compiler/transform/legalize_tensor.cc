// Shape and data-movement operators.
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
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

}  // namespace

void RegisterTensorKernelBuilders(KernelBuilderTable& table) {
  table["transpose"] = [](const KernelContext& k) -> absl::StatusOr<Stmt> {
    return TransposeBody(k);
  };
  table["reshape"] = [](const KernelContext& k) -> absl::StatusOr<Stmt> { return ReshapeBody(k); };
}

}  // namespace kiln::transform
