// Operator fusion by analysis feedback: a kernel merges with the only consumer of its result
// when their classes (classify_kernel.h, read from the loops) allow it. An elementwise,
// broadcast or injective producer is inlined into the consumer's loads (compute_inline); a
// reduction or output-fusable producer (matmul, conv) takes an elementwise or broadcast
// consumer as an epilogue on each finished element. Merging repeats, so chains such as
// matmul+add+gelu become one kernel, and the intermediates never reach memory.
#pragma once

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln::transform {

absl::StatusOr<ir::IRModule> FuseOps(ir::IRModule module);

}  // namespace kiln::transform
