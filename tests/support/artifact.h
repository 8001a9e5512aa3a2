// For tests that run compiled code: an artifact loaded through the runtime, run on
// ir::NDArrays, and deterministic input values.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/driver/driver.h"
#include "kiln/runtime.hpp"

namespace kiln::testing {

// A DLTensor that views `a`'s data, shape and dtype (no copy).
inline DLTensor ViewOf(ir::NDArray& a) {
  DLTensor t{};
  t.data = a.bytes.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(a.shape.size());
  t.dtype = {a.dtype.code, a.dtype.bits, 1};
  t.shape = a.shape.data();
  return t;
}

// `artifact` written to a temporary shared object and loaded (the file is removed at once:
// dlopen keeps the mapping); records a test failure and returns nullptr when that fails.
inline std::unique_ptr<runtime::Model> LoadArtifact(const driver::Artifact& artifact) {
  std::string path = ::testing::TempDir() + "/kiln-artifact-XXXXXX.so";
  int fd = mkstemps(path.data(), 3);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return nullptr;
  ssize_t written = write(fd, artifact.bytes.data(), artifact.bytes.size());
  close(fd);
  EXPECT_EQ(written, static_cast<ssize_t>(artifact.bytes.size())) << path;
  std::string error;
  std::unique_ptr<runtime::Model> model = runtime::Model::Load(path, &error);
  unlink(path.c_str());
  EXPECT_NE(model, nullptr) << error;
  return model;
}

// `onnx` compiled for `target` and loaded; records a test failure and returns nullptr when
// either step fails.
inline std::unique_ptr<runtime::Model> CompileAndLoad(const std::string& onnx,
                                                      const std::string& target = "x86_64") {
  auto parsed = driver::ResolveTarget(target);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return nullptr;
  auto artifact = driver::CompileModel(onnx, *parsed, {}, nullptr);
  EXPECT_TRUE(artifact.ok()) << artifact.status();
  if (!artifact.ok()) return nullptr;
  return LoadArtifact(*artifact);
}

// Runs `model` on `inputs` into `outputs` (which carry the output shapes and dtypes) and
// returns them.
inline std::vector<ir::NDArray> RunModel(const runtime::Model& model,
                                         std::vector<ir::NDArray> inputs,
                                         std::vector<ir::NDArray> outputs) {
  std::vector<DLTensor> in, out;
  for (ir::NDArray& a : inputs) in.push_back(ViewOf(a));
  for (ir::NDArray& a : outputs) out.push_back(ViewOf(a));
  std::string error;
  EXPECT_TRUE(model.Run(in, &out, &error)) << error;
  return outputs;
}

// The output shapes `model` computes for `inputs` before running (from their shapes and,
// where values decide shapes, their data), or the error it reports.
inline absl::StatusOr<std::vector<std::vector<int64_t>>> CompiledOutputShapes(
    const runtime::Model& model, std::vector<ir::NDArray> inputs) {
  std::vector<DLTensor> in;
  for (ir::NDArray& a : inputs) in.push_back(ViewOf(a));
  std::vector<std::vector<int64_t>> shapes;
  std::string error;
  if (!model.OutputShapes(in, &shapes, &error)) return absl::InvalidArgumentError(error);
  return shapes;
}

// `onnx` compiled for x86_64 and run on `inputs` into `outputs`; {} (with a test failure)
// when it does not compile or load.
inline std::vector<ir::NDArray> RunCompiled(const std::string& onnx,
                                            std::vector<ir::NDArray> inputs,
                                            std::vector<ir::NDArray> outputs) {
  std::unique_ptr<runtime::Model> model = CompileAndLoad(onnx);
  if (!model) return {};
  return RunModel(*model, std::move(inputs), std::move(outputs));
}

// n deterministic values scale * sin(0.7 i + 0.3), for weights and inputs.
inline std::vector<float> Wave(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * i + 0.3f);
  return v;
}

}  // namespace kiln::testing
