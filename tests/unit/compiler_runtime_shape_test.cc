// Shapes that depend on tensor values known only at run time (a reshape target that is a
// graph input): the importer binds the values to symbolic variables with
// match_cast(tensor_to_shape(...)), the reference interpreter binds them from the data, and
// compiled code reads them from the input's data. Compiled results are compared with the
// reference interpreter and with independently computed values.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>

#include "compiler/ir/parser.h"
#include "kiln/runtime.hpp"
#include "tests/support/import_and_run.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using namespace testing;  // NOLINT: test helpers

// Reshape(x[2, 3, 4], shape) with `shape` a 2-element graph input.
OnnxBuilder ReshapeByInputModel() {
  OnnxBuilder b;
  b.Input("x", {2, 3, 4});
  b.Input("shape", {2}, onnx::TensorProto::INT64);
  b.Node("Reshape", {"x", "shape"}, {"y"});
  b.Output("y", {"a", "b"});
  return b;
}

TEST(RuntimeShapeTest, ReshapeTargetFromAnInputIsBoundToSymbolicValues) {
  auto m = driver::ImportModel(ReshapeByInputModel().Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  std::string text = ir::ToString(*m);
  EXPECT_NE(text.find("match_cast(tensor_to_shape(%shape)"), std::string::npos) << text;
  // Rank 2 with dims computed from the values, not only a rank.
  EXPECT_EQ(InfoOf(*m, "y").rfind("Tensor([select(", 0), 0u) << text;
}

TEST(RuntimeShapeTest, TextRoundTripsTensorToShapeBinding) {
  auto m = driver::ImportModel(ReshapeByInputModel().Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  std::string text = ir::ToString(*m);
  auto parsed = ir::ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(ir::ToString(*parsed), text);
}

// ONNX semantics, computed by hand: 0 copies the input dim, -1 takes what is left.
TEST(RuntimeShapeTest, InterpreterResolvesZeroAndMinusOne) {
  struct Case {
    std::vector<int64_t> target, want;
  } cases[] = {{{4, 6}, {4, 6}}, {{-1, 8}, {3, 8}}, {{0, -1}, {2, 12}}, {{24, -1}, {24, 1}}};
  for (const Case& c : cases) {
    auto out = ImportAndRun(ReshapeByInputModel(), {Iota({2, 3, 4}), I64({2}, c.target)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape, c.want) << c.target[0] << ", " << c.target[1];
    EXPECT_EQ(Values((*out)[0]), Values(Iota({2, 3, 4})));
  }
}

TEST(RuntimeShapeTest, InterpreterRejectsAWrongElementCount) {
  auto out = ImportAndRun(ReshapeByInputModel(), {Iota({2, 3, 4}), I64({2}, {5, 5})});
  EXPECT_FALSE(out.ok());
}

DLTensor View(ir::NDArray& a) {
  DLTensor t{};
  t.data = a.bytes.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(a.shape.size());
  t.dtype = {a.dtype.code, a.dtype.bits, 1};
  t.shape = a.shape.data();
  return t;
}

std::unique_ptr<runtime::Model> Compile(const OnnxBuilder& b, const std::string& tag) {
  auto target = ir::ParseTarget("x86_64");
  EXPECT_TRUE(target.ok());
  auto artifact = driver::CompileModel(b.Serialize(), *target, {}, nullptr);
  EXPECT_TRUE(artifact.ok()) << artifact.status();
  if (!artifact.ok()) return nullptr;
  std::string path = ::testing::TempDir() + "/kiln_runtime_shape_" + tag + ".so";
  std::ofstream(path, std::ios::binary) << artifact->bytes;
  std::string error;
  auto loaded = runtime::Model::Load(path, &error);
  std::remove(path.c_str());
  EXPECT_TRUE(loaded) << error;
  return loaded;
}

TEST(RuntimeShapeTest, CompiledReshapeMatchesTheInterpreter) {
  OnnxBuilder b = ReshapeByInputModel();
  auto model = Compile(b, "reshape");
  ASSERT_TRUE(model);
  for (std::vector<int64_t> target : {std::vector<int64_t>{-1, 8}, {0, -1}, {6, 4}}) {
    std::vector<ir::NDArray> inputs = {Iota({2, 3, 4}), I64({2}, target)};
    auto want = ImportAndRun(b, inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<DLTensor> in = {View(inputs[0]), View(inputs[1])};
    std::vector<std::vector<int64_t>> shapes;
    std::string error;
    ASSERT_TRUE(model->OutputShapes(in, &shapes, &error)) << error;
    ASSERT_EQ(shapes.size(), 1u);
    EXPECT_EQ(shapes[0], (*want)[0].shape);
    ir::NDArray got = ir::NDArray::Zeros(arith::DataType::Float(32), shapes[0]);
    std::vector<DLTensor> out = {View(got)};
    ASSERT_TRUE(model->Run(in, &out, &error)) << error;
    EXPECT_EQ(Values(got), Values((*want)[0]));
  }
}

TEST(RuntimeShapeTest, CompiledReshapeReportsValuesThatDoNotFit) {
  auto model = Compile(ReshapeByInputModel(), "reshape_error");
  ASSERT_TRUE(model);
  ir::NDArray x = Iota({2, 3, 4});
  for (std::vector<int64_t> target : {std::vector<int64_t>{5, 5}, {-2, -12}}) {
    ir::NDArray shape = I64({2}, target);
    std::vector<DLTensor> in = {View(x), View(shape)};
    std::vector<std::vector<int64_t>> shapes;
    std::string error;
    EXPECT_FALSE(model->OutputShapes(in, &shapes, &error));
    EXPECT_NE(error.find("'shape' holds values that do not fit"), std::string::npos) << error;
  }
}

TEST(RuntimeShapeTest, OutputShapesNeedTheDataOfInputsWhoseValuesDecideShapes) {
  auto model = Compile(ReshapeByInputModel(), "reshape_no_data");
  ASSERT_TRUE(model);
  ir::NDArray x = Iota({2, 3, 4});
  ir::NDArray shape = I64({2}, {4, 6});
  std::vector<DLTensor> in = {View(x), View(shape)};
  in[1].data = nullptr;
  std::vector<std::vector<int64_t>> shapes;
  std::string error;
  EXPECT_FALSE(model->OutputShapes(in, &shapes, &error));
  EXPECT_NE(error.find("'shape': its values decide shapes"), std::string::npos) << error;
}

// Runs the compiled model and the interpreter on the same inputs; outputs must agree, and
// the compiled one lands in *got.
void ExpectCompiledMatchesInterpreter(const OnnxBuilder& b, const std::string& tag,
                                      std::vector<ir::NDArray> inputs, ir::NDArray* got) {
  auto model = Compile(b, tag);
  ASSERT_TRUE(model);
  auto want = ImportAndRun(b, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<DLTensor> in;
  for (ir::NDArray& a : inputs) in.push_back(View(a));
  std::vector<std::vector<int64_t>> shapes;
  std::string error;
  ASSERT_TRUE(model->OutputShapes(in, &shapes, &error)) << error;
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0], (*want)[0].shape);
  *got = ir::NDArray::Zeros((*want)[0].dtype, shapes[0]);
  std::vector<DLTensor> out = {View(*got)};
  ASSERT_TRUE(model->Run(in, &out, &error)) << error;
  EXPECT_EQ(Values(*got), Values((*want)[0]));
}

TEST(RuntimeShapeTest, CompiledUnsqueezeWithAxesInputMatchesTheInterpreter) {
  OnnxBuilder b;
  b.Input("x", {3, 4});
  b.Input("axes", {2}, onnx::TensorProto::INT64);
  b.Node("Unsqueeze", {"x", "axes"}, {"y"});
  b.Output("y", {"a", "b", "c", "d"});
  ir::NDArray got;
  ExpectCompiledMatchesInterpreter(b, "unsqueeze", {Iota({3, 4}), I64({2}, {-1, 1})}, &got);
  EXPECT_EQ(got.shape, (std::vector<int64_t>{3, 1, 4, 1}));  // axes of the rank-4 result
  EXPECT_EQ(Values(got), Values(Iota({3, 4})));
}

TEST(RuntimeShapeTest, CompiledSliceWithBoundsInputsMatchesTheInterpreter) {
  OnnxBuilder b;
  b.Input("x", {5, 6});
  b.Input("starts", {2}, onnx::TensorProto::INT64);
  b.Input("ends", {2}, onnx::TensorProto::INT64);
  b.Int64Initializer("axes", {2}, {0, 1});
  b.Node("Slice", {"x", "starts", "ends", "axes"}, {"y"});
  b.Output("y", {"a", "b"});
  // Negative, out of range and "to the end" (INT64_MAX) bounds: rows 1..4, columns 0..3.
  ir::NDArray got;
  ExpectCompiledMatchesInterpreter(
      b, "slice", {Iota({5, 6}), I64({2}, {-4, -100}), I64({2}, {INT64_MAX, 4})}, &got);
  std::vector<double> want;
  for (int r = 1; r < 5; ++r) {
    for (int c = 0; c < 4; ++c) want.push_back(r * 6 + c);
  }
  EXPECT_EQ(got.shape, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(Values(got), want);
}

// A matmul cannot prove that a reshaped dim (a select over run-time values) is its inner dim;
// it falls back to the operand's rank, as before those values were followed.
TEST(RuntimeShapeTest, OpsThatCannotProveRuntimeDimsKeepTheRank) {
  OnnxBuilder b;
  b.Input("x", {2, 3, 4});
  b.Input("shape", {2}, onnx::TensorProto::INT64);
  b.Input("w", {4, 5});
  b.Node("Reshape", {"x", "shape"}, {"r"});
  b.Node("MatMul", {"r", "w"}, {"y"});
  b.Output("y", {"a", 5});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor(ndim=2, f32)");
  ir::NDArray w = ir::NDArray::Zeros(arith::DataType::Float(32), {4, 5});
  for (int k = 0; k < 4; ++k) w.data<float>()[k * 5 + k] = 1;  // [I | 0]
  auto out = ImportAndRun(b, {Iota({2, 3, 4}), I64({2}, {-1, 4}), w});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{6, 5}));
  EXPECT_EQ((*out)[0].GetDouble(5 * 5 + 3), 23.0);  // row 5, column 3: x[23]
}

TEST(RuntimeShapeTest, CompiledRangeWithInputBoundsMatchesTheInterpreter) {
  OnnxBuilder b;
  for (const char* name : {"start", "limit", "delta"}) {
    b.Input(name, {}, onnx::TensorProto::INT64);
  }
  b.Node("Range", {"start", "limit", "delta"}, {"y"});
  b.Output("y", {"n"}, onnx::TensorProto::INT64);
  ir::NDArray got;
  ExpectCompiledMatchesInterpreter(b, "range", {I64({}, {10}), I64({}, {1}), I64({}, {-4})}, &got);
  EXPECT_EQ(Values(got), (std::vector<double>{10, 6, 2}));
  ExpectCompiledMatchesInterpreter(b, "range_empty", {I64({}, {1}), I64({}, {10}), I64({}, {-4})},
                                   &got);
  EXPECT_EQ(got.num_elements(), 0);
}

}  // namespace
}  // namespace kiln
