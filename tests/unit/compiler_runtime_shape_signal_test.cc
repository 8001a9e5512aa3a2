// Output shapes decided by run-time values in the signal ops and their neighbours: a float
// range's length (a count computed at run time from float values and bound once it exists,
// as NonZero's), STFT's frame step and length, MelWeightMatrix's bin counts and MaxUnpool's
// output_shape (integer values bound with match_cast of tensor_to_shape). Compiled shapes
// and values are compared with the reference interpreter at several values; bad values give
// an error in compiled code and in the interpreter alike, naming the input where one input
// decides it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "tests/support/import_and_run.h"
#include "tests/support/reference_check.h"
#include "tests/support/tensors.h"

namespace kiln {
namespace {

using namespace testing;  // NOLINT: test helpers
using testing::ExpectSameAsReference;

struct Compiled : testing::CompiledModel {
  explicit Compiled(const OnnxBuilder& b) : CompiledModel(b.Serialize()) {}
};

ir::NDArray Wave(std::vector<int64_t> shape) {
  ir::NDArray a = Iota(std::move(shape));
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    a.data<float>()[i] = std::sin(0.7f * i) + 0.25f * std::cos(2.3f * i);
  }
  return a;
}

// Compiled code rejects `inputs` for breaking a constraint on values it computed (no one
// input to name), and the interpreter fails too.
void ExpectRejectedAsComputed(const Compiled& c, const std::vector<ir::NDArray>& inputs) {
  auto shapes = testing::CompiledOutputShapes(*c.model, inputs);
  ASSERT_FALSE(shapes.ok());
  EXPECT_NE(shapes.status().message().find("shape constraints"), std::string::npos)
      << shapes.status();
  EXPECT_FALSE(interp::Run(c.module, inputs).ok());
}

OnnxBuilder FloatRangeModel() {
  OnnxBuilder b(11);
  for (const char* name : {"start", "limit", "delta"}) b.Input(name, {});
  b.Node("Range", {"start", "limit", "delta"}, {"y"});
  b.Output("y", {"n"});
  return b;
}

TEST(RuntimeShapeSignalTest, FloatRangeMatchesTheInterpreter) {
  Compiled c(FloatRangeModel());
  ASSERT_TRUE(c.model);
  struct Case {
    float start, limit, delta;
    int64_t want;
  } cases[] = {
      {1, 5, 2, 2},        // exact
      {10, -2, -3.5f, 4},  // negative delta: ceil(3.43)
      {0, 1, 0.3f, 4},     // ceil(3.33)
      {5, 1, 1, 0},        // empty: limit before start
      {-1.5f, 2.25f, 0.75f, 5},
  };
  for (const Case& k : cases) {
    auto want = ExpectSameAsReference(*c.model, c.module,
                                      {F32({}, {k.start}), F32({}, {k.limit}), F32({}, {k.delta})});
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, (std::vector<int64_t>{k.want})) << k.start << " " << k.delta;
  }
}

TEST(RuntimeShapeSignalTest, FloatRangeRejectsAZeroDelta) {
  Compiled c(FloatRangeModel());
  ASSERT_TRUE(c.model);
  ExpectRejectedAsComputed(c, {F32({}, {0}), F32({}, {4}), F32({}, {0})});
}

// As the window functions' expansions use it: the limit computed from an integer size.
TEST(RuntimeShapeSignalTest, FloatRangeOfAComputedLimitMatchesTheInterpreter) {
  OnnxBuilder b(17);
  b.Input("size", {}, onnx::TensorProto::INT64);
  b.FloatInitializer("zero", {}, {0});
  b.FloatInitializer("one", {}, {1});
  auto& cast = b.Node("Cast", {"size"}, {"limit"});
  OnnxBuilder::IntAttr(cast, "to", onnx::TensorProto::FLOAT);
  b.Node("Range", {"zero", "limit", "one"}, {"r"});
  b.Node("Cos", {"r"}, {"y"});
  b.Output("y", {"n"});
  Compiled c(b);
  ASSERT_TRUE(c.model);
  for (int64_t size : {7, 1, 0, 12}) {
    auto want = ExpectSameAsReference(*c.model, c.module, {I64({}, {size})}, 1e-6);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, (std::vector<int64_t>{size}));
  }
}

OnnxBuilder StftModel(bool window) {
  OnnxBuilder b(17);
  b.Input("signal", {2, 16, 1});
  b.Input("frame_step", {}, onnx::TensorProto::INT64);
  if (window) {
    b.Input("window", {8});
    b.Node("STFT", {"signal", "frame_step", "window"}, {"y"});
  } else {
    b.Input("frame_length", {}, onnx::TensorProto::INT64);
    b.Node("STFT", {"signal", "frame_step", "", "frame_length"}, {"y"});
  }
  b.Output("y", {2, "frames", "bins", 2});
  return b;
}

TEST(RuntimeShapeSignalTest, StftWithFrameStepAndLengthInputsMatchesTheInterpreter) {
  Compiled c(StftModel(false));
  ASSERT_TRUE(c.model);
  struct Case {
    int64_t step, length;
    std::vector<int64_t> want;
  } cases[] = {
      {4, 8, {2, 3, 5, 2}}, {3, 5, {2, 4, 3, 2}}, {1, 16, {2, 1, 9, 2}}, {20, 1, {2, 1, 1, 2}}};
  for (const Case& k : cases) {
    auto want = ExpectSameAsReference(
        *c.model, c.module, {Wave({2, 16, 1}), I64({}, {k.step}), I64({}, {k.length})}, 1e-5);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, k.want);
  }
}

TEST(RuntimeShapeSignalTest, StftWithWindowMatchesTheInterpreter) {
  Compiled c(StftModel(true));
  ASSERT_TRUE(c.model);
  ir::NDArray window = Wave({8});
  for (int64_t step : {2, 3, 8}) {
    auto want = ExpectSameAsReference(*c.model, c.module,
                                      {Wave({2, 16, 1}), I64({}, {step}), window}, 1e-5);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, (std::vector<int64_t>{2, (16 - 8) / step + 1, 5, 2}));
  }
}

TEST(RuntimeShapeSignalTest, StftRejectsBadFrameStepAndLength) {
  Compiled c(StftModel(false));
  ASSERT_TRUE(c.model);
  auto inputs = [](int64_t step, int64_t length) {
    return std::vector<ir::NDArray>{Wave({2, 16, 1}), I64({}, {step}), I64({}, {length})};
  };
  c.ExpectRejected(inputs(4, 17), "frame_length");  // longer than the signal
  c.ExpectRejected(inputs(4, 0), "frame_length");
  c.ExpectRejected(inputs(0, 8), "frame_step");
  c.ExpectRejected(inputs(-2, 8), "frame_step");
  Compiled windowed(StftModel(true));
  ASSERT_TRUE(windowed.model);
  windowed.ExpectRejected({Wave({2, 16, 1}), I64({}, {0}), Wave({8})}, "frame_step");
}

OnnxBuilder MelModel() {
  OnnxBuilder b(17);
  for (const char* name : {"num_mel_bins", "dft_length", "sample_rate"}) {
    b.Input(name, {}, onnx::TensorProto::INT64);
  }
  b.Input("lower_edge_hertz", {});
  b.Input("upper_edge_hertz", {});
  b.Node("MelWeightMatrix",
         {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"},
         {"y"});
  b.Output("y", {"bins", "mels"});
  return b;
}

std::vector<ir::NDArray> MelInputs(int64_t mels, int64_t dft, int64_t rate, float low, float high) {
  return {I64({}, {mels}), I64({}, {dft}), I64({}, {rate}), F32({}, {low}), F32({}, {high})};
}

TEST(RuntimeShapeSignalTest, MelWeightMatrixMatchesTheInterpreter) {
  Compiled c(MelModel());
  ASSERT_TRUE(c.model);
  struct Case {
    int64_t mels, dft, rate;
    float low, high;
  } cases[] = {
      {8, 16, 8192, 0, 4096},  // the conformance suite's values
      {5, 32, 16000, 100, 7000},
      {10, 64, 8000, 0, 3900},
      {3, 9, 1000, 50, 400},
  };
  for (const Case& k : cases) {
    auto want = ExpectSameAsReference(*c.model, c.module,
                                      MelInputs(k.mels, k.dft, k.rate, k.low, k.high), 1e-6);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, (std::vector<int64_t>{k.dft / 2 + 1, k.mels}));
  }
}

TEST(RuntimeShapeSignalTest, MelWeightMatrixRejectsSizesThatAreNotPositive) {
  Compiled c(MelModel());
  ASSERT_TRUE(c.model);
  c.ExpectRejected(MelInputs(0, 16, 8192, 0, 4096), "num_mel_bins");
  c.ExpectRejected(MelInputs(8, -16, 8192, 0, 4096), "dft_length");
  c.ExpectRejected(MelInputs(8, 16, 0, 0, 4096), "sample_rate");
}

OnnxBuilder MaxUnpoolModel() {
  OnnxBuilder b(11);
  b.Input("x", {1, 2, 2, 2});
  b.Input("indices", {1, 2, 2, 2}, onnx::TensorProto::INT64);
  b.Input("output_shape", {4}, onnx::TensorProto::INT64);
  auto& n = b.Node("MaxUnpool", {"x", "indices", "output_shape"}, {"y"});
  OnnxBuilder::IntsAttr(n, "kernel_shape", {2, 2});
  OnnxBuilder::IntsAttr(n, "strides", {2, 2});
  b.Output("y", {"n", "c", "h", "w"});
  return b;
}

TEST(RuntimeShapeSignalTest, MaxUnpoolWithOutputShapeInputMatchesTheInterpreter) {
  Compiled c(MaxUnpoolModel());
  ASSERT_TRUE(c.model);
  // Flat positions in the unpooled [1, 2, 4, 4]: the second channel's start at 16.
  ir::NDArray indices = I64({1, 2, 2, 2}, {0, 3, 9, 14, 16, 19, 29, 31});
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{1, 2, 4, 4}, {1, 2, 5, 5}, {2, 3, 4, 7}}) {
    auto want =
        ExpectSameAsReference(*c.model, c.module, {Wave({1, 2, 2, 2}), indices, I64({4}, shape)});
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(want[0].shape, shape);
  }
}

TEST(RuntimeShapeSignalTest, MaxUnpoolRejectsAnOutputShapeBelowTheUnpooledExtent) {
  Compiled c(MaxUnpoolModel());
  ASSERT_TRUE(c.model);
  ir::NDArray indices = I64({1, 2, 2, 2}, {0, 3, 9, 14, 16, 19, 29, 31});
  c.ExpectRejected({Wave({1, 2, 2, 2}), indices, I64({4}, {1, 2, 3, 4})}, "output_shape");
  c.ExpectRejected({Wave({1, 2, 2, 2}), indices, I64({4}, {1, 1, 4, 4})}, "output_shape");
}

}  // namespace
}  // namespace kiln
