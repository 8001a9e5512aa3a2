// Elementwise operators run by the reference interpreter: values computed here by hand (or
// with <cmath>) for the cases where ONNX's semantics are easy to get wrong: integer division
// and mod signs, rounding half to even, wrapping, mixed-type pow, casts, NaN handling.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using arith::DataType;
using testing::F32;
using testing::ImportAndRun;
using testing::OnnxBuilder;
using testing::TensorOf;
using testing::Values;

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt32 = onnx::TensorProto::INT32;
constexpr int kInt64 = onnx::TensorProto::INT64;
constexpr int kInt8 = onnx::TensorProto::INT8;
constexpr int kBool = onnx::TensorProto::BOOL;

// A model with one node `op` over inputs of the given element types, all of shape `dims`.
std::string OneNode(const std::string& op, const std::vector<int>& types,
                    const std::vector<testing::Dim>& dims, int out_type, int opset = 17,
                    onnx::NodeProto** node = nullptr, OnnxBuilder* builder = nullptr) {
  OnnxBuilder local(opset);
  OnnxBuilder& b = builder ? *builder : local;
  std::vector<std::string> names;
  for (size_t i = 0; i < types.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    b.Input(names.back(), dims, types[i]);
  }
  onnx::NodeProto& n = b.Node(op, names, {"y"});
  if (node) *node = &n;
  b.Output("y", dims, out_type);
  return b.Serialize();
}

TEST(ElementwiseOpsTest, RoundHalvesToEven) {
  auto out = ImportAndRun(OneNode("Round", {kFloat}, {6}, kFloat),
                          {F32({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0, 2, 2, -0.0f, -2, 2}));
}

TEST(ElementwiseOpsTest, IntegerDivTruncatesAndModFollowsDivisor) {
  ir::NDArray a = TensorOf<int32_t>(DataType::Int(32), {4}, {7, -7, 7, -7});
  ir::NDArray b = TensorOf<int32_t>(DataType::Int(32), {4}, {2, 2, -2, -2});
  auto div = ImportAndRun(OneNode("Div", {kInt32, kInt32}, {4}, kInt32), {a, b});
  ASSERT_TRUE(div.ok()) << div.status();
  EXPECT_EQ(Values<int32_t>((*div)[0]), (std::vector<int32_t>{3, -3, -3, 3}));
  auto mod = ImportAndRun(OneNode("Mod", {kInt32, kInt32}, {4}, kInt32), {a, b});
  ASSERT_TRUE(mod.ok()) << mod.status();
  EXPECT_EQ(Values<int32_t>((*mod)[0]), (std::vector<int32_t>{1, 1, -1, -1}));
  onnx::NodeProto* node;
  OnnxBuilder builder;
  std::string fmod_model = OneNode("Mod", {kInt32, kInt32}, {4}, kInt32, 17, &node, &builder);
  OnnxBuilder::IntAttr(*node, "fmod", 1);
  auto fmod = ImportAndRun(builder.Serialize(), {a, b});
  ASSERT_TRUE(fmod.ok()) << fmod.status();
  EXPECT_EQ(Values<int32_t>((*fmod)[0]), (std::vector<int32_t>{1, -1, 1, -1}));
}

TEST(ElementwiseOpsTest, SmallIntegersWrapAround) {
  ir::NDArray a = TensorOf<int8_t>(DataType::Int(8), {2}, {127, -128});
  ir::NDArray b = TensorOf<int8_t>(DataType::Int(8), {2}, {1, 1});
  auto add = ImportAndRun(OneNode("Add", {kInt8, kInt8}, {2}, kInt8), {a, b});
  ASSERT_TRUE(add.ok()) << add.status();
  EXPECT_EQ(Values<int8_t>((*add)[0]), (std::vector<int8_t>{-128, -127}));
  auto neg = ImportAndRun(OneNode("Neg", {kInt8}, {2}, kInt8), {a});
  ASSERT_TRUE(neg.ok()) << neg.status();
  EXPECT_EQ(Values<int8_t>((*neg)[0]), (std::vector<int8_t>{-127, -128}));
}

TEST(ElementwiseOpsTest, PowKeepsTheBaseType) {
  ir::NDArray base = TensorOf<int64_t>(DataType::Int(64), {3}, {2, 3, -2});
  ir::NDArray exponent = F32({3}, {10, 0.5f, 3});
  auto out = ImportAndRun(OneNode("Pow", {kInt64, kFloat}, {3}, kInt64), {base, exponent});
  ASSERT_TRUE(out.ok()) << out.status();
  // 3^0.5 truncates to 1.
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{1024, 1, -8}));
  ir::NDArray big = TensorOf<int64_t>(DataType::Int(64), {1}, {3});
  ir::NDArray e = TensorOf<int64_t>(DataType::Int(64), {1}, {39});
  auto exact = ImportAndRun(OneNode("Pow", {kInt64, kInt64}, {1}, kInt64), {big, e});
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(Values<int64_t>((*exact)[0])[0], 4052555153018976267);  // 3^39, beyond 2^53
}

TEST(ElementwiseOpsTest, ComparisonsAndLogicGiveBool) {
  OnnxBuilder b;
  b.Input("x", {2, 3});
  b.Input("y", {3});
  b.Node("Greater", {"x", "y"}, {"g"});
  b.Node("Equal", {"x", "y"}, {"e"});
  b.Node("Or", {"g", "e"}, {"ge"});
  b.Node("Xor", {"g", "ge"}, {"z"});  // true exactly where x == y
  b.Output("ge", {2, 3}, kBool);
  b.Output("z", {2, 3}, kBool);
  auto out = ImportAndRun(b.Serialize(), {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3}, {1, 5, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DataType::Bool());
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{1, 0, 1, 1, 1, 1}));
  EXPECT_EQ(Values<uint8_t>((*out)[1]), (std::vector<uint8_t>{1, 0, 0, 0, 1, 0}));
}

TEST(ElementwiseOpsTest, CastTruncatesTowardZero) {
  onnx::NodeProto* node;
  OnnxBuilder b;
  OneNode("Cast", {kFloat}, {5}, kInt32, 17, &node, &b);
  OnnxBuilder::IntAttr(*node, "to", kInt32);
  auto out = ImportAndRun(b.Serialize(), {F32({5}, {2.7f, -2.7f, 0.2f, -0.0f, 100.5f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{2, -2, 0, 0, 100}));
}

TEST(ElementwiseOpsTest, CastToBoolAndBack) {
  OnnxBuilder b;
  b.Input("x", {3});
  auto& to_bool = b.Node("Cast", {"x"}, {"t"});
  OnnxBuilder::IntAttr(to_bool, "to", kBool);
  auto& to_float = b.Node("Cast", {"t"}, {"y"});
  OnnxBuilder::IntAttr(to_float, "to", kFloat);
  b.Output("y", {3});
  auto out = ImportAndRun(b.Serialize(), {F32({3}, {0.0f, -0.5f, NAN})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0, 1, 1}));
}

TEST(ElementwiseOpsTest, VariadicOpsBroadcastAllOperands) {
  OnnxBuilder b;
  b.Input("a", {2, 1});
  b.Input("b", {3});
  b.Input("c", {1});
  b.Node("Max", {"a", "b", "c"}, {"max"});
  b.Node("Mean", {"a", "b", "c"}, {"mean"});
  b.Output("max", {2, 3});
  b.Output("mean", {2, 3});
  auto out =
      ImportAndRun(b.Serialize(), {F32({2, 1}, {0, 6}), F32({3}, {1, 2, NAN}), F32({1}, {3})});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> max = Values<float>((*out)[0]);
  EXPECT_EQ(max[0], 3);
  EXPECT_EQ(max[3], 6);
  EXPECT_TRUE(std::isnan(max[2]));  // NaN propagates, as numpy.maximum
  std::vector<float> mean = Values<float>((*out)[1]);
  EXPECT_FLOAT_EQ(mean[0], 4.0f / 3);
  EXPECT_FLOAT_EQ(mean[4], 11.0f / 3);
}

TEST(ElementwiseOpsTest, ActivationsUseTheirAttributes) {
  onnx::NodeProto* node;
  OnnxBuilder b;
  OneNode("Elu", {kFloat}, {3}, kFloat, 17, &node, &b);
  OnnxBuilder::FloatAttr(*node, "alpha", 2.0f);
  auto elu = ImportAndRun(b.Serialize(), {F32({3}, {-1, 0, 3})});
  ASSERT_TRUE(elu.ok()) << elu.status();
  EXPECT_FLOAT_EQ(Values<float>((*elu)[0])[0], static_cast<float>(2 * (std::exp(-1.0) - 1)));
  EXPECT_EQ(Values<float>((*elu)[0])[2], 3);
  // HardSigmoid defaults: alpha 0.2, beta 0.5, clamped to [0, 1].
  auto hs = ImportAndRun(OneNode("HardSigmoid", {kFloat}, {3}, kFloat), {F32({3}, {-5, 1, 5})});
  ASSERT_TRUE(hs.ok()) << hs.status();
  EXPECT_EQ(Values<float>((*hs)[0])[0], 0);
  EXPECT_FLOAT_EQ(Values<float>((*hs)[0])[1], 0.7f);
  EXPECT_EQ(Values<float>((*hs)[0])[2], 1);
}

TEST(ElementwiseOpsTest, WhereAndClip) {
  OnnxBuilder b(13);
  b.Input("c", {2}, kBool);
  b.Input("x", {2, 2}, kInt64);
  b.Input("y", {1}, kInt64);
  b.Int64Initializer("hi", {}, {5});
  b.Node("Where", {"c", "x", "y"}, {"w"});
  b.Node("Clip", {"w", "", "hi"}, {"z"});  // no lower bound
  b.Output("z", {2, 2}, kInt64);
  auto out =
      ImportAndRun(b.Serialize(), {TensorOf<uint8_t>(DataType::Bool(), {2}, {1, 0}),
                                   TensorOf<int64_t>(DataType::Int(64), {2, 2}, {-9, 2, 30, 4}),
                                   TensorOf<int64_t>(DataType::Int(64), {1}, {7})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{-9, 5, 5, 5}));
}

TEST(ElementwiseOpsTest, ClipBoundsWereAttributesBeforeOpset11) {
  onnx::NodeProto* node;
  OnnxBuilder b(6);
  OneNode("Clip", {kFloat}, {3}, kFloat, 6, &node, &b);
  OnnxBuilder::FloatAttr(*node, "min", -1);
  auto out = ImportAndRun(b.Serialize(), {F32({3}, {-3, 0.5f, 1e9f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{-1, 0.5f, 1e9f}));
}

TEST(ElementwiseOpsTest, DropoutPassesThroughWithFullMask) {
  OnnxBuilder b(13);
  b.Input("x", {2});
  b.Node("Dropout", {"x"}, {"y", "mask"});
  b.Output("y", {2});
  b.Output("mask", {2}, kBool);
  auto out = ImportAndRun(b.Serialize(), {F32({2}, {1.5f, -2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(Values<uint8_t>((*out)[1]), (std::vector<uint8_t>{1, 1}));
}

TEST(ElementwiseOpsTest, LegacyBroadcastAlignsAtAxis) {
  OnnxBuilder b(6);
  b.Input("a", {2, 3});
  b.Input("b", {2});
  auto& add = b.Node("Add", {"a", "b"}, {"y"});
  OnnxBuilder::IntAttr(add, "broadcast", 1);
  OnnxBuilder::IntAttr(add, "axis", 0);
  b.Output("y", {2, 3});
  auto out = ImportAndRun(b.Serialize(), {F32({2, 3}, {0, 0, 0, 1, 1, 1}), F32({2}, {10, 20})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{10, 10, 10, 21, 21, 21}));
}

TEST(ElementwiseOpsTest, ChannelSlopeForOldPRelu) {
  OnnxBuilder b(6);
  b.Input("x", {1, 2, 2});
  b.FloatInitializer("slope", {2}, {0.5f, 2});
  b.Node("PRelu", {"x", "slope"}, {"y"});
  b.Output("y", {1, 2, 2});
  auto out = ImportAndRun(b.Serialize(), {F32({1, 2, 2}, {-2, 3, -2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{-1, 3, -4, 3}));
}

}  // namespace
}  // namespace kiln
