// Dead-code elimination: drops bindings whose value nothing uses. Dataflow bindings are pure,
// so a binding that does not reach the result can go; the shape arithmetic an importer
// leaves behind (Shape -> Gather -> Concat, already folded into a ShapeExpr) is the main
// catch, and it must go before legalize, which has no kernels for shape-of-shape ops.
#pragma once

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln::transform {

absl::StatusOr<ir::IRModule> EliminateDeadCode(ir::IRModule module);

}  // namespace kiln::transform
