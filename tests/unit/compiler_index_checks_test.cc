// Kernels that read or write at indices taken from a tensor check them at run time: valid
// indices (negative ones wrap once where ONNX says so) give the interpreter's results, and an
// out-of-range index fails the call with a message naming the input, the index and the
// dimension, where the interpreter fails too. No access happens at a bad index, so these
// tests also hold under AddressSanitizer (`make sanitize`).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tests/support/import_and_run.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using namespace testing;  // NOLINT: test helpers

OnnxBuilder GatherModel(int64_t axis) {
  OnnxBuilder b;
  b.Input("data", {5, 5});
  b.Input("indices", {4}, onnx::TensorProto::INT64);
  OnnxBuilder::IntAttr(b.Node("Gather", {"data", "indices"}, {"y"}), "axis", axis);
  b.Output("y", axis == 0 ? std::vector<testing::Dim>{4, 5} : std::vector<testing::Dim>{5, 4});
  return b;
}

TEST(IndexChecksTest, GatherWrapsNegativeIndicesAndRejectsOutOfRange) {
  for (int64_t axis : {0, 1}) {
    CompiledModel c(GatherModel(axis));
    ASSERT_TRUE(c.model);
    c.ExpectMatches({Iota({5, 5}), I64({4}, {0, -1, 4, -5})});
    std::string dim = std::to_string(axis);
    c.ExpectCallFails({Iota({5, 5}), I64({4}, {0, 7, 1, 2})},
                      "input 'indices' holds index 7, out of range for dimension " + dim +
                          " of size 5 (gather axis " + dim + ")");
    c.ExpectCallFails({Iota({5, 5}), I64({4}, {0, 1, 2, -6})},
                      "input 'indices' holds index -6, out of range for dimension " + dim +
                          " of size 5 (gather axis " + dim + ")");
  }
}

TEST(IndexChecksTest, ComputedIndicesAreNamedByTheirOp) {
  OnnxBuilder b;
  b.Input("data", {5, 3});
  b.Input("base", {4}, onnx::TensorProto::INT64);
  b.Int64Initializer("two", {1}, {2});
  b.Node("Add", {"base", "two"}, {"indices"});
  b.Node("Gather", {"data", "indices"}, {"y"});
  b.Output("y", {4, 3});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  c.ExpectMatches({Iota({5, 3}), I64({4}, {0, -3, 2, -7})});
  c.ExpectCallFails({Iota({5, 3}), I64({4}, {0, 1, 3, 0})},
                    "op gather: index 5 (computed by the model) out of range for dimension 0 of "
                    "size 5");
}

TEST(IndexChecksTest, GatherElements) {
  OnnxBuilder b;
  b.Input("data", {3, 4});
  b.Input("indices", {3, 2}, onnx::TensorProto::INT64);
  OnnxBuilder::IntAttr(b.Node("GatherElements", {"data", "indices"}, {"y"}), "axis", 1);
  b.Output("y", {3, 2});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  c.ExpectMatches({Iota({3, 4}), I64({3, 2}, {0, 3, -1, -4, 2, 1})});
  c.ExpectCallFails({Iota({3, 4}), I64({3, 2}, {0, 3, -1, 4, 2, 1})},
                    "input 'indices' holds index 4, out of range for dimension 1 of size 4 "
                    "(gather_elements axis 1)");
}

TEST(IndexChecksTest, GatherND) {
  OnnxBuilder b;
  b.Input("data", {3, 4});
  b.Input("indices", {2, 2}, onnx::TensorProto::INT64);
  b.Node("GatherND", {"data", "indices"}, {"y"});
  b.Output("y", {2});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  c.ExpectMatches({Iota({3, 4}), I64({2, 2}, {2, -1, -3, 0})});
  c.ExpectCallFails({Iota({3, 4}), I64({2, 2}, {2, -1, 3, 0})},
                    "input 'indices' holds index 3, out of range for dimension 0 of size 3 "
                    "(gather_nd axis 0)");
  c.ExpectCallFails({Iota({3, 4}), I64({2, 2}, {2, -5, 0, 0})},
                    "input 'indices' holds index -5, out of range for dimension 1 of size 4 "
                    "(gather_nd axis 1)");
}

TEST(IndexChecksTest, ScatterElements) {
  OnnxBuilder b;
  b.Input("data", {2, 5});
  b.Input("indices", {2, 2}, onnx::TensorProto::INT64);
  b.Input("updates", {2, 2});
  auto& n = b.Node("ScatterElements", {"data", "indices", "updates"}, {"y"});
  OnnxBuilder::IntAttr(n, "axis", 1);
  OnnxBuilder::StringAttr(n, "reduction", "add");
  b.Output("y", {2, 5});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  c.ExpectMatches({Iota({2, 5}), I64({2, 2}, {-1, 4, 0, -5}), Iota({2, 2})});
  c.ExpectCallFails({Iota({2, 5}), I64({2, 2}, {-1, 4, 5, 0}), Iota({2, 2})},
                    "input 'indices' holds index 5, out of range for dimension 1 of size 5 "
                    "(scatter_elements axis 1)");
}

TEST(IndexChecksTest, ScatterND) {
  OnnxBuilder b;
  b.Input("data", {4, 3});
  b.Input("indices", {2, 1}, onnx::TensorProto::INT64);
  b.Input("updates", {2, 3});
  b.Node("ScatterND", {"data", "indices", "updates"}, {"y"});
  b.Output("y", {4, 3});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  c.ExpectMatches({Iota({4, 3}), I64({2, 1}, {-1, 1}), Iota({2, 3})});
  c.ExpectCallFails({Iota({4, 3}), I64({2, 1}, {1, -5}), Iota({2, 3})},
                    "input 'indices' holds index -5, out of range for dimension 0 of size 4 "
                    "(scatter_nd axis 0)");
}

// ONNX defines no error: an index that names no position leaves its row all off.
TEST(IndexChecksTest, OneHotOutOfRangeGivesAnOffRow) {
  OnnxBuilder b;
  b.Input("indices", {5}, onnx::TensorProto::INT64);
  b.Int64Initializer("depth", {}, {4});
  b.FloatInitializer("values", {2}, {-1, 3});
  b.Node("OneHot", {"indices", "depth", "values"}, {"y"});
  b.Output("y", {5, 4});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  auto want = ExpectSameAsReference(*c.model, c.module, {I64({5}, {0, -1, 4, -5, 100})});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(Values(want[0]), (std::vector<double>{3,  -1, -1, -1, -1, -1, -1, 3,  -1, -1,
                                                  -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
}

OnnxBuilder LossModel(const std::string& op, bool ignore) {
  OnnxBuilder b(13);
  b.Input("scores", {3, 4});
  b.Input("target", {3}, onnx::TensorProto::INT64);
  auto& n = b.Node(op, {"scores", "target"}, {"loss"});
  OnnxBuilder::StringAttr(n, "reduction", "none");
  if (ignore) OnnxBuilder::IntAttr(n, "ignore_index", -1);
  b.Output("loss", {3});
  return b;
}

TEST(IndexChecksTest, LossTargetsAreCheckedUnlessIgnored) {
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    SCOPED_TRACE(op);
    std::string name = std::string(op) == "NegativeLogLikelihoodLoss"
                           ? "negative_log_likelihood_loss"
                           : "softmax_cross_entropy_loss";
    CompiledModel ignoring(LossModel(op, true));
    ASSERT_TRUE(ignoring.model);
    ignoring.ExpectMatches({Iota({3, 4}), I64({3}, {3, -1, 0})});
    ignoring.ExpectCallFails({Iota({3, 4}), I64({3}, {3, -2, 0})},
                             "input 'target' holds index -2, out of range for dimension 1 of size "
                             "4 (" +
                                 name + " axis 1)");
    CompiledModel plain(LossModel(op, false));
    ASSERT_TRUE(plain.model);
    plain.ExpectMatches({Iota({3, 4}), I64({3}, {3, 1, 0})});
    plain.ExpectCallFails({Iota({3, 4}), I64({3}, {3, 4, 0})},
                          "input 'target' holds index 4, out of range for dimension 1 of size 4 (" +
                              name + " axis 1)");
  }
}

TEST(IndexChecksTest, RoiAlignBatchIndices) {
  OnnxBuilder b(16);
  b.Input("x", {2, 1, 4, 4});
  b.Input("rois", {2, 4});
  b.Input("batch_indices", {2}, onnx::TensorProto::INT64);
  auto& n = b.Node("RoiAlign", {"x", "rois", "batch_indices"}, {"y"});
  OnnxBuilder::IntAttr(n, "output_height", 2);
  OnnxBuilder::IntAttr(n, "output_width", 2);
  b.Output("y", {2, 1, 2, 2});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  ir::NDArray rois = F32({2, 4}, {0, 0, 3, 3, 1, 1, 2.5f, 3});
  c.ExpectMatches({Iota({2, 1, 4, 4}), rois, I64({2}, {1, 0})});
  c.ExpectCallFails({Iota({2, 1, 4, 4}), rois, I64({2}, {1, 2})},
                    "input 'batch_indices' holds index 2, out of range for dimension 0 of size 2 "
                    "(roi_align axis 0)");
}

TEST(IndexChecksTest, MaxUnpoolFlatIndices) {
  OnnxBuilder b(11);
  b.Input("x", {1, 1, 2, 2});
  b.Input("indices", {1, 1, 2, 2}, onnx::TensorProto::INT64);
  auto& n = b.Node("MaxUnpool", {"x", "indices"}, {"y"});
  OnnxBuilder::IntsAttr(n, "kernel_shape", {2, 2});
  OnnxBuilder::IntsAttr(n, "strides", {2, 2});
  b.Output("y", {1, 1, 4, 4});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  c.ExpectMatches({Iota({1, 1, 2, 2}), I64({1, 1, 2, 2}, {5, 2, 15, 8})});
  c.ExpectCallFails({Iota({1, 1, 2, 2}), I64({1, 1, 2, 2}, {5, 2, 16, 8})},
                    "input 'indices' holds index 16, out of range for size 16 (max_unpool)");
  c.ExpectCallFails({Iota({1, 1, 2, 2}), I64({1, 1, 2, 2}, {-1, 2, 15, 8})},
                    "input 'indices' holds index -1, out of range for size 16 (max_unpool)");
}

}  // namespace
}  // namespace kiln
