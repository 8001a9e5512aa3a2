// The elementwise family's reference kernels, split along op groups; elementwise.cc registers
// them all through RegisterElementwiseKernels. Also the broadcast helper they share.
#pragma once

#include <type_traits>
#include <vector>

#include "compiler/interp/kernel_util.h"

namespace kiln::interp {

void RegisterElementwiseMathKernels(KernelTable& table);    // elementwise_math.cc
void RegisterElementwiseBinaryKernels(KernelTable& table);  // elementwise_binary.cc

// Integer element types, bool excluded.
template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Several operands broadcast together (numpy rules): the output shape, and for each operand
// the element offset that feeds each output element, in row-major order.
struct Broadcast {
  Shape shape;
  std::vector<std::vector<int64_t>> offsets;
};
absl::StatusOr<Broadcast> BroadcastAll(const ir::ExprNode& call,
                                       const std::vector<const NDArray*>& operands);

// All tensor arguments [first, args.size()).
absl::StatusOr<std::vector<const NDArray*>> TensorArgs(const ir::ExprNode& call,
                                                       const std::vector<Value>& args,
                                                       size_t first = 0);

}  // namespace kiln::interp
