// The pass pipeline on a model whose Reshape target is computed from the input's shape:
// import folds the chain into a symbolic ShapeExpr, dead-code elimination drops the chain,
// and legalize then has only kernels it can define.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "cache/digest.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;

std::string ShapeChainModel() {
  OnnxBuilder b;
  b.Input("x", {"batch", "seq", 64});
  b.Int64Initializer("i0", {}, {0});
  b.Int64Initializer("i1", {}, {1});
  b.Int64Initializer("axes", {1}, {0});
  b.Int64Initializer("heads", {2}, {4, 16});
  b.Node("Shape", {"x"}, {"s"});
  OnnxBuilder::IntAttr(b.Node("Gather", {"s", "i0"}, {"b"}), "axis", 0);
  OnnxBuilder::IntAttr(b.Node("Gather", {"s", "i1"}, {"q"}), "axis", 0);
  b.Node("Unsqueeze", {"b", "axes"}, {"b1"});
  b.Node("Unsqueeze", {"q", "axes"}, {"q1"});
  OnnxBuilder::IntAttr(b.Node("Concat", {"b1", "q1", "heads"}, {"target"}), "axis", 0);
  b.Node("Reshape", {"x", "target"}, {"y"});
  b.Output("y", {"batch", "seq", 4, 16});
  return b.Serialize();
}

size_t NumBindings(const ir::IRModule& m) {
  size_t n = 0;
  for (const auto& block : m.functions.at("main").blocks) n += block.bindings.size();
  return n;
}

TEST(PipelineTest, DeadShapeArithmeticIsEliminated) {
  auto m = driver::ImportModel(ShapeChainModel());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(NumBindings(*m), 1u);
  auto after = driver::RunPipeline(*std::move(m), nullptr, "eliminate_dead_code");
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(NumBindings(*after), 1u) << ir::ToString(*after);
  const ir::Binding& only = after->functions.at("main").blocks[0].bindings[0];
  EXPECT_EQ(only.value->name, "reshape");
  EXPECT_EQ(ir::ToString(only.var->struct_info), "Tensor([batch, seq, 4, 16], f32)");
}

TEST(PipelineTest, ShapeChainModelLowersToHostCode) {
  auto m = driver::ImportModel(ShapeChainModel());
  ASSERT_TRUE(m.ok()) << m.status();
  auto lowered = driver::RunPipeline(*std::move(m), nullptr);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(lowered->prim_funcs.count("kiln_run"));
  EXPECT_TRUE(lowered->prim_funcs.count("reshape_0"));
}

// A cancelled or timed-out job stops the compiler at the next pass, with the job's status.
TEST(PipelineTest, InterruptionStopsTheCompileBetweenPasses) {
  int checks = 0;
  int passes = 0;
  driver::CompileOptions options;
  options.interrupted = [&checks]() -> absl::Status {
    return ++checks <= 3 ? absl::OkStatus() : absl::CancelledError("job cancelled");
  };
  auto events = [&passes](const driver::CompileEvent& event) {
    if (event.kind == driver::CompileEvent::Kind::kPass) ++passes;
  };
  absl::StatusOr<driver::Artifact> artifact =
      driver::CompileModel(ShapeChainModel(), *ir::ParseTarget("x86_64"), options, events);
  EXPECT_TRUE(absl::IsCancelled(artifact.status())) << artifact.status();
  EXPECT_EQ(artifact.status().message(), "job cancelled");
  EXPECT_EQ(passes, 3);
  EXPECT_LT(passes, static_cast<int>(driver::Pipeline().size()));
}

// Equal cache keys promise equal artifacts, so a compile must not depend on where the
// compiler's nodes happen to sit in memory. The parallel loops' closures once followed the
// hash order of node addresses: about one compile in ten packed them differently.
TEST(PipelineTest, SameModelCompilesToTheSameBytes) {
  OnnxBuilder b;
  b.Input("x", {"batch", 64});
  std::vector<float> w1(64 * 96), w2(96 * 32), bias(96);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = static_cast<float>(i % 13) / 13 - 0.5f;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<float>(i % 7) / 7 - 0.5f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 5);
  b.FloatInitializer("w1", {64, 96}, w1);
  b.FloatInitializer("w2", {96, 32}, w2);
  b.FloatInitializer("bias", {96}, bias);
  b.Node("MatMul", {"x", "w1"}, {"h"});
  b.Node("Add", {"h", "bias"}, {"hb"});
  b.Node("Relu", {"hb"}, {"r"});
  b.Node("MatMul", {"r", "w2"}, {"y"});
  b.Output("y", {"batch", 32});
  const std::string model = b.Serialize();
  const ir::Target target = *ir::ParseTarget("x86_64");
  std::set<std::string> digests;
  std::vector<std::unique_ptr<int[]>> shifts;  // moves later allocations elsewhere
  for (int i = 0; i < 16; ++i) {
    absl::StatusOr<driver::Artifact> artifact = driver::CompileModel(model, target, {}, nullptr);
    ASSERT_TRUE(artifact.ok()) << artifact.status();
    digests.insert(cache::Sha256Digest(artifact->bytes));
    shifts.push_back(std::make_unique<int[]>(1000 + 97 * i));
  }
  EXPECT_EQ(digests.size(), 1u);
}

}  // namespace
}  // namespace kiln
