// RNN, GRU, LSTM, Det and the signal operators: imported from ONNX, struct info with symbolic
// batch dims, and reference values worked out in the test from the ONNX equations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/driver/driver.h"
#include "compiler/interp/interpreter.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using arith::DataType;
using ir::NDArray;
using testing::ArrayOf;
using testing::OnnxBuilder;
using testing::Values;

std::string ResultInfo(const ir::IRModule& m) {
  return ir::ToString(m.functions.at("main").result->struct_info);
}

void ExpectValues(const NDArray& a, const std::vector<double>& expected) {
  ASSERT_EQ(a.num_elements(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(a.GetDouble(i), expected[i], 1e-5) << i;
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// hidden 1, input 1: forward weights (0.5, 0.25, bias 0.1 + 0.2), reverse (-1, 0.5, no bias).
TEST(RecurrentTest, BidirectionalRnnWithSequenceLengths) {
  OnnxBuilder b(14);
  b.Input("x", {2, "batch", 1});
  b.Input("lens", {"batch"}, onnx::TensorProto::INT32);
  b.FloatInitializer("w", {2, 1, 1}, {0.5f, -1});
  b.FloatInitializer("r", {2, 1, 1}, {0.25f, 0.5f});
  b.FloatInitializer("b", {2, 2}, {0.1f, 0.2f, 0, 0});
  auto& node = b.Node("RNN", {"x", "w", "r", "b", "lens"}, {"y", "y_h"});
  OnnxBuilder::IntAttr(node, "hidden_size", 1);
  OnnxBuilder::StringAttr(node, "direction", "bidirectional");
  b.Output("y", {2, 2, "batch", 1});
  b.Output("y_h", {2, "batch", 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tuple(Tensor([2, 2, batch, 1], f32), Tensor([2, batch, 1], f32))");
  // x[t][b]: t0 = (1, 2), t1 = (3, 4); batch 1 has only one step.
  NDArray x = ArrayOf(DataType::Float(), {2, 2, 1}, {1, 2, 3, 4});
  auto out = interp::Run(*m, {x, ArrayOf(DataType::Int(32), {2}, {2, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  double f00 = std::tanh(0.5 * 1 + 0.3), f10 = std::tanh(0.5 * 3 + 0.25 * f00 + 0.3);
  double f01 = std::tanh(0.5 * 2 + 0.3);
  double r10 = std::tanh(-3.0), r00 = std::tanh(-1 + 0.5 * r10), r01 = std::tanh(-2.0);
  // Y[t][dir][b]; steps past a row's length stay 0.
  ExpectValues((*out)[0], {f00, f01, r00, r01, f10, 0, r10, 0});
  ExpectValues((*out)[1], {f10, f01, r00, r01});
}

// One GRU step, hidden 1, both ways of applying the reset gate.
TEST(RecurrentTest, GruLinearBeforeReset) {
  const double wz = 0.3, wr = -0.2, wh = 0.7, rz = 0.1, rr = 0.4, rh = -0.6;
  const double bw[3] = {0.05, 0.1, -0.1}, br[3] = {0.2, -0.3, 0.15};
  const double x = 1.5, h0 = -0.5;
  for (int lbr : {0, 1}) {
    OnnxBuilder b(14);
    b.Input("x", {1, 1, 1});
    b.Input("h0", {1, 1, 1});
    b.FloatInitializer("w", {1, 3, 1}, {float(wz), float(wr), float(wh)});
    b.FloatInitializer("r", {1, 3, 1}, {float(rz), float(rr), float(rh)});
    b.FloatInitializer(
        "b", {1, 6},
        {float(bw[0]), float(bw[1]), float(bw[2]), float(br[0]), float(br[1]), float(br[2])});
    auto& node = b.Node("GRU", {"x", "w", "r", "b", "", "h0"}, {"", "y_h"});
    OnnxBuilder::IntAttr(node, "hidden_size", 1);
    OnnxBuilder::IntAttr(node, "linear_before_reset", lbr);
    b.Output("y_h", {1, 1, 1});
    auto m = driver::ImportModel(b.Serialize());
    ASSERT_TRUE(m.ok()) << m.status();
    auto out = interp::Run(*m, {ArrayOf(DataType::Float(), {1, 1, 1}, {x}),
                                ArrayOf(DataType::Float(), {1, 1, 1}, {h0})});
    ASSERT_TRUE(out.ok()) << out.status();
    double z = Sigmoid(wz * x + rz * h0 + bw[0] + br[0]);
    double r = Sigmoid(wr * x + rr * h0 + bw[1] + br[1]);
    double hh = lbr ? std::tanh(wh * x + bw[2] + r * (rh * h0 + br[2]))
                    : std::tanh(wh * x + bw[2] + rh * (r * h0) + br[2]);
    ExpectValues((*out)[0], {(1 - z) * hh + z * h0});
  }
}

// One LSTM step in batch-first layout with peepholes and a clip that bites.
TEST(RecurrentTest, LstmPeepholesClipAndBatchFirstLayout) {
  // Gates i, o, f, c.
  const double w[4] = {0.5, -0.4, 0.3, 2.0}, r[4] = {0.1, 0.2, -0.3, 0.4};
  const double p[3] = {0.05, -0.1, 0.2};  // i, o, f
  const double x = 1.0, h0 = 0.5, c0 = -0.25, clip = 1.5;
  OnnxBuilder b(14);
  b.Input("x", {"batch", 1, 1});
  b.Input("h0", {"batch", 1, 1});
  b.Input("c0", {"batch", 1, 1});
  b.FloatInitializer("w", {1, 4, 1}, {float(w[0]), float(w[1]), float(w[2]), float(w[3])});
  b.FloatInitializer("r", {1, 4, 1}, {float(r[0]), float(r[1]), float(r[2]), float(r[3])});
  b.FloatInitializer("p", {1, 3}, {float(p[0]), float(p[1]), float(p[2])});
  auto& node = b.Node("LSTM", {"x", "w", "r", "", "", "h0", "c0", "p"}, {"y", "y_h", "y_c"});
  OnnxBuilder::IntAttr(node, "hidden_size", 1);
  OnnxBuilder::IntAttr(node, "layout", 1);
  OnnxBuilder::FloatAttr(node, "clip", float(clip));
  b.Output("y", {"batch", 1, 1, 1});
  b.Output("y_h", {"batch", 1, 1});
  b.Output("y_c", {"batch", 1, 1});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m),
            "Tuple(Tensor([batch, 1, 1, 1], f32), Tensor([batch, 1, 1], f32), "
            "Tensor([batch, 1, 1], f32))");
  auto scalar = [](double v) { return ArrayOf(DataType::Float(), {1, 1, 1}, {v}); };
  auto out = interp::Run(*m, {scalar(x), scalar(h0), scalar(c0)});
  ASSERT_TRUE(out.ok()) << out.status();
  auto clipped = [&](double v) { return std::clamp(v, -clip, clip); };
  double i = Sigmoid(clipped(w[0] * x + r[0] * h0 + p[0] * c0));
  double f = Sigmoid(clipped(w[2] * x + r[2] * h0 + p[2] * c0));
  double g = std::tanh(clipped(w[3] * x + r[3] * h0));  // 2.2, clipped to 1.5
  double c = f * c0 + i * g;
  double o = Sigmoid(clipped(w[1] * x + r[1] * h0 + p[1] * c));
  double h = o * std::tanh(clipped(c));
  ExpectValues((*out)[0], {h});
  ExpectValues((*out)[1], {h});
  ExpectValues((*out)[2], {c});
}

TEST(RecurrentTest, WeightShapeMismatchIsUserError) {
  OnnxBuilder b(14);
  b.Input("x", {2, "batch", 3});
  b.FloatInitializer("w", {1, 4, 2}, std::vector<float>(8, 0));
  b.FloatInitializer("r", {1, 4, 4}, std::vector<float>(16, 0));
  auto& node = b.Node("RNN", {"x", "w", "r"}, {"y"});
  OnnxBuilder::IntAttr(node, "hidden_size", 4);
  b.Output("y", {2, 1, "batch", 4});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("W dimension 2 is 2, expected 3"), std::string::npos)
      << m.status();
}

TEST(SignalTest, DetOfStackedMatricesKeepsBatchDim) {
  OnnxBuilder b(11);
  b.Input("x", {"n", 3, 3});
  b.Node("Det", {"x"}, {"y"});
  b.Output("y", {"n"});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([n], f32)");
  // The second matrix needs a row swap: its top-left entry is 0.
  NDArray x = ArrayOf(DataType::Float(), {2, 3, 3},
                      {2, 0, 0, 0, 3, 0, 0, 0, 4, /**/ 0, 1, 2, 1, 0, 3, 4, -3, 8});
  auto out = interp::Run(*m, {x});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectValues((*out)[0], {24, -2});
}

TEST(SignalTest, DftOfRealSignalAndOnesided) {
  for (int onesided : {0, 1}) {
    OnnxBuilder b(17);
    b.Input("x", {"batch", 4, 1});
    auto& node = b.Node("DFT", {"x"}, {"y"});
    OnnxBuilder::IntAttr(node, "onesided", onesided);
    b.Output("y", {"batch", "?", 2});
    auto m = driver::ImportModel(b.Serialize());
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(ResultInfo(*m),
              onesided ? "Tensor([batch, 3, 2], f32)" : "Tensor([batch, 4, 2], f32)");
    auto out = interp::Run(*m, {ArrayOf(DataType::Float(), {1, 4, 1}, {1, 2, 3, 4})});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> full = {10, 0, -2, 2, -2, 0, -2, -2};  // fft([1, 2, 3, 4])
    if (onesided) full.resize(6);
    ExpectValues((*out)[0], full);
  }
}

TEST(SignalTest, InverseDftUndoesDft) {
  OnnxBuilder b(17);
  b.Input("x", {1, 4, 1});
  b.Node("DFT", {"x"}, {"spectrum"});
  auto& inv = b.Node("DFT", {"spectrum"}, {"y"});
  OnnxBuilder::IntAttr(inv, "inverse", 1);
  b.Output("y", {1, 4, 2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = interp::Run(*m, {ArrayOf(DataType::Float(), {1, 4, 1}, {1, -2, 3, 0.5})});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectValues((*out)[0], {1, 0, -2, 0, 3, 0, 0.5, 0});
}

TEST(SignalTest, StftFramesSymbolicBatch) {
  OnnxBuilder b(17);
  b.Input("signal", {"batch", 16, 1});
  b.Int64Initializer("step", {}, {4});
  b.Int64Initializer("length", {}, {8});
  b.Node("STFT", {"signal", "step", "", "length"}, {"y"});
  b.Output("y", {"batch", 3, 5, 2});
  auto m = driver::ImportModel(b.Serialize());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(ResultInfo(*m), "Tensor([batch, 3, 5, 2], f32)");
  auto out = interp::Run(*m, {ArrayOf(DataType::Float(), {1, 16, 1}, std::vector<double>(16, 1))});
  ASSERT_TRUE(out.ok()) << out.status();
  // A constant signal has all its energy in bin 0: 8 per frame.
  std::vector<double> expected(3 * 5 * 2, 0);
  for (int f = 0; f < 3; ++f) expected[f * 10] = 8;
  ExpectValues((*out)[0], expected);
}

TEST(SignalTest, HannWindowPeriodicAndSymmetric) {
  for (int periodic : {1, 0}) {
    OnnxBuilder b(17);
    b.Input("size", {}, onnx::TensorProto::INT64);
    auto& node = b.Node("HannWindow", {"size"}, {"y"});
    OnnxBuilder::IntAttr(node, "periodic", periodic);
    OnnxBuilder::IntAttr(node, "output_datatype", onnx::TensorProto::DOUBLE);
    b.Output("y", {"?"}, onnx::TensorProto::DOUBLE);
    auto m = driver::ImportModel(b.Serialize());
    ASSERT_TRUE(m.ok()) << m.status();
    // The size is a run-time value, bound to a symbolic variable.
    EXPECT_EQ(ResultInfo(*m).rfind("Tensor([size", 0), 0u) << ResultInfo(*m);
    auto out = interp::Run(*m, {ArrayOf(DataType::Int(64), {}, {periodic ? 4 : 5})});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectValues((*out)[0], periodic ? std::vector<double>{0, 0.5, 1, 0.5}
                                     : std::vector<double>{0, 0.5, 1, 0.5, 0});
  }
}

}  // namespace
}  // namespace kiln
