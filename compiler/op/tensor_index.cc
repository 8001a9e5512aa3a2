// Indexing operators: gather, gather_elements, gather_nd, scatter_elements, scatter_nd,
// compress, non_zero.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/op/op_def.h"
#include "compiler/op/tensor_util.h"

namespace kiln::op {
namespace {

using arith::DataType;
using arith::PrimExpr;
using ir::StructInfo;

absl::Status CheckIndices(const ir::ExprNode& call, const StructInfo& indices) {
  if (indices.dtype != DataType::Int(32) && indices.dtype != DataType::Int(64)) {
    return OpError(call, "indices must be i32 or i64, got " + indices.dtype.ToString());
  }
  return absl::OkStatus();
}

// gather(data, indices) {axis}: data[:axis] + indices.shape + data[axis+1:].
absl::StatusOr<StructInfo> InferGather(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2) return OpError(call, "expects data and indices");
  KILN_ASSIGN_OR_RETURN(const StructInfo* data, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* indices, TensorArg(call, 1));
  KILN_RETURN_IF_ERROR(CheckIndices(call, *indices));
  if (data->ndim < 0 || indices->ndim < 0) return StructInfo::TensorRank(-1, data->dtype);
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), data->ndim));
  int rank = data->ndim - 1 + indices->ndim;
  if (!data->shape || !indices->shape) return StructInfo::TensorRank(rank, data->dtype);
  const auto& d = *data->shape;
  std::vector<PrimExpr> out(d.begin(), d.begin() + axis);
  out.insert(out.end(), indices->shape->begin(), indices->shape->end());
  out.insert(out.end(), d.begin() + axis + 1, d.end());
  return StructInfo::Tensor(std::move(out), data->dtype);
}

// gather_elements(data, indices) {axis}: the shape of indices.
absl::StatusOr<StructInfo> InferGatherElements(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2) return OpError(call, "expects data and indices");
  KILN_ASSIGN_OR_RETURN(const StructInfo* data, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* indices, TensorArg(call, 1));
  KILN_RETURN_IF_ERROR(CheckIndices(call, *indices));
  if (data->ndim >= 0 && indices->ndim >= 0 && data->ndim != indices->ndim) {
    return OpError(call, "data and indices must have the same rank");
  }
  if (data->ndim >= 0) {
    KILN_RETURN_IF_ERROR(
        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), data->ndim).status());
  }
  if (!indices->shape) return StructInfo::TensorRank(indices->ndim, data->dtype);
  return StructInfo::Tensor(*indices->shape, data->dtype);
}

// gather_nd(data, indices) {batch_dims}: indices[:-1] + data[batch_dims + k:], k being the
// last dim of indices.
absl::StatusOr<StructInfo> InferGatherND(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2) return OpError(call, "expects data and indices");
  KILN_ASSIGN_OR_RETURN(const StructInfo* data, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* indices, TensorArg(call, 1));
  if (indices->dtype != DataType::Int(64)) return OpError(call, "indices must be i64");
  int64_t b = GetIntAttr(call.attrs, "batch_dims", 0);
  if (!data->shape || !indices->shape) return StructInfo::TensorRank(-1, data->dtype);
  const auto& d = *data->shape;
  const auto& idx = *indices->shape;
  if (idx.empty()) return OpError(call, "indices must have rank >= 1");
  const PrimExpr& last = idx.back();
  if (last->kind != arith::ExprKind::kIntImm) return StructInfo::TensorRank(-1, data->dtype);
  int64_t k = last->int_value;
  if (b < 0 || b >= static_cast<int64_t>(idx.size()) || b + k > static_cast<int64_t>(d.size())) {
    return OpError(call, absl::StrCat("indices of depth ", k, " with batch_dims ", b,
                                      " do not fit data of rank ", d.size()));
  }
  std::vector<PrimExpr> out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), d.begin() + b + k, d.end());
  return StructInfo::Tensor(std::move(out), data->dtype);
}

absl::Status CheckReduction(const ir::ExprNode& call) {
  std::string r = GetStringAttr(call.attrs, "reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min") {
    return OpError(call, "unknown reduction '" + r + "'");
  }
  return absl::OkStatus();
}

// scatter_elements / scatter_nd (data, indices, updates): the shape of data.
absl::StatusOr<StructInfo> InferScatter(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 3) return OpError(call, "expects data, indices and updates");
  KILN_ASSIGN_OR_RETURN(const StructInfo* data, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* indices, TensorArg(call, 1));
  KILN_ASSIGN_OR_RETURN(const StructInfo* updates, TensorArg(call, 2));
  KILN_RETURN_IF_ERROR(CheckIndices(call, *indices));
  KILN_RETURN_IF_ERROR(CheckReduction(call));
  if (updates->dtype != data->dtype) return OpError(call, "updates and data dtypes differ");
  if (call.name == "scatter_elements" && data->ndim >= 0) {
    KILN_RETURN_IF_ERROR(
        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), data->ndim).status());
  }
  return *data;
}

// The extent a data-dependent op is given as its last argument, Shape([n]), n a symbolic
// var that the importer bound to a count kernel's result (match_cast of tensor_to_shape); null
// when the op has no such argument and its output keeps its rank only.
absl::StatusOr<PrimExpr> CountArg(const ir::ExprNode& call, size_t i) {
  if (call.args.size() <= i) return PrimExpr();
  const ir::Expr& count = call.args[i];
  if (count->kind != ir::ExprKind::kShapeExpr || count->values.size() != 1) {
    return OpError(call, absl::StrCat("argument ", i, " must be a Shape of one extent"));
  }
  return count->values[0];
}

// compress(data, condition[, Shape([n])]) {axis}: how many slices survive depends on the
// data; n, when given, is that count.
absl::StatusOr<StructInfo> InferCompress(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 2 && call.args.size() != 3) {
    return OpError(call, "expects data, condition and an optional count");
  }
  KILN_ASSIGN_OR_RETURN(const StructInfo* data, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(const StructInfo* cond, TensorArg(call, 1));
  if (cond->dtype != DataType::Bool()) return OpError(call, "condition must be bool");
  KILN_ASSIGN_OR_RETURN(PrimExpr count, CountArg(call, 2));
  if (data->ndim < 0) return StructInfo::TensorRank(data->ndim, data->dtype);
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), data->ndim));
  if (!count || !data->shape) return StructInfo::TensorRank(data->ndim, data->dtype);
  std::vector<PrimExpr> shape = *data->shape;
  shape[axis] = count;
  return StructInfo::Tensor(std::move(shape), data->dtype);
}

// non_zero(data[, Shape([n])]): [rank, n], the count n known only at run time.
absl::StatusOr<StructInfo> InferNonZero(const ir::ExprNode& call, const arith::Analyzer&) {
  if (call.args.size() != 1 && call.args.size() != 2) {
    return OpError(call, "expects data and an optional count");
  }
  KILN_ASSIGN_OR_RETURN(const StructInfo* data, TensorArg(call, 0));
  KILN_ASSIGN_OR_RETURN(PrimExpr count, CountArg(call, 1));
  if (!count || data->ndim < 0) return StructInfo::TensorRank(2, DataType::Int(64));
  return StructInfo::Tensor({arith::IntImm(data->ndim), count}, DataType::Int(64));
}

}  // namespace

std::vector<OpDef> TensorIndexOps() {
  return {
      {"gather", InferGather},      {"gather_elements", InferGatherElements},
      {"gather_nd", InferGatherND}, {"scatter_elements", InferScatter},
      {"scatter_nd", InferScatter}, {"compress", InferCompress},
      {"non_zero", InferNonZero},
  };
}

}  // namespace kiln::op
