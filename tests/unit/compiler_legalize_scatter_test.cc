// Compiled gather_nd, scatter_elements and scatter_nd against the reference interpreter,
// with duplicate and negative indices, and values worked out by hand.
#include <gtest/gtest.h>

#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

namespace kiln::testing {
namespace {

using arith::DataType;

constexpr int kI64 = onnx::TensorProto::INT64;

TEST(LegalizeScatterTest, ScatterElementsAddsDuplicateIndicesInOrder) {
  OnnxBuilder b(18);
  b.Input("data", {"n", 3});
  b.Input("indices", {1, 3}, kI64);
  b.Input("updates", {1, 3});
  auto& node = b.Node("ScatterElements", {"data", "indices", "updates"}, {"y"});
  OnnxBuilder::IntAttr(node, "axis", 1);
  OnnxBuilder::StringAttr(node, "reduction", "add");
  b.Output("y", {"n", 3});
  auto want = ExpectCompiledMatchesReference(
      b.Serialize(), {ArrayOf(DataType::Float(), {2, 3}, {1, 2, 3, 4, 5, 6}),
                      ArrayOf(DataType::Int(), {1, 3}, {1, -2, 0}),
                      ArrayOf(DataType::Float(), {1, 3}, {10, 20, 30})});
  ASSERT_EQ(want.size(), 1u);
  // Row 0: element 0 gets 30, element 1 gets 10 and 20 (index -2 is 1).
  EXPECT_EQ(want[0].GetDouble(0), 31);
  EXPECT_EQ(want[0].GetDouble(1), 32);
  EXPECT_EQ(want[0].GetDouble(3), 4);
}

TEST(LegalizeScatterTest, ScatterNDOverwritesSlices) {
  OnnxBuilder b(16);
  b.Input("data", {4, 2});
  b.Input("indices", {2, 1}, kI64);
  b.Input("updates", {2, 2});
  b.Node("ScatterND", {"data", "indices", "updates"}, {"y"});
  b.Output("y", {4, 2});
  auto want = ExpectCompiledMatchesReference(
      b.Serialize(), {ArrayOf(DataType::Float(), {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
                      ArrayOf(DataType::Int(), {2, 1}, {3, -4}),
                      ArrayOf(DataType::Float(), {2, 2}, {-1, -2, -3, -4})});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(0), -3);  // row -4 is row 0
  EXPECT_EQ(want[0].GetDouble(7), -2);  // row 3
}

TEST(LegalizeScatterTest, GatherNDWithBatchDims) {
  OnnxBuilder b(13);
  b.Input("data", {"n", 2, 3});
  b.Input("indices", {"n", 2, 1}, kI64);
  OnnxBuilder::IntAttr(b.Node("GatherND", {"data", "indices"}, {"y"}), "batch_dims", 1);
  b.Output("y", {"n", 2, 3});
  auto want = ExpectCompiledMatchesReference(
      b.Serialize(), {ArrayOf(DataType::Float(), {2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
                      ArrayOf(DataType::Int(), {2, 2, 1}, {1, 0, -1, 1})});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(0), 3);  // batch 0, row 1
  EXPECT_EQ(want[0].GetDouble(6), 9);  // batch 1, row -1
}

}  // namespace
}  // namespace kiln::testing
