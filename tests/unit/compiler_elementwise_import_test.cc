// Importing elementwise operators: symbolic dims flow through broadcasting, shape arithmetic
// on Shape's output stays symbolic, and bad models give INVALID_ARGUMENT naming the problem.
#include <gtest/gtest.h>

#include "compiler/driver/driver.h"
#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;
constexpr int kBool = onnx::TensorProto::BOOL;

std::string ResultInfo(const ir::IRModule& m) {
  return ir::ToString(m.functions.at("main").result->struct_info);
}

TEST(ElementwiseImportTest, BroadcastKeepsSymbolicDims) {
  OnnxBuilder b;
  b.Input("x", {"n", 1, 4});
  b.Input("y", {"m", 1});
  b.Input("c", {"n", "m", 1}, kBool);
  b.Node("Mul", {"x", "y"}, {"p"});
  b.Node("Where", {"c", "p", "x"}, {"w"});
  b.Node("Sigmoid", {"w"}, {"s"});
  b.Node("Less", {"s", "x"}, {"z"});
  b.Output("z", {"n", "m", 4}, kBool);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([n, m, 4], bool)");
}

TEST(ElementwiseImportTest, VariadicSumOverSymbolicDims) {
  OnnxBuilder b;
  b.Input("a", {"n", 3});
  b.Input("b", {3});
  b.Input("c", {"n", 1});
  b.Node("Sum", {"a", "b", "c"}, {"y"});
  b.Output("y", {"n", 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([n, 3], f32)");
}

TEST(ElementwiseImportTest, ShapeArithmeticStaysSymbolic) {
  // Reshape(x, Shape(x) * [2, 1], cast to i32 and back, / [1, 2]): [n, 8] -> [2n, 4], known
  // at import although n is not. Needs Shape (tensor family) and Reshape.
  OnnxBuilder b;
  b.Input("x", {"n", 8});
  b.Int64Initializer("mul", {2}, {2, 1});
  b.Int64Initializer("div", {2}, {1, 2});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Mul", {"s", "mul"}, {"s2"});
  auto& to32 = b.Node("Cast", {"s2"}, {"s3"});
  OnnxBuilder::IntAttr(to32, "to", onnx::TensorProto::INT32);
  auto& to64 = b.Node("Cast", {"s3"}, {"s4"});
  OnnxBuilder::IntAttr(to64, "to", kInt64);
  b.Node("Div", {"s4", "div"}, {"s5"});
  b.Node("Reshape", {"x", "s5"}, {"y"});
  b.Output("y", {"?", "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([n * 2, 4], f32)");
}

absl::Status ImportError(const std::string& model) {
  auto m = driver::ImportModel(model);
  return m.ok() ? absl::OkStatus() : m.status();
}

TEST(ElementwiseImportTest, ClashingDimsAreNamed) {
  OnnxBuilder b;
  b.Input("x", {"n", 3});
  b.Input("y", {"n", 4});
  b.Node("Add", {"x", "y"}, {"z"});
  b.Output("z", {"n", 4});
  absl::Status s = ImportError(b.Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cannot broadcast dimension 1: 3 with 4"), std::string::npos) << s;
}

TEST(ElementwiseImportTest, MixedDTypesAreRejected) {
  OnnxBuilder b;
  b.Input("x", {3});
  b.Input("y", {3}, kInt64);
  b.Node("Sub", {"x", "y"}, {"z"});
  b.Output("z", {3});
  absl::Status s = ImportError(b.Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("operand dtypes differ: f32 and i64"), std::string::npos) << s;
}

TEST(ElementwiseImportTest, FloatMathRejectsIntegers) {
  OnnxBuilder b;
  b.Input("x", {3}, kInt64);
  b.Node("Sqrt", {"x"}, {"y"});
  b.Output("y", {3}, kInt64);
  absl::Status s = ImportError(b.Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("op sqrt: needs a float tensor, got i64"), std::string::npos) << s;
}

TEST(ElementwiseImportTest, FloatModNeedsFmod) {
  OnnxBuilder b;
  b.Input("x", {3});
  b.Input("y", {3});
  b.Node("Mod", {"x", "y"}, {"z"});
  b.Output("z", {3});
  absl::Status s = ImportError(b.Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("fmod must be 1 for float operands"), std::string::npos) << s;
}

// float16 values round to nearest even; 1/3 becomes 0.333251953125, 65504 is the largest.
TEST(ElementwiseImportTest, CastThroughFloat16RoundsToHalfPrecision) {
  OnnxBuilder b;
  b.Input("x", {4});
  OnnxBuilder::IntAttr(b.Node("Cast", {"x"}, {"h"}), "to", onnx::TensorProto::FLOAT16);
  OnnxBuilder::IntAttr(b.Node("Cast", {"h"}, {"y"}), "to", onnx::TensorProto::FLOAT);
  b.Output("y", {4});
  auto out =
      testing::ImportAndRun(b.Serialize(), {testing::F32({4}, {1.0f, 1.0f / 3, 65504.0f, 1e-8f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(testing::Values<float>((*out)[0]),
            (std::vector<float>{1.0f, 0.333251953125f, 65504.0f, 0.0f}));
}

TEST(ElementwiseImportTest, CastToBfloat16IsUnsupported) {
  OnnxBuilder b;
  b.Input("x", {3});
  auto& cast = b.Node("Cast", {"x"}, {"y"});
  OnnxBuilder::IntAttr(cast, "to", onnx::TensorProto::BFLOAT16);
  b.Output("y", {3}, onnx::TensorProto::BFLOAT16);
  absl::Status s = ImportError(b.Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("BFLOAT16"), std::string::npos) << s;
}

TEST(ElementwiseImportTest, TrainingDropoutIsRejected) {
  OnnxBuilder b(13);
  b.Input("x", {3});
  b.FloatInitializer("ratio", {}, {0.5f});
  auto& t = b.model().mutable_graph()->add_initializer()[0];
  t.set_name("training");
  t.set_data_type(kBool);
  t.add_int32_data(1);
  b.Node("Dropout", {"x", "ratio", "training"}, {"y"});
  b.Output("y", {3});
  absl::Status s = ImportError(b.Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("training mode (ratio 0.5) is not supported"), std::string::npos) << s;
}

}  // namespace
}  // namespace kiln
