#include <gtest/gtest.h>

#include "compiler/transform/plan_memory.h"

namespace kiln::transform {
namespace {

using arith::IntImm;
using arith::MakeVar;
using arith::PrimExpr;

std::string Text(const PrimExpr& e) { return arith::ToString(e); }

TEST(PlanMemory, DeadTensorOfEqualSymbolicSizeIsReused) {
  PrimExpr batch = MakeVar("batch");
  PrimExpr bytes = IntImm(4) * batch * IntImm(32);
  arith::Analyzer analyzer;
  // a (0..1), b (1..2), c (2..3): c may take a's storage, b may not (it reads a).
  MemoryPlan plan = PlanMemory({{bytes, 0, 1}, {bytes, 1, 2}, {bytes, 2, 3}}, analyzer);
  ASSERT_EQ(plan.token_bytes.size(), 2u);
  EXPECT_EQ(plan.token_of[0], plan.token_of[2]);
  EXPECT_NE(plan.token_of[0], plan.token_of[1]);
  EXPECT_EQ(Text(plan.workspace_bytes), Text(analyzer.Simplify(IntImm(256) * batch)));
  EXPECT_EQ(Text(plan.no_reuse_bytes), Text(analyzer.Simplify(IntImm(384) * batch)));
}

TEST(PlanMemory, InputAndOutputOfOneStepNeverShare) {
  arith::Analyzer analyzer;
  MemoryPlan plan = PlanMemory({{IntImm(64), 0, 1}, {IntImm(64), 1, 1}}, analyzer);
  EXPECT_NE(plan.token_of[0], plan.token_of[1]);
}

TEST(PlanMemory, UnprovableSymbolicSizesGetTheirOwnStorage) {
  PrimExpr batch = MakeVar("batch"), seq = MakeVar("seq");
  arith::Analyzer analyzer;
  // seq*4 bytes may be larger than batch*4: without bounds nothing is provable.
  MemoryPlan plan = PlanMemory({{IntImm(4) * batch, 0, 0}, {IntImm(4) * seq, 1, 1}}, analyzer);
  EXPECT_NE(plan.token_of[0], plan.token_of[1]);
}

TEST(PlanMemory, SmallerSymbolicSizeFitsALargerDeadToken) {
  PrimExpr batch = MakeVar("batch");
  arith::Analyzer analyzer;
  MemoryPlan plan = PlanMemory({{IntImm(8) * batch, 0, 0}, {IntImm(4) * batch, 1, 1}}, analyzer);
  EXPECT_EQ(plan.token_of[0], plan.token_of[1]);
  EXPECT_EQ(Text(plan.token_bytes[0]), Text(analyzer.Simplify(IntImm(8) * batch)));
}

TEST(PlanMemory, UpperBoundsLetDifferentShapesShareAConstantToken) {
  PrimExpr batch = MakeVar("batch"), seq = MakeVar("seq");
  arith::Analyzer analyzer;
  analyzer.Bind(batch, {1, 8});
  analyzer.Bind(seq, {1, 4096});
  MemoryPlan plan = PlanMemory(
      {{IntImm(4) * batch * seq, 0, 0}, {IntImm(4) * seq, 1, 1}, {IntImm(2) * batch, 2, 2}},
      analyzer);
  ASSERT_EQ(plan.token_bytes.size(), 1u);
  EXPECT_EQ(Text(plan.token_bytes[0]), "131072");  // 4 * 8 * 4096
  EXPECT_EQ(Text(plan.workspace_bytes), "131072");
  // Without reuse every tensor has its exact size; at the bounds that is 131072 + 16384 + 64.
  EXPECT_EQ(analyzer.ConstBounds(plan.no_reuse_bytes).max, 147520);
}

TEST(PlanMemory, AConstantTokenGrowsWhenNoFreeTokenIsBigEnough) {
  arith::Analyzer analyzer;
  MemoryPlan plan = PlanMemory({{IntImm(100), 0, 0}, {IntImm(1000), 1, 1}}, analyzer);
  ASSERT_EQ(plan.token_bytes.size(), 1u);
  EXPECT_EQ(Text(plan.token_bytes[0]), "1000");
  EXPECT_EQ(Text(plan.workspace_bytes), "1024");
}

TEST(PlanMemory, TokensAreLaidOutAlignedBackToBack) {
  arith::Analyzer analyzer;
  MemoryPlan plan = PlanMemory({{IntImm(10), 0, 1}, {IntImm(70), 1, 1}}, analyzer);
  ASSERT_EQ(plan.token_offset.size(), 2u);
  EXPECT_EQ(Text(plan.token_offset[0]), "0");
  EXPECT_EQ(Text(plan.token_offset[1]), "64");
  EXPECT_EQ(Text(plan.workspace_bytes), "192");
}

}  // namespace
}  // namespace kiln::transform
