// Convolution and pooling: symbolic batch and spatial dims flow through the window
// arithmetic, values match hand-computed results, bad models name the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/compiler_nn_test_util.h"

namespace kiln::nn_test {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TEST(NNConvTest, Conv2dKeepsSymbolicDimsAndCountsPaddedTaps) {
  OnnxBuilder b;
  b.Input("x", {"n", 3, "h", "w"});
  b.FloatInitializer("W", {4, 3, 3, 3}, std::vector<float>(4 * 3 * 3 * 3, 1.0f));
  auto& conv = b.Node("Conv", {"x", "W"}, {"y"});
  OnnxBuilder::IntsAttr(conv, "strides", {2, 2});
  OnnxBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  b.Output("y", {"n", 4, "?", "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([n, 4, floordiv(h + 1, 2), floordiv(w + 1, 2)], f32)");
  // All ones: each output counts the in-range taps of its 3x3 window, times 3 channels.
  auto out = interp::Run(*m, {F32({1, 3, 5, 6}, std::vector<float>(90, 1.0f))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].shape, ElementsAre(1, 4, 3, 3));
  std::vector<double> first_channel = Values((*out)[0]);
  first_channel.resize(9);
  EXPECT_THAT(first_channel, ElementsAre(12, 18, 18, 18, 27, 27, 12, 18, 18));
}

TEST(NNConvTest, SameUpperPaddingGivesCeilOfInputOverStride) {
  OnnxBuilder b;
  b.Input("x", {1, 1, "l"});
  b.FloatInitializer("W", {1, 1, 2}, {1, 10});
  auto& conv = b.Node("Conv", {"x", "W"}, {"y"});
  OnnxBuilder::IntsAttr(conv, "strides", {2});
  OnnxBuilder::StringAttr(conv, "auto_pad", "SAME_UPPER");
  b.Output("y", {1, 1, "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([1, 1, floordiv(l + 1, 2)], f32)");
  // l = 5: total padding 1, all at the end: windows [1 2] [3 4] [5 pad].
  auto out = interp::Run(*m, {F32({1, 1, 5}, {1, 2, 3, 4, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(21, 43, 5));
}

TEST(NNConvTest, GroupedConv1dWithBias) {
  OnnxBuilder b;
  b.Input("x", {1, 2, 3});
  b.FloatInitializer("W", {2, 1, 2}, {1, 1, 1, -1});
  b.FloatInitializer("B", {2}, {100, 200});
  auto& conv = b.Node("Conv", {"x", "W", "B"}, {"y"});
  OnnxBuilder::IntAttr(conv, "group", 2);
  b.Output("y", {1, 2, 2});
  // Channel 0 sums neighbours of [1 2 3]; channel 1 differences neighbours of [10 20 40].
  auto out = ImportAndRun(b, {F32({1, 2, 3}, {1, 2, 3, 10, 20, 40})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(103, 105, 190, 180));
}

TEST(NNConvTest, ConvTransposeScattersThroughTheKernel) {
  OnnxBuilder b;
  b.Input("x", {1, 1, "l"});
  b.FloatInitializer("W", {1, 1, 2}, {1, 10});
  auto& conv = b.Node("ConvTranspose", {"x", "W"}, {"y"});
  OnnxBuilder::IntsAttr(conv, "strides", {2});
  OnnxBuilder::IntsAttr(conv, "output_padding", {1});
  b.Output("y", {1, 1, "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([1, 1, l * 2 + 1], f32)");
  auto out = interp::Run(*m, {F32({1, 1, 3}, {1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(1, 10, 2, 20, 3, 30, 0));
}

TEST(NNConvTest, ConvTransposeOutputShapeDerivesPads) {
  OnnxBuilder b;
  b.Input("x", {1, 1, 3});
  b.FloatInitializer("W", {1, 1, 3}, {1, 1, 1});
  auto& conv = b.Node("ConvTranspose", {"x", "W"}, {"y"});
  OnnxBuilder::IntsAttr(conv, "output_shape", {4});
  b.Output("y", {1, 1, 4});
  // The full result [1 3 6 5 3] loses one element of padding, at the start.
  auto out = ImportAndRun(b, {F32({1, 1, 3}, {1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(3, 6, 5, 3));
}

TEST(NNConvTest, ChannelMismatchNamesTheDims) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 4, 4});
  b.FloatInitializer("W", {2, 2, 1, 1}, {1, 1, 1, 1});
  b.Node("Conv", {"x", "W"}, {"y"}, "bad_conv");
  b.Output("y", {1, 2, 4, 4});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            "node 0 'bad_conv' (op Conv): op conv: input channel count is 3, expected 2");
}

TEST(NNConvTest, KernelLargerThanInputIsAUserError) {
  OnnxBuilder b;
  b.Input("x", {1, 1, 2});
  b.FloatInitializer("W", {1, 1, 4}, {1, 1, 1, 1});
  b.Node("Conv", {"x", "W"}, {"y"}, "big_kernel");
  b.Output("y", {1, 1, 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "node 0 'big_kernel' (op Conv): op conv: the window does not fit spatial dim 0 "
            "(output extent -1)");
}

TEST(NNConvTest, ConvIntegerSubtractsZeroPoints) {
  OnnxBuilder b(10);
  b.Input("x", {1, 1, 3}, onnx::TensorProto::UINT8);
  Initializer(b, "W", onnx::TensorProto::UINT8,
              ArrayOf(arith::DataType::UInt(8), {1, 1, 2}, {3, 1}));
  Initializer(b, "x_zp", onnx::TensorProto::UINT8, ArrayOf(arith::DataType::UInt(8), {}, {10}));
  Initializer(b, "w_zp", onnx::TensorProto::UINT8, ArrayOf(arith::DataType::UInt(8), {}, {2}));
  b.Node("ConvInteger", {"x", "W", "x_zp", "w_zp"}, {"y"});
  b.Output("y", {1, 1, 2}, onnx::TensorProto::INT32);
  // (x - 10) = [0 2 5] convolved with (w - 2) = [1 -1].
  auto out = ImportAndRun(b, {ArrayOf(arith::DataType::UInt(8), {1, 1, 3}, {10, 12, 15})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, arith::DataType::Int(32));
  EXPECT_THAT(Values((*out)[0]), ElementsAre(-2, -3));
}

TEST(NNPoolTest, MaxPoolValuesAndIndicesInBothStorageOrders) {
  for (int64_t order : {0, 1}) {
    OnnxBuilder b(12);
    b.Input("x", {1, 1, 4, 4});
    auto& pool = b.Node("MaxPool", {"x"}, {"y", "i"});
    OnnxBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
    OnnxBuilder::IntsAttr(pool, "strides", {2, 2});
    OnnxBuilder::IntAttr(pool, "storage_order", order);
    b.Output("y", {1, 1, 2, 2});
    b.Output("i", {1, 1, 2, 2}, onnx::TensorProto::INT64);
    auto out = ImportAndRun(b, {Iota({1, 1, 4, 4})});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(Values((*out)[0]), ElementsAre(5, 7, 13, 15));
    // Column-major numbering of (row, col) is col * 4 + row.
    if (order == 0) EXPECT_THAT(Values((*out)[1]), ElementsAre(5, 7, 13, 15));
    if (order == 1) EXPECT_THAT(Values((*out)[1]), ElementsAre(5, 13, 7, 15));
  }
}

TEST(NNPoolTest, AveragePoolCountsPaddingOnlyWhenAsked) {
  for (int64_t include : {0, 1}) {
    OnnxBuilder b;
    b.Input("x", {1, 1, 3});
    auto& pool = b.Node("AveragePool", {"x"}, {"y"});
    OnnxBuilder::IntsAttr(pool, "kernel_shape", {2});
    OnnxBuilder::IntsAttr(pool, "pads", {1, 1});
    OnnxBuilder::IntAttr(pool, "count_include_pad", include);
    b.Output("y", {1, 1, 4});
    auto out = ImportAndRun(b, {F32({1, 1, 3}, {1, 2, 3})});
    ASSERT_TRUE(out.ok()) << out.status();
    if (include == 0) EXPECT_THAT(Values((*out)[0]), ElementsAre(1, 1.5, 2.5, 3));
    if (include == 1) EXPECT_THAT(Values((*out)[0]), ElementsAre(0.5, 1.5, 2.5, 1.5));
  }
}

TEST(NNPoolTest, CeilModeOnSymbolicLengthIsCheckedAtRunTime) {
  OnnxBuilder b;
  b.Input("x", {1, 1, "l"});
  auto& pool = b.Node("MaxPool", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(pool, "kernel_shape", {2});
  OnnxBuilder::IntsAttr(pool, "strides", {2});
  OnnxBuilder::IntAttr(pool, "ceil_mode", 1);
  b.Output("y", {1, 1, "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  // No window can start in the (absent) end padding, so no run-time select is needed.
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([1, 1, floordiv(l + 1, 2)], f32)");
  // l = 5: windows [0 1] [2 3] [4]; l = 4: the third window would start past the end.
  for (int64_t l : {5, 4}) {
    auto out = interp::Run(*m, {Iota({1, 1, l})});
    ASSERT_TRUE(out.ok()) << out.status();
    if (l == 5) EXPECT_THAT(Values((*out)[0]), ElementsAre(1, 3, 4));
    if (l == 4) EXPECT_THAT(Values((*out)[0]), ElementsAre(1, 3));
  }
}

TEST(NNPoolTest, CeilModeWithEndPaddingDropsWindowsStartingInIt) {
  OnnxBuilder b;
  b.Input("x", {1, 1, "l"});
  auto& pool = b.Node("AveragePool", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(pool, "kernel_shape", {2});
  OnnxBuilder::IntsAttr(pool, "strides", {2});
  OnnxBuilder::IntsAttr(pool, "pads", {0, 2});
  OnnxBuilder::IntAttr(pool, "ceil_mode", 1);
  b.Output("y", {1, 1, "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  // Whether the last window starts in the padding depends on l: decided at run time.
  EXPECT_EQ(InfoOf(*m, "y"),
            "Tensor([1, 1, floordiv(l + 1, 2) - select(floordiv(l + 1, 2) * 2 >= l, 1, 0) + 1], "
            "f32)");
  for (int64_t l : {4, 5}) {
    auto out = interp::Run(*m, {Iota({1, 1, l})});
    ASSERT_TRUE(out.ok()) << out.status();
    if (l == 4) EXPECT_THAT(Values((*out)[0]), ElementsAre(0.5, 2.5));
    if (l == 5) EXPECT_THAT(Values((*out)[0]), ElementsAre(0.5, 2.5, 4));
  }
}

TEST(NNPoolTest, LpPoolTakesTheNormOfEachWindow) {
  OnnxBuilder b;
  b.Input("x", {1, 1, 4});
  auto& pool = b.Node("LpPool", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(pool, "kernel_shape", {2});
  OnnxBuilder::IntsAttr(pool, "strides", {2});
  b.Output("y", {1, 1, 2});
  auto out = ImportAndRun(b, {F32({1, 1, 4}, {3, -4, 6, 8})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(5, 10));
}

TEST(NNPoolTest, GlobalPoolsKeepBatchAndChannels) {
  OnnxBuilder b;
  b.Input("x", {"n", "c", "h", "w"});
  b.Node("GlobalAveragePool", {"x"}, {"avg"});
  b.Node("GlobalMaxPool", {"x"}, {"max"});
  b.Output("avg", {"n", "c", 1, 1});
  b.Output("max", {"n", "c", 1, 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "avg"), "Tensor([n, c, 1, 1], f32)");
  auto out = interp::Run(*m, {Iota({1, 2, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(1.5, 5.5));
  EXPECT_THAT(Values((*out)[1]), ElementsAre(3, 7));
}

TEST(NNPoolTest, MaxUnpoolPlacesValuesAtTheirIndices) {
  OnnxBuilder b;
  b.Input("x", {1, 1, 2, 2});
  b.Input("i", {1, 1, 2, 2}, onnx::TensorProto::INT64);
  b.Int64Initializer("shape", {4}, {1, 1, 5, 5});
  auto& unpool = b.Node("MaxUnpool", {"x", "i", "shape"}, {"y"});
  OnnxBuilder::IntsAttr(unpool, "kernel_shape", {2, 2});
  OnnxBuilder::IntsAttr(unpool, "strides", {2, 2});
  b.Output("y", {1, 1, 5, 5});
  // Indices count in the 4x4 extent the pooling inverts; the result sits in a 5x5 corner.
  ir::NDArray indices = ArrayOf(arith::DataType::Int(64), {1, 1, 2, 2}, {5, 7, 13, 15});
  auto out = ImportAndRun(b, {F32({1, 1, 2, 2}, {1, 2, 3, 4}), indices});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> expected(25, 0);
  expected[6] = 1;
  expected[8] = 2;
  expected[16] = 3;
  expected[18] = 4;
  EXPECT_THAT(Values((*out)[0]), ElementsAreArray(expected));
}

TEST(NNPoolTest, PoolWithoutKernelShapeIsAUserError) {
  OnnxBuilder b;
  b.Input("x", {1, 1, 4});
  b.Node("MaxPool", {"x"}, {"y"}, "no_kernel");
  b.Output("y", {1, 1, 4});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("kernel_shape must have 1 entries"));
}

}  // namespace
}  // namespace kiln::nn_test
