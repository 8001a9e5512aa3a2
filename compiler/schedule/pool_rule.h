// The pool rule, for a kernel that is legalize's 2-D max pool over f32 (windows of up to 64
// taps, any strides, dilations and padding, ceil_mode included): output rows in
// parallel, the columns whose taps all lie inside the input vectorized with the taps
// unrolled, the edge columns as legalize wrote them. nullopt for any other kernel.
#pragma once

#include <optional>

#include "compiler/schedule/rules.h"

namespace kiln::schedule {

std::optional<ScheduledKernel> SchedulePool(const ir::Stmt& body, const ir::Target& target);

}  // namespace kiln::schedule
