// Image family, index half: TopK, ArgMax/ArgMin, CumSum, ReverseSequence, Unique,
// NonMaxSuppression and TfIdfVectorizer. Symbolic dims flow through where the output size
// follows from them; data-dependent sizes keep the rank; values match hand-computed ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/import_and_run.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using testing::F32;
using ::testing::HasSubstr;
using testing::I64;
using testing::OnnxBuilder;
using testing::Values;

constexpr int kI64 = onnx::TensorProto::INT64;

TEST(ImageTopKTest, ConstantKKeepsOtherDimsSymbolic) {
  OnnxBuilder b;
  b.Input("x", {"n", 5});
  b.Int64Initializer("k", {1}, {2});
  b.Node("TopK", {"x", "k"}, {"values", "indices"});
  b.Output("values", {"n", 2});
  b.Output("indices", {"n", 2}, kI64);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n, 2], f32)", "Tensor([n, 2], i64)"));
}

// k given as data becomes a symbolic variable bound from it at run time (tensor_to_shape).
TEST(ImageTopKTest, RunTimeKIsASymbolicDim) {
  OnnxBuilder b;
  b.Input("x", {"n", 5});
  b.Input("k", {1}, kI64);
  b.Node("TopK", {"x", "k"}, {"values", "indices"});
  b.Output("values", {"n", "?"});
  b.Output("indices", {"n", "?"}, kI64);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m),
              ElementsAre("Tensor([n, k_1_0], f32)", "Tensor([n, k_1_0], i64)"));
}

TEST(ImageTopKTest, TiesKeepIndexOrder) {
  auto run = [](int64_t largest, int64_t k) {
    OnnxBuilder b;
    b.Input("x", {5});
    b.Int64Initializer("k", {1}, {k});
    OnnxBuilder::IntAttr(b.Node("TopK", {"x", "k"}, {"values", "indices"}), "largest", largest);
    b.Output("values", {k});
    b.Output("indices", {k}, kI64);
    auto out = testing::ImportAndRun(b.Serialize(), {F32({5}, {3, 1, 3, 2, 1})});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? std::make_pair(Values<float>((*out)[0]), Values<int64_t>((*out)[1]))
                    : std::make_pair(std::vector<float>{}, std::vector<int64_t>{});
  };
  auto [top, top_at] = run(1, 3);
  EXPECT_THAT(top, ElementsAre(3, 3, 2));
  EXPECT_THAT(top_at, ElementsAre(0, 2, 3));
  auto [low, low_at] = run(0, 2);
  EXPECT_THAT(low, ElementsAre(1, 1));
  EXPECT_THAT(low_at, ElementsAre(1, 4));
}

TEST(ImageTopKTest, Opset9TakesKFromTheAttribute) {
  OnnxBuilder b(9);
  b.Input("x", {"n", 4});
  OnnxBuilder::IntAttr(b.Node("TopK", {"x"}, {"values", "indices"}), "k", 1);
  b.Output("values", {"n", 1});
  b.Output("indices", {"n", 1}, kI64);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n, 1], f32)", "Tensor([n, 1], i64)"));
  auto out = interp::Run(*m, {F32({2, 4}, {1, 9, 3, 4, 8, 2, 8, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(9, 8));
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(1, 0));
}

TEST(ImageTopKTest, KLargerThanTheAxisIsAnError) {
  OnnxBuilder b;
  b.Input("x", {2, 3});
  b.Int64Initializer("k", {1}, {4});
  b.Node("TopK", {"x", "k"}, {"values", "indices"});
  b.Output("values", {2, 4});
  b.Output("indices", {2, 4}, kI64);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("k 4 exceeds the axis size 3"));
}

TEST(ImageArgTest, SelectLastIndexAndKeepdims) {
  auto run = [](const std::string& op, int64_t last) {
    OnnxBuilder b;
    b.Input("x", {"n", 4});
    auto& node = b.Node(op, {"x"}, {"y"});
    OnnxBuilder::IntAttr(node, "axis", 1);
    OnnxBuilder::IntAttr(node, "keepdims", 0);
    OnnxBuilder::IntAttr(node, "select_last_index", last);
    b.Output("y", {"n"}, kI64);
    auto m = driver::ImportModel(b.Serialize());
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return std::vector<int64_t>{};
    EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n], i64)"));
    auto out = interp::Run(*m, {F32({2, 4}, {1, 5, 5, 2, 0, 0, 7, 0})});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? Values<int64_t>((*out)[0]) : std::vector<int64_t>{};
  };
  EXPECT_THAT(run("ArgMax", 0), ElementsAre(1, 2));
  EXPECT_THAT(run("ArgMax", 1), ElementsAre(2, 2));
  EXPECT_THAT(run("ArgMin", 0), ElementsAre(0, 0));
  EXPECT_THAT(run("ArgMin", 1), ElementsAre(0, 3));
}

TEST(ImageScanTest, CumSumOfInt64StaysExactBeyondDoublePrecision) {
  OnnxBuilder b;
  b.Input("x", {"n"}, kI64);
  b.Int64Initializer("axis", {}, {0});
  b.Node("CumSum", {"x", "axis"}, {"y"});
  b.Output("y", {"n"}, kI64);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n], i64)"));
  const int64_t big = int64_t{1} << 53;
  auto out = interp::Run(*m, {I64({3}, {big, 1, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int64_t>((*out)[0]), ElementsAre(big, big + 1, big + 2));
}

TEST(ImageScanTest, CumSumExclusiveReverseAlongRunTimeAxis) {
  OnnxBuilder b;
  b.Input("x", {2, 3});
  b.Input("axis", {}, onnx::TensorProto::INT32);
  auto& node = b.Node("CumSum", {"x", "axis"}, {"y"});
  OnnxBuilder::IntAttr(node, "exclusive", 1);
  OnnxBuilder::IntAttr(node, "reverse", 1);
  b.Output("y", {2, 3});
  ir::NDArray axis = testing::TensorOf<int32_t>(arith::DataType::Int(32), {}, {-1});
  auto out = testing::ImportAndRun(b.Serialize(), {F32({2, 3}, {1, 2, 3, 4, 5, 6}), axis});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(5, 3, 0, 11, 6, 0));
}

TEST(ImageScanTest, ReverseSequenceReversesEachPrefix) {
  OnnxBuilder b;
  b.Input("x", {3, 4});
  b.Int64Initializer("lens", {3}, {4, 2, 0});
  auto& node = b.Node("ReverseSequence", {"x", "lens"}, {"y"});
  OnnxBuilder::IntAttr(node, "batch_axis", 0);
  OnnxBuilder::IntAttr(node, "time_axis", 1);
  b.Output("y", {3, 4});
  auto out = testing::ImportAndRun(b.Serialize(),
                                   {F32({3, 4}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(3, 2, 1, 0, 11, 10, 12, 13, 20, 21, 22, 23));
}

// y, indices and counts take the first `count` entries of results sized for the worst case,
// `count` being a symbolic variable bound at run time (data-dependent shapes).
TEST(ImageUniqueTest, CountSizedOutputsHaveASymbolicSize) {
  OnnxBuilder b(11);
  b.Input("x", {"n"});
  b.Node("Unique", {"x"}, {"y", "indices", "inverse", "counts"});
  b.Output("y", {"?"});
  b.Output("indices", {"?"}, kI64);
  b.Output("inverse", {"n"}, kI64);
  b.Output("counts", {"?"}, kI64);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m),
              ElementsAre("Tensor([min(y_n_0, n)], f32)", "Tensor([min(y_n_0, n)], i64)",
                          "Tensor([n], i64)", "Tensor([min(y_n_0, n)], i64)"));
}

TEST(ImageUniqueTest, SortedAndFirstOccurrenceOrders) {
  auto run = [](int64_t sorted) {
    OnnxBuilder b(11);
    b.Input("x", {2, 3});
    OnnxBuilder::IntAttr(b.Node("Unique", {"x"}, {"y", "indices", "inverse", "counts"}), "sorted",
                         sorted);
    b.Output("y", {"?"});
    b.Output("indices", {"?"}, kI64);
    b.Output("inverse", {6}, kI64);
    b.Output("counts", {"?"}, kI64);
    auto out = testing::ImportAndRun(b.Serialize(), {F32({2, 3}, {2, 1, 1, 3, 4, 3})});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::vector<ir::NDArray>(4);
  };
  // Without an axis the input is flattened.
  auto s = run(1);
  EXPECT_THAT(Values<float>(s[0]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Values<int64_t>(s[1]), ElementsAre(1, 0, 3, 4));
  EXPECT_THAT(Values<int64_t>(s[2]), ElementsAre(1, 0, 0, 2, 3, 2));
  EXPECT_THAT(Values<int64_t>(s[3]), ElementsAre(2, 1, 2, 1));
  auto u = run(0);
  EXPECT_THAT(Values<float>(u[0]), ElementsAre(2, 1, 3, 4));
  EXPECT_THAT(Values<int64_t>(u[1]), ElementsAre(0, 1, 3, 4));
  EXPECT_THAT(Values<int64_t>(u[2]), ElementsAre(0, 1, 1, 2, 3, 2));
  EXPECT_THAT(Values<int64_t>(u[3]), ElementsAre(1, 2, 2, 1));
}

TEST(ImageUniqueTest, RowsAlongAnAxis) {
  OnnxBuilder b(11);
  b.Input("x", {3, 2});
  OnnxBuilder::IntAttr(b.Node("Unique", {"x"}, {"y", "", "inverse"}), "axis", 0);
  b.Output("y", {"?", 2});
  b.Output("inverse", {3}, kI64);
  auto out = testing::ImportAndRun(b.Serialize(), {F32({3, 2}, {1, 5, 0, 9, 1, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(0, 9, 1, 5));
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(1, 0, 1));
}

TEST(ImageBoxTest, NonMaxSuppressionPerClass) {
  OnnxBuilder b(11);
  b.Input("boxes", {1, 3, 4});
  b.Input("scores", {1, 2, 3});
  b.Int64Initializer("max_out", {1}, {10});
  b.FloatInitializer("iou", {1}, {0.5});
  b.Node("NonMaxSuppression", {"boxes", "scores", "max_out", "iou"}, {"selected"});
  b.Output("selected", {"?", 3}, kI64);
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([min(selected_n_0, 6), 3], i64)"));
  // Boxes 0 and 1 overlap with IoU 0.9 / 1.1; box 2 stands apart.
  auto out = interp::Run(*m, {F32({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6}),
                              F32({1, 2, 3}, {0.9f, 0.8f, 0.7f, 0.1f, 0.2f, 0.3f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{4, 3}));
  EXPECT_THAT(Values<int64_t>((*out)[0]), ElementsAre(0, 0, 0, 0, 0, 2, 0, 1, 2, 0, 1, 1));
}

TEST(ImageBoxTest, TfIdfCountsSkipGrams) {
  OnnxBuilder b(9);
  b.Input("x", {"n", 5}, onnx::TensorProto::INT32);
  auto& node = b.Node("TfIdfVectorizer", {"x"}, {"y"});
  OnnxBuilder::IntAttr(node, "min_gram_length", 1);
  OnnxBuilder::IntAttr(node, "max_gram_length", 2);
  OnnxBuilder::IntAttr(node, "max_skip_count", 1);
  OnnxBuilder::IntsAttr(node, "ngram_counts", {0, 2});
  OnnxBuilder::IntsAttr(node, "ngram_indexes", {0, 1, 2});
  OnnxBuilder::IntsAttr(node, "pool_int64s", {1, 3, 1, 2});  // unigrams 1, 3; bigram (1, 2)
  testing::OnnxBuilder::StringAttr(node, "mode", "TFIDF");
  testing::OnnxBuilder::FloatsAttr(node, "weights", {0.5, 2, 3});
  b.Output("y", {"n", 3});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(testing::OutputInfos(*m), ElementsAre("Tensor([n, 3], f32)"));
  ir::NDArray x =
      testing::TensorOf<int32_t>(arith::DataType::Int(32), {2, 5}, {1, 2, 1, 2, 3, 3, 3, 1, 4, 2});
  auto out = interp::Run(*m, {x});
  ASSERT_TRUE(out.ok()) << out.status();
  // Row 0: 1 twice, 3 once, (1, 2) twice adjacent. Row 1: 1 once, 3 twice, (1, _, 2) once.
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1, 2, 6, 0.5, 4, 3));
}

}  // namespace
}  // namespace kiln
