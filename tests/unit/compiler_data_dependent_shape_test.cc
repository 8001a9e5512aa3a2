// Outputs whose size depends on the data (NonZero, Compress): a count kernel's result is
// read by host code and bound to a fresh symbolic variable, which sizes the output and
// everything computed from it. Compiled shapes and values are compared with the reference
// interpreter at inputs the conformance suite does not use: nothing selected (empty
// outputs), everything selected, several input shapes through one artifact, and later ops
// that consume the data-dependent output.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/import_and_run.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using namespace testing;  // NOLINT: test helpers
using testing::ArrayOf;

// The model compiled once and imported once.
struct Compiled : testing::CompiledModel {
  explicit Compiled(const OnnxBuilder& b) : CompiledModel(b.Serialize()) {}
};

ir::NDArray F32Of(std::vector<int64_t> shape, std::vector<double> values) {
  return ArrayOf(arith::DataType::Float(32), std::move(shape), values);
}

ir::NDArray BoolOf(std::vector<double> values) {
  int64_t n = values.size();
  return ArrayOf(arith::DataType::Bool(), {n}, values);
}

ir::NDArray Filled(std::vector<int64_t> shape, double v) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return F32Of(std::move(shape), std::vector<double>(n, v));
}

OnnxBuilder NonZeroModel() {
  OnnxBuilder b;
  b.Input("x", {"n", "m"});
  b.Node("NonZero", {"x"}, {"y"});
  b.Output("y", {2, "count"}, onnx::TensorProto::INT64);
  return b;
}

TEST(DataDependentShapeTest, NonZeroMatchesTheInterpreterAtSeveralShapes) {
  Compiled c(NonZeroModel());
  ASSERT_TRUE(c.model);
  EXPECT_EQ(c.ExpectSame({Filled({3, 4}, 0)}), (std::vector<int64_t>{2, 0}));  // nothing
  EXPECT_EQ(c.ExpectSame({Filled({3, 4}, -2.5)}), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(c.ExpectSame({F32Of({2, 3}, {0, 1, -0.0, 0, 0, 7})}), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c.ExpectSame({Filled({0, 5}, 1)}), (std::vector<int64_t>{2, 0}));  // empty input
  ir::NDArray big = Iota({17, 9});  // only element 0 is zero
  EXPECT_EQ(c.ExpectSame({big}), (std::vector<int64_t>{2, 152}));
}

OnnxBuilder CompressModel(int64_t axis) {
  OnnxBuilder b;
  b.Input("x", {"n", "m"});
  b.Input("keep", {"k"}, onnx::TensorProto::BOOL);
  OnnxBuilder::IntAttr(b.Node("Compress", {"x", "keep"}, {"y"}), "axis", axis);
  b.Output("y", {"a", "b"});
  return b;
}

TEST(DataDependentShapeTest, CompressMatchesTheInterpreterAtSeveralShapes) {
  Compiled c(CompressModel(1));
  ASSERT_TRUE(c.model);
  ir::NDArray x = Iota({3, 5});
  EXPECT_EQ(c.ExpectSame({x, BoolOf({0, 0, 0, 0, 0})}), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(c.ExpectSame({x, BoolOf({1, 1, 1, 1, 1})}), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(c.ExpectSame({x, BoolOf({0, 1, 0, 1, 1})}), (std::vector<int64_t>{3, 3}));
  // A condition shorter than the axis drops the slices past it.
  EXPECT_EQ(c.ExpectSame({x, BoolOf({1, 0, 1})}), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(c.ExpectSame({Iota({6, 2}), BoolOf({0, 1})}), (std::vector<int64_t>{6, 1}));
}

// A condition longer than the axis is an error in both; the artifact checks it before it
// fills anything.
TEST(DataDependentShapeTest, CompressRejectsAConditionLongerThanTheAxis) {
  Compiled c(CompressModel(1));
  ASSERT_TRUE(c.model);
  std::vector<ir::NDArray> inputs = {Iota({3, 2}), BoolOf({1, 0, 1})};
  auto shapes = testing::CompiledOutputShapes(*c.model, inputs);
  ASSERT_FALSE(shapes.ok());
  EXPECT_NE(shapes.status().message().find("shape constraints: a size computed from them is 2, "
                                           "expected 3"),
            std::string::npos)
      << shapes.status();
  EXPECT_FALSE(interp::Run(c.module, inputs).ok());
}

TEST(DataDependentShapeTest, CompressWithoutAxisFlattens) {
  OnnxBuilder b;
  b.Input("x", {"n", 3});
  b.Input("keep", {"k"}, onnx::TensorProto::BOOL);
  b.Node("Compress", {"x", "keep"}, {"y"});
  b.Output("y", {"a"});
  Compiled c(b);
  ASSERT_TRUE(c.model);
  EXPECT_EQ(c.ExpectSame({Iota({2, 3}), BoolOf({1, 0, 0, 1, 1, 0})}), (std::vector<int64_t>{3}));
  EXPECT_EQ(c.ExpectSame({Iota({4, 3}), BoolOf({0, 0})}), (std::vector<int64_t>{0}));
}

// The data-dependent result is an intermediate here: it lives in a workspace sized by the
// count, and a gather and an add read it with their own symbolic extents.
TEST(DataDependentShapeTest, LaterOpsConsumeTheDataDependentOutput) {
  OnnxBuilder b;
  b.Input("x", {"n"});
  b.Node("NonZero", {"x"}, {"idx"});
  OnnxBuilder::IntAttr(b.Node("Gather", {"x", "idx"}, {"picked"}), "axis", 0);
  b.Node("Add", {"picked", "picked"}, {"y"});
  b.Output("y", {1, "count"});
  Compiled c(b);
  ASSERT_TRUE(c.model);
  EXPECT_EQ(c.ExpectSame({F32Of({6}, {0, 3, 0, -1, 2, 0})}), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.ExpectSame({Filled({4}, 0)}), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(c.ExpectSame({Filled({9}, 1.5)}), (std::vector<int64_t>{1, 9}));
}

// Two counts in one model: each binds its own variable, and the second result depends on
// the first through a compress of the nonzero indices.
TEST(DataDependentShapeTest, ChainedCountsBindOneVariableEach) {
  OnnxBuilder b;
  b.Input("x", {"n"});
  b.Input("keep", {"k"}, onnx::TensorProto::BOOL);
  b.Node("NonZero", {"x"}, {"idx"});
  OnnxBuilder::IntAttr(b.Node("Compress", {"idx", "keep"}, {"y"}), "axis", 1);
  b.Output("y", {1, "count"}, onnx::TensorProto::INT64);
  Compiled c(b);
  ASSERT_TRUE(c.model);
  EXPECT_EQ(c.ExpectSame({F32Of({5}, {1, 0, 2, 3, 0}), BoolOf({1, 0, 1})}),
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.ExpectSame({F32Of({3}, {1, 1, 1}), BoolOf({0, 0})}), (std::vector<int64_t>{1, 0}));
}

// A reshape target that a kernel computes binds its values the same way, and the reshape's
// constraint on them (the element count) is checked once they are bound.
TEST(DataDependentShapeTest, ReshapeToValuesComputedByAKernel) {
  OnnxBuilder b;
  b.Input("x", {2, 3, 4});
  b.Input("shape", {2}, onnx::TensorProto::INT64);
  b.Node("Neg", {"shape"}, {"negated"});
  b.Node("Reshape", {"x", "negated"}, {"y"});
  b.Output("y", {"a", "b"});
  Compiled c(b);
  ASSERT_TRUE(c.model);
  EXPECT_EQ(c.ExpectSame({Iota({2, 3, 4}), I64({2}, {-4, 1})}), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(c.ExpectSame({Iota({2, 3, 4}), I64({2}, {-12, -2})}), (std::vector<int64_t>{12, 2}));
  std::vector<ir::NDArray> bad = {Iota({2, 3, 4}), I64({2}, {-5, -5})};
  EXPECT_FALSE(interp::Run(c.module, bad).ok());
  auto shapes = testing::CompiledOutputShapes(*c.model, bad);
  ASSERT_FALSE(shapes.ok());
  EXPECT_NE(shapes.status().message().find("do not meet the model's shape constraints"),
            std::string::npos)
      << shapes.status();
}

}  // namespace
}  // namespace kiln
