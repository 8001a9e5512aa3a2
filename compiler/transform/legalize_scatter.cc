// Index tuples and scatters: gather_nd, scatter_elements and scatter_nd, following the
// reference kernels in interp/tensor_index.cc. A scatter is two loop nests: copy the data
// into the output, then visit the updates in order and combine each into the element its
// index names. The second nest stores at run-time indices, so the scheduler keeps it serial
// and duplicate indices combine in the reference's order. Every index read is checked at run
// time: an out-of-range one fails the call, as the reference's error.
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

// data[batch..., indices[q..., 0], ..., indices[q..., len-1], rest...] where `q` indexes the
// tuples (its first `batch` entries are also data's leading indices); every index read is
// checked.
Indices TupleTarget(const KernelContext& k, const Buffer& indices, const Indices& q, size_t batch,
                    int64_t len, const Indices& rest) {
  const Buffer& data = k.inputs[0];
  Indices at(q.begin(), q.begin() + batch);
  for (int64_t j = 0; j < len; ++j) {
    Indices in_tuple = q;
    in_tuple.push_back(arith::IntImm(j));
    int dim = static_cast<int>(batch + j);
    at.push_back(CheckedIndex(k, 1, arith::Load(indices, in_tuple), data->shape[dim], dim, true));
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
    return arith::Load(data, TupleTarget(k, indices, q, batch, len, rest));
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
    at[axis] = CheckedIndex(k, 1, arith::Load(indices, idx), data->shape[axis],
                            static_cast<int>(axis), true);
    // The checked index is bound once: the load and the store must not check it twice.
    PrimExpr target = arith::MakeVar("target");
    PrimExpr checked = at[axis];
    at[axis] = target;
    Stmt store =
        ir::Store(k.out, at, Combine(reduction, arith::Load(k.out, at), arith::Load(updates, idx)));
    return ir::Let(target, checked, store);
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
    Indices at = TupleTarget(k, indices, q, 0, len, rest);
    // Each checked index is bound once, so the load and the store share one check.
    std::vector<std::pair<PrimExpr, PrimExpr>> lets;
    for (int64_t j = 0; j < len; ++j) {
      lets.push_back({arith::MakeVar(absl::StrCat("target", j)), at[j]});
      at[j] = lets.back().first;
    }
    Stmt store =
        ir::Store(k.out, at, Combine(reduction, arith::Load(k.out, at), arith::Load(updates, idx)));
    for (size_t j = lets.size(); j-- > 0;) store = ir::Let(lets[j].first, lets[j].second, store);
    return store;
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
