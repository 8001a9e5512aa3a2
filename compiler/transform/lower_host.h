// Host lowering: the graph function `main` (all calls already call_tir) becomes the two host
// functions of runtime/include/kiln/artifact_abi.h, ahead of time, with no interpreter left:
//   kiln_infer_shapes: bind symbolic vars from input shapes, check them, write output shapes;
//   kiln_run:          the same checks (outputs too), then carve workspace and call kernels.
// Intermediates share one workspace as plan_memory.h plans it, with the user's dim bounds
// from `context` (checked at run time); the planned sizes are left in `context`.
// Control flow runs in host code: an `if` branches on its condition's value, a loop or scan
// is a serial host loop over its body's kernels, carried values in workspace buffers.
// Constants move into module.constants; `main` is removed.
#pragma once

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/pass_context.h"

namespace kiln::transform {

absl::StatusOr<ir::IRModule> LowerHost(ir::IRModule module, ir::PassContext& context);

}  // namespace kiln::transform
