// Control flow compiled ahead of time (lower_host.cc, legalize_control.h): If branches, Scan
// and Loop bodies run as host-level branches and serial loops over their kernels. Every
// artifact is compared with the reference interpreter, on inputs that take both branches and
// several trip counts; forms outside what is compiled give an error naming the binding.
#include <gtest/gtest.h>

#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"

namespace kiln {
namespace {

using arith::DataType;
using testing::ArrayOf;
using testing::CompiledModel;
using testing::OnnxBuilder;

ir::NDArray Bool(bool v) { return ArrayOf(DataType::Bool(), {}, {v ? 1.0 : 0.0}); }
ir::NDArray Int64(int64_t v) { return ArrayOf(DataType::Int(64), {}, {static_cast<double>(v)}); }

std::vector<double> Ramp(int64_t n, double start, double step) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(start + step * i);
  return v;
}

ir::NDArray Floats(std::vector<int64_t> shape, double start = 1, double step = 0.5) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return ArrayOf(DataType::Float(), std::move(shape), Ramp(n, start, step));
}

// A Constant node making a bool scalar `name`.
void BoolConstant(OnnxBuilder& b, const std::string& name, bool value) {
  auto& node = b.Node("Constant", {}, {name});
  auto* a = node.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  a->mutable_t()->add_int32_data(value ? 1 : 0);
}

// if (c) (y, z) = (x + x, x) else (y, z) = (x * x, exp(x)): one branch returns a value of the
// enclosing graph itself, so the if copies it.
std::string IfModel() {
  OnnxBuilder then_b, else_b;
  then_b.Node("Add", {"x", "x"}, {"t"});
  then_b.Node("Identity", {"x"}, {"t2"});
  then_b.Output("t", {"n"});
  then_b.Output("t2", {"n"});
  else_b.Node("Mul", {"x", "x"}, {"e"});
  else_b.Node("Exp", {"x"}, {"e2"});
  else_b.Output("e", {"n"});
  else_b.Output("e2", {"n"});
  OnnxBuilder b;
  b.Input("c", {}, onnx::TensorProto::BOOL);
  b.Input("x", {"n"});
  b.Node("Relu", {"x"}, {"r"});
  auto& node = b.Node("If", {"c"}, {"y", "z"}, "branch");
  OnnxBuilder::GraphAttr(node, "then_branch", then_b.graph());
  OnnxBuilder::GraphAttr(node, "else_branch", else_b.graph());
  b.Node("Add", {"y", "r"}, {"out"});
  b.Output("out", {"n"});
  b.Output("z", {"n"});
  return b.Serialize();
}

TEST(ControlCompiledTest, IfTakesTheBranchTheConditionPicks) {
  CompiledModel m(IfModel());
  ASSERT_NE(m.model, nullptr);
  for (int64_t n : {1, 4, 9}) {
    ir::NDArray x = Floats({n}, -1, 0.75);
    for (bool c : {true, false}) {
      // exp may differ from the interpreter's in the last bit.
      auto want = testing::ExpectSameAsReference(*m.model, m.module, {Bool(c), x}, 1e-6);
      ASSERT_EQ(want.size(), 2u);
      EXPECT_EQ(want[0].shape, (std::vector<int64_t>{n}));
    }
  }
}

// The outputs really differ between the branches (not only equal to the interpreter's).
TEST(ControlCompiledTest, IfBranchesGiveDifferentResults) {
  CompiledModel m(IfModel());
  ASSERT_NE(m.model, nullptr);
  ir::NDArray x = ArrayOf(DataType::Float(), {2}, {3, -2});
  auto then_out = testing::RunModel(
      *m.model, {Bool(true), x},
      {ir::NDArray::Zeros(DataType::Float(), {2}), ir::NDArray::Zeros(DataType::Float(), {2})});
  auto else_out = testing::RunModel(
      *m.model, {Bool(false), x},
      {ir::NDArray::Zeros(DataType::Float(), {2}), ir::NDArray::Zeros(DataType::Float(), {2})});
  ASSERT_EQ(then_out.size(), 2u);
  ASSERT_EQ(else_out.size(), 2u);
  EXPECT_EQ(then_out[0].GetDouble(0), 9);   // 3 + 3 + relu(3)
  EXPECT_EQ(else_out[0].GetDouble(0), 12);  // 3 * 3 + relu(3)
  EXPECT_EQ(then_out[1].GetDouble(1), -2);
}

// scan(a, b; xs) with body (a, b, x) -> (b, a; a + x, a * x): the state swaps each step, so
// each new state value is the other's old buffer. xs is scanned in reverse.
std::string ScanModel() {
  OnnxBuilder body;
  body.Input("a", {2});
  body.Input("b", {2});
  body.Input("x_t", {2});
  body.Node("Add", {"a", "x_t"}, {"sum"});
  body.Node("Mul", {"a", "x_t"}, {"prod"});
  body.Node("Identity", {"b"}, {"a_next"});
  body.Node("Identity", {"a"}, {"b_next"});
  body.Output("a_next", {2});
  body.Output("b_next", {2});
  body.Output("sum", {2});
  body.Output("prod", {2});
  OnnxBuilder b;
  b.Input("a0", {2});
  b.Input("b0", {2});
  b.Input("xs", {"len", 2});
  auto& scan = b.Node("Scan", {"a0", "b0", "xs"}, {"a_final", "b_final", "sums", "prods"}, "scan");
  OnnxBuilder::IntAttr(scan, "num_scan_inputs", 1);
  OnnxBuilder::IntsAttr(scan, "scan_input_directions", {1});
  OnnxBuilder::GraphAttr(scan, "body", body.graph());
  b.Output("a_final", {2});
  b.Output("b_final", {2});
  b.Output("sums", {"len", 2});
  b.Output("prods", {"len", 2});
  return b.Serialize();
}

TEST(ControlCompiledTest, ScanCarriesStateAndStacksOutputs) {
  CompiledModel m(ScanModel());
  ASSERT_NE(m.model, nullptr);
  for (int64_t len : {1, 2, 5}) {
    auto shape = m.ExpectSame({Floats({2}, 1, 1), Floats({2}, -3, 2), Floats({len, 2}, 0.5, 0.25)});
    EXPECT_EQ(shape, (std::vector<int64_t>{2}));
  }
}

// for i in [0, trips) while cond: acc = acc + x; cond = i < k; scan output: acc after each
// step. The iterations that run depend on both trips and k.
std::string LoopModel(bool with_k) {
  OnnxBuilder body;
  body.Input("i", {}, onnx::TensorProto::INT64);
  body.Input("cond_in", {}, onnx::TensorProto::BOOL);
  body.Input("acc_in", {"n"});
  body.Node("Add", {"acc_in", "x"}, {"acc_out"});
  if (with_k) {
    body.Node("Less", {"i", "k"}, {"cond_out"});
  } else {
    body.Node("Identity", {"cond_in"}, {"cond_out"});
  }
  body.Node("Identity", {"acc_out"}, {"step"});
  body.Output("cond_out", {}, onnx::TensorProto::BOOL);
  body.Output("acc_out", {"n"});
  body.Output("step", {"n"});
  OnnxBuilder b;
  b.Input("trips", {}, onnx::TensorProto::INT64);
  b.Input("k", {}, onnx::TensorProto::INT64);
  b.Input("x", {"n"});
  b.Input("acc", {"n"});
  BoolConstant(b, "true", true);
  auto& loop = b.Node("Loop", {"trips", "true", "acc"}, {"final", "steps"}, "loop");
  OnnxBuilder::GraphAttr(loop, "body", body.graph());
  b.Node("Mul", {"steps", "steps"}, {"squares"});
  b.Output("final", {"n"});
  b.Output("squares", {"s", "n"});
  return b.Serialize();
}

TEST(ControlCompiledTest, LoopRunsItsTripCount) {
  CompiledModel m(LoopModel(/*with_k=*/false));
  ASSERT_NE(m.model, nullptr);
  for (int64_t trips : {1, 3, 6}) {
    auto want = testing::ExpectSameAsReference(
        *m.model, m.module, {Int64(trips), Int64(0), Floats({3}, 1, 1), Floats({3}, 0, 0)});
    ASSERT_EQ(want.size(), 2u);
    EXPECT_EQ(want[1].shape, (std::vector<int64_t>{trips, 3}));
  }
}

TEST(ControlCompiledTest, LoopStopsWhenItsConditionTurnsFalse) {
  CompiledModel m(LoopModel(/*with_k=*/true));
  ASSERT_NE(m.model, nullptr);
  for (auto [trips, k] : std::vector<std::pair<int64_t, int64_t>>{{5, 1}, {5, 9}, {2, 0}}) {
    auto want = testing::ExpectSameAsReference(
        *m.model, m.module, {Int64(trips), Int64(k), Floats({2}, 1, 1), Floats({2}, 2, 0)});
    ASSERT_EQ(want.size(), 2u);
    EXPECT_EQ(want[1].shape[0], std::min(trips, k + 1)) << trips << " " << k;
  }
}

// for i in [0, trips): y = y + x[start : i + 1] with x = [1, 2, 3, 4, 5] a constant (or an
// input of length n), start = i (or 0); scan output: y after each step. The slice's length
// is read from values inside the body, so the body binds its own dims in each iteration
// (ONNX test_loop11 with start = i). With start = 0 the carried y grows after the first step.
std::string SliceLoopModel(bool start_at_i, bool x_is_input = false, bool with_scan = true) {
  OnnxBuilder body;
  body.Input("i", {}, onnx::TensorProto::INT64);
  body.Input("cond_in", {}, onnx::TensorProto::BOOL);
  body.Input("y_in", {1});
  body.Node("Add", {"i", "one"}, {"end"});
  body.Node("Unsqueeze", {"i"}, {"start"}).add_input("axes");
  body.Node("Unsqueeze", {"end"}, {"end1"}).add_input("axes");
  body.Node("Slice", {"x", start_at_i ? "start" : "zero", "end1"}, {"piece"});
  body.Node("Add", {"y_in", "piece"}, {"y_out"});
  body.Node("Identity", {"cond_in"}, {"cond_out"});
  body.Node("Identity", {"y_out"}, {"scan_out"});
  body.Output("cond_out", {}, onnx::TensorProto::BOOL);
  body.Output("y_out", {1});
  if (with_scan) body.Output("scan_out", {1});
  OnnxBuilder b;
  b.Input("trips", {}, onnx::TensorProto::INT64);
  b.Input("y", {1});
  if (x_is_input) {
    b.Input("x", {"n"});
  } else {
    b.FloatInitializer("x", {5}, {1, 2, 3, 4, 5});
  }
  b.Int64Initializer("one", {}, {1});
  b.Int64Initializer("zero", {1}, {0});
  b.Int64Initializer("axes", {1}, {0});
  BoolConstant(b, "true", true);
  std::vector<std::string> outputs = {"final"};
  if (with_scan) outputs.push_back("steps");
  auto& loop = b.Node("Loop", {"trips", "true", "y"}, outputs, "slice_loop");
  OnnxBuilder::GraphAttr(loop, "body", body.graph());
  b.Output("final", {1});
  if (with_scan) b.Output("steps", {"s", 1});
  return b.Serialize();
}

TEST(ControlCompiledTest, LoopBodyBindsItsOwnDimsEachIteration) {
  CompiledModel m(SliceLoopModel(/*start_at_i=*/true));
  ASSERT_NE(m.model, nullptr);
  for (int64_t trips : {1, 2, 5}) {
    ir::NDArray y = ArrayOf(DataType::Float(), {1}, {0.5});
    auto want = testing::ExpectSameAsReference(*m.model, m.module, {Int64(trips), y});
    ASSERT_EQ(want.size(), 2u);
    EXPECT_EQ(want[0].GetDouble(0), 0.5 + trips * (trips + 1) / 2) << trips;
    EXPECT_EQ(want[1].shape, (std::vector<int64_t>{trips, 1}));
  }
}

// ONNX lets a carried value change shape; compiled code keeps it in one buffer of the
// loop's state shape and checks each iteration that it still has it.
TEST(ControlCompiledTest, CarriedValueChangingShapeIsARunTimeError) {
  std::string onnx = SliceLoopModel(/*start_at_i=*/false, false, /*with_scan=*/false);
  CompiledModel m(onnx);
  ASSERT_NE(m.model, nullptr);
  ir::NDArray y = ArrayOf(DataType::Float(), {1}, {0.5});
  m.ExpectSame({Int64(1), y});  // one step: y + x[0:1] keeps the shape [1]
  auto grown = interp::Run(m.module, {Int64(2), y});
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ((*grown)[0].shape, (std::vector<int64_t>{2}));
  std::vector<ir::NDArray> inputs = {Int64(2), y};
  ir::NDArray final_y = ir::NDArray::Zeros(DataType::Float(), {1});
  std::vector<DLTensor> in = {testing::ViewOf(inputs[0]), testing::ViewOf(inputs[1])};
  std::vector<DLTensor> out = {testing::ViewOf(final_y)};
  std::string error;
  EXPECT_FALSE(m.model->Run(in, &out, &error));
  EXPECT_NE(error.find("a size computed from them is 2, expected 1"), std::string::npos) << error;
}

absl::Status CompileError(const std::string& onnx) {
  auto target = ir::ParseTarget("x86_64");
  EXPECT_TRUE(target.ok());
  return driver::CompileModel(onnx, *target, {}, nullptr).status();
}

TEST(ControlCompiledTest, ScanAlongAnotherAxisIsAClearError) {
  OnnxBuilder body;
  body.Input("s", {2});
  body.Input("x_t", {2});
  body.Node("Add", {"s", "x_t"}, {"s_next"});
  body.Output("s_next", {2});
  OnnxBuilder b;
  b.Input("s0", {2});
  b.Input("xs", {2, 3});
  auto& scan = b.Node("Scan", {"s0", "xs"}, {"s_final"}, "scan");
  OnnxBuilder::IntAttr(scan, "num_scan_inputs", 1);
  OnnxBuilder::IntsAttr(scan, "scan_input_axes", {1});
  OnnxBuilder::GraphAttr(scan, "body", body.graph());
  b.Output("s_final", {2});
  absl::Status status = CompileError(b.Serialize());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_NE(status.message().find("(scan): scan input 0 is not scanned along axis 0"),
            std::string::npos)
      << status;
}

TEST(ControlCompiledTest, LoopWithoutTripCountIsAClearError) {
  OnnxBuilder body;
  body.Input("i", {}, onnx::TensorProto::INT64);
  body.Input("cond_in", {}, onnx::TensorProto::BOOL);
  body.Input("acc_in", {2});
  body.Node("Add", {"acc_in", "acc_in"}, {"acc_out"});
  body.Node("Identity", {"cond_in"}, {"cond_out"});
  body.Output("cond_out", {}, onnx::TensorProto::BOOL);
  body.Output("acc_out", {2});
  OnnxBuilder b;
  b.Input("c", {}, onnx::TensorProto::BOOL);
  b.Input("acc", {2});
  auto& loop = b.Node("Loop", {"", "c", "acc"}, {"final"}, "loop");
  OnnxBuilder::GraphAttr(loop, "body", body.graph());
  b.Output("final", {2});
  absl::Status status = CompileError(b.Serialize());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_NE(status.message().find("(loop): a loop without a maximum trip count"), std::string::npos)
      << status;
}

// A dim the body reads from values sizes a buffer planned before the loop runs: it needs a
// bound known then (here x's length n would be one, which is not compiled yet).
TEST(ControlCompiledTest, BodyDimWithoutAConstantBoundIsAClearError) {
  absl::Status status = CompileError(SliceLoopModel(/*start_at_i=*/true, /*x_is_input=*/true));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_NE(status.message().find("(loop): the size of %"), std::string::npos) << status;
  EXPECT_NE(status.message().find("no bound known before the loop runs"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace kiln
