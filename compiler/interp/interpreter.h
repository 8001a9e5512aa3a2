// The reference interpreter: runs a graph-level function directly, binding by binding, with
// the reference kernels. It is the oracle every compiled backend is tested against, and it
// answers `kiln run --reference`.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "compiler/interp/value.h"
#include "compiler/ir/graph.h"

namespace kiln::interp {

// Runs `function` of `module` on `inputs` (one per parameter) and returns its result: one
// value per output of `main` (a tuple result is flattened one level). Input shapes and
// dtypes are checked against the parameters' struct info, symbolic dims included.
absl::StatusOr<std::vector<ir::NDArray>> Run(const ir::IRModule& module,
                                             const std::vector<ir::NDArray>& inputs,
                                             const std::string& function = "main");

// Evaluates one operator call on already-evaluated arguments (constant folding uses this).
absl::StatusOr<Value> EvaluateCall(const ir::ExprNode& call, const std::vector<Value>& args);

}  // namespace kiln::interp
