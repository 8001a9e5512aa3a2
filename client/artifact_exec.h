// Loading and running an artifact from the CLI: shared by `kiln run` and `kiln bench`.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/tensor_io.h"
#include "kiln/runtime.hpp"

namespace kiln::client {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The artifact itself, or the one .so in a folder that `kiln compile` wrote.
absl::StatusOr<std::string> FindArtifact(const std::string& path);

// "x f32[n, 3], bias f32[n]": the model's inputs, for error messages.
std::string DescribeInputs(const std::vector<runtime::TensorInfo>& inputs);

// Zero-filled outputs with the shapes the model computes from the inputs' shapes.
absl::StatusOr<NamedTensors> AllocateOutputs(const runtime::Model& model, NamedTensors& inputs);

// Runs the model once on tensors that already have the right shapes.
absl::Status RunModel(const runtime::Model& model, NamedTensors& inputs, NamedTensors& outputs);

}  // namespace kiln::client
