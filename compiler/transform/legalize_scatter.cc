// Index tuples and scatters: gather_nd, scatter_elements and scatter_nd, following the
// reference kernels in interp/tensor_index.cc. A scatter is two loop nests: copy the data
// into the output, then visit the updates in order and combine each into the element its
// index names. The second nest stores at run-time indices, so the scheduler keeps it serial
// and duplicate indices combine in the reference's order.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/transform/legalize_tensor_util.h"

namespace kiln::transform {
namespace {

using arith::Buffer;
using arith::ExprKind;
using arith::PrimExpr;
using ir::Stmt;

absl::Status Unimplemented(const KernelContext& k, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat("op ", k.call.name, ": ", why));
}

// The constant extent of the last dim of indices: how many data axes an index tuple names.
absl::StatusOr<int64_t> TupleLength(const KernelContext& k, const Buffer& indices) {
  if (indices->shape.empty() || indices->shape.back()->kind != ExprKind::kIntImm) {
    return Unimplemented(k, "the last dim of indices must be known at compile time");
  }
  return indices->shape.back()->int_value;
}

// data[batch..., indices[q..., 0], ..., indices[q..., k-1], rest...] where `q` indexes the
// tuples (its first `batch` entries are also data's leading indices).
Indices TupleTarget(const Buffer& data, const Buffer& indices, const Indices& q, size_t batch,
                    int64_t k, const Indices& rest) {
  Indices at(q.begin(), q.begin() + batch);
  for (int64_t j = 0; j < k; ++j) {
    Indices in_tuple = q;
    in_tuple.push_back(arith::IntImm(j));
    at.push_back(WrapIndex(arith::Load(indices, in_tuple), data->shape[batch + j]));
  }
  at.insert(at.end(), rest.begin(), rest.end());
  return at;
}

// out[q..., e...] = data[batch..., indices[q...], e...]
absl::StatusOr<Stmt> GatherNDBody(const KernelContext& k) {
  if (k.inputs.size() != 2) return NotConstant(k.call, 1, "indices as a tensor");
  const Buffer &data = k.inputs[0], &indices = k.inputs[1];
  size_t batch = op::GetIntAttr(k.call.attrs, "batch_dims", 0);
  KILN_ASSIGN_OR_RETURN(int64_t len, TupleLength(k, indices));
  size_t tuples = indices->shape.size() - 1;
  if (batch > tuples || batch + len > data->shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("op gather_nd: index tuples of length ", len, " with batch_dims ", batch,
                     " do not fit data of rank ", data->shape.size()));
  }
  return Compute(k.out, [&](const Indices& idx) {
    Indices q(idx.begin(), idx.begin() + tuples), rest(idx.begin() + tuples, idx.end());
    return arith::Load(data, TupleTarget(data, indices, q, batch, len, rest));
  });
}

// The reduction attr, checked: "none", "add", "mul", "max" or "min".
absl::StatusOr<std::string> Reduction(const KernelContext& k) {
  std::string reduction = op::GetStringAttr(k.call.attrs, "reduction", "none");
  if (reduction == "none") return reduction;
  if (k.out->dtype.code == arith::DataType::kBool) {
    return Unimplemented(k, "reduction " + reduction + " does not support bool");
  }
  if (reduction == "add" || reduction == "mul" || reduction == "max" || reduction == "min") {
    return reduction;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("op ", k.call.name, ": unknown reduction '", reduction, "'"));
}

// reduction(current, update) as the reference's Combine; "none" overwrites.
PrimExpr Combine(const std::string& reduction, PrimExpr current, PrimExpr update) {
  if (reduction == "add") return current + update;
  if (reduction == "mul") return current * update;
  if (reduction == "max") return arith::Max(current, update);
  if (reduction == "min") return arith::Min(current, update);
  return update;
}

// Whether every run-time index of `at` (those at `axes`) lies inside `buf`: an update aimed
// outside is dropped rather than written out of bounds (the reference reports an error).
PrimExpr Inside(const Buffer& buf, const Indices& at, const std::vector<size_t>& axes) {
  PrimExpr inside;
  for (size_t d : axes) {
    PrimExpr ok =
        arith::Binary(ExprKind::kAnd, arith::Binary(ExprKind::kGE, at[d], arith::IntImm(0)),
                      arith::Binary(ExprKind::kLT, at[d], buf->shape[d]));
    inside = inside ? arith::Binary(ExprKind::kAnd, inside, ok) : ok;
  }
  return inside;
}

// The output starts as a copy of the data.
Stmt CopyData(const KernelContext& k) {
  return Compute(k.out, [&](const Indices& idx) { return arith::Load(k.inputs[0], idx); });
}

absl::StatusOr<Stmt> ScatterElementsBody(const KernelContext& k) {
  if (k.inputs.size() != 3) return NotConstant(k.call, 1, "indices as a tensor");
  const Buffer &data = k.inputs[0], &indices = k.inputs[1], &updates = k.inputs[2];
  int64_t rank = data->shape.size();
  int64_t axis = op::GetIntAttr(k.call.attrs, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || indices->shape.size() != data->shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat("op scatter_elements: axis ", axis,
                                                   " or indices rank ", indices->shape.size(),
                                                   " does not fit data of rank ", rank));
  }
  KILN_ASSIGN_OR_RETURN(std::string reduction, Reduction(k));
  Stmt scatter = LoopNest(indices->shape, "u", [&](const Indices& idx) {
    Indices at = idx;
    at[axis] = WrapIndex(arith::Load(indices, idx), data->shape[axis]);
    Stmt store =
        ir::Store(k.out, at, Combine(reduction, arith::Load(k.out, at), arith::Load(updates, idx)));
    return ir::IfThenElse(Inside(k.out, at, {static_cast<size_t>(axis)}), store);
  });
  return ir::Seq({CopyData(k), scatter});
}

// out[indices[q...], e...] = combine(out[...], updates[q..., e...])
absl::StatusOr<Stmt> ScatterNDBody(const KernelContext& k) {
  if (k.inputs.size() != 3) return NotConstant(k.call, 1, "indices as a tensor");
  const Buffer &data = k.inputs[0], &indices = k.inputs[1], &updates = k.inputs[2];
  KILN_ASSIGN_OR_RETURN(int64_t len, TupleLength(k, indices));
  if (len > static_cast<int64_t>(data->shape.size())) {
    return absl::InvalidArgumentError(absl::StrCat("op scatter_nd: index tuples of length ", len,
                                                   " exceed data rank ", data->shape.size()));
  }
  size_t tuples = indices->shape.size() - 1;
  if (updates->shape.size() != tuples + data->shape.size() - len) {
    return absl::InvalidArgumentError("op scatter_nd: updates have the wrong rank");
  }
  KILN_ASSIGN_OR_RETURN(std::string reduction, Reduction(k));
  Stmt scatter = LoopNest(updates->shape, "u", [&](const Indices& idx) {
    Indices q(idx.begin(), idx.begin() + tuples), rest(idx.begin() + tuples, idx.end());
    Indices at = TupleTarget(data, indices, q, 0, len, rest);
    Stmt store =
        ir::Store(k.out, at, Combine(reduction, arith::Load(k.out, at), arith::Load(updates, idx)));
    std::vector<size_t> indexed;
    for (int64_t j = 0; j < len; ++j) indexed.push_back(j);
    return len == 0 ? store : ir::IfThenElse(Inside(k.out, at, indexed), store);
  });
  return ir::Seq({CopyData(k), scatter});
}

}  // namespace

void RegisterScatterKernelBuilders(KernelBuilderTable& table) {
  table["gather_nd"] = GatherNDBody;
  table["scatter_elements"] = ScatterElementsBody;
  table["scatter_nd"] = ScatterNDBody;
}

}  // namespace kiln::transform
