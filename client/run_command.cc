// `kiln run`: load an artifact with the runtime, feed it tensors from files, write outputs.
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/artifact_exec.h"
#include "client/commands.h"
#include "client/tensor_io.h"
#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "kiln/runtime.hpp"

namespace kiln::client {
namespace {

// Reads one file per model input, in the model's order; names must match exactly.
absl::StatusOr<NamedTensors> ReadInputs(const RunArgs& args,
                                        const std::vector<runtime::TensorInfo>& expected) {
  std::map<std::string, std::string> files;
  for (const auto& [name, file] : args.inputs) {
    if (!files.emplace(name, file).second) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' given twice"));
    }
    bool known = false;
    for (const auto& input : expected) known = known || input.name == name;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown input '", name, "'; the model's inputs are: ", DescribeInputs(expected)));
    }
  }
  NamedTensors tensors;
  for (const auto& input : expected) {
    auto file = files.find(input.name);
    if (file == files.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing input '", input.name, "' (", runtime::Describe(input),
                       "); give it with --input ", input.name, "=FILE"));
    }
    absl::StatusOr<Tensor> tensor = ReadTensorFile(file->second);
    if (!tensor.ok()) return tensor.status();
    tensors.emplace_back(input.name, *std::move(tensor));
  }
  return tensors;
}

// Computes output shapes, allocates the outputs and runs the artifact.
absl::StatusOr<NamedTensors> Execute(const runtime::Model& model, NamedTensors& inputs) {
  absl::StatusOr<NamedTensors> outputs = AllocateOutputs(model, inputs);
  if (!outputs.ok()) return outputs.status();
  absl::Status status = RunModel(model, inputs, *outputs);
  if (!status.ok()) return status;
  return outputs;
}

// Tensor names may hold characters a file name must not ("encoder/out:0").
std::string FileNameFor(const std::string& tensor_name) {
  std::string name = tensor_name;
  for (char& c : name) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  return name + ".npy";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status WriteOutputs(const std::string& out_dir, const NamedTensors& outputs,
                          Console console) {
  for (const auto& [name, tensor] : outputs) {
    std::string path = (std::filesystem::path(out_dir) / FileNameFor(name)).string();
    absl::Status status = WriteNpyFile(path, tensor);
    if (!status.ok()) return status;
    console.out << name << ": " << path << " " << runtime::DTypeText(tensor.dtype)
                << ShapeText(tensor.shape) << "\n";
  }
  return absl::OkStatus();
}

// The model's inputs as the runtime would describe them, from the imported `main`.
std::vector<runtime::TensorInfo> ModelInputs(const ir::Function& main) {
  std::vector<runtime::TensorInfo> infos;
  for (size_t i = 0; i < main.params.size(); ++i) {
    const ir::StructInfo& info = main.params[i]->struct_info;
    runtime::TensorInfo t;
    t.name = main.input_names[i];
    t.dtype = DLDataType{info.dtype.code, info.dtype.bits, 1};
    if (info.shape) {
      for (const auto& d : *info.shape) t.dims.push_back(arith::ToString(d));
    }
    infos.push_back(std::move(t));
  }
  return infos;
}

// DLPack and Kiln number dtype codes alike (bool is code 6, 8 bits), so they convert 1:1.
ir::NDArray ToNDArray(const Tensor& t) {
  ir::NDArray a;
  a.dtype = arith::DataType{static_cast<arith::DataType::Code>(t.dtype.code), t.dtype.bits};
  a.shape = t.shape;
  a.bytes.assign(t.data.begin(), t.data.end());
  return a;
}

absl::StatusOr<Tensor> FromNDArray(const ir::NDArray& a) {
  absl::StatusOr<Tensor> t = MakeTensor(DLDataType{a.dtype.code, a.dtype.bits, 1}, a.shape);
  if (!t.ok()) return t.status();
  std::copy(a.bytes.begin(), a.bytes.end(), t->data.begin());
  return t;
}

// `kiln run --reference`: the reference interpreter on the ONNX model itself.
absl::Status RunReference(const RunArgs& args, Console console) {
  absl::StatusOr<std::string> bytes = ReadModelFile(args.artifact_dir);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<ir::IRModule> module = driver::ImportModel(*bytes);
  if (!module.ok()) return module.status();
  const ir::Function& main = module->functions.at("main");
  absl::StatusOr<NamedTensors> inputs = ReadInputs(args, ModelInputs(main));
  if (!inputs.ok()) return inputs.status();
  std::vector<ir::NDArray> in;
  for (const auto& [name, tensor] : *inputs) in.push_back(ToNDArray(tensor));
  absl::StatusOr<std::vector<ir::NDArray>> out = interp::Run(*module, in);
  if (!out.ok()) return out.status();
  NamedTensors outputs;
  for (size_t i = 0; i < out->size(); ++i) {
    absl::StatusOr<Tensor> t = FromNDArray((*out)[i]);
    if (!t.ok()) return t.status();
    outputs.emplace_back(main.output_names[i], *std::move(t));
  }
  return WriteOutputs(args.out_dir, outputs, console);
}

}  // namespace

absl::Status Run(const RunArgs& args, Console console) {
  if (args.out_dir.empty()) return absl::InvalidArgumentError("no output folder given (--out)");
  if (args.reference) return RunReference(args, console);
  absl::StatusOr<std::string> path = FindArtifact(args.artifact_dir);
  if (!path.ok()) return path.status();
  std::string error;
  std::unique_ptr<runtime::Model> model = runtime::Model::Load(*path, &error);
  if (model == nullptr) return absl::InvalidArgumentError(error);
  absl::StatusOr<NamedTensors> inputs = ReadInputs(args, model->inputs());
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<NamedTensors> outputs = Execute(*model, *inputs);
  if (!outputs.ok()) return outputs.status();
  return WriteOutputs(args.out_dir, *outputs, console);
}

}  // namespace kiln::client
