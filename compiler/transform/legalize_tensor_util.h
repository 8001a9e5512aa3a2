// What the tensor family's kernel builders share: reading an operand's values at compile
// time, and one element of a scalar operand in a kernel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/transform/legalize_kernels.h"

namespace kiln::transform {

// The integer values of call.args[i] when they are known at compile time: a constant
// tensor, or a ShapeExpr (whose values may be symbolic); nullopt otherwise.
std::optional<std::vector<arith::PrimExpr>> IntsOperand(const ir::ExprNode& call, size_t i);
// The error for an operand that must be known at compile time and is not.
absl::Status NotConstant(const ir::ExprNode& call, size_t i, const std::string& what);
// The first element of call.args[i] inside a kernel: a ShapeExpr's value, else a load from
// its input buffer.
arith::PrimExpr ScalarOperand(const KernelContext& k, size_t i);
// The position in k.inputs of call.args[i] (ShapeExpr arguments have none).
size_t InputIndex(const ir::ExprNode& call, size_t i);

void RegisterTensorIndexKernelBuilders(KernelBuilderTable& table);  // legalize_tensor_index.cc

}  // namespace kiln::transform
