// Reference kernels for neural-network operators.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

// numpy matmul for ranks >= 2, accumulating in double (float) or the type itself (ints).
absl::StatusOr<Value> Matmul(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* a, TensorArg(call, args, 0));
  KILN_ASSIGN_OR_RETURN(const NDArray* b, TensorArg(call, args, 1));
  size_t ra = a->shape.size(), rb = b->shape.size();
  if (ra < 2 || rb < 2) return KernelError(call, "operands must have rank >= 2");
  int64_t m = a->shape[ra - 2], k = a->shape[ra - 1], n = b->shape[rb - 1];
  if (b->shape[rb - 2] != k) return KernelError(call, "inner dimensions differ");
  Shape batch_a(a->shape.begin(), a->shape.end() - 2), batch_b(b->shape.begin(), b->shape.end() - 2);
  KILN_ASSIGN_OR_RETURN(Shape batch, BroadcastShape(batch_a, batch_b));
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  NDArray out = NDArray::Zeros(a->dtype, out_shape);
  Shape sa = Strides(batch_a), sb = Strides(batch_b);
  int64_t o = 0;
  ForEachIndex(batch, [&](const Index& bidx) {
    int64_t base_a = BroadcastOffset(bidx, batch_a, sa) * m * k;
    int64_t base_b = BroadcastOffset(bidx, batch_b, sb) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += a->GetDouble(base_a + i * k + p) * b->GetDouble(base_b + p * n + j);
        }
        out.SetDouble(o++, acc);
      }
    }
  });
  return Value(std::move(out));
}

// Softmax along one axis, max subtracted for stability.
absl::StatusOr<Value> Softmax(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  int64_t rank = x->shape.size();
  KILN_ASSIGN_OR_RETURN(int64_t axis, op::NormalizeAxis(call, op::GetIntAttr(call.attrs, "axis", -1), rank));
  NDArray out = NDArray::Zeros(x->dtype, x->shape);
  Shape outer = x->shape;
  outer[axis] = 1;
  Shape strides = Strides(x->shape);
  int64_t extent = x->shape[axis], step = strides[axis];
  ForEachIndex(outer, [&](const Index& idx) {
    int64_t base = Offset(idx, strides);
    double max = -INFINITY, sum = 0;
    for (int64_t k = 0; k < extent; ++k) max = std::max(max, x->GetDouble(base + k * step));
    for (int64_t k = 0; k < extent; ++k) sum += std::exp(x->GetDouble(base + k * step) - max);
    for (int64_t k = 0; k < extent; ++k) {
      out.SetDouble(base + k * step, std::exp(x->GetDouble(base + k * step) - max) / sum);
    }
  });
  return Value(std::move(out));
}

}  // namespace

void RegisterNNKernels(KernelTable& table) {
  table["matmul"] = Matmul;
  table["softmax"] = Softmax;
}

}  // namespace kiln::interp
