// Targets checked against LLVM (codegen::CheckTarget, driver::ResolveTarget): unknown cpus and
// features are user errors naming them, and a valid description compiles and runs.
#include <gtest/gtest.h>

#include "compiler/codegen/codegen.h"
#include "compiler/driver/driver.h"
#include "gmock/gmock.h"
#include "tests/support/artifact.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::OnnxBuilder;

absl::Status ResolveError(std::string_view text) {
  absl::StatusOr<ir::Target> target = driver::ResolveTarget(text);
  EXPECT_FALSE(target.ok()) << text;
  return target.status();
}

TEST(TargetCheckTest, PresetsAndNormalizedDescriptionsPass) {
  for (const ir::Target& t : ir::ListPresetTargets()) {
    EXPECT_TRUE(codegen::CheckTarget(t).ok()) << t.preset << ": " << codegen::CheckTarget(t);
  }
  // ir's triple normalization agrees with LLVM's (CheckTarget compares them).
  for (const char* text :
       {"triple=x86_64-linux-gnu", "triple=x86_64-unknown-linux-gnu", "triple=x86_64-pc-linux-gnu",
        "triple=x86_64-linux", "triple=x86_64--linux-gnu",
        "triple=x86_64-unknown-linux-gnu;"
        "cpu=znver4;features=+avx512f,-avx512vl",
        "triple=aarch64-linux-gnu;cpu=cortex-a76;features=+dotprod", "triple=riscv64-linux-gnu",
        "triple=wasm32-unknown-unknown;features=+simd128"}) {
    absl::StatusOr<ir::Target> t = driver::ResolveTarget(text);
    EXPECT_TRUE(t.ok()) << text << ": " << t.status();
  }
}

TEST(TargetCheckTest, UnknownCpuIsInvalidArgumentNamingIt) {
  absl::Status status = ResolveError("triple=x86_64-linux-gnu;cpu=foo");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "unknown cpu 'foo' for x86_64-unknown-linux-gnu");
}

TEST(TargetCheckTest, UnknownFeatureIsInvalidArgumentNamingIt) {
  absl::Status status = ResolveError("triple=x86_64-linux-gnu;features=+avx2,+avx9000");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "unknown feature 'avx9000' for x86_64-unknown-linux-gnu");
  EXPECT_THAT(ResolveError("triple=x86_64-linux-gnu;features=-neon").message(),
              HasSubstr("unknown feature 'neon'"));
}

TEST(TargetCheckTest, NonElfTriplesAreRejected) {
  absl::Status status = ResolveError("triple=x86_64-apple-macosx");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("does not use ELF or wasm"));
}

TEST(TargetCheckTest, FeaturesOfAnotherArchAreUnknown) {
  EXPECT_EQ(ResolveError("triple=aarch64-linux-gnu;features=+avx2").message(),
            "unknown feature 'avx2' for aarch64-unknown-linux-gnu");
  EXPECT_EQ(ResolveError("triple=riscv64-linux-gnu;cpu=skylake").message(),
            "unknown cpu 'skylake' for riscv64-unknown-linux-gnu");
}

// threads=N in a description: the artifact starts with N threads, and computes the same.
TEST(TargetCheckTest, ADescriptionsThreadsAreTheArtifactsDefault) {
  OnnxBuilder b;
  b.Input("x", {"n", 64});
  b.Input("w", {64, 64});
  b.Node("MatMul", {"x", "w"}, {"y"});
  b.Output("y", {"n", 64});
  std::unique_ptr<runtime::Model> three =
      testing::CompileAndLoad(b.Serialize(), "triple=x86_64-linux-gnu;threads=3");
  std::unique_ptr<runtime::Model> one = testing::CompileAndLoad(b.Serialize(), "x86_64");
  ASSERT_NE(three, nullptr);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(three->num_threads(), 3);
  EXPECT_EQ(one->num_threads(), 1);
  ir::NDArray x = ir::NDArray::Zeros(arith::DataType::Float(32), {200, 64});
  ir::NDArray w = ir::NDArray::Zeros(arith::DataType::Float(32), {64, 64});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = (i % 7) - 3.0f;
  for (int64_t i = 0; i < w.num_elements(); ++i) w.data<float>()[i] = (i % 5) * 0.25f;
  auto run = [&](const runtime::Model& model) {
    return testing::RunModel(model, {x, w},
                             {ir::NDArray::Zeros(arith::DataType::Float(32), {200, 64})})[0];
  };
  EXPECT_EQ(run(*three).bytes, run(*one).bytes);
}

TEST(TargetCheckTest, HostIsThisMachineAsLLVMSeesIt) {
  absl::StatusOr<ir::Target> host = driver::ResolveTarget("host");
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->preset, "host");
  EXPECT_EQ(host->Arch(), "x86_64");  // the machines Kiln is built and tested on
  EXPECT_NE(host->cpu, "x86-64");     // a real cpu name, not the baseline
  EXPECT_THAT(host->features, HasSubstr("+sse2"));
  EXPECT_EQ(driver::ListTargets().back().preset, "host");
}

TEST(TargetCheckTest, CompileModelRejectsABadTargetBeforeCompiling) {
  ir::Target target = *ir::ParseTarget("triple=x86_64-linux-gnu;cpu=foo");
  OnnxBuilder b;
  b.Input("x", {"n"});
  b.Node("Relu", {"x"}, {"y"});
  b.Output("y", {"n"});
  int events = 0;
  absl::StatusOr<driver::Artifact> artifact = driver::CompileModel(
      b.Serialize(), target, {}, [&](const driver::CompileEvent&) { ++events; });
  EXPECT_EQ(artifact.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(artifact.status().message(), HasSubstr("unknown cpu 'foo'"));
  EXPECT_EQ(events, 0);
}

TEST(TargetCheckTest, ValidDescriptionCompilesAndRuns) {
  OnnxBuilder b;
  b.Input("x", {"n"});
  b.Input("z", {"n"});
  b.Node("Add", {"x", "z"}, {"s"});
  b.Node("Relu", {"s"}, {"y"});
  b.Output("y", {"n"});
  // SSE4.2 exists on every x86-64 machine this runs on; 128-bit vectors from the features.
  std::unique_ptr<runtime::Model> model = testing::CompileAndLoad(
      b.Serialize(), "triple=x86_64-linux-gnu;cpu=x86-64;features=+sse4.2,+popcnt,+sse4.2");
  ASSERT_TRUE(model);
  const int64_t n = 37;
  ir::NDArray x = ir::NDArray::Zeros(arith::DataType::Float(32), {n});
  ir::NDArray z = ir::NDArray::Zeros(arith::DataType::Float(32), {n});
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[i] = static_cast<float>(i) - 20.0f;
    z.data<float>()[i] = 0.5f;
  }
  std::vector<ir::NDArray> out =
      testing::RunModel(*model, {x, z}, {ir::NDArray::Zeros(arith::DataType::Float(32), {n})});
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[0].data<float>()[i], std::max(0.0f, static_cast<float>(i) - 19.5f)) << i;
  }
}

}  // namespace
}  // namespace kiln
