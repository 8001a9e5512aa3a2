// The pass pipeline on a model whose Reshape target is computed from the input's shape:
// import folds the chain into a symbolic ShapeExpr, dead-code elimination drops the chain,
// and legalize then has only kernels it can define.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kiln
