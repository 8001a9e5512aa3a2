// Tensor family: symbolic shapes flow through the shape arithmetic that ONNX models compute
// at run time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Expand, Range, ...), and
// shapes that only data decides keep their rank.
#include <gtest/gtest.h>

#include "tests/support/import_and_run.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using namespace testing;  // NOLINT: test helpers

// Shape(x) -> Gather(0), Gather(1) -> Unsqueeze -> Concat with [4, 16] -> Reshape(x, that).
OnnxBuilder SplitHeadsModel() {
  OnnxBuilder b;
  b.Input("x", {"batch", "seq", 64});
  b.Int64Initializer("i0", {}, {0});
  b.Int64Initializer("i1", {}, {1});
  b.Int64Initializer("axes", {1}, {0});
  b.Int64Initializer("heads", {2}, {4, 16});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Gather", {"s", "i0"}, {"b"});
  b.Node("Gather", {"s", "i1"}, {"t"});
  b.Node("Unsqueeze", {"b", "axes"}, {"b1"});
  b.Node("Unsqueeze", {"t", "axes"}, {"t1"});
  auto& concat = b.Node("Concat", {"b1", "t1", "heads"}, {"target"});
  OnnxBuilder::IntAttr(concat, "axis", 0);
  b.Node("Reshape", {"x", "target"}, {"y"});
  b.Output("y", {"batch", "seq", 4, 16});
  return b;
}

TEST(TensorShapeTest, ShapeArithmeticKeepsReshapeSymbolic) {
  auto m = driver::ImportModel(SplitHeadsModel().Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([batch, seq, 4, 16], f32)") << ir::ToString(*m);
  // The computed target is not needed at run time: reshape takes a ShapeExpr.
  EXPECT_NE(ir::ToString(*m).find("reshape(%x, shape([batch, seq, 4, 16]))"), std::string::npos)
      << ir::ToString(*m);
}

TEST(TensorShapeTest, ShapeArithmeticRunsWithConcreteDims) {
  auto out = ImportAndRun(SplitHeadsModel(), {Iota({2, 3, 64})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{2, 3, 4, 16}));
  EXPECT_EQ(Values((*out)[0]), Values(Iota({2, 3, 64})));
}

TEST(TensorShapeTest, ExpandToAnotherInputsShape) {
  OnnxBuilder b;
  b.Input("x", {"n", 1});
  b.Input("y", {"n", 5});
  b.Node("Shape", {"y"}, {"s"});
  b.Node("Expand", {"x", "s"}, {"z"});
  b.Output("z", {"n", 5});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "z"), "Tensor([n, 5], f32)");
  auto out = ImportAndRun(b, {F32({2, 1}, {1, 2}), Iota({2, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{1, 1, 1, 1, 1, 2, 2, 2, 2, 2}));
}

TEST(TensorShapeTest, RangeAndConstantOfShapeFromSymbolicDims) {
  OnnxBuilder b;
  b.Input("x", {"n", "m"});
  b.Int64Initializer("zero", {}, {0});
  b.Int64Initializer("one", {}, {1});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Gather", {"s", "one"}, {"cols"});
  b.Node("Range", {"zero", "cols", "one"}, {"r"});
  b.Node("ConstantOfShape", {"s"}, {"c"});
  b.Output("r", {"m"}, onnx::TensorProto::INT64);
  b.Output("c", {"n", "m"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "r"), "Tensor([m], i64)");
  EXPECT_EQ(InfoOf(*m, "c"), "Tensor([n, m], f32)");
  auto out = ImportAndRun(b, {Iota({2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ((*out)[1].shape, (std::vector<int64_t>{2, 3}));
}

TEST(TensorShapeTest, SizeFlowsIntoReshape) {
  OnnxBuilder b;
  b.Input("x", {"n", "m"});
  b.Int64Initializer("axes", {1}, {0});
  b.Node("Size", {"x"}, {"size"});
  b.Node("Unsqueeze", {"size", "axes"}, {"flat"});
  b.Node("Reshape", {"x", "flat"}, {"y"});
  b.Output("y", {"k"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([m * n], f32)");
}

// Slicing with bounds taken from a shape clamps symbolically; the run agrees with it.
TEST(TensorShapeTest, SliceWithSymbolicBounds) {
  OnnxBuilder b;
  b.Input("x", {"n", 8});
  b.Input("y", {"k"});
  b.Int64Initializer("zero", {1}, {0});
  b.Int64Initializer("one", {1}, {1});
  b.Int64Initializer("end", {1}, {-1});
  b.Node("Shape", {"y"}, {"ky"});
  b.Node("Slice", {"x", "zero", "ky", "zero"}, {"head"});
  b.Node("Slice", {"x", "one", "end", "one"}, {"mid"});
  b.Output("head", {"h", 8});
  b.Output("mid", {"n", 6});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "head"), "Tensor([min(k, n), 8], f32)");
  EXPECT_EQ(InfoOf(*m, "mid"), "Tensor([n, 6], f32)");
  auto out = ImportAndRun(b, {Iota({3, 8}), Iota({5})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ((*out)[1].shape, (std::vector<int64_t>{3, 6}));
}

TEST(TensorShapeTest, SplitSymbolicDimIntoEqualParts) {
  OnnxBuilder b;
  b.Input("x", {"n", 6});
  auto& split = b.Node("Split", {"x"}, {"a", "b"});
  OnnxBuilder::IntAttr(split, "axis", 1);
  b.Output("a", {"n", 3});
  b.Output("b", {"n", 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ir::ToString(m->functions.at("main").result->struct_info),
            "Tuple(Tensor([n, 3], f32), Tensor([n, 3], f32))");
  auto out = ImportAndRun(b, {Iota({2, 6})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{0, 1, 2, 6, 7, 8}));
  EXPECT_EQ(Values((*out)[1]), (std::vector<double>{3, 4, 5, 9, 10, 11}));
}

// A target shape given as data is only known at run time: its values become symbolic
// variables (tensor_to_shape), and the dims resolve 0 (copy the dim) and -1 (what is left)
// over them.
TEST(TensorShapeTest, RunTimeReshapeTargetGivesSymbolicDims) {
  OnnxBuilder b;
  b.Input("x", {"n", 4, 6});
  b.Input("shape", {3}, onnx::TensorProto::INT64);
  b.Node("Reshape", {"x", "shape"}, {"y"});
  b.Output("y", {"a", "b", "c"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y").rfind("Tensor([select(", 0), 0u) << InfoOf(*m, "y");
  auto out = ImportAndRun(b, {Iota({2, 4, 6}), I64({3}, {0, -1, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{2, 8, 3}));
}

// The count is bound to a fresh symbolic variable (match_cast of tensor_to_shape), so the
// output has a symbolic shape, not only a rank.
TEST(TensorShapeTest, NonZeroBindsItsCountToASymbolicVar) {
  OnnxBuilder b;
  b.Input("x", {2, 2});
  b.Node("NonZero", {"x"}, {"y"});
  b.Output("y", {2, "k"}, onnx::TensorProto::INT64);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([2, y_n_0], i64)");
  auto out = ImportAndRun(b, {F32({2, 2}, {1, 0, -0.0f, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{0, 1, 0, 1}));
}

// 0 copies a (symbolic) input dim and -1 takes what is left: batch * seq * 64 / (batch *
// seq * 4) must come out as 16.
TEST(TensorShapeTest, ReshapeZeroAndMinusOneWithSymbolicDims) {
  OnnxBuilder b;
  b.Input("x", {"batch", "seq", 64});
  b.Int64Initializer("target", {4}, {0, 0, 4, -1});
  b.Node("Reshape", {"x", "target"}, {"y"});
  b.Int64Initializer("flat", {2}, {-1, 64});
  b.Node("Reshape", {"x", "flat"}, {"z"});
  b.Output("y", {"batch", "seq", 4, 16});
  b.Output("z", {"k", 64});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([batch, seq, 4, 16], f32)");
  EXPECT_EQ(InfoOf(*m, "z"), "Tensor([batch * seq, 64], f32)");
}

}  // namespace
}  // namespace kiln
