// ONNX import: symbolic dims flow from dim_params through every op's struct info, and bad
// models give errors that name the node.
#include <gtest/gtest.h>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "compiler/interp/interpreter.h"
#include "compiler/transform/legalize.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;

const ir::Function& Main(const ir::IRModule& m) { return m.functions.at("main"); }

std::string ResultInfo(const ir::IRModule& m) { return ir::ToString(Main(m).result->struct_info); }

std::string SmallMlp() {
  OnnxBuilder b;
  b.Input("x", {"batch", 4});
  b.FloatInitializer("w1", {3, 4}, std::vector<float>(12, 0.5f));
  b.FloatInitializer("b1", {3}, {1, 2, 3});
  b.FloatInitializer("w2", {3, 2}, std::vector<float>(6, 0.25f));
  b.FloatInitializer("b2", {2}, {0, 1});
  auto& gemm = b.Node("Gemm", {"x", "w1", "b1"}, {"h"}, "fc1");
  OnnxBuilder::IntAttr(gemm, "transB", 1);
  b.Node("Relu", {"h"}, {"r"});
  b.Node("MatMul", {"r", "w2"}, {"m"});
  b.Node("Add", {"m", "b2"}, {"logits"});
  b.Node("Softmax", {"logits"}, {"y"});
  b.Output("y", {"batch", 2});
  return b.Serialize();
}

TEST(ImportTest, SymbolicBatchFlowsThroughMlp) {
  auto m = driver::ImportModel(SmallMlp());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([batch, 2], f32)");
  const ir::Function& main = Main(*m);
  ASSERT_EQ(main.params.size(), 1u);
  EXPECT_EQ(ir::ToString(main.params[0]->struct_info), "Tensor([batch, 4], f32)");
  EXPECT_EQ(main.input_names, std::vector<std::string>{"x"});
  EXPECT_EQ(main.output_names, std::vector<std::string>{"y"});
  // Gemm with transB becomes transpose + matmul + add; the transpose of the constant weight
  // folds at import, so the matmul reads a [4, 3] constant.
  std::string text = ir::ToString(*m);
  EXPECT_EQ(text.find("transpose("), std::string::npos) << text;
  EXPECT_NE(text.find("matmul(%x, const[0])"), std::string::npos) << text;
  EXPECT_NE(text.find("const[0]: f32[4, 3] = 0x"), std::string::npos) << text;
}

TEST(ImportTest, SharedDimParamIsOneVariable) {
  OnnxBuilder b;
  b.Input("a", {"n", 3});
  b.Input("b", {"n", 3});
  b.Node("Add", {"a", "b"}, {"c"});
  b.Output("c", {"n", 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& params = Main(*m).params;
  // Same variable object, so broadcasting proves the dims equal.
  EXPECT_EQ((*params[0]->struct_info.shape)[0], (*params[1]->struct_info.shape)[0]);
  EXPECT_EQ(ResultInfo(*m), "Tensor([n, 3], f32)");
}

TEST(ImportTest, ReshapeInfersMinusOneOverSymbolicProduct) {
  OnnxBuilder b;
  b.Input("x", {"batch", 2, 6});
  b.Int64Initializer("shape", {2}, {-1, 4});
  b.Node("Reshape", {"x", "shape"}, {"y"});
  b.Output("y", {"?", 4});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([batch * 3, 4], f32)");
}

TEST(ImportTest, FlattenAndTransposeKeepSymbols) {
  OnnxBuilder b;
  b.Input("x", {"n", 2, "w"});
  b.Node("Transpose", {"x"}, {"t"});  // default perm reverses the dims
  b.Node("Flatten", {"t"}, {"y"});
  b.Output("y", {"w", "?"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([w, n * 2], f32)");
}

TEST(ImportTest, UnsupportedOperatorNamesTheNode) {
  OnnxBuilder b;
  b.Input("x", {2});
  b.Node("Relu", {"x"}, {"r"});
  b.Node("FancyOp", {"r"}, {"y"}, "my_fancy_node");
  b.Output("y", {2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "node 1 'my_fancy_node' (op FancyOp): unsupported operator");
}

TEST(ImportTest, ShapeClashNamesOpAndDims) {
  OnnxBuilder b;
  b.Input("a", {"n", 3});
  b.Input("b", {"n", 4});
  b.Node("Add", {"a", "b"}, {"c"}, "bad_add");
  b.Output("c", {"n", 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "node 0 'bad_add' (op Add): op add: cannot broadcast dimension 1: 3 with 4");
}

// GPT-2 slices its [max_pos, max_pos] causal-mask table by the sequence length, which gives
// min(seq, max_pos); adding it to [seq, seq] scores is valid only where the two are equal.
TEST(ImportTest, TableSlicedBySymbolicLengthBroadcastsWithThatLength) {
  OnnxBuilder b;
  b.Input("x", {"seq", "seq"});
  std::vector<float> table(8 * 8);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  b.FloatInitializer("table", {8, 8}, table);
  b.Int64Initializer("zeros", {2}, {0, 0});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Slice", {"table", "zeros", "s"}, {"mask"});
  b.Node("Add", {"x", "mask"}, {"y"});
  b.Output("y", {"seq", "seq"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([seq, seq], f32)");
  ir::NDArray x = ir::NDArray::Zeros(arith::DataType::Float(), {3, 3});
  for (int64_t i = 0; i < 9; ++i) x.SetDouble(i, 100 * i);
  auto y = interp::Run(*m, {x});
  ASSERT_TRUE(y.ok()) << y.status();
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 3; ++c)
      EXPECT_EQ(y->at(0).GetDouble(r * 3 + c), 100 * (r * 3 + c) + r * 8 + c);
  }
}

TEST(ImportTest, GarbageBytesAreNotAModel) {
  auto m = driver::ImportModel("this is not a protobuf \xff\xff\xff");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("not an ONNX model"), std::string::npos) << m.status();
}

TEST(LegalizeTest, EveryCallBecomesAKernelWithSymbolicExtents) {
  auto m = driver::ImportModel(SmallMlp());
  ASSERT_TRUE(m.ok()) << m.status();
  auto lowered = transform::Legalize(*std::move(m));
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  for (const auto& block : Main(*lowered).blocks) {
    for (const auto& binding : block.bindings) EXPECT_EQ(binding.value->name, "call_tir");
  }
  const ir::PrimFunc& matmul = lowered->prim_funcs.at("matmul_0");
  ASSERT_EQ(matmul.scalars.size(), 1u);
  EXPECT_EQ(matmul.scalars[0]->name, "batch");
  EXPECT_NE(ir::ToString(matmul).find("for i0 in range(0, batch)"), std::string::npos)
      << ir::ToString(matmul);
}

TEST(LowerHostTest, HostCodeBindsChecksAndCallsKernels) {
  auto m = driver::ImportModel(SmallMlp());
  ASSERT_TRUE(m.ok()) << m.status();
  auto lowered = driver::RunPipeline(*std::move(m), nullptr);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(lowered->functions.empty());
  std::string run = ir::ToString(lowered->prim_funcs.at("kiln_run"));
  // batch is bound from input 0's dim 0, dim 1 is checked against 4, outputs are checked.
  EXPECT_NE(run.find("let batch: i64 = kiln.input_shape(0:i32, 0:i32)"), std::string::npos) << run;
  EXPECT_NE(run.find("assert kiln.input_shape(0:i32, 1:i32) == 4 else kiln.shape_error(0:i32, "
                     "0:i32, 1:i32, 4, kiln.input_shape(0:i32, 1:i32))"),
            std::string::npos)
      << run;
  EXPECT_NE(run.find("assert kiln.output_shape(0:i32, 0:i32) == batch"), std::string::npos) << run;
  EXPECT_EQ(lowered->constants.size(), 4u);
}

}  // namespace
}  // namespace kiln
