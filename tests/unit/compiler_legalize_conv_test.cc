// Compiled conv_transpose, conv_integer and qlinear_conv against the reference interpreter:
// strides, pads, dilations, groups, output padding and zero points.
#include <gtest/gtest.h>

#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"

namespace kiln::testing {
namespace {

using arith::DataType;

constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI32 = onnx::TensorProto::INT32;

// Deterministic values in [-2, 2) (or [0, range) for unsigned data), different per seed.
std::vector<double> Values(int64_t count, int seed, double range = 0) {
  std::vector<double> v;
  uint32_t state = 2654435761u * (seed + 1);
  for (int64_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    double unit = (state >> 8) / double(1 << 24);
    v.push_back(range > 0 ? static_cast<int>(unit * range) : unit * 4 - 2);
  }
  return v;
}

TEST(LegalizeConvTest, ConvTransposeWithStridesPadsGroupsAndBias) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 4, 3, 4});
  b.Input("w", {4, 3, 3, 2});
  b.Input("bias", {6});
  auto& node = b.Node("ConvTranspose", {"x", "w", "bias"}, {"y"});
  OnnxBuilder::IntAttr(node, "group", 2);
  OnnxBuilder::IntsAttr(node, "strides", {2, 3});
  OnnxBuilder::IntsAttr(node, "pads", {1, 0, 0, 1});
  OnnxBuilder::IntsAttr(node, "dilations", {1, 2});
  OnnxBuilder::IntsAttr(node, "output_padding", {1, 0});
  // out = stride * (in - 1) + output_padding + dilation * (k - 1) + 1 - pads
  b.Output("y", {"n", 6, 7, 11});
  ExpectCompiledMatchesReference(b.Serialize(),
                                 {ArrayOf(DataType::Float(), {2, 4, 3, 4}, Values(96, 1)),
                                  ArrayOf(DataType::Float(), {4, 3, 3, 2}, Values(72, 2)),
                                  ArrayOf(DataType::Float(), {6}, Values(6, 3))});
}

TEST(LegalizeConvTest, ConvTransposeOfOneElementIsTheKernel) {
  OnnxBuilder b(13);
  b.Input("x", {1, 1, 1, 1});
  b.Input("w", {1, 1, 2, 2});
  b.Node("ConvTranspose", {"x", "w"}, {"y"});
  b.Output("y", {1, 1, 2, 2});
  auto want = ExpectCompiledMatchesReference(
      b.Serialize(), {ArrayOf(DataType::Float(), {1, 1, 1, 1}, {2}),
                      ArrayOf(DataType::Float(), {1, 1, 2, 2}, {1, 2, 3, 4})});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(3), 8);
}

TEST(LegalizeConvTest, ConvIntegerSubtractsPerChannelZeroPoints) {
  OnnxBuilder b(13);
  b.Input("x", {1, 2, 4, 4}, kU8);
  b.Input("w", {3, 2, 2, 2}, kU8);
  b.Input("x_zp", {}, kU8);
  b.Input("w_zp", {3}, kU8);
  auto& node = b.Node("ConvInteger", {"x", "w", "x_zp", "w_zp"}, {"y"});
  OnnxBuilder::IntsAttr(node, "pads", {1, 1, 0, 0});
  b.Output("y", {1, 3, 4, 4}, kI32);
  ExpectCompiledMatchesReference(
      b.Serialize(),
      {ArrayOf(DataType::UInt(8), {1, 2, 4, 4}, Values(32, 4, 256)),
       ArrayOf(DataType::UInt(8), {3, 2, 2, 2}, Values(24, 5, 256)),
       ArrayOf(DataType::UInt(8), {}, {128}), ArrayOf(DataType::UInt(8), {3}, {0, 100, 255})});
}

TEST(LegalizeConvTest, QLinearConvWithBiasRequantizes) {
  OnnxBuilder b(13);
  b.Input("x", {1, 2, 3, 3}, kU8);
  b.Input("w", {2, 2, 2, 2}, kU8);
  for (const char* name : {"x_scale", "y_scale"}) b.Input(name, {});
  b.Input("w_scale", {2});
  for (const char* name : {"x_zp", "y_zp"}) b.Input(name, {}, kU8);
  b.Input("w_zp", {2}, kU8);
  b.Input("bias", {2}, kI32);
  b.Node("QLinearConv", {"x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp", "bias"},
         {"y"});
  b.Output("y", {1, 2, 2, 2}, kU8);
  auto f = [](double v) { return ArrayOf(DataType::Float(), {}, {v}); };
  auto u = [](double v) { return ArrayOf(DataType::UInt(8), {}, {v}); };
  ExpectCompiledMatchesReference(
      b.Serialize(),
      {ArrayOf(DataType::UInt(8), {1, 2, 3, 3}, Values(18, 6, 256)),
       ArrayOf(DataType::UInt(8), {2, 2, 2, 2}, Values(16, 7, 256)), f(0.02), f(0.05),
       ArrayOf(DataType::Float(), {2}, {0.01, 0.03}), u(120), u(128),
       ArrayOf(DataType::UInt(8), {2}, {128, 90}), ArrayOf(DataType::Int(32), {2}, {-300, 1000})});
}

}  // namespace
}  // namespace kiln::testing
