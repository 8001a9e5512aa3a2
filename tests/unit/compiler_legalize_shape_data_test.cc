// Shapes used as data in compiled kernels: shape and size of a tensor with symbolic dims read
// as tensor values, and a range whose start is a symbolic value (a KV cache's length), which
// makes that value a scalar parameter of the kernel although no buffer shape uses it.
// Compiled against the reference interpreter, and against values computed here.
#include <gtest/gtest.h>

#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"

namespace kiln {
namespace {

using arith::DataType;
using testing::OnnxBuilder;

TEST(LegalizeShapeDataTest, ShapeElementAddedToData) {
  OnnxBuilder b;
  b.Input("x", {"n", 3}, onnx::TensorProto::INT64);
  b.Int64Initializer("zero", {}, {0});
  b.Node("Shape", {"x"}, {"s"});
  OnnxBuilder::IntAttr(b.Node("Gather", {"s", "zero"}, {"n0"}), "axis", 0);
  b.Node("Add", {"x", "n0"}, {"y"});
  b.Output("y", {"n", 3}, onnx::TensorProto::INT64);
  auto want = testing::ExpectCompiledMatchesReference(
      b.Serialize(), {testing::ArrayOf(DataType::Int(), {2, 3}, {0, 1, 2, 3, 4, 5})});
  ASSERT_EQ(want.size(), 1u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(want[0].GetDouble(i), i + 2);
}

TEST(LegalizeShapeDataTest, ShapeSliceAndSize) {
  OnnxBuilder b;
  b.Input("x", {"n", "m", 2}, onnx::TensorProto::INT64);
  OnnxBuilder::IntAttr(b.Node("Shape", {"x"}, {"s"}), "start", 1);
  b.Node("Size", {"x"}, {"z"});
  b.Node("Add", {"s", "z"}, {"y"});
  b.Output("y", {2}, onnx::TensorProto::INT64);
  std::vector<double> zeros(3 * 4 * 2, 0.0);
  auto want = testing::ExpectCompiledMatchesReference(
      b.Serialize(), {testing::ArrayOf(DataType::Int(), {3, 4, 2}, zeros)});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(0), 4 + 24);
  EXPECT_EQ(want[0].GetDouble(1), 2 + 24);
}

// The position ids of new tokens after a cache: range(past, past + seq, 1).
TEST(LegalizeShapeDataTest, RangeStartingAtSymbolicCacheLength) {
  OnnxBuilder b;
  b.Input("cache", {"past", 2});
  b.Input("x", {"seq", 2});
  b.Int64Initializer("zero", {}, {0});
  b.Int64Initializer("one", {}, {1});
  b.Node("Shape", {"cache"}, {"cs"});
  OnnxBuilder::IntAttr(b.Node("Gather", {"cs", "zero"}, {"p"}), "axis", 0);
  b.Node("Shape", {"x"}, {"xs"});
  OnnxBuilder::IntAttr(b.Node("Gather", {"xs", "zero"}, {"s"}), "axis", 0);
  b.Node("Add", {"p", "s"}, {"limit"});
  b.Node("Range", {"p", "limit", "one"}, {"y"});
  b.Output("y", {"seq"}, onnx::TensorProto::INT64);
  auto want = testing::ExpectCompiledMatchesReference(
      b.Serialize(), {testing::ArrayOf(DataType::Float(), {5, 2}, std::vector<double>(10, 0.0)),
                      testing::ArrayOf(DataType::Float(), {3, 2}, std::vector<double>(6, 0.0))});
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(want[0].num_elements(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(want[0].GetDouble(i), 5 + i);
}

}  // namespace
}  // namespace kiln
