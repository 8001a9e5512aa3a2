// Helpers the tensor family's kernels share. Data movement copies elements as bytes, so one
// kernel serves every dtype (float16 and bool included).
#pragma once

#include <cstring>
#include <vector>

#include "compiler/interp/kernel_util.h"

namespace kiln::interp {

// out[out_index] = in[in_index], whatever the (common) dtype.
inline void CopyElement(NDArray& out, int64_t out_index, const NDArray& in, int64_t in_index) {
  int64_t bytes = in.dtype.bytes();
  std::memcpy(out.bytes.data() + out_index * bytes, in.bytes.data() + in_index * bytes, bytes);
}

// Argument i read as int64 values (a 0-d or 1-D integer tensor, or an evaluated ShapeExpr).
absl::StatusOr<std::vector<int64_t>> IntsArg(const ir::ExprNode& call,
                                             const std::vector<Value>& args, size_t i);
// A possibly negative index into a dim of size `dim`; a KernelError naming `what` when it
// is out of range.
absl::StatusOr<int64_t> ResolveIndex(const ir::ExprNode& call, int64_t index, int64_t dim,
                                     const char* what);

void RegisterTensorSliceKernels(KernelTable& table);   // interp/tensor_slice.cc
void RegisterTensorCreateKernels(KernelTable& table);  // interp/tensor_create.cc
void RegisterTensorIndexKernels(KernelTable& table);   // interp/tensor_index.cc

}  // namespace kiln::interp
