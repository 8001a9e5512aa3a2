// Inputs the interpreter rejects make the compiled call fail too, with a message naming the
// input (or the op, for a value the model computed), never with a clamped or garbage result;
// good inputs still give the interpreter's results. Optional inputs given empty at run time
// read as omitted, as in the interpreter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tests/support/import_and_run.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using namespace testing;  // NOLINT: test helpers

ir::NDArray I32(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Int(32), std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) a.data<int32_t>()[i] = values[i];
  return a;
}

TEST(InputErrorsTest, ReverseSequenceRejectsLengthsOutsideTheTimeAxis) {
  OnnxBuilder b;
  b.Input("x", {5, 3});
  b.Input("sequence_lens", {3}, onnx::TensorProto::INT64);
  auto& node = b.Node("ReverseSequence", {"x", "sequence_lens"}, {"y"});
  OnnxBuilder::IntAttr(node, "batch_axis", 1);
  OnnxBuilder::IntAttr(node, "time_axis", 0);
  b.Output("y", {5, 3});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  c.ExpectMatches({Iota({5, 3}), I64({3}, {5, 2, 0})}, 1e-5);
  c.ExpectCallFails({Iota({5, 3}), I64({3}, {5, 9, 0})},
                    "input 'sequence_lens' holds 9, more than the sequence length 5 "
                    "(reverse_sequence)");
  c.ExpectCallFails({Iota({5, 3}), I64({3}, {1, 2, -1})},
                    "input 'sequence_lens' holds -1, a negative length (reverse_sequence)");
}

TEST(InputErrorsTest, ReverseSequenceNamesItsOpForLengthsTheModelComputed) {
  OnnxBuilder b;
  b.Input("x", {5, 3});
  b.Input("base", {3}, onnx::TensorProto::INT64);
  b.Int64Initializer("one", {1}, {1});
  b.Node("Add", {"base", "one"}, {"lens"});
  auto& node = b.Node("ReverseSequence", {"x", "lens"}, {"y"});
  OnnxBuilder::IntAttr(node, "batch_axis", 1);
  OnnxBuilder::IntAttr(node, "time_axis", 0);
  b.Output("y", {5, 3});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  c.ExpectMatches({Iota({5, 3}), I64({3}, {4, 1, -1})}, 1e-5);
  c.ExpectCallFails({Iota({5, 3}), I64({3}, {5, 1, 0})},
                    "op reverse_sequence: the model computed length 6, more than the sequence "
                    "length 5");
}

// RNN, GRU and LSTM over X [4, 2, 3], hidden size 2, forward and reverse.
OnnxBuilder RecurrentModel(const std::string& op, int64_t gates, const std::string& direction) {
  constexpr int64_t kHidden = 2, kInput = 3;
  OnnxBuilder b;
  b.Input("x", {4, 2, kInput});
  b.Input("sequence_lens", {2}, onnx::TensorProto::INT32);
  std::vector<float> w(gates * kHidden * kInput), r(gates * kHidden * kHidden);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  for (size_t i = 0; i < r.size(); ++i) r[i] = 0.03f * static_cast<float>(i % 5) - 0.05f;
  b.FloatInitializer("w", {1, gates * kHidden, kInput}, w);
  b.FloatInitializer("r", {1, gates * kHidden, kHidden}, r);
  std::vector<std::string> outs = {"y", "y_h"};
  if (op == "LSTM") outs.push_back("y_c");
  auto& node = b.Node(op, {"x", "w", "r", "", "sequence_lens"}, outs);
  OnnxBuilder::IntAttr(node, "hidden_size", kHidden);
  OnnxBuilder::StringAttr(node, "direction", direction);
  b.Output("y", {4, 1, 2, kHidden});
  b.Output("y_h", {1, 2, kHidden});
  if (op == "LSTM") b.Output("y_c", {1, 2, kHidden});
  return b;
}

TEST(InputErrorsTest, RnnFamilyRejectsSequenceLengthsOutOfRange) {
  struct Op {
    std::string onnx, kiln;
    int64_t gates;
  };
  for (const Op& op : {Op{"RNN", "rnn", 1}, Op{"GRU", "gru", 3}, Op{"LSTM", "lstm", 4}}) {
    for (const std::string direction : {"forward", "reverse"}) {
      SCOPED_TRACE(op.onnx + " " + direction);
      CompiledModel c(RecurrentModel(op.onnx, op.gates, direction));
      ASSERT_TRUE(c.model);
      c.ExpectMatches({Iota({4, 2, 3}), I32({2}, {4, 2})}, 1e-5);
      c.ExpectCallFails(
          {Iota({4, 2, 3}), I32({2}, {7, 2})},
          "input 'sequence_lens' holds 7, more than the sequence length 4 (" + op.kiln + ")");
      c.ExpectCallFails({Iota({4, 2, 3}), I32({2}, {3, -2})},
                        "input 'sequence_lens' holds -2, a negative length (" + op.kiln + ")");
    }
  }
}

// 4 mel bins over a 16-point DFT (9 spectrogram bins); the band edges come from inputs.
TEST(InputErrorsTest, MelWeightMatrixRejectsBandEdgesOutOfRange) {
  OnnxBuilder b;
  b.Int64Initializer("num_mel_bins", {}, {4});
  b.Int64Initializer("dft_length", {}, {16});
  b.Input("sample_rate", {}, onnx::TensorProto::INT64);
  b.Input("lower_edge_hertz", {});
  b.Input("upper_edge_hertz", {});
  b.Node("MelWeightMatrix",
         {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"},
         {"y"});
  b.Output("y", {9, 4});
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  c.ExpectMatches({I64({}, {8000}), F32({}, {0}), F32({}, {4000})}, 1e-5);
  c.ExpectMatches({I64({}, {8000}), F32({}, {100}), F32({}, {3000})}, 1e-5);
  // With the upper edge at the sample rate, the last filter's right edge is bin 10: its
  // falling side would reach bin 9.
  c.ExpectCallFails(
      {I64({}, {8000}), F32({}, {0}), F32({}, {8000})},
      "op mel_weight_matrix: index 9 (computed by the model) out of range for size 9");
}

// NonMaxSuppression with its optional scalars as inputs of unknown size: given empty at run
// time, they read as omitted (no boxes kept, IoU threshold 0, no score threshold).
TEST(InputErrorsTest, NonMaxSuppressionReadsEmptyRunTimeScalarsAsOmitted) {
  OnnxBuilder b;
  b.Input("boxes", {1, 4, 4});
  b.Input("scores", {1, 2, 4});
  b.Input("max_output_boxes_per_class", {"m"}, onnx::TensorProto::INT64);
  b.Input("iou_threshold", {"i"});
  b.Input("score_threshold", {"s"});
  b.Node("NonMaxSuppression",
         {"boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"},
         {"selected"});
  b.Output("selected", {"n", 3}, onnx::TensorProto::INT64);
  CompiledModel c(b);
  ASSERT_TRUE(c.model);
  ir::NDArray boxes = F32({1, 4, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3, 0, 2.2f, 1, 3.2f});
  ir::NDArray scores = F32({1, 2, 4}, {0.9f, 0.8f, 0.3f, 0.7f, 0.1f, 0.6f, 0.95f, 0.2f});
  ir::NDArray none_i64 = I64({0}, {}), none_f32 = F32({0}, {});
  c.ExpectMatches({boxes, scores, I64({1}, {3}), F32({1}, {0.5f}), F32({1}, {0.25f})}, 1e-5);
  c.ExpectMatches({boxes, scores, I64({1}, {3}), F32({1}, {0.5f}), none_f32}, 1e-5);
  c.ExpectMatches({boxes, scores, I64({1}, {3}), none_f32, F32({1}, {0.25f})}, 1e-5);
  c.ExpectMatches({boxes, scores, I64({1}, {3}), none_f32, none_f32}, 1e-5);
  c.ExpectMatches({boxes, scores, none_i64, F32({1}, {0.5f}), F32({1}, {0.25f})}, 1e-5);
}

}  // namespace
}  // namespace kiln
