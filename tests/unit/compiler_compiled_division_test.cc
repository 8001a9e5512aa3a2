// Integer division in a compiled artifact never traps: x / 0 gives 0 and INT_MIN / -1 wraps,
// exactly as the reference interpreter answers, so a bad input cannot kill the process that
// runs the model.
#include <gtest/gtest.h>

#include <climits>

#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/artifact.h"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;

ir::NDArray Int32s(std::vector<int32_t> values) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Int(32), {int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i) a.data<int32_t>()[i] = values[i];
  return a;
}

TEST(CompiledDivisionTest, IntegerDivisionByZeroAndMinusOneMatchesTheReference) {
  OnnxBuilder b;
  b.Input("a", {"n"}, onnx::TensorProto::INT32);
  b.Input("b", {"n"}, onnx::TensorProto::INT32);
  b.Node("Div", {"a", "b"}, {"q"});
  b.Output("q", {"n"}, onnx::TensorProto::INT32);
  std::string model = b.Serialize();
  std::vector<ir::NDArray> inputs = {Int32s({7, -7, 5, INT_MIN, 9}), Int32s({2, 2, 0, -1, -1})};

  auto module = driver::ImportModel(model);
  ASSERT_TRUE(module.ok()) << module.status();
  auto want = interp::Run(*module, inputs);
  ASSERT_TRUE(want.ok()) << want.status();

  std::unique_ptr<runtime::Model> loaded = testing::CompileAndLoad(model);
  ASSERT_TRUE(loaded);
  ir::NDArray got = ir::NDArray::Zeros(arith::DataType::Int(32), {5});
  std::vector<DLTensor> in = {testing::ViewOf(inputs[0]), testing::ViewOf(inputs[1])};
  std::vector<DLTensor> out = {testing::ViewOf(got)};
  std::string error;
  ASSERT_TRUE(loaded->Run(in, &out, &error)) << error;
  std::vector<int32_t> expected = {3, -3, 0, INT_MIN, -9};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ((*want)[0].data<int32_t>()[i], expected[i]) << "reference, element " << i;
    EXPECT_EQ(got.data<int32_t>()[i], expected[i]) << "compiled, element " << i;
  }
}

}  // namespace
}  // namespace kiln
