// Loop and scan need to run their body, a Function, so they get a runner from the
// interpreter instead of being plain kernels.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/interp/value.h"
#include "compiler/ir/graph.h"

namespace kiln::interp {

using FunctionRunner =
    std::function<absl::StatusOr<Value>(const ir::Function& func, const std::vector<Value>& args)>;

// ONNX Loop semantics: returns the tuple (final carried values..., stacked scan outputs...).
absl::StatusOr<Value> RunLoop(const ir::ExprNode& call, const std::vector<Value>& args,
                              const FunctionRunner& run);
// ONNX Scan (opset 9+) semantics: returns (final states..., scan outputs...).
absl::StatusOr<Value> RunScan(const ir::ExprNode& call, const std::vector<Value>& args,
                              const FunctionRunner& run);

}  // namespace kiln::interp
