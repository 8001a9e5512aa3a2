// The conv rule, for a kernel that is legalize's direct 2-D convolution over f32 (any
// padding, strides, dilations; groups that hold whole channel blocks; any elementwise
// epilogue fused after it): an implicit GEMM with output channels in the vector lanes and a
// register tile over output columns; a pointwise conv is a matmul over the flattened plane
// and takes the matmul rule. nullopt for any other kernel.
#pragma once

#include <optional>

#include "compiler/schedule/rules.h"

namespace kiln::schedule {

// A conv of one group as a matmul over its output plane, for the GPU tiler: a pointwise one
// as the conv rule hands the matmul rule, any other as an implicit GEMM whose B gathers the
// input at each tap (zero in the padding). nullopt for any other kernel.
std::optional<Matmul> MatchConvAsMatmul(const ir::Stmt& body);

std::optional<ScheduledKernel> ScheduleConv(const ir::Stmt& body, const ir::Target& target,
                                            const ConstantOf& constant_of = nullptr);

}  // namespace kiln::schedule
