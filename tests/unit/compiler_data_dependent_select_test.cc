// Unique and NonMaxSuppression compiled: a kernel fills worst-case sized results and counts
// them, host code binds the count to a fresh symbolic variable, and the outputs are the first
// `count` entries. Compiled shapes and values are compared with the reference interpreter at
// inputs the conformance suite does not use (nothing selected, everything distinct, ties,
// several shapes through one artifact), and a few results are also spelled out by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/import_and_run.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using namespace testing;  // NOLINT: test helpers

struct Compiled : testing::CompiledModel {
  explicit Compiled(const OnnxBuilder& b) : CompiledModel(b.Serialize()) {}
};

// Unique's four outputs, with or without an axis.
OnnxBuilder UniqueModel(std::vector<testing::Dim> dims, bool has_axis, int64_t axis,
                        int64_t sorted) {
  OnnxBuilder b;
  b.Input("x", dims);
  auto& n = b.Node("Unique", {"x"}, {"y", "indices", "inverse", "counts"});
  if (has_axis) OnnxBuilder::IntAttr(n, "axis", axis);
  OnnxBuilder::IntAttr(n, "sorted", sorted);
  b.Output("y", has_axis ? dims : std::vector<testing::Dim>{"u"});
  b.Output("indices", {"u"}, onnx::TensorProto::INT64);
  b.Output("inverse", {"n"}, onnx::TensorProto::INT64);
  b.Output("counts", {"u"}, onnx::TensorProto::INT64);
  return b;
}

TEST(DataDependentSelectTest, UniqueWithoutAxisSortedMatchesTheInterpreter) {
  Compiled c(UniqueModel({"n"}, false, 0, 1));
  ASSERT_TRUE(c.model);
  EXPECT_EQ(c.ExpectSame({F32({6}, {2, 1, 1, 3, 4, 3})}), (std::vector<int64_t>{4}));
  EXPECT_EQ(c.ExpectSame({F32({5}, {7, 7, 7, 7, 7})}), (std::vector<int64_t>{1}));
  EXPECT_EQ(c.ExpectSame({F32({4}, {4, -3, 2, 1})}), (std::vector<int64_t>{4}));  // distinct
  EXPECT_EQ(c.ExpectSame({F32({0}, {})}), (std::vector<int64_t>{0}));  // nothing to select
  EXPECT_EQ(c.ExpectSame({Iota({40})}), (std::vector<int64_t>{40}));
  // Spelled out, so that the test does not lean on the interpreter alone.
  std::vector<ir::NDArray> inputs = {F32({6}, {2, 1, 1, 3, 4, 3})};
  auto want = testing::ExpectSameAsReference(*c.model, c.module, inputs);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_EQ(Values(want[0]), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(Values(want[1]), (std::vector<double>{1, 0, 3, 4}));
  EXPECT_EQ(Values(want[2]), (std::vector<double>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(Values(want[3]), (std::vector<double>{2, 1, 2, 1}));
}

TEST(DataDependentSelectTest, UniqueNotSortedKeepsTheOrderOfFirstOccurrence) {
  Compiled c(UniqueModel({"n", 2}, false, 0, 0));  // flattened first
  ASSERT_TRUE(c.model);
  EXPECT_EQ(c.ExpectSame({F32({3, 2}, {2, 1, 1, 3, 4, 3})}), (std::vector<int64_t>{4}));
  EXPECT_EQ(c.ExpectSame({F32({2, 2}, {5, 5, 5, 5})}), (std::vector<int64_t>{1}));
  EXPECT_EQ(c.ExpectSame({F32({0, 2}, {})}), (std::vector<int64_t>{0}));
  std::vector<ir::NDArray> inputs = {F32({3, 2}, {2, 1, 1, 3, 4, 3})};
  auto want = testing::ExpectSameAsReference(*c.model, c.module, inputs);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_EQ(Values(want[0]), (std::vector<double>{2, 1, 3, 4}));
  EXPECT_EQ(Values(want[2]), (std::vector<double>{0, 1, 1, 2, 3, 2}));
}

TEST(DataDependentSelectTest, UniqueSlicesAlongAnAxis) {
  for (int64_t axis : {1, -2}) {
    for (int64_t sorted : {0, 1}) {
      Compiled c(UniqueModel({2, "n", 2}, true, axis, sorted));
      ASSERT_TRUE(c.model);
      ir::NDArray x = F32({2, 4, 2}, {1, 1, 0, 1, 1, 1, 2, 0,  //
                                      3, 3, 4, 4, 3, 3, 5, 5});
      EXPECT_EQ(c.ExpectSame({x}), (std::vector<int64_t>{2, 3, 2}));
      EXPECT_EQ(c.ExpectSame({Iota({2, 5, 2})}), (std::vector<int64_t>{2, 5, 2}));
      EXPECT_EQ(c.ExpectSame({F32({2, 3, 2}, std::vector<float>(12, 1))}),
                (std::vector<int64_t>{2, 1, 2}));
      EXPECT_EQ(c.ExpectSame({F32({2, 0, 2}, {})}), (std::vector<int64_t>{2, 0, 2}));
    }
  }
}

// Unique's distinct slices feed a later op, with their symbolic count as its extent.
TEST(DataDependentSelectTest, LaterOpsConsumeUniquesOutput) {
  OnnxBuilder b;
  b.Input("x", {"n"}, onnx::TensorProto::INT64);
  b.Node("Unique", {"x"}, {"y"});
  b.Node("Add", {"y", "y"}, {"z"});
  b.Output("z", {"u"}, onnx::TensorProto::INT64);
  Compiled c(b);
  ASSERT_TRUE(c.model);
  EXPECT_EQ(c.ExpectSame({I64({5}, {9, -2, 9, 0, -2})}), (std::vector<int64_t>{3}));
  EXPECT_EQ(c.ExpectSame({I64({1}, {4})}), (std::vector<int64_t>{1}));
}

OnnxBuilder NmsModel(int64_t center_point_box) {
  OnnxBuilder b;
  b.Input("boxes", {"b", "n", 4});
  b.Input("scores", {"b", "c", "n"});
  b.Input("max", {1}, onnx::TensorProto::INT64);
  b.Input("iou", {1});
  b.Input("score", {1});
  auto& n = b.Node("NonMaxSuppression", {"boxes", "scores", "max", "iou", "score"}, {"selected"});
  OnnxBuilder::IntAttr(n, "center_point_box", center_point_box);
  b.Output("selected", {"k", 3}, onnx::TensorProto::INT64);
  return b;
}

ir::NDArray Scalar(float v) { return F32({1}, {v}); }

// Six boxes, two clusters and a far one, as the ONNX examples lay them out.
const std::vector<float> kBoxes = {0, 0,  1, 1,  0, 0.1f,  1, 1.1f,  0, -0.1f, 1, 0.9f,
                                   0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100,   1, 101};
const std::vector<float> kScores = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};

TEST(DataDependentSelectTest, NonMaxSuppressionMatchesTheInterpreter) {
  Compiled c(NmsModel(0));
  ASSERT_TRUE(c.model);
  ir::NDArray boxes = F32({1, 6, 4}, kBoxes), scores = F32({1, 1, 6}, kScores);
  auto run = [&](int64_t max, float iou, float score) {
    return c.ExpectSame({boxes, scores, I64({1}, {max}), Scalar(iou), Scalar(score)});
  };
  EXPECT_EQ(run(3, 0.5f, 0), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(run(2, 0.5f, 0), (std::vector<int64_t>{2, 3}));      // the per-class limit
  EXPECT_EQ(run(0, 0.5f, 0), (std::vector<int64_t>{0, 3}));      // nothing may be kept
  EXPECT_EQ(run(10, 0.5f, 1), (std::vector<int64_t>{0, 3}));     // no score above the threshold
  EXPECT_EQ(run(10, 0.5f, 0.4f), (std::vector<int64_t>{2, 3}));  // box 5 scores 0.3
  EXPECT_EQ(run(10, 1, 0), (std::vector<int64_t>{6, 3}));        // nothing suppressed
  EXPECT_EQ(run(10, -0.5f, 0), (std::vector<int64_t>{1, 3}));    // everything overlaps enough
  // Spelled out: box 3 first, then 0 (1 and 2 overlap it), then 5.
  auto want = testing::ExpectSameAsReference(
      *c.model, c.module, {boxes, scores, I64({1}, {3}), Scalar(0.5f), Scalar(0)});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(Values(want[0]), (std::vector<double>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
}

TEST(DataDependentSelectTest, NonMaxSuppressionOverBatchesClassesAndTies) {
  Compiled c(NmsModel(0));
  ASSERT_TRUE(c.model);
  std::vector<float> two_batches = kBoxes;
  two_batches.insert(two_batches.end(), kBoxes.rbegin(), kBoxes.rend());  // flipped corners
  std::vector<float> scores = kScores;
  scores.insert(scores.end(), {0.1f, 0.2f, 0.2f, 0.2f, 0.9f, 0.0f});  // ties
  scores.insert(scores.end(), kScores.rbegin(), kScores.rend());
  scores.insert(scores.end(), 6, 0.5f);
  ir::NDArray boxes = F32({2, 6, 4}, two_batches), s = F32({2, 2, 6}, scores);
  for (int64_t max : {1, 2, 6}) {
    for (float iou : {0.0f, 0.5f}) {
      c.ExpectSame({boxes, s, I64({1}, {max}), Scalar(iou), Scalar(0.05f)});
    }
  }
  // A different number of boxes through the same artifact.
  c.ExpectSame({F32({1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1}), F32({1, 3, 2}, {0.5f, 0.5f, 0, 1, 1, 0}),
                I64({1}, {5}), Scalar(0.5f), Scalar(-1)});
  c.ExpectSame({F32({1, 0, 4}, {}), F32({1, 3, 0}, {}), I64({1}, {5}), Scalar(0.5f), Scalar(0)});
}

TEST(DataDependentSelectTest, NonMaxSuppressionWithCenterPointBoxesAndOptionalInputs) {
  Compiled centered(NmsModel(1));
  ASSERT_TRUE(centered.model);
  std::vector<float> center = {0.5f, 0.5f,  1, 1, 0.5f, 0.6f,  1, 1, 0.5f, 0.4f,   1, 1,
                               0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1};
  centered.ExpectSame(
      {F32({1, 6, 4}, center), F32({1, 1, 6}, kScores), I64({1}, {3}), Scalar(0.5f), Scalar(0)});
  // Without max_output_boxes_per_class nothing is selected; without the thresholds every box
  // is a candidate and only boxes that overlap by more than 0 are suppressed.
  OnnxBuilder b;
  b.Input("boxes", {1, "n", 4});
  b.Input("scores", {1, 1, "n"});
  b.Input("max", {1}, onnx::TensorProto::INT64);
  b.Node("NonMaxSuppression", {"boxes", "scores", "max"}, {"selected"});
  b.Output("selected", {"k", 3}, onnx::TensorProto::INT64);
  Compiled optional(b);
  ASSERT_TRUE(optional.model);
  EXPECT_EQ(optional.ExpectSame({F32({1, 6, 4}, kBoxes), F32({1, 1, 6}, kScores), I64({1}, {9})}),
            (std::vector<int64_t>{3, 3}));
  OnnxBuilder none;
  none.Input("boxes", {1, "n", 4});
  none.Input("scores", {1, 1, "n"});
  none.Node("NonMaxSuppression", {"boxes", "scores"}, {"selected"});
  none.Output("selected", {"k", 3}, onnx::TensorProto::INT64);
  Compiled without_max(none);
  ASSERT_TRUE(without_max.model);
  EXPECT_EQ(without_max.ExpectSame({F32({1, 6, 4}, kBoxes), F32({1, 1, 6}, kScores)}),
            (std::vector<int64_t>{0, 3}));
}

// Boxes that are not [batch, boxes, 4], or scores for another number of boxes: an import
// error when the dims are known, a run-time one when only the run time knows them.
TEST(DataDependentSelectTest, NonMaxSuppressionRejectsMismatchedBoxesAndScores) {
  OnnxBuilder bad;
  bad.Input("boxes", {1, 3, 5});
  bad.Input("scores", {1, 1, 3});
  bad.Node("NonMaxSuppression", {"boxes", "scores"}, {"selected"});
  bad.Output("selected", {"k", 3}, onnx::TensorProto::INT64);
  auto m = driver::ImportModel(bad.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("non_max_suppression_select"), std::string::npos)
      << m.status();
  EXPECT_NE(m.status().message().find("[batch, boxes, 4]"), std::string::npos) << m.status();

  OnnxBuilder b;
  b.Input("boxes", {1, "n", 4});
  b.Input("scores", {1, 1, "m"});
  b.Node("NonMaxSuppression", {"boxes", "scores"}, {"selected"});
  b.Output("selected", {"k", 3}, onnx::TensorProto::INT64);
  Compiled c(b);
  ASSERT_TRUE(c.model);
  c.ExpectSame({F32({1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1}), F32({1, 1, 2}, {0.5f, 0.4f})});
  std::vector<ir::NDArray> mismatched = {F32({1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1}),
                                         F32({1, 1, 3}, {0.5f, 0.4f, 0.3f})};
  EXPECT_FALSE(testing::CompiledOutputShapes(*c.model, mismatched).ok());
  EXPECT_FALSE(interp::Run(c.module, mismatched).ok());
}

// Inputs large enough that the default schedule looks for loops to parallelize: the walks
// that carry a dependence must stay serial.
TEST(DataDependentSelectTest, LargerInputsMatchTheInterpreter) {
  Compiled unique(UniqueModel({"n"}, false, 0, 1));
  ASSERT_TRUE(unique.model);
  std::vector<float> values(600);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 37) % 101);
  EXPECT_EQ(unique.ExpectSame({F32({600}, values)}), (std::vector<int64_t>{101}));
  Compiled nms(NmsModel(0));
  ASSERT_TRUE(nms.model);
  int64_t n = 300;
  std::vector<float> boxes, scores;
  for (int64_t i = 0; i < n; ++i) {
    float x = static_cast<float>((i * 7) % 50), y = static_cast<float>((i * 13) % 40);
    boxes.insert(boxes.end(), {y, x, y + 3, x + 4});
    scores.push_back(static_cast<float>((i * 31) % 97) / 97);
  }
  for (int64_t i = 0; i < n; ++i) scores.push_back(static_cast<float>((i * 11) % 89) / 89);
  std::vector<int64_t> selected = nms.ExpectSame(
      {F32({1, n, 4}, boxes), F32({1, 2, n}, scores), I64({1}, {250}), Scalar(0.3f), Scalar(0.1f)});
  ASSERT_EQ(selected.size(), 2u);
  EXPECT_GT(selected[0], 20);  // some boxes suppressed, many kept
  EXPECT_LT(selected[0], 2 * n);
}

}  // namespace
}  // namespace kiln
