// Image family, sampling half: Resize (and Upsample), DepthToSpace/SpaceToDepth, GridSample
// and RoiAlign. Symbolic dims flow through, values match hand-computed results, and bad
// models give errors that name the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/import_and_run.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::F32;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using testing::OnnxBuilder;
using ::testing::Pointwise;
using testing::Values;

constexpr int kF32 = onnx::TensorProto::FLOAT;

// ---- Resize ----------------------------------------------------------------------------

TEST(ImageResizeTest, IntegralScalesKeepDimsSymbolic) {
  OnnxBuilder b;
  b.Input("x", {"n", 3, "h", "w"});
  b.FloatInitializer("scales", {4}, {1, 1, 2, 3});
  b.Node("Resize", {"x", "", "scales"}, {"y"});
  b.Output("y", {"n", 3, "?", "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n, 3, h * 2, w * 3], f32)"));
}

TEST(ImageResizeTest, FractionalScaleOfSymbolicDimKeepsRankOnly) {
  OnnxBuilder b;
  b.Input("x", {"n", 4});
  b.FloatInitializer("scales", {2}, {0.5, 1});
  b.Node("Resize", {"x", "", "scales"}, {"y"});
  b.Output("y", {"?", "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  // floor(n * 0.5) has no exact symbolic form here: the rank is what is known.
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor(ndim=2, f32)"));
}

TEST(ImageResizeTest, ConstantSizesGiveTheShape) {
  OnnxBuilder b;
  b.Input("x", {1, 1, 2, 2});
  b.Int64Initializer("sizes", {4}, {1, 1, 3, 5});
  b.Node("Resize", {"x", "", "", "sizes"}, {"y"});
  b.Output("y", {1, 1, 3, 5});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([1, 1, 3, 5], f32)"));
}

TEST(ImageResizeTest, LinearHalfPixelClampsAtTheEdges) {
  OnnxBuilder b;
  b.Input("x", {2});
  b.FloatInitializer("scales", {1}, {2});
  OnnxBuilder::StringAttr(b.Node("Resize", {"x", "", "scales"}, {"y"}), "mode", "linear");
  b.Output("y", {4});
  auto out = testing::ImportAndRun(b.Serialize(), {F32({2}, {0, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Sources (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25; outside points take the edge.
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(0, 1, 3, 4));
}

TEST(ImageResizeTest, CubicAsymmetricMatchesTheKeysKernel) {
  OnnxBuilder b;
  b.Input("x", {4});
  b.FloatInitializer("scales", {1}, {2});
  auto& n = b.Node("Resize", {"x", "", "scales"}, {"y"});
  OnnxBuilder::StringAttr(n, "mode", "cubic");
  OnnxBuilder::StringAttr(n, "coordinate_transformation_mode", "asymmetric");
  b.Output("y", {8});
  auto out = testing::ImportAndRun(b.Serialize(), {F32({4}, {0, 1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Half-way weights for a = -0.75: -0.09375, 0.59375, 0.59375, -0.09375, taps clamped to
  // the edges: e.g. at 0.5 the taps read 0, 0, 1, 2.
  EXPECT_THAT(Values<float>((*out)[0]),
              Pointwise(FloatNear(1e-6), {0.f, 0.40625f, 1.f, 1.5f, 2.f, 2.59375f, 3.f, 3.09375f}));
}

TEST(ImageResizeTest, CropAndResizeExtrapolatesOutsideTheImage) {
  OnnxBuilder b;
  b.Input("x", {4});
  b.FloatInitializer("roi", {2}, {0.5, 1.5});
  b.Int64Initializer("sizes", {1}, {3});
  auto& n = b.Node("Resize", {"x", "roi", "", "sizes"}, {"y"});
  OnnxBuilder::StringAttr(n, "mode", "linear");
  OnnxBuilder::StringAttr(n, "coordinate_transformation_mode", "tf_crop_and_resize");
  OnnxBuilder::FloatAttr(n, "extrapolation_value", 10);
  b.Output("y", {3});
  auto out = testing::ImportAndRun(b.Serialize(), {F32({4}, {0, 1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Sources 1.5 + 1.5 * i over the input's 0..3: the last one lies outside.
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1.5, 3, 10));
}

TEST(ImageResizeTest, NearestModesRoundAsAsked) {
  auto run = [](const std::string& nearest_mode) {
    OnnxBuilder b;
    b.Input("x", {4});
    b.Int64Initializer("sizes", {1}, {8});
    auto& n = b.Node("Resize", {"x", "", "", "sizes"}, {"y"});
    OnnxBuilder::StringAttr(n, "coordinate_transformation_mode", "asymmetric");
    OnnxBuilder::StringAttr(n, "nearest_mode", nearest_mode);
    b.Output("y", {8});
    auto out = testing::ImportAndRun(b.Serialize(), {F32({4}, {10, 11, 12, 13})});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? Values<float>((*out)[0]) : std::vector<float>{};
  };
  // Sources i / 2: half-way points go down or up depending on the mode; ceil past the end
  // clamps to the last element.
  EXPECT_THAT(run("round_prefer_floor"), ElementsAre(10, 10, 11, 11, 12, 12, 13, 13));
  EXPECT_THAT(run("round_prefer_ceil"), ElementsAre(10, 11, 11, 12, 12, 13, 13, 13));
  EXPECT_THAT(run("ceil"), ElementsAre(10, 11, 11, 12, 12, 13, 13, 13));
}

TEST(ImageResizeTest, Opset10DownsamplesWithCeil) {
  OnnxBuilder b(10);
  b.Input("x", {1, 4});
  b.FloatInitializer("scales", {2}, {1, 0.6f});
  b.Node("Resize", {"x", "scales"}, {"y"});
  b.Output("y", {1, 2});
  auto out = testing::ImportAndRun(b.Serialize(), {F32({1, 4}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  // floor(4 * 0.6) = 2 outputs at sources 0 and 1/0.6 = 1.67, which rounds up.
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1, 3));
}

TEST(ImageResizeTest, Opset9UpsampleRepeats) {
  OnnxBuilder b(9);
  b.Input("x", {"n", 2});
  b.FloatInitializer("scales", {2}, {1, 3});
  b.Node("Upsample", {"x", "scales"}, {"y"});
  b.Output("y", {"n", 6});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n, 6], f32)"));
  auto out = interp::Run(*m, {F32({2, 2}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4));
}

TEST(ImageResizeTest, MissingScalesAndSizesIsAnError) {
  OnnxBuilder b;
  b.Input("x", {2, 2});
  b.Node("Resize", {"x"}, {"y"});
  b.Output("y", {2, 2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("one of scales and sizes"));
}

// ---- DepthToSpace, SpaceToDepth ----------------------------------------------------------

// DepthToSpace by its definition: reshape to [N, b, b, C', H, W] (DCR) or [N, C', b, b, H, W]
// (CRD), transpose, reshape.
std::vector<float> DepthToSpaceByDefinition(const std::vector<float>& x, int64_t n, int64_t c,
                                            int64_t h, int64_t w, int64_t b, bool crd) {
  int64_t co = c / (b * b);
  std::vector<float> out(x.size());
  for (int64_t in = 0; in < n; ++in)
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t k = 0; k < co; ++k)
          for (int64_t y = 0; y < h; ++y)
            for (int64_t z = 0; z < w; ++z) {
              int64_t ch = crd ? (k * b + i) * b + j : (i * b + j) * co + k;
              int64_t src = ((in * c + ch) * h + y) * w + z;
              int64_t dst = ((in * co + k) * h * b + y * b + i) * w * b + z * b + j;
              out[dst] = x[src];
            }
  return out;
}

std::vector<float> Iota(size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(ImageBlockTest, DepthToSpaceModesMatchTheDefinition) {
  for (std::string mode : {"DCR", "CRD"}) {
    OnnxBuilder b;
    b.Input("x", {"n", 8, 2, 3});
    auto& node = b.Node("DepthToSpace", {"x"}, {"y"});
    OnnxBuilder::IntAttr(node, "blocksize", 2);
    OnnxBuilder::StringAttr(node, "mode", mode);
    b.Output("y", {"n", 2, 4, 6});
    auto m = driver::ImportModel(b.Serialize());
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n, 2, 4, 6], f32)"));
    std::vector<float> x = Iota(2 * 8 * 2 * 3);
    auto out = interp::Run(*m, {F32({2, 8, 2, 3}, x)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(Values<float>((*out)[0]),
                ElementsAreArray(DepthToSpaceByDefinition(x, 2, 8, 2, 3, 2, mode == "CRD")))
        << mode;
  }
}

TEST(ImageBlockTest, SpaceToDepthUndoesDepthToSpace) {
  OnnxBuilder b;
  b.Input("x", {"n", 2, 4, 6});
  OnnxBuilder::IntAttr(b.Node("SpaceToDepth", {"x"}, {"d"}), "blocksize", 2);
  OnnxBuilder::IntAttr(b.Node("DepthToSpace", {"d"}, {"y"}), "blocksize", 2);
  b.Output("y", {"n", 2, 4, 6});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n, 2, 4, 6], f32)"));
  std::vector<float> x = Iota(2 * 2 * 4 * 6);
  auto out = interp::Run(*m, {F32({2, 2, 4, 6}, x)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAreArray(x));
}

TEST(ImageBlockTest, SpaceToDepthOfSymbolicHeight) {
  OnnxBuilder b;
  b.Input("x", {1, 2, "h", 6});
  OnnxBuilder::IntAttr(b.Node("SpaceToDepth", {"x"}, {"y"}), "blocksize", 2);
  b.Output("y", {1, 8, "?", 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  // Nothing says h is even: the kernel checks that at run time.
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([1, 8, floordiv(h, 2), 3], f32)"));
  auto odd = interp::Run(*m, {F32({1, 2, 3, 6}, Iota(36))});
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(std::string(odd.status().message()), HasSubstr("multiples of blocksize"));
}

TEST(ImageBlockTest, ChannelsNotDivisibleIsAnError) {
  OnnxBuilder b;
  b.Input("x", {1, 8, 2, 2});
  OnnxBuilder::IntAttr(b.Node("DepthToSpace", {"x"}, {"y"}), "blocksize", 3);
  b.Output("y", {1, 1, 6, 6});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("channels 8 is not a multiple of 9"));
}

// ---- GridSample, RoiAlign --------------------------------------------------------------

TEST(ImageSamplingTest, GridSampleShapeFollowsTheGrid) {
  OnnxBuilder b(16);
  b.Input("x", {"n", "c", "h", "w"});
  b.Input("grid", {"n", 5, 7, 2});
  b.Node("GridSample", {"x", "grid"}, {"y"});
  b.Output("y", {"n", "c", 5, 7});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n, c, 5, 7], f32)"));
}

TEST(ImageSamplingTest, GridSamplePaddingModes) {
  auto run = [](const std::string& padding) {
    OnnxBuilder b(16);
    b.Input("x", {1, 1, 2, 2});
    b.Input("grid", {1, 1, 3, 2});
    auto& n = b.Node("GridSample", {"x", "grid"}, {"y"});
    OnnxBuilder::StringAttr(n, "padding_mode", padding);
    OnnxBuilder::IntAttr(n, "align_corners", 1);
    b.Output("y", {1, 1, 1, 3});
    // Corners (-1, -1) and (1, 1) are pixel centers with align_corners; (0, -3) lies above.
    auto out = testing::ImportAndRun(
        b.Serialize(), {F32({1, 1, 2, 2}, {1, 2, 3, 4}), F32({1, 1, 3, 2}, {-1, -1, 1, 1, 0, -3})});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? Values<float>((*out)[0]) : std::vector<float>{};
  };
  EXPECT_THAT(run("zeros"), ElementsAre(1, 4, 0));
  EXPECT_THAT(run("border"), ElementsAre(1, 4, 1.5));  // clamped to the top row's middle
  // y = -3 is row -1, which mirrors to row 1: 3 and 4 averaged.
  EXPECT_THAT(run("reflection"), ElementsAre(1, 4, 3.5));
}

TEST(ImageSamplingTest, RoiAlignAveragesAConstantImageToItself) {
  OnnxBuilder b(16);
  b.Input("x", {1, 2, 6, 6});
  b.Input("rois", {"r", 4});
  b.Input("batch_indices", {"r"}, onnx::TensorProto::INT64);
  auto& n = b.Node("RoiAlign", {"x", "rois", "batch_indices"}, {"y"});
  OnnxBuilder::IntAttr(n, "output_height", 2);
  OnnxBuilder::IntAttr(n, "output_width", 3);
  b.Output("y", {"r", 2, 2, 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([r, 2, 2, 3], f32)"));
  std::vector<float> x(72, 7.0f);
  std::fill(x.begin() + 36, x.end(), -2.0f);  // channel 1
  auto out = interp::Run(
      *m, {F32({1, 2, 6, 6}, x), F32({1, 4}, {0.5, 1, 4.5, 5}), testing::I64({1}, {0})});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> expected(6, 7.0f);
  expected.resize(12, -2.0f);
  EXPECT_THAT(Values<float>((*out)[0]), Pointwise(FloatNear(1e-5), expected));
}

TEST(ImageSamplingTest, RoiAlignBatchIndexOutOfRangeIsAnError) {
  OnnxBuilder b(16);
  b.Input("x", {1, 1, 4, 4});
  b.Input("rois", {1, 4});
  b.Input("batch_indices", {1}, onnx::TensorProto::INT64);
  b.Node("RoiAlign", {"x", "rois", "batch_indices"}, {"y"});
  b.Output("y", {1, 1, 1, 1});
  auto out =
      testing::ImportAndRun(b.Serialize(), {F32({1, 1, 4, 4}, std::vector<float>(16, 1)),
                                            F32({1, 4}, {0, 0, 2, 2}), testing::I64({1}, {3})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("batch index 3 out of range"));
}

}  // namespace
}  // namespace kiln
