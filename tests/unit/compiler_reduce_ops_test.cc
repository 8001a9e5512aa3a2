// The reduce family end to end: ONNX reductions and losses imported, their struct info
// (symbolic dims kept), and the reference kernels' values against values worked out here.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using arith::DataType;
using ir::NDArray;
using testing::ArrayOf;
using testing::OnnxBuilder;
using testing::Values;

std::string ResultInfo(const ir::IRModule& m) {
  return ir::ToString(m.functions.at("main").result->struct_info);
}

void ExpectNear(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-5) << i;
}

// x: [n, 2, 3] holding 0, 1, 2, ... in row-major order.
NDArray Iota(int64_t n) {
  std::vector<double> v(n * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return ArrayOf(DataType::Float(), {n, 2, 3}, v);
}

TEST(ReduceTest, SumOverConstantAxesKeepsSymbolicDims) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 2, 3});
  b.Int64Initializer("axes", {1}, {-1});
  auto& node = b.Node("ReduceSum", {"x", "axes"}, {"y"});
  OnnxBuilder::IntAttr(node, "keepdims", 0);
  b.Output("y", {"n", 2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([n, 2], f32)");
  auto out = interp::Run(*m, {Iota(2)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{2, 2}));
  ExpectNear(Values((*out)[0]), {0 + 1 + 2, 3 + 4 + 5, 6 + 7 + 8, 9 + 10 + 11});
}

TEST(ReduceTest, AttributeAxesBeforeOpset18KeepDims) {
  OnnxBuilder b(11);
  b.Input("x", {"n", 2, 3});
  auto& node = b.Node("ReduceMean", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(node, "axes", {0, 2});
  b.Output("y", {1, 2, 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([1, 2, 1], f32)");
  auto out = interp::Run(*m, {Iota(2)});
  ASSERT_TRUE(out.ok()) << out.status();
  // Row j of both batches: mean of {0,1,2,6,7,8} = 4 and {3,4,5,9,10,11} = 7.
  ExpectNear(Values((*out)[0]), {4, 7});
}

TEST(ReduceTest, NoAxesReducesEverything) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 2, 3});
  b.Node("ReduceMax", {"x"}, {"y"});
  b.Output("y", {1, 1, 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([1, 1, 1], f32)");
  auto out = interp::Run(*m, {Iota(3)});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values((*out)[0]), {17});
}

// The axes are bound to symbolic values (checked by the host): each dim is a select.
TEST(ReduceTest, RunTimeAxesGiveDimsComputedFromTheirValues) {
  OnnxBuilder b(18);
  b.Input("x", {"n", 2, 3});
  b.Input("axes", {1}, onnx::TensorProto::INT64);
  b.Node("ReduceL2", {"x", "axes"}, {"y"});
  b.Output("y", {"?", "?", "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m).rfind("Tensor([select(", 0), 0u) << ResultInfo(*m);
  auto out = interp::Run(*m, {Iota(1), ArrayOf(DataType::Int(64), {1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{1, 1, 3}));
  ExpectNear(Values((*out)[0]), {3, std::sqrt(1.0 + 16), std::sqrt(4.0 + 25)});
}

TEST(ReduceTest, EmptyRunTimeAxesWithNoopIsIdentity) {
  OnnxBuilder b(13);
  b.Input("x", {2, 3});
  b.Input("axes", {0}, onnx::TensorProto::INT64);
  auto& node = b.Node("ReduceSum", {"x", "axes"}, {"y"});
  OnnxBuilder::IntAttr(node, "noop_with_empty_axes", 1);
  b.Output("y", {2, 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  NDArray x = ArrayOf(DataType::Float(), {2, 3}, {1, -2, 3, -4, 5, -6});
  auto out = interp::Run(*m, {x, ArrayOf(DataType::Int(64), {0}, {})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, x.shape);
  ExpectNear(Values((*out)[0]), Values(x));
}

TEST(ReduceTest, Int64SumIsExactBeyondDoublePrecision) {
  OnnxBuilder b(13);
  b.Input("x", {2}, onnx::TensorProto::INT64);
  auto& node = b.Node("ReduceSum", {"x"}, {"y"});
  OnnxBuilder::IntAttr(node, "keepdims", 0);
  b.Output("y", {}, onnx::TensorProto::INT64);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  NDArray x = NDArray::Zeros(DataType::Int(64), {2});
  x.data<int64_t>()[0] = (int64_t{1} << 60) + 1;
  x.data<int64_t>()[1] = 2;
  auto out = interp::Run(*m, {x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data<int64_t>()[0], (int64_t{1} << 60) + 3);
}

TEST(ReduceTest, ReduceProdOfShapeStaysSymbolic) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 2, 3});
  b.Node("Shape", {"x"}, {"s"});
  auto& prod = b.Node("ReduceProd", {"s"}, {"count"});
  OnnxBuilder::IntAttr(prod, "keepdims", 1);
  b.Node("Reshape", {"x", "count"}, {"y"});
  b.Output("y", {"?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([n * 6], f32)");
}

TEST(ReduceTest, AxisOutOfRangeIsUserError) {
  OnnxBuilder b(11);
  b.Input("x", {"n", 2});
  auto& node = b.Node("ReduceMin", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(node, "axes", {2});
  b.Output("y", {"n", 2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("axis 2 out of range"), std::string::npos) << m.status();
}

TEST(ReduceTest, RepeatedAxisIsUserError) {
  OnnxBuilder b(11);
  b.Input("x", {"n", 2});
  auto& node = b.Node("ReduceSumSquare", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(node, "axes", {1, -1});
  b.Output("y", {"n", 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("appears twice"), std::string::npos) << m.status();
}

// input [N=2, C=3] of log-probabilities; target {2, 1}; class 1 ignored; weight {1, 2, 3}.
TEST(LossTest, NegativeLogLikelihoodMeanWithWeightAndIgnoreIndex) {
  OnnxBuilder b(13);
  b.Input("input", {"n", 3});
  b.Input("target", {"n"}, onnx::TensorProto::INT64);
  b.FloatInitializer("weight", {3}, {1, 2, 3});
  auto& node = b.Node("NegativeLogLikelihoodLoss", {"input", "target", "weight"}, {"loss"});
  OnnxBuilder::IntAttr(node, "ignore_index", 1);
  b.Output("loss", {});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([], f32)");
  NDArray input = ArrayOf(DataType::Float(), {2, 3}, {-1, -2, -3, -4, -5, -6});
  NDArray target = ArrayOf(DataType::Int(64), {2}, {2, 1});
  auto out = interp::Run(*m, {input, target});
  ASSERT_TRUE(out.ok()) << out.status();
  // Only sample 0 counts: -(-3) * 3 / 3.
  ExpectNear(Values((*out)[0]), {3});
}

TEST(LossTest, NegativeLogLikelihoodNoneKeepsSpatialDims) {
  OnnxBuilder b(13);
  b.Input("input", {"n", 2, "d"});
  b.Input("target", {"n", "d"}, onnx::TensorProto::INT64);
  auto& node = b.Node("NegativeLogLikelihoodLoss", {"input", "target"}, {"loss"});
  node.add_attribute()->CopyFrom(onnx::AttributeProto());
  node.mutable_attribute(0)->set_name("reduction");
  node.mutable_attribute(0)->set_type(onnx::AttributeProto::STRING);
  node.mutable_attribute(0)->set_s("none");
  b.Output("loss", {"n", "d"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([n, d], f32)");
  NDArray input = ArrayOf(DataType::Float(), {1, 2, 2}, {-1, -2, -3, -4});
  NDArray target = ArrayOf(DataType::Int(64), {1, 2}, {1, 0});
  auto out = interp::Run(*m, {input, target});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(Values((*out)[0]), {3, 2});
  // A target outside [0, C) is a run-time user error.
  auto bad = interp::Run(*m, {input, ArrayOf(DataType::Int(64), {1, 2}, {2, 0})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("target 2 out of range"), std::string::npos);
}

TEST(LossTest, SoftmaxCrossEntropyReturnsLogProb) {
  OnnxBuilder b(13);
  b.Input("scores", {"n", 2});
  b.Input("labels", {"n"}, onnx::TensorProto::INT64);
  b.Node("SoftmaxCrossEntropyLoss", {"scores", "labels"}, {"loss", "log_prob"});
  b.Output("loss", {});
  b.Output("log_prob", {"n", 2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tuple(Tensor([], f32), Tensor([n, 2], f32))");
  NDArray scores = ArrayOf(DataType::Float(), {2, 2}, {0, 0, 1, 0});
  auto out = interp::Run(*m, {scores, ArrayOf(DataType::Int(64), {2}, {0, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  double lse = std::log(1 + std::exp(1.0));  // log(e^1 + e^0)
  ExpectNear(Values((*out)[1]), {std::log(0.5), std::log(0.5), 1 - lse, -lse});
  ExpectNear(Values((*out)[0]), {(-std::log(0.5) + lse) / 2});
}

}  // namespace
}  // namespace kiln
