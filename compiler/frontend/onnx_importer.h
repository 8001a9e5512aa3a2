// ONNX import: a serialized ModelProto becomes an IRModule whose `main` function takes the
// graph inputs and returns its outputs. Every `dim_param` becomes one symbolic variable shared
// by every input that names it; an unnamed dynamic dim gets a fresh variable.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"

namespace kiln::frontend {

// User errors are INVALID_ARGUMENT; a node's error names its index, name and op type.
absl::StatusOr<ir::IRModule> ImportOnnx(std::string_view model_bytes);

}  // namespace kiln::frontend
