// MatMul (numpy's 1-D rules, batch broadcasting), Gemm's bias forms and Einsum: symbolic
// dims flow through, values match hand-computed products, bad equations name the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/compiler_nn_test_util.h"

namespace kiln::nn_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NNMatmulTest, BatchBroadcastKeepsSymbolicBatch) {
  OnnxBuilder b;
  b.Input("a", {"n", 2, 3});
  b.FloatInitializer("w", {3, 1}, {1, 10, 100});
  b.Node("MatMul", {"a", "w"}, {"y"});
  b.Output("y", {"n", 2, 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([n, 2, 1], f32)");
  auto out = interp::Run(*m, {Iota({2, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(210, 543, 876, 1209));
}

TEST(NNMatmulTest, VectorOperandsGainAndLoseADim) {
  OnnxBuilder b;
  b.Input("v", {"k"});
  b.Input("m", {"n", "k", 2});
  b.Input("u", {2});
  b.Node("MatMul", {"v", "m"}, {"vm"});    // [k] @ [n, k, 2] -> [n, 2]
  b.Node("MatMul", {"vm", "u"}, {"vmu"});  // [n, 2] @ [2] -> [n]
  b.Node("MatMul", {"u", "u"}, {"dot"});   // [2] @ [2] -> []
  b.Output("vmu", {"n"});
  b.Output("dot", {});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "vm"), "Tensor([n, 2], f32)");
  EXPECT_EQ(InfoOf(*m, "vmu"), "Tensor([n], f32)");
  EXPECT_EQ(InfoOf(*m, "dot"), "Tensor([], f32)");
  // v = [1 1 1]; m's two batches are iota; u = [1 2].
  auto out = interp::Run(*m, {F32({3}, {1, 1, 1}), Iota({2, 3, 2}), F32({2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Column sums: batch 0 [6 9], batch 1 [24 27]; then dotted with [1 2].
  EXPECT_THAT(Values((*out)[0]), ElementsAre(24, 78));
  EXPECT_THAT(Values((*out)[1]), ElementsAre(5));
}

TEST(NNMatmulTest, RunTimeShapesKeepTheRankAndAreCheckedByTheKernel) {
  OnnxBuilder b;
  b.Input("x", {6});
  b.Input("s", {2}, onnx::TensorProto::INT64);
  b.FloatInitializer("w", {3, 1}, {1, 1, 1});
  b.Node("Reshape", {"x", "s"}, {"r"});  // shape known only at run time
  b.Node("MatMul", {"r", "w"}, {"y"});
  b.Output("y", {"?", 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor(ndim=2, f32)");
  ir::NDArray fits = ArrayOf(arith::DataType::Int(64), {2}, {2, 3});
  auto out = interp::Run(*m, {Iota({6}), fits});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(3, 12));
  ir::NDArray clashes = ArrayOf(arith::DataType::Int(64), {2}, {3, 2});
  auto bad = interp::Run(*m, {Iota({6}), clashes});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "op matmul: inner dimensions differ: 2 and 3");
}

TEST(NNMatmulTest, InnerDimMismatchIsAUserError) {
  OnnxBuilder b;
  b.Input("a", {2, 3});
  b.Input("b", {4, 2});
  b.Node("MatMul", {"a", "b"}, {"y"}, "bad_mm");
  b.Output("y", {2, 2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            "node 0 'bad_mm' (op MatMul): op matmul: inner dimensions differ: 3 and 4");
}

TEST(NNMatmulTest, GemmBroadcastsVectorBiasAndWorksWithoutOne) {
  OnnxBuilder b;
  b.Input("a", {"n", 2});
  b.FloatInitializer("w", {2, 2}, {1, 0, 0, 1});
  b.FloatInitializer("c", {2}, {10, 20});
  auto& gemm = b.Node("Gemm", {"a", "w", "c"}, {"y"});
  OnnxBuilder::FloatAttr(gemm, "alpha", 2.0f);
  b.Node("Gemm", {"a", "w"}, {"z"});
  b.Output("y", {"n", 2});
  b.Output("z", {"n", 2});
  auto out = ImportAndRun(b, {F32({2, 2}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values((*out)[0]), ElementsAre(12, 24, 16, 28));
  EXPECT_THAT(Values((*out)[1]), ElementsAre(1, 2, 3, 4));
}

absl::StatusOr<std::vector<ir::NDArray>> RunEinsum(const std::string& equation,
                                                   const std::vector<ir::NDArray>& inputs) {
  OnnxBuilder b(12);
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    std::vector<testing::Dim> dims(inputs[i].shape.begin(), inputs[i].shape.end());
    b.Input(names.back(), dims);
  }
  OnnxBuilder::StringAttr(b.Node("Einsum", names, {"y"}, "einsum"), "equation", equation);
  b.Output("y", {});
  return ImportAndRun(b, inputs);
}

TEST(NNEinsumTest, ExplicitImplicitDiagonalAndEllipsis) {
  auto mm = RunEinsum("ij,jk->ik", {Iota({2, 3}), Iota({3, 2})});
  ASSERT_TRUE(mm.ok()) << mm.status();
  EXPECT_THAT(Values((*mm)[0]), ElementsAre(10, 13, 28, 40));
  // Implicit output: labels used once, alphabetically: "ij,jk" is "ik" too, "ba" is "ab".
  auto transposed = RunEinsum("ba", {Iota({2, 3})});
  ASSERT_TRUE(transposed.ok()) << transposed.status();
  EXPECT_THAT((*transposed)[0].shape, ElementsAre(3, 2));
  EXPECT_THAT(Values((*transposed)[0]), ElementsAre(0, 3, 1, 4, 2, 5));
  auto trace = RunEinsum("ii", {Iota({3, 3})});
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_THAT(Values((*trace)[0]), ElementsAre(12));
  auto diag = RunEinsum("...ii->...i", {Iota({2, 2, 2})});
  ASSERT_TRUE(diag.ok()) << diag.status();
  EXPECT_THAT(Values((*diag)[0]), ElementsAre(0, 3, 4, 7));
  // Ellipsis dims broadcast: [2] against [3, 2] sums over the last label.
  auto bcast = RunEinsum("...j,...j->...", {F32({2}, {1, 10}), Iota({3, 2})});
  ASSERT_TRUE(bcast.ok()) << bcast.status();
  EXPECT_THAT(Values((*bcast)[0]), ElementsAre(10, 32, 54));
}

TEST(NNEinsumTest, SymbolicDimsFlowThroughLabels) {
  OnnxBuilder b(12);
  b.Input("a", {"n", "k"});
  b.Input("c", {"k", "m"});
  OnnxBuilder::StringAttr(b.Node("Einsum", {"a", "c"}, {"y"}), "equation", "nk,km->mn");
  b.Output("y", {"m", "n"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(InfoOf(*m, "y"), "Tensor([m, n], f32)");
}

TEST(NNEinsumTest, BadEquationsNameTheProblem) {
  auto rank = RunEinsum("ijk->i", {Iota({2, 3})});
  ASSERT_FALSE(rank.ok());
  EXPECT_THAT(std::string(rank.status().message()),
              HasSubstr("op einsum: term 'ijk' does not fit operand 0 of rank 2"));
  auto clash = RunEinsum("ij,ij->i", {Iota({2, 3}), Iota({2, 4})});
  ASSERT_FALSE(clash.ok());
  EXPECT_THAT(std::string(clash.status().message()),
              HasSubstr("operand 1 dim 1 is 4, but its label has extent 3"));
  auto output = RunEinsum("ij->k", {Iota({2, 3})});
  ASSERT_FALSE(output.ok());
  EXPECT_THAT(std::string(output.status().message()), HasSubstr("does not appear in any input"));
}

}  // namespace
}  // namespace kiln::nn_test
