#include "compiler/interp/kernel_util.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::interp {

Shape Strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

int64_t Offset(const Index& index, const Shape& strides) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += index[d] * strides[d];
  return offset;
}

void ForEachIndex(const Shape& shape, const std::function<void(const Index&)>& fn) {
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  Index idx(shape.size(), 0);
  while (true) {
    fn(idx);
    size_t d = shape.size();
    while (d > 0) {
      --d;
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
      if (d == 0) return;
    }
    if (shape.empty()) return;
  }
}

absl::StatusOr<Shape> BroadcastShape(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shapes [", absl::StrJoin(a, ", "), "] and [", absl::StrJoin(b, ", "),
          "] do not broadcast at dimension ", i));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t BroadcastOffset(const Index& out_index, const Shape& in, const Shape& in_strides) {
  size_t skip = out_index.size() - in.size();
  int64_t offset = 0;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1) offset += out_index[skip + d] * in_strides[d];
  }
  return offset;
}

absl::StatusOr<const NDArray*> TensorArg(const ir::ExprNode& call, const std::vector<Value>& args,
                                         size_t i) {
  if (i >= args.size() || !args[i].is_tensor()) {
    return KernelError(call, absl::StrCat("argument ", i, " must be a tensor"));
  }
  return &args[i].tensor();
}

std::vector<int64_t> ToInt64s(const NDArray& a) {
  std::vector<int64_t> out(a.num_elements());
  for (int64_t i = 0; i < a.num_elements(); ++i) out[i] = a.GetInt(i);
  return out;
}

}  // namespace kiln::interp
