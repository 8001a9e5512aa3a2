// Tensor family: reference kernels against values computed by hand, every opset form the
// suite uses (attributes that became inputs), and user errors that name the problem.
#include <gtest/gtest.h>

#include <limits>

#include "tests/support/import_and_run.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using namespace testing;  // NOLINT: test helpers

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// x[4, 5] = 0..19, Slice(starts=[3, -1], ends=[-INF, 0], axes=[0, 1], steps=[-2, -2]):
// rows 3, 1 and columns 4, 2.
TEST(TensorOpsTest, SliceNegativeStepsClamp) {
  OnnxBuilder b;
  b.Input("x", {4, 5});
  b.Int64Initializer("starts", {2}, {3, -1});
  b.Int64Initializer("ends", {2}, {-kInt64Max, 0});
  b.Int64Initializer("axes", {2}, {0, 1});
  b.Int64Initializer("steps", {2}, {-2, -2});
  b.Node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  b.Output("y", {2, 2});
  auto out = ImportAndRun(b, {Iota({4, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{19, 17, 9, 7}));
}

// Opset 9 Slice takes its bounds as attributes.
TEST(TensorOpsTest, SliceOpset9Attributes) {
  OnnxBuilder b(9);
  b.Input("x", {3, 4});
  auto& n = b.Node("Slice", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(n, "starts", {1});
  OnnxBuilder::IntsAttr(n, "ends", {1000});
  OnnxBuilder::IntsAttr(n, "axes", {1});
  b.Output("y", {3, 3});
  auto out = ImportAndRun(b, {Iota({3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{1, 2, 3, 5, 6, 7, 9, 10, 11}));
}

TEST(TensorOpsTest, GatherNegativeIndicesAndRangeError) {
  OnnxBuilder b;
  b.Input("x", {3, 2});
  b.Input("i", {2}, onnx::TensorProto::INT64);
  b.Node("Gather", {"x", "i"}, {"y"});
  b.Output("y", {2, 2});
  auto out = ImportAndRun(b, {Iota({3, 2}), I64({2}, {-1, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{4, 5, 0, 1}));
  auto bad = ImportAndRun(b, {Iota({3, 2}), I64({2}, {3, 0})});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("op gather: index 3 out of range for size 3"),
            std::string::npos)
      << bad.status();
}

// batch_dims = 1: each batch picks its own row.
TEST(TensorOpsTest, GatherNDWithBatchDims) {
  OnnxBuilder b;
  b.Input("x", {2, 2, 2});
  b.Int64Initializer("i", {2, 1}, {1, 0});
  auto& n = b.Node("GatherND", {"x", "i"}, {"y"});
  OnnxBuilder::IntAttr(n, "batch_dims", 1);
  b.Output("y", {2, 2});
  auto out = ImportAndRun(b, {Iota({2, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{2, 3, 4, 5}));
}

TEST(TensorOpsTest, ScatterElementsAddsDuplicates) {
  OnnxBuilder b;
  b.Input("x", {1, 4});
  b.Int64Initializer("i", {1, 3}, {1, 1, -1});
  b.FloatInitializer("u", {1, 3}, {10, 20, 30});
  auto& n = b.Node("ScatterElements", {"x", "i", "u"}, {"y"});
  OnnxBuilder::IntAttr(n, "axis", 1);
  OnnxBuilder::StringAttr(n, "reduction", "add");
  b.Output("y", {1, 4});
  auto out = ImportAndRun(b, {F32({1, 4}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{1, 32, 3, 34}));
}

TEST(TensorOpsTest, ScatterNDMultipliesSlices) {
  OnnxBuilder b;
  b.Input("x", {2, 2});
  b.Int64Initializer("i", {1, 1}, {1});
  b.FloatInitializer("u", {1, 2}, {3, 5});
  auto& n = b.Node("ScatterND", {"x", "i", "u"}, {"y"});
  OnnxBuilder::StringAttr(n, "reduction", "mul");
  b.Output("y", {2, 2});
  auto out = ImportAndRun(b, {F32({2, 2}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{1, 2, 9, 20}));
}

// [0 1 2] padded by 2 on each side: reflect mirrors without the edge, edge repeats it.
TEST(TensorOpsTest, PadReflectAndEdge) {
  for (const auto& [mode, expected] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"reflect", {2, 1, 0, 1, 2, 1, 0}},
           {"edge", {0, 0, 0, 1, 2, 2, 2}},
           {"constant", {0, 0, 0, 1, 2, 0, 0}}}) {
    OnnxBuilder b;
    b.Input("x", {1, 3});
    b.Int64Initializer("pads", {4}, {0, 2, 0, 2});
    auto& n = b.Node("Pad", {"x", "pads"}, {"y"});
    OnnxBuilder::StringAttr(n, "mode", mode);
    b.Output("y", {1, 7});
    auto out = ImportAndRun(b, {F32({1, 3}, {0, 1, 2})});
    ASSERT_TRUE(out.ok()) << mode << ": " << out.status();
    EXPECT_EQ(Values((*out)[0]), expected) << mode;
  }
}

// Opset 2 Pad: pads and value are attributes.
TEST(TensorOpsTest, PadOpset2Attributes) {
  OnnxBuilder b(2);
  b.Input("x", {2});
  auto& n = b.Node("Pad", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(n, "pads", {1, 0});
  OnnxBuilder::FloatAttr(n, "value", 7);
  b.Output("y", {3});
  auto out = ImportAndRun(b, {F32({2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{7, 1, 2}));
}

TEST(TensorOpsTest, SplitOpset11AttributeAndSqueezeAxes) {
  OnnxBuilder b(11);
  b.Input("x", {1, 5});
  auto& split = b.Node("Split", {"x"}, {"a", "b"});
  OnnxBuilder::IntAttr(split, "axis", 1);
  OnnxBuilder::IntsAttr(split, "split", {2, 3});
  auto& squeeze = b.Node("Squeeze", {"b"}, {"c"});
  OnnxBuilder::IntsAttr(squeeze, "axes", {0});
  b.Output("a", {1, 2});
  b.Output("c", {3});
  auto out = ImportAndRun(b, {Iota({1, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{0, 1}));
  EXPECT_EQ((*out)[1].shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(Values((*out)[1]), (std::vector<double>{2, 3, 4}));
}

TEST(TensorOpsTest, TileAndOneHot) {
  OnnxBuilder b;
  b.Input("x", {2});
  b.Input("i", {2}, onnx::TensorProto::INT64);
  b.Int64Initializer("reps", {1}, {2});
  b.Int64Initializer("depth", {}, {3});
  b.FloatInitializer("values", {2}, {-1, 5});
  b.Node("Tile", {"x", "reps"}, {"t"});
  auto& oh = b.Node("OneHot", {"i", "depth", "values"}, {"o"});
  OnnxBuilder::IntAttr(oh, "axis", 0);
  b.Output("t", {4});
  b.Output("o", {3, 2});
  auto out = ImportAndRun(b, {F32({2}, {1, 2}), I64({2}, {-1, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{1, 2, 1, 2}));
  // Column j is hot at row i[j] (index -1 is depth - 1 = 2).
  EXPECT_EQ(Values((*out)[1]), (std::vector<double>{-1, 5, -1, -1, 5, -1}));
}

TEST(TensorOpsTest, TriluLowerWithK) {
  OnnxBuilder b;
  b.Input("x", {3, 3});
  b.Int64Initializer("k", {}, {-1});
  auto& n = b.Node("Trilu", {"x", "k"}, {"y"});
  OnnxBuilder::IntAttr(n, "upper", 0);
  b.Output("y", {3, 3});
  auto out = ImportAndRun(b, {F32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
}

// Every operand constant: the import folds the ops through the same kernels.
TEST(TensorOpsTest, ConstantOperandsFold) {
  OnnxBuilder b;
  b.Input("x", {2});
  b.FloatInitializer("c", {2, 2}, {1, 2, 3, 4});
  b.Int64Initializer("perm_shape", {1}, {4});
  b.Node("Reshape", {"c", "perm_shape"}, {"flat"});
  b.Int64Initializer("starts", {1}, {2});
  b.Int64Initializer("ends", {1}, {4});
  b.Node("Slice", {"flat", "starts", "ends"}, {"tail"});
  b.Node("Add", {"x", "tail"}, {"y"});
  b.Output("y", {2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  std::string text = ir::ToString(*m);
  EXPECT_EQ(text.find("slice("), std::string::npos) << text;
  EXPECT_EQ(text.find("reshape("), std::string::npos) << text;
  auto out = interp::Run(*m, {F32({2}, {10, 20})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{13, 24}));
}

TEST(TensorOpsTest, ErrorsNameTheProblem) {
  struct Case {
    std::string op;
    std::vector<int64_t> operand;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"Reshape", {5, 5}, "op reshape: cannot reshape 6 elements into 25"},
           {"Squeeze", {1}, "op squeeze: cannot squeeze axis 1 of size 3"},
           {"Expand", {4, 3}, "op expand: cannot expand dimension 0 of size 2 to 4"}}) {
    OnnxBuilder b;
    b.Input("x", {2, 3});
    b.Int64Initializer("v", {int64_t(c.operand.size())}, c.operand);
    b.Node(c.op, {"x", "v"}, {"y"});
    b.Output("y", {2, 3});
    auto m = driver::ImportModel(b.Serialize());
    ASSERT_FALSE(m.ok()) << c.op;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(c.message), std::string::npos) << m.status();
  }
}

TEST(TensorOpsTest, ConcatShapeClashIsUserError) {
  OnnxBuilder b;
  b.Input("a", {2, 3});
  b.Input("b", {2, 4});
  auto& n = b.Node("Concat", {"a", "b"}, {"y"});
  OnnxBuilder::IntAttr(n, "axis", 0);
  b.Output("y", {4, 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("op concat: input 1 dimension 1 is 4, expected 3"),
            std::string::npos)
      << m.status();
}

}  // namespace
}  // namespace kiln
