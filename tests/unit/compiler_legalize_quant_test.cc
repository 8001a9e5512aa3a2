// Compiled quantize_linear, dequantize_linear, matmul_integer and qlinear_matmul against the
// reference interpreter: half-to-even rounding, saturation, per-axis parameters and zero
// points.
#include <gtest/gtest.h>

#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"

namespace kiln::testing {
namespace {

using arith::DataType;

constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI8 = onnx::TensorProto::INT8;
constexpr int kI32 = onnx::TensorProto::INT32;

TEST(LegalizeQuantTest, QuantizeRoundsHalfToEvenAndSaturatesPerAxis) {
  OnnxBuilder b(13);
  b.Input("x", {"n", 2});
  b.Input("scale", {2});
  b.Input("zp", {2}, kI8);
  OnnxBuilder::IntAttr(b.Node("QuantizeLinear", {"x", "scale", "zp"}, {"y"}), "axis", 1);
  b.Output("y", {"n", 2}, kI8);
  auto want = ExpectCompiledMatchesReference(
      b.Serialize(),
      {ArrayOf(DataType::Float(), {3, 2}, {2.5, 1, 3.5, -1000, 1000, 0.5}),
       ArrayOf(DataType::Float(), {2}, {1, 0.5}), ArrayOf(DataType::Int(8), {2}, {1, -3})});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(0), 3);     // round(2.5) = 2, + 1
  EXPECT_EQ(want[0].GetDouble(2), 5);     // round(3.5) = 4, + 1
  EXPECT_EQ(want[0].GetDouble(3), -128);  // saturated
  EXPECT_EQ(want[0].GetDouble(4), 127);
}

TEST(LegalizeQuantTest, DequantizeWithoutZeroPoint) {
  OnnxBuilder b(13);
  b.Input("x", {"n"}, kU8);
  b.Input("scale", {});
  b.Node("DequantizeLinear", {"x", "scale"}, {"y"});
  b.Output("y", {"n"});
  auto want = ExpectCompiledMatchesReference(
      b.Serialize(),
      {ArrayOf(DataType::UInt(8), {3}, {0, 7, 255}), ArrayOf(DataType::Float(), {}, {0.25})});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(2), 63.75);
}

TEST(LegalizeQuantTest, MatmulIntegerSubtractsZeroPoints) {
  OnnxBuilder b(13);
  b.Input("a", {2, 3}, kU8);
  b.Input("b", {3, 2}, kU8);
  b.Input("a_zp", {}, kU8);
  b.Input("b_zp", {2}, kU8);
  b.Node("MatMulInteger", {"a", "b", "a_zp", "b_zp"}, {"y"});
  b.Output("y", {2, 2}, kI32);
  auto want = ExpectCompiledMatchesReference(
      b.Serialize(),
      {ArrayOf(DataType::UInt(8), {2, 3}, {1, 2, 3, 250, 0, 9}),
       ArrayOf(DataType::UInt(8), {3, 2}, {4, 5, 6, 7, 8, 255}),
       ArrayOf(DataType::UInt(8), {}, {1}), ArrayOf(DataType::UInt(8), {2}, {2, 5})});
  ASSERT_EQ(want.size(), 1u);
  // Row 0 of a - 1 is [0, 1, 2]; column 0 of b - 2 is [2, 4, 6].
  EXPECT_EQ(want[0].GetDouble(0), 16);
}

TEST(LegalizeQuantTest, QLinearMatmulRequantizes) {
  OnnxBuilder b(13);
  for (const char* name : {"a", "b"}) b.Input(name, {2, 2}, kU8);
  for (const char* name : {"a_scale", "b_scale", "y_scale"}) b.Input(name, {});
  for (const char* name : {"a_zp", "b_zp", "y_zp"}) b.Input(name, {}, kU8);
  b.Node("QLinearMatMul", {"a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"},
         {"y"});
  b.Output("y", {2, 2}, kU8);
  auto f = [](double v) { return ArrayOf(DataType::Float(), {}, {v}); };
  auto u = [](double v) { return ArrayOf(DataType::UInt(8), {}, {v}); };
  auto want = ExpectCompiledMatchesReference(
      b.Serialize(), {ArrayOf(DataType::UInt(8), {2, 2}, {10, 20, 30, 40}),
                      ArrayOf(DataType::UInt(8), {2, 2}, {50, 60, 70, 200}), f(0.5), f(0.0625),
                      f(0.25), u(5), u(60), u(100)});
  ASSERT_EQ(want.size(), 1u);
  // (10-5)(50-60) + (20-5)(70-60) = 100; 100 * 0.5 * 0.0625 / 0.25 + 100 = 112.5, which
  // rounds to even.
  EXPECT_EQ(want[0].GetDouble(0), 112);
}

}  // namespace
}  // namespace kiln::testing
