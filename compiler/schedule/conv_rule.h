// The conv rule, for a kernel that is legalize's direct 2-D convolution over f32 (any
// padding, strides, dilations; groups that hold whole channel blocks; any elementwise
// epilogue fused after it): an implicit GEMM with output channels in the vector lanes and a
// register tile over output columns; a pointwise conv is a matmul over the flattened plane
// and takes the matmul rule. nullopt for any other kernel.
#pragma once

#include <functional>
#include <optional>

#include "compiler/ir/loop.h"
#include "compiler/ir/target.h"
#include "compiler/ir/tensor.h"

namespace kiln::schedule {

// Weights packed at compile time: the kernel reads parameter `packed` where it had `weights`,
// and its caller passes `data` in place of the weight constant.
struct PackedWeights {
  arith::Buffer weights, packed;
  ir::NDArray data;
};

struct ConvSchedule {
  ir::Stmt body;
  std::optional<PackedWeights> packed;
};

// The constant a kernel parameter is bound to at the kernel's only call site, or null.
using ConstantOf = std::function<const ir::NDArray*(const arith::Buffer&)>;

std::optional<ConvSchedule> ScheduleConv(const ir::Stmt& body, const ir::Target& target,
                                         const ConstantOf& constant_of = nullptr);

}  // namespace kiln::schedule
