// Operators whose result is a tuple (one kernel, one output buffer per field): compiled for
// x86_64, run as an artifact and compared with the reference interpreter. Each model makes
// some fields graph outputs and feeds others to further kernels, so that host lowering
// writes fields both into output buffers and into workspace.
#include <gtest/gtest.h>

#include <random>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/structural.h"
#include "compiler/ir/verifier.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"

namespace kiln {
namespace {

using testing::ExpectCompiledMatchesReference;
using testing::OnnxBuilder;
using Dims = std::vector<int64_t>;

ir::NDArray Floats(const Dims& shape, uint32_t seed) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2, 2);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = dist(rng);
  return a;
}

// A call_tir whose result is a tuple, and TupleGetItem of it, print, parse and verify.
TEST(LegalizeMultiOutputTest, TupleCallTIRRoundTripsThroughText) {
  OnnxBuilder b;
  b.Input("x", {"n", 6});
  b.Int64Initializer("sizes", {2}, {2, 4});
  auto& n = b.Node("Split", {"x", "sizes"}, {"a", "c"});
  OnnxBuilder::IntAttr(n, "axis", 1);
  b.Output("c", {"n", 4});
  auto module = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(module.ok()) << module.status();
  auto legalized = driver::RunPipeline(*std::move(module), nullptr, "legalize");
  ASSERT_TRUE(legalized.ok()) << legalized.status();
  std::string text = ir::ToString(*legalized);
  EXPECT_NE(text.find("call_tir(@split_0"), std::string::npos) << text;
  EXPECT_NE(text.find("Tuple(Tensor([n, 2], f32), Tensor([n, 4], f32))"), std::string::npos)
      << text;
  auto parsed = ir::ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(ir::StructuralMismatch(*legalized, *parsed), "");
  EXPECT_TRUE(ir::VerifyModule(*parsed).ok()) << ir::VerifyModule(*parsed);
  EXPECT_EQ(ir::ToString(*parsed), text);
}

TEST(LegalizeMultiOutputTest, TopKWithTiesKeepsTheLowerIndexFirst) {
  for (int64_t largest : {1, 0}) {
    OnnxBuilder b;
    b.Input("x", {3, 6});
    b.Int64Initializer("k", {1}, {4});
    auto& n = b.Node("TopK", {"x", "k"}, {"values", "indices"});
    OnnxBuilder::IntAttr(n, "largest", largest);
    b.Output("values", {3, 4});
    b.Output("indices", {3, 4}, onnx::TensorProto::INT64);
    ir::NDArray x = ir::NDArray::Zeros(arith::DataType::Float(32), {3, 6});
    float values[] = {1, 5, 5, 2, 0, 5, -1, -1, -1, -1, -1, -1, 3, 2, 7, 2, 9, 3};
    for (int i = 0; i < 18; ++i) x.data<float>()[i] = values[i];
    SCOPED_TRACE(largest ? "largest" : "smallest");
    ExpectCompiledMatchesReference(b.Serialize(), {x});
  }
}

TEST(LegalizeMultiOutputTest, SplitFeedsOneFieldToAKernelAndReturnsTheOthers) {
  OnnxBuilder b;
  b.Input("x", {"n", 7});
  b.Int64Initializer("sizes", {3}, {2, 4, 1});
  auto& n = b.Node("Split", {"x", "sizes"}, {"a", "mid", "c"});
  OnnxBuilder::IntAttr(n, "axis", 1);
  b.Node("Neg", {"mid"}, {"neg_mid"});
  b.Output("a", {"n", 2});
  b.Output("neg_mid", {"n", 4});
  b.Output("c", {"n", 1});
  ExpectCompiledMatchesReference(b.Serialize(), {Floats({3, 7}, 1)});
}

TEST(LegalizeMultiOutputTest, LayerNormalizationStatistics) {
  OnnxBuilder b;
  b.Input("x", {2, "n", 5});
  b.FloatInitializer("scale", {5}, {1, 2, 0.5, -1, 3});
  auto& n = b.Node("LayerNormalization", {"x", "scale"}, {"y", "mean", "inv_std"});
  OnnxBuilder::IntAttr(n, "axis", 1);
  b.Output("y", {2, "n", 5});
  b.Output("mean", {2, 1, 1});
  b.Output("inv_std", {2, 1, 1});
  ExpectCompiledMatchesReference(b.Serialize(), {Floats({2, 3, 5}, 2)});
}

TEST(LegalizeMultiOutputTest, DropoutMaskIsAllTrueInInference) {
  OnnxBuilder b;
  b.Input("x", {"n"});
  b.Node("Dropout", {"x"}, {"y", "mask"});
  b.Output("y", {"n"});
  b.Output("mask", {"n"}, onnx::TensorProto::BOOL);
  ExpectCompiledMatchesReference(b.Serialize(), {Floats({5}, 3)});
}

TEST(LegalizeMultiOutputTest, BatchNormalizationTrainingUpdatesRunningStatistics) {
  OnnxBuilder b(15);
  b.Input("x", {"n", 3, 2, 2});
  b.FloatInitializer("scale", {3}, {1, 0.5, 2});
  b.FloatInitializer("bias", {3}, {0, 1, -1});
  b.FloatInitializer("mean", {3}, {0.1, 0.2, 0.3});
  b.FloatInitializer("var", {3}, {1, 2, 3});
  auto& n = b.Node("BatchNormalization", {"x", "scale", "bias", "mean", "var"},
                   {"y", "running_mean", "running_var"});
  OnnxBuilder::IntAttr(n, "training_mode", 1);
  b.Output("y", {"n", 3, 2, 2});
  b.Output("running_mean", {3});
  b.Output("running_var", {3});
  ExpectCompiledMatchesReference(b.Serialize(), {Floats({2, 3, 2, 2}, 4)});
}

TEST(LegalizeMultiOutputTest, DynamicQuantizeLinear) {
  OnnxBuilder b;
  b.Input("x", {"n", 3});
  b.Node("DynamicQuantizeLinear", {"x"}, {"y", "scale", "zero_point"});
  b.Output("y", {"n", 3}, onnx::TensorProto::UINT8);
  b.Output("scale", {});
  b.Output("zero_point", {}, onnx::TensorProto::UINT8);
  ExpectCompiledMatchesReference(b.Serialize(), {Floats({4, 3}, 13)});
  ir::NDArray zeros = ir::NDArray::Zeros(arith::DataType::Float(32), {2, 3});
  ExpectCompiledMatchesReference(b.Serialize(), {zeros});  // scale 0
}

TEST(LegalizeMultiOutputTest, MaxPoolIndicesInBothStorageOrders) {
  for (int64_t column_major : {0, 1}) {
    OnnxBuilder b;
    b.Input("x", {2, 2, 5, 4});
    auto& n = b.Node("MaxPool", {"x"}, {"y", "indices"});
    OnnxBuilder::IntsAttr(n, "kernel_shape", {3, 2});
    OnnxBuilder::IntsAttr(n, "pads", {1, 0, 1, 1});
    OnnxBuilder::IntsAttr(n, "strides", {2, 1});
    OnnxBuilder::IntAttr(n, "storage_order", column_major);
    b.Output("y", {2, 2, 3, 4});
    b.Output("indices", {2, 2, 3, 4}, onnx::TensorProto::INT64);
    SCOPED_TRACE(column_major ? "column major" : "row major");
    ExpectCompiledMatchesReference(b.Serialize(), {Floats({2, 2, 5, 4}, 14)});
  }
}

// Omitted operands (B) among given ones (sequence_lens, initial_h) and a state output that
// only a later kernel reads.
TEST(LegalizeMultiOutputTest, BidirectionalLstmWithSequenceLengths) {
  OnnxBuilder b;
  b.Input("x", {4, "batch", 3});
  b.Input("w", {2, 8, 3});
  b.Input("r", {2, 8, 2});
  b.Input("lens", {"batch"}, onnx::TensorProto::INT32);
  b.Input("h0", {2, "batch", 2});
  auto& n = b.Node("LSTM", {"x", "w", "r", "", "lens", "h0"}, {"y", "y_h", "y_c"});
  OnnxBuilder::IntAttr(n, "hidden_size", 2);
  OnnxBuilder::StringAttr(n, "direction", "bidirectional");
  b.Node("Abs", {"y_c"}, {"abs_c"});
  b.Output("y", {4, 2, "batch", 2});
  b.Output("abs_c", {2, "batch", 2});
  ir::NDArray lens = ir::NDArray::Zeros(arith::DataType::Int(32), {3});
  lens.data<int32_t>()[0] = 4;
  lens.data<int32_t>()[1] = 2;
  lens.data<int32_t>()[2] = 0;
  ExpectCompiledMatchesReference(b.Serialize(), {Floats({4, 3, 3}, 5), Floats({2, 8, 3}, 6),
                                                 Floats({2, 8, 2}, 7), lens, Floats({2, 3, 2}, 8)});
}

TEST(LegalizeMultiOutputTest, GruLinearBeforeResetAndNot) {
  for (int64_t lbr : {0, 1}) {
    OnnxBuilder b;
    b.Input("x", {3, 2, 4});
    b.Input("w", {1, 9, 4});
    b.Input("r", {1, 9, 3});
    b.Input("bias", {1, 18});
    auto& n = b.Node("GRU", {"x", "w", "r", "bias"}, {"", "y_h"});
    OnnxBuilder::IntAttr(n, "hidden_size", 3);
    OnnxBuilder::IntAttr(n, "linear_before_reset", lbr);
    OnnxBuilder::StringAttr(n, "direction", "reverse");
    b.Output("y_h", {1, 2, 3});
    SCOPED_TRACE(lbr ? "linear_before_reset" : "reset before linear");
    ExpectCompiledMatchesReference(b.Serialize(), {Floats({3, 2, 4}, 9), Floats({1, 9, 4}, 10),
                                                   Floats({1, 9, 3}, 11), Floats({1, 18}, 12)});
  }
}

}  // namespace
}  // namespace kiln
