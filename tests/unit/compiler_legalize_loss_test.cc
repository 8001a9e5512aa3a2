// Compiled negative_log_likelihood_loss and softmax_cross_entropy_loss against the reference
// interpreter: weights, an ignored class, and each reduction.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/import_and_run.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

namespace kiln::testing {
namespace {

using arith::DataType;

constexpr int kI64 = onnx::TensorProto::INT64;

// input [2, 3, 2] (N, C, d1); targets [2, 2] with one ignored entry (class 2).
std::vector<ir::NDArray> LossInputs(bool with_weight) {
  std::vector<ir::NDArray> in = {
      ArrayOf(DataType::Float(), {2, 3, 2}, {0.5, -1, 2, 0.25, -0.5, 1, 3, -2, 0, 1.5, -1, 0.75}),
      ArrayOf(DataType::Int(), {2, 2}, {0, 2, 1, 0})};
  if (with_weight) in.push_back(ArrayOf(DataType::Float(), {3}, {0.5, 2, 4}));
  return in;
}

std::string NLLModel(const std::string& reduction, bool with_weight) {
  OnnxBuilder b(13);
  b.Input("x", {2, 3, 2});
  b.Input("t", {2, 2}, kI64);
  std::vector<std::string> args = {"x", "t"};
  if (with_weight) {
    b.Input("w", {3});
    args.push_back("w");
  }
  auto& node = b.Node("NegativeLogLikelihoodLoss", args, {"loss"});
  OnnxBuilder::StringAttr(node, "reduction", reduction);
  OnnxBuilder::IntAttr(node, "ignore_index", 2);
  if (reduction == "none") {
    b.Output("loss", {2, 2});
  } else {
    b.Output("loss", {});
  }
  return b.Serialize();
}

TEST(LegalizeLossTest, NLLMeanDividesByTheWeightOfTheCountedTargets) {
  auto want = ExpectCompiledMatchesReference(NLLModel("mean", true), LossInputs(true));
  ASSERT_EQ(want.size(), 1u);
  // Counted: (n0, d0) class 0 -> -0.5 * 0.5; (n1, d0) class 1 -> -0 * 2; (n1, d1) class 0
  // -> -(-2) * 0.5. Total weight 0.5 + 2 + 0.5.
  double expected = (-0.5 * 0.5 + 0 * 2 + 2 * 0.5) / 3.0;
  EXPECT_NEAR(want[0].GetDouble(0), expected, 1e-6);
}

TEST(LegalizeLossTest, NLLNoneKeepsEachElement) {
  auto want = ExpectCompiledMatchesReference(NLLModel("none", false), LossInputs(false));
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].GetDouble(1), 0);  // ignored
  EXPECT_EQ(want[0].GetDouble(3), 2);  // -x[1, 0, 1]
}

TEST(LegalizeLossTest, NLLSumWithoutWeight) {
  ExpectCompiledMatchesReference(NLLModel("sum", false), LossInputs(false));
}

TEST(LegalizeLossTest, SoftmaxCrossEntropyGivesLossAndLogProb) {
  OnnxBuilder b(13);
  b.Input("x", {2, 3, 2});
  b.Input("t", {2, 2}, kI64);
  b.Input("w", {3});
  auto& node = b.Node("SoftmaxCrossEntropyLoss", {"x", "t", "w"}, {"loss", "log_prob"});
  OnnxBuilder::IntAttr(node, "ignore_index", 2);
  b.Output("loss", {});
  b.Output("log_prob", {2, 3, 2});
  auto want = ExpectCompiledMatchesReference(b.Serialize(), LossInputs(true));
  ASSERT_EQ(want.size(), 2u);
  // log_prob[0, 0, 0] = 0.5 - log(e^0.5 + e^2 + e^-0.5).
  EXPECT_NEAR(want[1].GetDouble(0), 0.5 - std::log(std::exp(0.5) + std::exp(2) + std::exp(-0.5)),
              1e-6);
}

}  // namespace
}  // namespace kiln::testing
