// The Winograd rules, F(2x2, 3x3) and F(4x4, 3x3), end to end: 3x3 stride-1 convolutions
// (pad 1 and 0, planes no multiple of the tile, channel counts no multiple of the vector block,
// with bias + relu or a residual add) compiled with each rule's traces, run through the runtime
// on one and three threads and on batches of 1 and 2, compared with the reference interpreter;
// and the kernels the rules are offered for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/manifest.h"
#include "compiler/driver/pipeline.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/verifier.h"
#include "compiler/schedule/schedule.h"
#include "compiler/tune/measure.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"

namespace kiln::testing {
namespace {

// x[n, c, h, w] * w[m, c, k, k] + bias, then relu; a residual input added before the relu
// when `residual`. The batch is symbolic.
struct ConvCase {
  std::string name;
  int64_t c, m, h, w;
  int64_t pad = 1, k = 3, stride = 1;
  bool residual = false;
  bool constant_weights = true;
  bool symbolic_plane = false;  // input and output planes "h" x "w" (pad 1 only)

  int64_t OutDim(int64_t in) const { return (in + 2 * pad - k) / stride + 1; }
  std::vector<int64_t> OutShape(int64_t batch) const { return {batch, m, OutDim(h), OutDim(w)}; }

  std::string Model() const {
    OnnxBuilder b;
    if (symbolic_plane) {
      b.Input("x", {"n", c, "h", "w"});
    } else {
      b.Input("x", {"n", c, h, w});
    }
    if (constant_weights) {
      b.FloatInitializer("w", {m, c, k, k}, RandomValues(m * c * k * k, 11));
    } else {
      b.Input("w", {m, c, k, k});
    }
    b.FloatInitializer("b", {m}, RandomValues(m, 12));
    onnx::NodeProto& conv = b.Node("Conv", {"x", "w", "b"}, {"y"});
    OnnxBuilder::IntsAttr(conv, "strides", {stride, stride});
    OnnxBuilder::IntsAttr(conv, "pads", {pad, pad, pad, pad});
    std::string before_relu = "y";
    if (residual) {
      if (symbolic_plane) {
        b.Input("r", {"n", m, "h", "w"});
      } else {
        b.Input("r", {"n", m, OutDim(h), OutDim(w)});
      }
      b.Node("Add", {"y", "r"}, {"s"});
      before_relu = "s";
    }
    b.Node("Relu", {before_relu}, {"z"});
    if (symbolic_plane) {
      b.Output("z", {"n", m, "h", "w"});
    } else {
      b.Output("z", {"n", m, OutDim(h), OutDim(w)});
    }
    return b.Serialize();
  }

  std::vector<ir::NDArray> Inputs(int64_t batch) const {
    std::vector<ir::NDArray> inputs = {RandomArray({batch, c, h, w}, 1)};
    if (residual) inputs.push_back(RandomArray(OutShape(batch), 2));
    return inputs;
  }
};

std::vector<ConvCase> Cases() {
  return {
      {.name = "pad1_7x7", .c = 9, .m = 3, .h = 7, .w = 7},
      {.name = "pad1_8x8_residual", .c = 17, .m = 20, .h = 8, .w = 8, .residual = true},
      {.name = "pad0_5x9", .c = 17, .m = 3, .h = 5, .w = 9, .pad = 0},
      {.name = "pad0_8x8", .c = 11, .m = 17, .h = 8, .w = 8, .pad = 0},
      {.name = "pad1_5x9_residual", .c = 8, .m = 13, .h = 5, .w = 9, .residual = true},
      // A plane known only at run time, odd.
      {.name = "pad1_symbolic_9x7",
       .c = 17,
       .m = 9,
       .h = 9,
       .w = 7,
       .residual = true,
       .symbolic_plane = true},
      // 40 output channels: two blocks of 32 lanes at AVX-512, the second ragged, so a call of
      // one block of tiles splits them in two tasks of 32 and 8 channels.
      {.name = "pad1_6x6_two_groups", .c = 8, .m = 40, .h = 6, .w = 6},
      // Several blocks of tiles per image (98 tiles), and deep enough to tell the sums apart.
      {.name = "pad1_14x14_deep", .c = 64, .m = 64, .h = 14, .w = 14, .residual = true},
  };
}

// The conv kernel's search spaces, as TunableKernels lists them.
std::vector<schedule::SearchSpace> ConvSpaces(const ConvCase& conv, const ir::Target& target) {
  for (const schedule::TunableKernel& k :
       schedule::TunableKernels(Fused(conv.Model(), target), target)) {
    if (k.kernel.rfind("fused_conv", 0) == 0) return k.spaces;
  }
  ADD_FAILURE() << "no tunable conv kernel";
  return {};
}

std::optional<schedule::SearchSpace> SpaceOf(const ConvCase& conv, const ir::Target& target,
                                             const std::string& rule) {
  for (schedule::SearchSpace& space : ConvSpaces(conv, target)) {
    if (space.rule == rule) return space;
  }
  return std::nullopt;
}

ir::NDArray RunOn(runtime::Model& model, const ConvCase& conv, int64_t batch, int threads) {
  std::string error;
  EXPECT_TRUE(model.SetNumThreads(threads, &error)) << error;
  return RunModel(model, conv.Inputs(batch),
                  {ir::NDArray::Zeros(arith::DataType::Float(32), conv.OutShape(batch))})[0];
}

// A target and a rule: "winograd" (F(2x2, 3x3)) or "winograd4" (F(4x4, 3x3)).
class ScheduleWinogradTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  ir::Target target() const { return ResolvedTarget(std::get<0>(GetParam())); }
  const std::string& rule() const { return std::get<1>(GetParam()); }
  // The GEMMs: (m + 2)^2 for tiles of m x m.
  int64_t positions() const { return rule() == "winograd" ? 16 : 36; }
};

// The rule takes a 3x3 stride-1 conv with constant weights: its space is offered beside the
// conv rule's, and the kernel it builds reads the transformed weights, packed at compile time.
TEST_P(ScheduleWinogradTest, RuleTakesA3x3Stride1ConvWithTransformedWeights) {
  const ConvCase conv = Cases()[0];
  std::vector<schedule::SearchSpace> spaces = ConvSpaces(conv, target());
  ASSERT_GE(spaces.size(), 3u);
  EXPECT_EQ(spaces[0].rule, "conv");
  std::optional<schedule::SearchSpace> space = SpaceOf(conv, target(), rule());
  ASSERT_TRUE(space.has_value());
  std::vector<std::string> knobs;
  for (const schedule::Knob& knob : space->knobs) knobs.push_back(knob.name);
  EXPECT_EQ(knobs, (std::vector<std::string>{"tiles_per_task", "tile_cols", "tile_vectors"}));
  // Register tiles of 8 tiles by default where the 16 accumulators fit the registers.
  EXPECT_EQ(space->knobs[1].choices.front(), target().VectorRegisters() >= 32 ? 8 : 4);
  TracedModel traced = CompileWithTrace(conv.Model(), target(), space->Default());
  EXPECT_NE(traced.kernels.find("w_wino: f32[" + std::to_string(positions()) + ","),
            std::string::npos)
      << traced.kernels;
  EXPECT_NE(traced.kernels.find("parallel"), std::string::npos) << traced.kernels;
  // The default schedule is still the conv rule's.
  TracedModel plain = CompileWithTrace(conv.Model(), target(), std::nullopt);
  EXPECT_EQ(plain.kernels.find("w_wino"), std::string::npos) << plain.kernels;
}

// A call of one block of tiles (a batch of one, the plane in one block) runs as two tasks,
// each over half the blocks of output channels, so that two threads share it; where those
// blocks are odd in number it stays one task. The other tests run both forms on three threads.
TEST_P(ScheduleWinogradTest, OneBlockOfTilesSplitsItsOutputChannels) {
  for (int64_t m : {40, 3}) {
    ConvCase conv = Cases()[0];
    conv.m = m;
    std::optional<schedule::SearchSpace> space = SpaceOf(conv, target(), rule());
    ASSERT_TRUE(space.has_value());
    schedule::Trace trace = space->Default();
    const std::vector<int64_t>& tiles = space->knobs[0].choices;
    trace.decisions[0].value = *std::max_element(tiles.begin(), tiles.end());
    TracedModel traced = CompileWithTrace(conv.Model(), target(), trace);
    const int64_t lanes = 2 * std::max(4, target().vector_bits / 32);
    const bool even_blocks = (m + lanes - 1) / lanes % 2 == 0;
    const std::string split = "let wgroups: i64 = select(";
    EXPECT_EQ(traced.kernels.find(split) != std::string::npos, even_blocks) << "m=" << m << "\n"
                                                                            << traced.kernels;
  }
}

// The kernel's tensors (A0 the input, A3 the residual, out) are read and written a channel
// at a time, one tile's row side by side: no vectorized loop touches them, since lanes over
// channels or tiles of an NCHW tensor are gathers and scatters. The vectorized loops run over
// the task's own buffers: the copied patches, the transforms, the GEMMs.
TEST_P(ScheduleWinogradTest, VectorizedLoopsReadAndWriteOnlyTheTasksBuffers) {
  const ConvCase conv = Cases()[1];  // with a residual
  ASSERT_TRUE(conv.residual);
  std::optional<schedule::SearchSpace> space = SpaceOf(conv, target(), rule());
  ASSERT_TRUE(space.has_value());
  TracedModel traced = CompileWithTrace(conv.Model(), target(), space->Default());
  std::vector<std::string> lines = absl::StrSplit(traced.kernels, '\n');
  int vectorized = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!absl::StrContains(lines[i], " vectorized {")) continue;
    ++vectorized;
    const size_t indent = lines[i].find_first_not_of(' ');
    for (size_t j = i + 1; j < lines.size() && lines[j].find_first_not_of(' ') > indent; ++j) {
      for (const char* tensor : {"A0[", "A3[", "out["}) {
        EXPECT_FALSE(absl::StrContains(lines[j], tensor)) << "line " << j + 1 << ": " << lines[j];
      }
    }
  }
  // The input transform's, the GEMM's and the output transform's.
  EXPECT_GE(vectorized, 3) << traced.kernels;
}

// Strided, 5x5, pointwise, run-time-weight convs and those of few input channels are not
// offered the rule.
TEST_P(ScheduleWinogradTest, OtherConvsAreNotOffered) {
  for (const ConvCase& conv :
       {ConvCase{.name = "stride2", .c = 16, .m = 8, .h = 9, .w = 9, .stride = 2},
        ConvCase{.name = "5x5", .c = 16, .m = 8, .h = 9, .w = 9, .pad = 2, .k = 5},
        ConvCase{.name = "1x1", .c = 16, .m = 8, .h = 9, .w = 9, .pad = 0, .k = 1},
        ConvCase{.name = "few_input_channels", .c = 5, .m = 19, .h = 11, .w = 11},
        ConvCase{.name = "runtime_weights",
        .c = 4,
        .m = 8,
        .h = 9,
        .w = 9,
        .constant_weights = false}}) {
    SCOPED_TRACE(conv.name);
    EXPECT_FALSE(SpaceOf(conv, target(), rule()).has_value());
  }
}

// Each knob at each of its choices, the others at their defaults: the kernel matches the
// interpreter on batches of 1 and 2, on one and three threads.
TEST_P(ScheduleWinogradTest, EveryKnobChoiceMatchesTheInterpreter) {
  for (const ConvCase& conv : Cases()) {
    SCOPED_TRACE(conv.name);
    std::optional<schedule::SearchSpace> space = SpaceOf(conv, target(), rule());
    ASSERT_TRUE(space.has_value());
    std::string onnx = conv.Model();
    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    std::vector<ir::NDArray> expected;
    for (int64_t batch : {1, 2}) {
      auto run = interp::Run(*module, conv.Inputs(batch));
      ASSERT_TRUE(run.ok()) << run.status();
      expected.push_back((*run)[0]);
    }
    for (size_t knob = 0; knob < space->knobs.size(); ++knob) {
      for (int64_t choice : space->knobs[knob].choices) {
        schedule::Trace trace = space->Default();
        trace.decisions[knob].value = choice;
        SCOPED_TRACE(trace.ToJson());
        TracedModel traced = CompileWithTrace(onnx, target(), trace);
        ASSERT_NE(traced.model, nullptr);
        ASSERT_NE(traced.kernels.find("w_wino: f32[" + std::to_string(positions()) + ","),
                  std::string::npos);
        for (int64_t batch : {1, 2}) {
          for (int threads : {1, 3}) {
            ExpectClose(RunOn(*traced.model, conv, batch, threads), expected[batch - 1],
                        "batch=" + std::to_string(batch) + " threads=" + std::to_string(threads));
          }
        }
      }
    }
  }
}

// The tuner keeps a candidate whose outputs agree with the default schedule's by its own test
// (tune::FloatsAgree, which allows 1e-4 of the buffer's largest magnitude besides rtol 1e-4
// and atol 1e-5): the Winograd kernel does, on a deep conv.
TEST_P(ScheduleWinogradTest, MatchesTheDefaultScheduleWithinTheTunersTolerance) {
  const ConvCase conv = Cases().back();
  std::optional<schedule::SearchSpace> space = SpaceOf(conv, target(), rule());
  ASSERT_TRUE(space.has_value());
  TracedModel wino = CompileWithTrace(conv.Model(), target(), space->Default());
  TracedModel plain = CompileWithTrace(conv.Model(), target(), std::nullopt);
  ASSERT_NE(wino.model, nullptr);
  ASSERT_NE(plain.model, nullptr);
  ir::NDArray a = RunOn(*wino.model, conv, 2, 1), b = RunOn(*plain.model, conv, 2, 1);
  ASSERT_EQ(a.shape, b.shape);
  double scale = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) scale = std::max(scale, std::fabs(b.GetDouble(i)));
  int bad = 0;
  for (int64_t i = 0; i < a.num_elements() && bad < 5; ++i) {
    double x = a.GetDouble(i), y = b.GetDouble(i);
    if (!tune::FloatsAgree(x, y, scale)) {
      ADD_FAILURE() << "element " << i << " is " << x << ", the default schedule's " << y;
      ++bad;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TargetsAndRules, ScheduleWinogradTest,
                         ::testing::Combine(::testing::ValuesIn(CpuTestTargets()),
                                            ::testing::Values("winograd", "winograd4")));

}  // namespace
}  // namespace kiln::testing
