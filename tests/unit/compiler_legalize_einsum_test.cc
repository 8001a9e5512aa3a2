// einsum compiled with symbolic dims, against the reference interpreter and against sums
// computed here.
#include <gtest/gtest.h>

#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"

namespace kiln {
namespace {

using arith::DataType;
using testing::OnnxBuilder;

void Equation(onnx::NodeProto& node, const std::string& equation) {
  auto* a = node.add_attribute();
  a->set_name("equation");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(equation);
}

// A batched matmul whose contracted label has a symbolic extent, and a broadcast batch.
TEST(LegalizeEinsumTest, BatchMatmulOverSymbolicDim) {
  OnnxBuilder b(12);
  b.Input("a", {2, 3, "k"});
  b.Input("c", {1, "k", 2});
  Equation(b.Node("Einsum", {"a", "c"}, {"y"}), "bij,bjk->bik");
  b.Output("y", {2, 3, 2});
  std::vector<double> a(2 * 3 * 4), c(4 * 2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.25 * i - 1;
  for (size_t i = 0; i < c.size(); ++i) c[i] = 1.5 - 0.5 * i;
  auto want = testing::ExpectCompiledMatchesReference(
      b.Serialize(), {testing::ArrayOf(DataType::Float(), {2, 3, 4}, a),
                      testing::ArrayOf(DataType::Float(), {1, 4, 2}, c)});
  ASSERT_EQ(want.size(), 1u);
  // y[1][2][1] = sum_j a[1][2][j] * c[0][j][1]
  double expected = 0;
  for (int j = 0; j < 4; ++j) expected += a[(1 * 3 + 2) * 4 + j] * c[j * 2 + 1];
  EXPECT_DOUBLE_EQ(want[0].GetDouble((1 * 3 + 2) * 2 + 1), expected);
}

// A diagonal and a full sum of an integer tensor: repeated labels, no output labels.
TEST(LegalizeEinsumTest, TraceOfIntegers) {
  OnnxBuilder b(12);
  b.Input("x", {"n", "n"}, onnx::TensorProto::INT32);
  Equation(b.Node("Einsum", {"x"}, {"y"}), "ii->");
  b.Output("y", {}, onnx::TensorProto::INT32);
  auto want = testing::ExpectCompiledMatchesReference(
      b.Serialize(), {testing::ArrayOf(DataType::Int(32), {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(0), 1 + 5 + 9);
}

}  // namespace
}  // namespace kiln
