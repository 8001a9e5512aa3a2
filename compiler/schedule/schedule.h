// Scheduling: every kernel gets the default rule of its class for the target (DESIGN.md,
// "schedule"): matmul kernels are tiled for registers and caches with B packed into panels;
// convolutions are tiled (conv_rule.h), their constant weights packed at compile time, which
// changes the kernel's parameter and its caller's argument together (a pass across levels);
// every other loop nest has its outer data-parallel loop run on the thread pool and its
// contiguous inner loop vectorized. For a GPU target every kernel is spread over blocks and
// threads instead (ScheduleForGpu). The tuning database will come before these rules.
#pragma once

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"

namespace kiln::schedule {

absl::StatusOr<ir::IRModule> Schedule(ir::IRModule module, const ir::Target& target);

}  // namespace kiln::schedule
