// Symbolic memory planning end to end: intermediates share one workspace, the manifest records
// the planned and the no-reuse sizes, user dim bounds turn them into numbers and are checked
// when the artifact runs, and the results stay what the reference interpreter says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "compiler/driver/driver.h"
#include "kiln/runtime.hpp"
#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"

namespace kiln {
namespace {

using testing::ArrayOf;
using testing::OnnxBuilder;
using testing::ViewOf;

std::vector<float> Wave(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.3f * std::sin(0.7f * i + 0.3f);
  return v;
}

// Three matmul -> softmax steps: five intermediates of n*16 floats, at most two alive at once.
std::string ChainModel() {
  OnnxBuilder b(13);
  b.Input("x", {"n", 16});
  std::string prev = "x";
  for (int i = 0; i < 3; ++i) {
    std::string w = "w" + std::to_string(i), mm = "mm" + std::to_string(i);
    std::string sm = i == 2 ? "y" : "sm" + std::to_string(i);
    b.FloatInitializer(w, {16, 16}, Wave(256));
    b.Node("MatMul", {prev, w}, {mm});
    b.Node("Softmax", {mm}, {sm});
    prev = sm;
  }
  b.Output("y", {"n", 16});
  return b.Serialize();
}

absl::StatusOr<driver::Artifact> Compile(std::map<std::string, int64_t> bounds) {
  auto target = ir::ParseTarget("x86_64");
  if (!target.ok()) return target.status();
  driver::CompileOptions options;
  options.dim_bounds = std::move(bounds);
  return driver::CompileModel(ChainModel(), *target, options, nullptr);
}

std::string ManifestField(const std::string& manifest, const std::string& key) {
  size_t at = manifest.find("\"" + key + "\": ");
  if (at == std::string::npos) return "";
  at += key.size() + 4;
  return manifest.substr(at, manifest.find_first_of(",\n", at) - at);
}

TEST(MemoryPlanTest, ManifestRecordsPlannedAndNoReuseSizes) {
  auto artifact = Compile({});
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  // Two storages of n*16*4 bytes are enough for five intermediates.
  EXPECT_EQ(ManifestField(artifact->manifest_json, "workspace_bytes"), "\"n*128\"");
  EXPECT_EQ(ManifestField(artifact->manifest_json, "workspace_bytes_without_reuse"), "\"n*320\"");
}

TEST(MemoryPlanTest, BoundsMakeTheSizesNumbers) {
  auto artifact = Compile({{"n", 100}});
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_EQ(ManifestField(artifact->manifest_json, "workspace_bytes"), "12800");
  EXPECT_EQ(ManifestField(artifact->manifest_json, "workspace_bytes_without_reuse"), "32000");
}

TEST(MemoryPlanTest, UnknownBoundNameIsRejectedNamingIt) {
  auto artifact = Compile({{"seq", 100}});
  ASSERT_FALSE(artifact.ok());
  EXPECT_EQ(artifact.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(artifact.status().message().find("'seq'"), std::string::npos) << artifact.status();
  EXPECT_NE(artifact.status().message().find("n"), std::string::npos) << artifact.status();
}

TEST(MemoryPlanTest, SharedStorageKeepsTheReferenceResults) {
  for (int64_t n : {1, 7, 33}) {
    std::vector<double> x(n * 16);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.37 * i);
    testing::ExpectCompiledMatchesReference(ChainModel(),
                                            {ArrayOf(arith::DataType::Float(32), {n, 16}, x)});
  }
}

// Runs the bounded artifact at batch n; the error text when it fails.
std::string RunBounded(const driver::Artifact& artifact, int64_t n) {
  std::string path = ::testing::TempDir() + "/kiln_memory_plan_bounded.so";
  std::ofstream(path, std::ios::binary) << artifact.bytes;
  std::string error;
  auto model = runtime::Model::Load(path, &error);
  std::remove(path.c_str());
  if (!model) return error;
  ir::NDArray x = ArrayOf(arith::DataType::Float(32), {n, 16}, std::vector<double>(n * 16, 0.5));
  ir::NDArray y = ir::NDArray::Zeros(arith::DataType::Float(32), {n, 16});
  std::vector<DLTensor> in = {ViewOf(x)}, out = {ViewOf(y)};
  if (!model->Run(in, &out, &error)) return error;
  // Softmax rows sum to one: the workspace held the right values.
  for (int64_t r = 0; r < n; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < 16; ++c) sum += y.GetDouble(r * 16 + c);
    if (std::fabs(sum - 1) > 1e-5)
      return "row " + std::to_string(r) + " sums to " + std::to_string(sum);
  }
  return "";
}

TEST(MemoryPlanTest, BoundIsCheckedWhenTheArtifactRuns) {
  auto artifact = Compile({{"n", 100}});
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_EQ(RunBounded(*artifact, 100), "");
  EXPECT_EQ(RunBounded(*artifact, 3), "");
  EXPECT_EQ(RunBounded(*artifact, 101),
            "input 'x' dimension 0 (n): 101 exceeds the bound 100 the artifact was compiled with "
            "(--dim-bound)");
}

}  // namespace
}  // namespace kiln
