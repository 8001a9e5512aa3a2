// Quantization: rounding half to even, saturation, per-axis parameters, dynamic
// quantization, and the integer matmuls with zero points.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/compiler_nn_test_util.h"

namespace kiln::nn_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const arith::DataType kU8 = arith::DataType::UInt(8);
const arith::DataType kI8 = arith::DataType::Int(8);

TEST(NNQuantTest, QuantizeRoundsHalfToEvenAndSaturates) {
  OnnxBuilder b(13);
  b.Input("x", {"n"});
  b.FloatInitializer("scale", {}, {2});
  Initializer(b, "zp", onnx::TensorProto::INT8, ArrayOf(kI8, {}, {1}));
  b.Node("QuantizeLinear", {"x", "scale", "zp"}, {"y"});
  b.Output("y", {"n"}, onnx::TensorProto::INT8);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([n], i8)");
  // x / 2 = 2.5, 3.5, -2.5, 500, -500 round to 2, 4, -2, then + 1 and clamp to [-128, 127].
  auto out = interp::Run(*m, {F32({5}, {5, 7, -5, 1000, -1000})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, kI8);
  EXPECT_THAT(Values((*out)[0]), ElementsAre(3, 5, -1, 127, -128));
}

TEST(NNQuantTest, PerAxisDequantizeAndQuantizeWithoutZeroPoint) {
  OnnxBuilder b(13);
  b.Input("x", {2, 2}, onnx::TensorProto::UINT8);
  b.FloatInitializer("scale", {2}, {0.5, 10});
  Initializer(b, "zp", onnx::TensorProto::UINT8, ArrayOf(kU8, {2}, {1, 0}));
  OnnxBuilder::IntAttr(b.Node("DequantizeLinear", {"x", "scale", "zp"}, {"y"}), "axis", 0);
  b.Node("QuantizeLinear", {"y", "scale"}, {"q"});  // default axis 1, uint8 without a zero point
  b.Output("y", {2, 2});
  b.Output("q", {2, 2}, onnx::TensorProto::UINT8);
  auto out = ImportAndRun(b, {ArrayOf(kU8, {2, 2}, {3, 5, 2, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Row 0: (x - 1) * 0.5; row 1: x * 10.
  EXPECT_THAT(Values((*out)[0]), ElementsAre(1, 2, 20, 40));
  // Column 0 divides by 0.5, column 1 by 10: 2, 0.2, 40, 4 -> 2, 0, 40, 4.
  EXPECT_THAT(Values((*out)[1]), ElementsAre(2, 0, 40, 4));
}

TEST(NNQuantTest, DynamicQuantizeSpansZero) {
  OnnxBuilder b(11);
  b.Input("x", {4});
  b.Node("DynamicQuantizeLinear", {"x"}, {"y", "scale", "zp"});
  b.Output("y", {4}, onnx::TensorProto::UINT8);
  b.Output("scale", {});
  b.Output("zp", {}, onnx::TensorProto::UINT8);
  // Range [-51, 204]: scale 1, zero point 51.
  auto out = ImportAndRun(b, {F32({4}, {-51, 0, 10.5, 204})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(0, 51, 61, 255));
  EXPECT_THAT(Values((*out)[1]), ElementsAre(1));
  EXPECT_THAT(Values((*out)[2]), ElementsAre(51));
}

TEST(NNQuantTest, MatMulIntegerSubtractsPerRowZeroPoints) {
  OnnxBuilder b(10);
  b.Input("a", {"n", 2}, onnx::TensorProto::UINT8);
  b.Input("azp", {"n"}, onnx::TensorProto::UINT8);
  Initializer(b, "w", onnx::TensorProto::UINT8, ArrayOf(kU8, {2}, {1, 2}));
  b.Node("MatMulInteger", {"a", "w", "azp"}, {"y"});  // [n, 2] @ [2] -> [n]
  b.Output("y", {"n"}, onnx::TensorProto::INT32);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([n], i32)");
  auto out = interp::Run(*m, {ArrayOf(kU8, {2, 2}, {10, 20, 3, 4}), ArrayOf(kU8, {2}, {10, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(20, 11));
}

TEST(NNQuantTest, QLinearMatMulRescalesTheIntegerProduct) {
  OnnxBuilder b(10);
  b.Input("a", {1, 2}, onnx::TensorProto::UINT8);
  b.FloatInitializer("a_scale", {}, {0.5});
  Initializer(b, "a_zp", onnx::TensorProto::UINT8, ArrayOf(kU8, {}, {2}));
  Initializer(b, "b", onnx::TensorProto::UINT8, ArrayOf(kU8, {2, 1}, {3, 5}));
  b.FloatInitializer("b_scale", {}, {1});
  Initializer(b, "b_zp", onnx::TensorProto::UINT8, ArrayOf(kU8, {}, {1}));
  b.FloatInitializer("y_scale", {}, {2});
  Initializer(b, "y_zp", onnx::TensorProto::UINT8, ArrayOf(kU8, {}, {100}));
  b.Node("QLinearMatMul", {"a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"},
         {"y"});
  b.Output("y", {1, 1}, onnx::TensorProto::UINT8);
  // (4 - 2) * (3 - 1) + (12 - 2) * (5 - 1) = 44; 44 * 0.5 / 2 = 11; + 100.
  auto out = ImportAndRun(b, {ArrayOf(kU8, {1, 2}, {4, 12})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(111));
}

TEST(NNQuantTest, ScaleLengthMustMatchTheAxis) {
  OnnxBuilder b(13);
  b.Input("x", {2, 3});
  b.FloatInitializer("scale", {2}, {1, 1});
  b.Node("QuantizeLinear", {"x", "scale"}, {"y"}, "bad_q");
  b.Output("y", {2, 3}, onnx::TensorProto::UINT8);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("op quantize_linear: argument 1 has 2 entries for axis 1 of extent 3"));
}

}  // namespace
}  // namespace kiln::nn_test
