// Normalizations and the softmax family: statistics outputs keep symbolic shapes, values
// match hand-computed results, the pre-opset-13 softmax semantics coerce to 2-D.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/compiler_nn_test_util.h"

namespace kiln::nn_test {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::Pointwise;

MATCHER_P(Near, tolerance, "") {
  return std::fabs(std::get<0>(arg) - std::get<1>(arg)) <= tolerance;
}

TEST(NNNormTest, BatchNormUsesGivenStatistics) {
  OnnxBuilder b;
  b.Input("x", {"n", 2, "l"});
  b.FloatInitializer("scale", {2}, {1, 2});
  b.FloatInitializer("bias", {2}, {0, 1});
  b.FloatInitializer("mean", {2}, {1, 0});
  b.FloatInitializer("var", {2}, {4, 1});
  auto& bn = b.Node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"});
  OnnxBuilder::FloatAttr(bn, "epsilon", 0.0f);
  b.Output("y", {"n", 2, "l"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([n, 2, l], f32)");
  auto out = interp::Run(*m, {F32({1, 2, 2}, {1, 5, 1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Channel 0: (x - 1) / 2; channel 1: 2 * x + 1.
  EXPECT_THAT(Values((*out)[0]), ElementsAre(0, 2, 3, 5));
}

TEST(NNNormTest, BatchNormTrainingUpdatesRunningStatistics) {
  OnnxBuilder b(15);
  b.Input("x", {2, 1, 1});
  b.FloatInitializer("scale", {1}, {1});
  b.FloatInitializer("bias", {1}, {0});
  b.FloatInitializer("mean", {1}, {10});
  b.FloatInitializer("var", {1}, {10});
  auto& bn = b.Node("BatchNormalization", {"x", "scale", "bias", "mean", "var"},
                    {"y", "running_mean", "running_var"});
  OnnxBuilder::IntAttr(bn, "training_mode", 1);
  OnnxBuilder::FloatAttr(bn, "epsilon", 0.0f);
  OnnxBuilder::FloatAttr(bn, "momentum", 0.5f);
  b.Output("y", {2, 1, 1});
  b.Output("running_mean", {1});
  b.Output("running_var", {1});
  // Batch [1, 3]: mean 2, population variance 1.
  auto out = ImportAndRun(b, {F32({2, 1, 1}, {1, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(-1, 1));
  EXPECT_THAT(Values((*out)[1]), ElementsAre(6));
  EXPECT_THAT(Values((*out)[2]), ElementsAre(5.5));
}

TEST(NNNormTest, LayerNormStatisticsKeepLeadingSymbolicDims) {
  OnnxBuilder b(17);
  b.Input("x", {"n", 4});
  b.FloatInitializer("scale", {4}, {1, 1, 2, 2});
  b.Node("LayerNormalization", {"x", "scale"}, {"y", "mean", "inv_std"});
  b.Output("y", {"n", 4});
  b.Output("mean", {"n", 1});
  b.Output("inv_std", {"n", 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "mean"), "Tensor([n, 1], f32)");
  EXPECT_EQ(InfoOf(*m, "inv_std"), "Tensor([n, 1], f32)");
  // Row [1 2 3 4]: mean 2.5, variance 1.25.
  auto out = interp::Run(*m, {F32({1, 4}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  double inv_std = 1 / std::sqrt(1.25 + 1e-5);
  EXPECT_THAT(Values((*out)[0]), Pointwise(Near(1e-6), {-1.5 * inv_std, -0.5 * inv_std,
                                                        1.0 * inv_std, 3.0 * inv_std}));
  EXPECT_THAT(Values((*out)[1]), ElementsAre(2.5));
  EXPECT_THAT(Values((*out)[2]), ElementsAre(DoubleNear(inv_std, 1e-6)));
}

TEST(NNNormTest, InstanceNormPerBatchAndChannel) {
  OnnxBuilder b;
  b.Input("x", {1, 2, 2});
  b.FloatInitializer("scale", {2}, {1, 3});
  b.FloatInitializer("bias", {2}, {0, 1});
  auto& norm = b.Node("InstanceNormalization", {"x", "scale", "bias"}, {"y"});
  OnnxBuilder::FloatAttr(norm, "epsilon", 0.0f);
  b.Output("y", {1, 2, 2});
  auto out = ImportAndRun(b, {F32({1, 2, 2}, {0, 2, 5, 9})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(-1, 1, -2, 4));
}

TEST(NNNormTest, LrnSumsSquaresOverNeighbouringChannels) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 1});
  auto& lrn = b.Node("LRN", {"x"}, {"y"});
  OnnxBuilder::IntAttr(lrn, "size", 3);
  OnnxBuilder::FloatAttr(lrn, "alpha", 3.0f);
  OnnxBuilder::FloatAttr(lrn, "beta", 1.0f);
  OnnxBuilder::FloatAttr(lrn, "bias", 1.0f);
  b.Output("y", {1, 3, 1});
  // alpha / size = 1: y = x / (1 + squares of the channel and its neighbours).
  auto out = ImportAndRun(b, {F32({1, 3, 1}, {1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), Pointwise(Near(1e-6), {1.0 / 6, 2.0 / 15, 3.0 / 14}));
}

TEST(NNNormTest, MeanVarianceNormalizationOverGivenAxes) {
  OnnxBuilder b;
  b.Input("x", {2, 2});
  OnnxBuilder::IntsAttr(b.Node("MeanVarianceNormalization", {"x"}, {"y"}), "axes", {1});
  b.Output("y", {2, 2});
  auto out = ImportAndRun(b, {F32({2, 2}, {1, 3, 10, 30})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), Pointwise(Near(1e-6), {-1, 1, -1, 1}));
}

TEST(NNSoftmaxTest, LogSoftmaxBeforeOpset13FlattensTheTrailingDims) {
  OnnxBuilder b(11);
  b.Input("x", {"n", 2, 2});
  b.Node("LogSoftmax", {"x"}, {"y"});  // axis 1: softmax over each row's 4 values
  b.Output("y", {"n", 2, 2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([n, 2, 2], f32)");
  auto out = interp::Run(*m, {F32({1, 2, 2}, {0, 0, 0, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), Pointwise(Near(1e-6), std::vector<double>(4, -std::log(4.0))));
}

TEST(NNSoftmaxTest, HardmaxMarksTheFirstMaximum) {
  OnnxBuilder b(13);
  b.Input("x", {2, 3});
  b.Node("Hardmax", {"x"}, {"y"});
  b.Output("y", {2, 3});
  auto out = ImportAndRun(b, {F32({2, 3}, {1, 3, 3, -1, -2, -3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(0, 1, 0, 1, 0, 0));
}

TEST(NNSoftmaxTest, AxisOutOfRangeIsAUserError) {
  OnnxBuilder b(13);
  b.Input("x", {2, 3});
  OnnxBuilder::IntAttr(b.Node("Softmax", {"x"}, {"y"}, "bad_softmax"), "axis", 2);
  b.Output("y", {2, 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "node 0 'bad_softmax' (op Softmax): axis 2 out of range for rank 2");
}

}  // namespace
}  // namespace kiln::nn_test
