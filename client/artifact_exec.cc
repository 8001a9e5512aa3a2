#include "client/artifact_exec.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::client {
namespace {

std::vector<DLTensor> Views(NamedTensors& tensors) {
  std::vector<DLTensor> views;
  for (auto& [name, tensor] : tensors) views.push_back(tensor.View());
  return views;
}

}  // namespace

// A wasm32 artifact runs in a browser or Node.js, not through dlopen.
absl::Status WasmArtifact(const std::string& path) {
  return absl::InvalidArgumentError(absl::StrCat(
      "'", path,
      "' is a WebAssembly module: run it in a browser or Node.js with "
      "runtime/js/kiln.mjs (see runtime/js/README.md); kiln run loads native artifacts"));
}

absl::StatusOr<std::string> FindArtifact(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::path(path).extension() == ".wasm") return WasmArtifact(path);
  if (std::filesystem::is_regular_file(path, ec)) return path;
  if (!std::filesystem::is_directory(path, ec)) {
    return absl::NotFoundError(absl::StrCat("no artifact folder '", path, "'"));
  }
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.path().extension() == ".so") found.push_back(entry.path().string());
    if (entry.path().extension() == ".wasm") return WasmArtifact(entry.path().string());
  }
  if (found.size() == 1) return found[0];
  if (found.empty()) return absl::NotFoundError(absl::StrCat("no .so artifact in '", path, "'"));
  return absl::InvalidArgumentError(
      absl::StrCat("several artifacts in '", path, "': ", absl::StrJoin(found, ", ")));
}

std::string DescribeInputs(const std::vector<runtime::TensorInfo>& inputs) {
  std::vector<std::string> parts;
  for (const auto& input : inputs) parts.push_back(input.name + " " + runtime::Describe(input));
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<NamedTensors> AllocateOutputs(const runtime::Model& model, NamedTensors& inputs) {
  std::vector<std::vector<int64_t>> shapes;
  std::string error;
  if (!model.OutputShapes(Views(inputs), &shapes, &error)) {
    return absl::InvalidArgumentError(error);
  }
  NamedTensors outputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    absl::StatusOr<Tensor> tensor = MakeTensor(model.outputs()[i].dtype, shapes[i]);
    if (!tensor.ok()) return tensor.status();
    outputs.emplace_back(model.outputs()[i].name, *std::move(tensor));
  }
  return outputs;
}

absl::Status RunModel(const runtime::Model& model, NamedTensors& inputs, NamedTensors& outputs) {
  std::vector<DLTensor> out = Views(outputs);
  std::string error;
  if (!model.Run(Views(inputs), &out, &error)) return absl::InvalidArgumentError(error);
  return absl::OkStatus();
}

}  // namespace kiln::client
