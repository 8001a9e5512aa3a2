// Control flow through import and the reference interpreter: If branches and Loop/Scan
// bodies are subgraphs that use the enclosing graph's values directly.
#include <gtest/gtest.h>

#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;

ir::NDArray Floats(std::vector<int64_t> shape, std::vector<float> values) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(), std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) a.data<float>()[i] = values[i];
  return a;
}

ir::NDArray Scalar(arith::DataType dtype, int64_t v) {
  ir::NDArray a = ir::NDArray::Zeros(dtype, {});
  a.SetDouble(0, static_cast<double>(v));
  return a;
}

std::vector<float> Values(const ir::NDArray& a) {
  return {a.data<float>(), a.data<float>() + a.num_elements()};
}

// if (c) y = x + x else y = x * x, with x from the enclosing graph.
std::string IfModel() {
  OnnxBuilder then_b, else_b;
  then_b.Node("Add", {"x", "x"}, {"t"});
  then_b.Output("t", {"n"});
  else_b.Node("Mul", {"x", "x"}, {"e"});
  else_b.Output("e", {"n"});
  OnnxBuilder b;
  b.Input("c", {}, onnx::TensorProto::BOOL);
  b.Input("x", {"n"});
  auto& node = b.Node("If", {"c"}, {"y"}, "branch");
  OnnxBuilder::GraphAttr(node, "then_branch", then_b.graph());
  OnnxBuilder::GraphAttr(node, "else_branch", else_b.graph());
  b.Output("y", {"n"});
  return b.Serialize();
}

TEST(ControlTest, IfRunsTheBranchTheConditionPicks) {
  auto m = driver::ImportModel(IfModel());
  ASSERT_TRUE(m.ok()) << m.status();
  // Both branches keep x's symbolic shape, so the If's result does too.
  EXPECT_EQ(ir::ToString(m->functions.at("main").result->struct_info), "Tensor([n], f32)");
  ir::NDArray x = Floats({3}, {1, 2, 3});
  auto then_out = interp::Run(*m, {Scalar(arith::DataType::Bool(), 1), x});
  ASSERT_TRUE(then_out.ok()) << then_out.status();
  EXPECT_EQ(Values((*then_out)[0]), (std::vector<float>{2, 4, 6}));
  auto else_out = interp::Run(*m, {Scalar(arith::DataType::Bool(), 0), x});
  ASSERT_TRUE(else_out.ok()) << else_out.status();
  EXPECT_EQ(Values((*else_out)[0]), (std::vector<float>{1, 4, 9}));
}

// for i in range(trips): acc = acc + x; scan output: acc after each step.
std::string LoopModel() {
  OnnxBuilder body;
  body.Input("i", {}, onnx::TensorProto::INT64);
  body.Input("cond_in", {}, onnx::TensorProto::BOOL);
  body.Input("acc_in", {2});
  body.Node("Add", {"acc_in", "x"}, {"acc_out"});
  body.Node("Identity", {"cond_in"}, {"cond_out"});
  body.Node("Identity", {"acc_out"}, {"step"});
  body.Output("cond_out", {}, onnx::TensorProto::BOOL);
  body.Output("acc_out", {2});
  body.Output("step", {2});
  OnnxBuilder b;
  b.Input("trips", {}, onnx::TensorProto::INT64);
  b.Input("x", {2});
  b.Input("acc", {2});
  b.Node("Constant", {}, {"true"}).add_attribute();
  auto& t = *b.model().mutable_graph()->mutable_node(0);
  t.mutable_attribute(0)->set_name("value");
  t.mutable_attribute(0)->set_type(onnx::AttributeProto::TENSOR);
  t.mutable_attribute(0)->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  t.mutable_attribute(0)->mutable_t()->add_int32_data(1);
  auto& loop = b.Node("Loop", {"trips", "true", "acc"}, {"final", "steps"}, "loop");
  OnnxBuilder::GraphAttr(loop, "body", body.graph());
  b.Output("final", {2});
  b.Output("steps", {"trips", 2});
  return b.Serialize();
}

TEST(ControlTest, LoopCarriesValuesAndStacksScanOutputs) {
  auto m = driver::ImportModel(LoopModel());
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = interp::Run(*m, {Scalar(arith::DataType::Int(64), 3), Floats({2}, {1, 10}),
                              Floats({2}, {0, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<float>{3, 30}));
  EXPECT_EQ((*out)[1].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values((*out)[1]), (std::vector<float>{1, 10, 2, 20, 3, 30}));
}

TEST(ControlTest, SubgraphErrorsNameTheNodeInside) {
  OnnxBuilder body;
  body.Node("NoSuchOp", {"x"}, {"y"}, "inner");
  body.Output("y", {2});
  OnnxBuilder b;
  b.Input("c", {}, onnx::TensorProto::BOOL);
  b.Input("x", {2});
  auto& node = b.Node("If", {"c"}, {"y"}, "outer_if");
  OnnxBuilder::GraphAttr(node, "then_branch", body.graph());
  OnnxBuilder::GraphAttr(node, "else_branch", body.graph());
  b.Output("y", {2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("node 0 'outer_if' (op If): subgraph 'test' node 0 'inner' "
                                      "(op NoSuchOp): unsupported operator"),
            std::string::npos)
      << m.status();
}

}  // namespace
}  // namespace kiln
