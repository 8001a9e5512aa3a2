// The conv rule, for a kernel that is legalize's direct 2-D convolution over f32 (any
// padding, strides, dilations; groups that hold whole channel blocks; any elementwise
// epilogue fused after it): an implicit GEMM with output channels in the vector lanes and a
// register tile over output columns. nullopt for any other kernel.
#pragma once

#include <optional>

#include "compiler/ir/loop.h"
#include "compiler/ir/target.h"

namespace kiln::schedule {

std::optional<ir::Stmt> ScheduleConv(const ir::Stmt& body, const ir::Target& target);

}  // namespace kiln::schedule
