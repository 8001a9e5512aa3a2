// Reference kernels for indexing operators: gather, gather_elements, gather_nd,
// scatter_elements, scatter_nd, compress, non_zero. Indices may be negative (counted from
// the end); out-of-range indices are a run-time error naming the op.
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/tensor_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

int64_t Product(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

absl::StatusOr<int64_t> AxisAttr(const ir::ExprNode& call, int64_t rank) {
  return ResolveIndex(call, op::GetIntAttr(call.attrs, "axis", 0), rank, "axis");
}

absl::StatusOr<Value> Gather(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* data, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* indices, TensorArg(call, args, 1));
  const Shape& ds = data->shape;
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(call, ds.size()));
  Shape shape(ds.begin(), ds.begin() + axis);
  shape.insert(shape.end(), indices->shape.begin(), indices->shape.end());
  shape.insert(shape.end(), ds.begin() + axis + 1, ds.end());
  NDArray out = NDArray::Zeros(data->dtype, shape);
  int64_t outer = Product(ds, 0, axis), inner = Product(ds, axis + 1, ds.size());
  int64_t dim = ds[axis], n = indices->num_elements();
  for (int64_t j = 0; j < n; ++j) {
    KILN_ASSIGN_OR_RETURN(int64_t at, ResolveIndex(call, indices->GetInt(j), dim, "index"));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < inner; ++k) {
        CopyElement(out, (o * n + j) * inner + k, *data, (o * dim + at) * inner + k);
      }
    }
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> GatherElements(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* data, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* indices, TensorArg(call, args, 1));
  if (data->shape.size() != indices->shape.size()) {
    return KernelError(call, "data and indices must have the same rank");
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(call, data->shape.size()));
  NDArray out = NDArray::Zeros(data->dtype, indices->shape);
  Shape strides = Strides(data->shape);
  int64_t i = 0;
  absl::Status status;
  ForEachIndex(indices->shape, [&](const Index& idx) {
    auto at = ResolveIndex(call, indices->GetInt(i), data->shape[axis], "index");
    if (!at.ok()) {
      status.Update(at.status());
      ++i;
      return;
    }
    Index src = idx;
    src[axis] = *at;
    CopyElement(out, i++, *data, Offset(src, strides));
  });
  KILN_RETURN_IF_ERROR(status);
  return Value(std::move(out));
}

// The data offset that the index tuple at indices[q * k, (q + 1) * k) addresses, starting
// at data axis `first`; `base` is the offset of the batch that q belongs to.
absl::StatusOr<int64_t> TupleOffset(const ir::ExprNode& call, const NDArray& data,
                                    const NDArray& indices, int64_t q, int64_t k, size_t first,
                                    const Shape& strides) {
  int64_t offset = 0;
  for (int64_t j = 0; j < k; ++j) {
    KILN_ASSIGN_OR_RETURN(
        int64_t at, ResolveIndex(call, indices.GetInt(q * k + j), data.shape[first + j], "index"));
    offset += at * strides[first + j];
  }
  return offset;
}

absl::StatusOr<Value> GatherND(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* data, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* indices, TensorArg(call, args, 1));
  const Shape &ds = data->shape, &is = indices->shape;
  size_t b = op::GetIntAttr(call.attrs, "batch_dims", 0);
  if (is.empty() || b >= is.size() || b + is.back() > ds.size()) {
    return KernelError(call, "indices do not fit the data");
  }
  int64_t k = is.back();
  Shape shape(is.begin(), is.end() - 1);
  shape.insert(shape.end(), ds.begin() + b + k, ds.end());
  NDArray out = NDArray::Zeros(data->dtype, shape);
  Shape strides = Strides(ds);
  int64_t slice = Product(ds, b + k, ds.size());
  int64_t per_batch = Product(is, b, is.size() - 1), count = Product(is, 0, is.size() - 1);
  for (int64_t q = 0; q < count; ++q) {
    KILN_ASSIGN_OR_RETURN(int64_t offset, TupleOffset(call, *data, *indices, q, k, b, strides));
    offset += (q / per_batch) * (b > 0 ? strides[b - 1] : 0);
    for (int64_t e = 0; e < slice; ++e) CopyElement(out, q * slice + e, *data, offset + e);
  }
  return Value(std::move(out));
}

// out[o] = reduction(out[o], updates[u]); "none" overwrites.
void Combine(NDArray& out, int64_t o, const NDArray& updates, int64_t u,
             const std::string& reduction) {
  if (reduction == "none") return CopyElement(out, o, updates, u);
  DispatchDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T& dst = out.data<T>()[o];
    T src = updates.data<T>()[u];
    if (reduction == "add") dst = static_cast<T>(dst + src);
    if (reduction == "mul") dst = static_cast<T>(dst * src);
    if (reduction == "max") dst = std::max(dst, src);
    if (reduction == "min") dst = std::min(dst, src);
  });
}

// Reductions compute in the element type, which must be one DispatchDType knows.
absl::StatusOr<std::string> ReductionAttr(const ir::ExprNode& call, DataType dtype) {
  std::string reduction = op::GetStringAttr(call.attrs, "reduction", "none");
  if (reduction != "none" && !DispatchDType(dtype, [](auto) {})) {
    return KernelError(call, "reduction " + reduction + " does not support " + dtype.ToString());
  }
  return reduction;
}

absl::StatusOr<Value> ScatterElements(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* data, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* indices, TensorArg(call, args, 1));
  KILN_ASSIGN_OR_RETURN(const NDArray* updates, TensorArg(call, args, 2));
  if (indices->shape != updates->shape || indices->shape.size() != data->shape.size()) {
    return KernelError(call, "indices and updates must have one shape, of the data's rank");
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(call, data->shape.size()));
  KILN_ASSIGN_OR_RETURN(std::string reduction, ReductionAttr(call, data->dtype));
  NDArray out = *data;
  Shape strides = Strides(data->shape);
  int64_t i = 0;
  absl::Status status;
  ForEachIndex(indices->shape, [&](const Index& idx) {
    auto at = ResolveIndex(call, indices->GetInt(i), data->shape[axis], "index");
    if (!at.ok()) {
      status.Update(at.status());
      ++i;
      return;
    }
    Index dst = idx;
    dst[axis] = *at;
    Combine(out, Offset(dst, strides), *updates, i++, reduction);
  });
  KILN_RETURN_IF_ERROR(status);
  return Value(std::move(out));
}

absl::StatusOr<Value> ScatterND(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* data, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* indices, TensorArg(call, args, 1));
  KILN_ASSIGN_OR_RETURN(const NDArray* updates, TensorArg(call, args, 2));
  const Shape &ds = data->shape, &is = indices->shape;
  if (is.empty() || is.back() > static_cast<int64_t>(ds.size())) {
    return KernelError(call, "indices do not fit the data");
  }
  int64_t k = is.back();
  Shape expect(is.begin(), is.end() - 1);
  expect.insert(expect.end(), ds.begin() + k, ds.end());
  if (updates->shape != expect) return KernelError(call, "updates have the wrong shape");
  KILN_ASSIGN_OR_RETURN(std::string reduction, ReductionAttr(call, data->dtype));
  NDArray out = *data;
  Shape strides = Strides(ds);
  int64_t slice = Product(ds, k, ds.size()), count = Product(is, 0, is.size() - 1);
  for (int64_t q = 0; q < count; ++q) {
    KILN_ASSIGN_OR_RETURN(int64_t offset, TupleOffset(call, *data, *indices, q, k, 0, strides));
    for (int64_t e = 0; e < slice; ++e)
      Combine(out, offset + e, *updates, q * slice + e, reduction);
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> Compress(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* data, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* cond, TensorArg(call, args, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisAttr(call, data->shape.size()));
  int64_t dim = data->shape[axis];
  if (cond->shape.size() != 1 || cond->num_elements() > dim) {
    return KernelError(call, "condition must be 1-D and no longer than the axis");
  }
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond->num_elements(); ++i) {
    if (cond->bytes[i]) keep.push_back(i);
  }
  Shape shape = data->shape;
  shape[axis] = keep.size();
  NDArray out = NDArray::Zeros(data->dtype, shape);
  Shape strides = Strides(data->shape);
  int64_t i = 0;
  ForEachIndex(shape, [&](const Index& idx) {
    Index src = idx;
    src[axis] = keep[idx[axis]];
    CopyElement(out, i++, *data, Offset(src, strides));
  });
  return Value(std::move(out));
}

// Whether element i is not zero; -0.0 is zero, so floats compare as numbers.
bool IsNonZero(const NDArray& x, int64_t i) {
  if (x.dtype.is_float() && x.dtype.bits == 16) {
    return (x.data<uint16_t>()[i] & 0x7fff) != 0;
  }
  if (x.dtype.is_float()) return x.GetDouble(i) != 0.0;
  for (int b = 0; b < x.dtype.bytes(); ++b) {
    if (x.bytes[i * x.dtype.bytes() + b]) return true;
  }
  return false;
}

absl::StatusOr<Value> NonZero(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  std::vector<Index> hits;
  int64_t i = 0;
  ForEachIndex(x->shape, [&](const Index& idx) {
    if (IsNonZero(*x, i++)) hits.push_back(idx);
  });
  int64_t rank = x->shape.size(), n = hits.size();
  NDArray out = NDArray::Zeros(DataType::Int(64), {rank, n});
  for (int64_t d = 0; d < rank; ++d) {
    for (int64_t j = 0; j < n; ++j) out.data<int64_t>()[d * n + j] = hits[j][d];
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterTensorIndexKernels(KernelTable& table) {
  table["gather"] = Gather;
  table["gather_elements"] = GatherElements;
  table["gather_nd"] = GatherND;
  table["scatter_elements"] = ScatterElements;
  table["scatter_nd"] = ScatterND;
  table["compress"] = Compress;
  table["non_zero"] = NonZero;
}

}  // namespace kiln::interp
