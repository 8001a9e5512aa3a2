// Legalize: every operator call in a graph function becomes call_tir to a new loop-level
// kernel (a PrimFunc with symbolic extents), written compute-definition style: one loop nest
// per output element, reductions as explicit accumulation.
#pragma once

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln::transform {

absl::StatusOr<ir::IRModule> Legalize(ir::IRModule module);

}  // namespace kiln::transform
