// The conv rule, end to end: convolutions (with fused bias, residual add and relu) compiled for
// a target, run through the runtime on one and three threads, compared with the reference
// interpreter. Channel counts are no multiple of the 8- or 16-channel block, output widths no
// multiple of the 6-column tile, and the batch is 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "compiler/codegen/codegen.h"
#include "compiler/driver/driver.h"
#include "compiler/driver/manifest.h"
#include "compiler/driver/pipeline.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/verifier.h"
#include "compiler/schedule/conv_rule.h"
#include "compiler/schedule/schedule.h"
#include "tests/support/conv_case.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"

namespace kiln::testing {
namespace {

std::vector<ConvCase> Cases() {
  return {
      {.name = "3x3_pad1", .c = 5, .m = 19, .h = 11, .w = 11, .k = 3, .pads = {1, 1, 1, 1}},
      // Narrow outputs take narrower tiles; every tile is a border tile.
      {.name = "3x3_pad1_width7", .c = 9, .m = 17, .h = 7, .w = 7, .k = 3, .pads = {1, 1, 1, 1}},
      {.name = "stride2_asymmetric_pads",
       .c = 4,
       .m = 13,
       .h = 10,
       .w = 15,
       .k = 3,
       .stride = 2,
       .pads = {1, 0, 0, 2}},
      {.name = "dilation2",
       .c = 3,
       .m = 17,
       .h = 9,
       .w = 13,
       .k = 3,
       .dilation = 2,
       .pads = {2, 2, 2, 2}},
      {.name = "stem_7x7_stride2",
       .c = 3,
       .m = 8,
       .h = 23,
       .w = 23,
       .k = 7,
       .stride = 2,
       .pads = {3, 3, 3, 3}},
      // Output channels that fill their blocks at every vector width: the epilogue checks no
      // channel (EpilogueChecksOnlyWhatCanFail). Four input channels, 36 taps: the tiler's
      // (three would take the column-lanes form).
      {.name = "stem_whole_channel_blocks",
       .c = 4,
       .m = 32,
       .h = 23,
       .w = 23,
       .k = 3,
       .stride = 2,
       .pads = {1, 1, 1, 1}},
      // Few taps (27): the column-lanes form, rows wide enough for its tiles at every vector
      // width; 19 channels, the last tile of channels clamped.
      {.name = "column_stem_stride2",
       .c = 3,
       .m = 19,
       .h = 9,
       .w = 70,
       .k = 3,
       .stride = 2,
       .pads = {1, 1, 1, 1}},
      {.name = "column_dilation2_asymmetric_pads",
       .c = 2,
       .m = 10,
       .h = 6,
       .w = 45,
       .k = 3,
       .dilation = 2,
       .pads = {2, 1, 0, 3}},
      // 25 taps of one channel, a residual add read at each output.
      {.name = "column_5x5_residual",
       .c = 1,
       .m = 12,
       .h = 5,
       .w = 40,
       .k = 5,
       .pads = {2, 2, 2, 2},
       .residual = true},
      {.name = "1x1_residual", .c = 7, .m = 20, .h = 6, .w = 9, .k = 1, .residual = true},
      // A plane smaller than one tile of positions.
      {.name = "1x1_small_plane", .c = 5, .m = 13, .h = 3, .w = 4, .k = 1},
      // More input channels than the pointwise form takes: the tiler's.
      {.name = "1x1_many_channels", .c = 70, .m = 9, .h = 5, .w = 7, .k = 1},
      // More input channels than one depth block of the matmul rule: partial sums in out.
      {.name = "1x1_deep_residual", .c = 300, .m = 13, .h = 5, .w = 6, .k = 1, .residual = true},
      // A plane of more positions than one column block of the matmul rule (128): whole
      // panels of B read in place in both blocks, the second's last one copied.
      {.name = "1x1_two_column_blocks", .c = 12, .m = 24, .h = 12, .w = 13, .k = 1},
      {.name = "3x3_residual",
       .c = 9,
       .m = 21,
       .h = 7,
       .w = 7,
       .k = 3,
       .pads = {1, 1, 1, 1},
       .residual = true},
      {.name = "groups_of_whole_blocks",
       .c = 6,
       .m = 32,
       .h = 8,
       .w = 8,
       .k = 3,
       .group = 2,
       .pads = {1, 1, 1, 1}},
      {.name = "groups_of_3", .c = 6, .m = 9, .h = 8, .w = 8, .k = 3, .group = 3},
      {.name = "depthwise",
       .c = 10,
       .m = 10,
       .h = 9,
       .w = 14,
       .k = 3,
       .stride = 2,
       .group = 10,
       .pads = {1, 1, 1, 1}},
      // Wide enough for register tiles between the edges, strided.
      {.name = "depthwise_stride2_wide",
       .c = 8,
       .m = 8,
       .h = 6,
       .w = 41,
       .k = 3,
       .stride = 2,
       .group = 8,
       .pads = {1, 1, 1, 1}},
      // Stride 2 with taps carried from column to column (StridedDepthwiseRowsCarryATap):
      // 5 taps a row, two of them carried, one from a carried tap.
      {.name = "depthwise_5x5_stride2_wide",
       .c = 4,
       .m = 4,
       .h = 9,
       .w = 77,
       .k = 5,
       .stride = 2,
       .group = 4,
       .pads = {2, 2, 2, 2}},
      // Two input channels a group, each carrying its own taps.
      {.name = "groups_of_2_stride2_wide",
       .c = 6,
       .m = 3,
       .h = 5,
       .w = 70,
       .k = 3,
       .stride = 2,
       .group = 3,
       .pads = {1, 1, 1, 1}},
      {.name = "depthwise_stride1",
       .c = 11,
       .m = 11,
       .h = 7,
       .w = 20,
       .k = 3,
       .group = 11,
       .pads = {1, 1, 1, 1}},
      // The plane form, dilated: its band's sums flattened at a pitch of 11 + 4 columns, the
      // residual added to each output row from them.
      {.name = "depthwise_dilation2_residual",
       .c = 7,
       .m = 7,
       .h = 9,
       .w = 11,
       .k = 3,
       .dilation = 2,
       .group = 7,
       .pads = {2, 2, 2, 2},
       .residual = true},
      // Two input channels a group on a plane narrower than a vector: the plane form's flat
      // positions, a copy of the plane per channel and tap column.
      {.name = "groups_of_2_narrow_plane",
       .c = 6,
       .m = 6,
       .h = 6,
       .w = 9,
       .k = 3,
       .group = 3,
       .pads = {1, 1, 1, 1}},
      // The plane form's flat positions on rows wider than a vector, two columns wrapped at
      // each end of a row, the residual read at each position.
      {.name = "depthwise_5x5_wide_flat_plane",
       .c = 5,
       .m = 5,
       .h = 13,
       .w = 37,
       .k = 5,
       .group = 5,
       .pads = {2, 2, 2, 2},
       .residual = true},
      // Every row and column near an edge: taps checked one by one on most of the plane.
      {.name = "depthwise_5x5_small_plane",
       .c = 6,
       .m = 6,
       .h = 5,
       .w = 7,
       .k = 5,
       .group = 6,
       .pads = {2, 1, 2, 3}},
  };
}

// Case `name` of Cases().
ConvCase CaseOf(const std::string& name) {
  const std::vector<ConvCase> cases = Cases();
  auto it = std::find_if(cases.begin(), cases.end(), [&](const auto& c) { return c.name == name; });
  EXPECT_NE(it, cases.end()) << name;
  return it == cases.end() ? ConvCase{} : *it;
}

// The model of case `name` of Cases().
std::string ModelOf(const std::string& name) {
  ConvCase conv = CaseOf(name);
  return conv.name.empty() ? std::string() : conv.Model();
}

class ScheduleConvTest : public ::testing::TestWithParam<std::string> {};

// Constant weights are packed at compile time: the kernel takes them packed, and packs
// nothing itself.
TEST_P(ScheduleConvTest, ConvIsTiledWithWeightsPackedAtCompileTime) {
  std::string kernels = ScheduledKernels(Cases()[0].Model(), GetParam());
  EXPECT_NE(kernels.find("w_packed: f32["), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("alloc packed_w"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("parallel"), std::string::npos) << kernels;
}

// However many input channels: constant weights packed at compile time are not bounded by a
// kernel-local buffer's size. (A 3x3 conv of 512 channels at 512-bit vectors, resnet18's
// last stage, once took the row form and ran 12x slower.)
TEST_P(ScheduleConvTest, DeepConvIsTiledWithWeightsPackedAtCompileTime) {
  ConvCase deep{.name = "deep", .c = 1024, .m = 20, .h = 4, .w = 5, .k = 3, .pads = {1, 1, 1, 1}};
  std::string kernels = ScheduledKernels(deep.Model(), GetParam());
  EXPECT_NE(kernels.find("w_packed: f32["), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("alloc packed_w"), std::string::npos) << kernels;
  // Each channel step prefetches the packed row 64 taps on, unclamped past the block's end.
  EXPECT_NE(kernels.find("kiln.prefetch(w_packed[ocb, (rkh * 3 + rkw) * 1024 + rc + 64, 0])"),
            std::string::npos)
      << kernels;
  auto module = driver::ImportModel(deep.Model());
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<ir::NDArray> inputs = {RandomArray({1, 1024, 4, 5}, 3)};
  auto expected = interp::Run(*module, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ExpectClose(Compiled(deep.Model(), GetParam()).Run(inputs, {1, 20, 4, 5}, 1), (*expected)[0], "");
}

// A 3x3 conv (padding 1, relu) of 9 to 17 channels over a plane of symbolic height and width.
std::string SymbolicPlaneConv() {
  OnnxBuilder b;
  b.Input("x", {"n", 9, "h", "w"});
  b.FloatInitializer("k", {17, 9, 3, 3}, RandomValues(17 * 9 * 3 * 3, 11));
  onnx::NodeProto& conv = b.Node("Conv", {"x", "k"}, {"y"});
  OnnxBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"y"}, {"z"});
  b.Output("z", {"n", 17, "h", "w"});
  return b.Serialize();
}

// With a symbolic width, the columns left after the whole tiles take the narrowest tile that
// covers them: of 4 columns or half a tile. At 512-bit vectors a tile is 14 columns, and a row
// of 7 (resnet18's last stage) is one tile of 7, not a tile of 14 of which half repeats.
TEST_P(ScheduleConvTest, SymbolicWidthEndsRowsWithTheNarrowestTileThatCovers) {
  std::string kernels = ScheduledKernels(SymbolicPlaneConv(), "x86_64-v4");
  for (const char* tile :
       {"alloc acc: f32[14, 32]", "alloc acc: f32[7, 32]", "alloc acc: f32[4, 32]"}) {
    EXPECT_NE(kernels.find(tile), std::string::npos) << tile << " in " << kernels;
  }
  auto module = driver::ImportModel(SymbolicPlaneConv());
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(SymbolicPlaneConv(), GetParam());
  // Every remainder of 6- and 14-column tiles that takes a tile of its own, rows narrower
  // than a tile among them.
  for (int64_t width : {3, 5, 7, 9, 10, 11, 13, 17, 18, 21, 24, 25, 28}) {
    SCOPED_TRACE("width " + std::to_string(width));
    std::vector<ir::NDArray> inputs = {RandomArray({1, 9, 3, width}, width)};
    auto expected = interp::Run(*module, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ExpectClose(compiled.Run(inputs, {1, 17, 3, width}, 2), (*expected)[0], "");
  }
}

// A border tile whose tap misses only its first or only its last column (a padding of 1)
// leaves that column out of the channel loop rather than masking every column, which LLVM
// makes a branch per column. Every tile of a plane 7 or 14 columns wide is a border tile.
// (SymbolicWidthEndsRowsWithTheNarrowestTileThatCovers checks the values.)
TEST_P(ScheduleConvTest, BorderTilesLeaveAColumnOutsideThePaddingOut) {
  std::string kernels = ScheduledKernels(SymbolicPlaneConv(), "x86_64-v4");
  // Columns 1..13 and 0..12 of a 14-column tile, 1..6 and 0..5 of a 7-column one.
  for (const char* cols : {"for col in range(1, 13) unrolled", "for col in range(0, 13) unrolled",
                           "for col in range(1, 6) unrolled", "for col in range(0, 6) unrolled"}) {
    EXPECT_NE(kernels.find(cols), std::string::npos) << cols << " in " << kernels;
  }
}

// The epilogue stores each element of a tile under a check of its channel and column only
// where one can fail: a last block of channels past M, a row narrower than a tile at a
// symbolic width. Checks that always hold cost the stem conv (27 products a sum) a fifth of
// its time, a compare per element.
TEST_P(ScheduleConvTest, EpilogueChecksOnlyWhatCanFail) {
  auto named = [&](const std::string& name) { return ScheduledKernels(ModelOf(name), GetParam()); };
  std::string whole = named("stem_whole_channel_blocks");
  EXPECT_NE(whole.find("w_packed: f32["), std::string::npos) << whole;  // the tiler's
  EXPECT_EQ(whole.find("+ lane < 32"), std::string::npos) << whole;
  EXPECT_EQ(whole.find("+ col < 12"), std::string::npos) << whole;
  std::string partial = named("3x3_pad1");  // 19 channels
  // A staged epilogue (AVX-512: StagedEpiloguesTransposeTheirTilesInRegisters) loops over the
  // block's channels inside M instead.
  const char* channels_inside = GetParam() == "x86_64-v4"
                                    ? "for lane in range(0, min(32, 19 - ocb * 32)) serial"
                                    : "+ lane < 19";
  EXPECT_NE(partial.find(channels_inside), std::string::npos) << partial;
  std::string symbolic = ScheduledKernels(SymbolicPlaneConv(), GetParam());
  EXPECT_NE(symbolic.find("+ col < w"), std::string::npos) << symbolic;
}

// The epilogue runs on whole vectors of output channels, as the accumulators hold them: the
// bias add and the relu are vector operations, and only the stores (a plane apart from channel
// to channel) are split up. Run lane by lane, each element took its own add, max and stack
// reloads of its address: the stem conv (3 -> 32 channels) ran 1.3x slower. (On AVX2 and SSE
// LLVM's SLP vectorizer put the lanes back together; on AVX-512 it did not.) On AVX-512 the
// stores are a scatter at a constant vector of offsets from one base, no vector multiply of
// 64-bit indices (which split each 16-lane scatter in two).
TEST_P(ScheduleConvTest, EpilogueRunsOnWholeVectorsOfChannels) {
  std::string text = KernelsLLVMText(ModelOf("stem_whole_channel_blocks"), GetParam());
  EXPECT_NE(text.find("fadd <"), std::string::npos) << text;
  EXPECT_EQ(text.find("fadd float "), std::string::npos) << text;
  EXPECT_FALSE(std::regex_search(text, std::regex(R"(mul (nuw |nsw )*<\d+ x i64>)"))) << text;
}

// With AVX-512, a tile of half a vector of columns or more stores through a stage: the tile
// is transposed there in registers, 16 x 16 at a time, and each output channel then reads its
// columns as one vector and stores them as one, where a vector of channels took a scatter, an
// element per store (mobilenet_v2's stem: 0.85x the time), and a gather per channel from the
// stage cost resnet18's stem a fifth of its time. The epilogue's values are computed at the
// stage's every column, past the tile's too: one that reads its input at the columns (a
// residual add) keeps the scatter.
TEST(ScheduleConvStagedEpilogueTest, StagedEpiloguesTransposeTheirTilesInRegisters) {
  const std::string stem_model = ModelOf("stem_whole_channel_blocks");
  std::string scheduled = ScheduledKernels(stem_model, "x86_64-v4");
  EXPECT_NE(scheduled.find("kiln.transpose(channels[16, 0], stage[0, 16], 16, 16, 32)"),
            std::string::npos)
      << scheduled;
  std::string stem = KernelsLLVMText(stem_model, "x86_64-v4");
  EXPECT_EQ(stem.find("@llvm.masked.gather"), std::string::npos) << stem;
  EXPECT_EQ(stem.find("@llvm.masked.scatter"), std::string::npos) << stem;
  // A shuffle of two vectors (a broadcast shuffles one).
  EXPECT_TRUE(
      std::regex_search(stem, std::regex(R"(shufflevector <16 x float> %\S+, <16 x float> %)")))
      << stem;
  ConvCase residual{.name = "3x3_wide_residual",
                    .c = 5,
                    .m = 19,
                    .h = 11,
                    .w = 20,
                    .k = 3,
                    .pads = {1, 1, 1, 1},
                    .residual = true};
  std::string kernels = ScheduledKernels(residual.Model(), "x86_64-v4");
  EXPECT_EQ(kernels.find("alloc stage"), std::string::npos) << kernels;
  residual.residual = false;
  kernels = ScheduledKernels(residual.Model(), "x86_64-v4");
  EXPECT_NE(kernels.find("alloc stage"), std::string::npos) << kernels;
}

// A conv of few taps (3 channels x 3 x 3, a stem's) takes the column-lanes form: output
// columns in the lanes and a register tile of output channels, so each tile stores whole
// vectors of columns where the tiler transposes its tile through a stage and gathers each
// channel's columns (mobilenet_v2's stem alone: 0.59x the tiler's time). Each output row first
// copies its input rows, split by phase at stride 2, so that every tap reads consecutive
// columns. 36 taps (4 channels) stay with the tiler.
TEST_P(ScheduleConvTest, FewTapConvsTakeTheColumnLanesForm) {
  const std::string channels = std::to_string(ResolvedTarget(GetParam()).VectorRegisters() / 4);
  std::string stem = ScheduledKernels(ModelOf("column_stem_stride2"), GetParam());
  EXPECT_NE(stem.find("alloc rows: f32[8192]"), std::string::npos) << stem;
  // Tap kw = 0 reads input column 2 ow - 1: phase 1, one column to the left.
  EXPECT_NE(stem.find("rows[((c * 3 + kh) * 2 + 1) * (35 + 1) + (ow0 + lane + 0)] * A1[min(ocb * " +
                      channels + " + 0, 19 - 1), c, kh, 0]"),
            std::string::npos)
      << stem;
  EXPECT_NE(stem.find("out[i0, i1, i2, ow0 + lane] = "), std::string::npos) << stem;
  std::string tiler = ScheduledKernels(ModelOf("stem_whole_channel_blocks"), GetParam());
  EXPECT_EQ(tiler.find("alloc rows"), std::string::npos) << tiler;
}

// A register tile of R rows (tile_rows) shares each weight vector it loads across R x P
// columns. At a symbolic height a task takes R rows: the last moves back to end at the
// plane's last row, and a plane lower than R clamps its rows; the tile's top and bottom taps
// fall in the padding for some of its rows only.
TEST_P(ScheduleConvTest, TallTilesMatchTheInterpreterAtEveryHeight) {
  ir::Target target = ResolvedTarget(GetParam());
  std::string onnx = SymbolicPlaneConv();
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<schedule::TunableKernel> kernels =
      schedule::TunableKernels(Fused(onnx, target), target);
  ASSERT_EQ(kernels.size(), 1u);
  ASSERT_EQ(kernels[0].spaces[0].rule, "conv");
  for (int64_t rows : {2}) {
    schedule::Trace trace = kernels[0].spaces[0].Default();
    for (schedule::Decision& d : trace.decisions) {
      if (d.knob == "tile_rows") d.value = rows;
      if (d.knob == "tile_cols") d.value = 4;
    }
    SCOPED_TRACE(trace.ToJson());
    TracedModel traced = CompileWithTrace(onnx, target, trace);
    ASSERT_NE(traced.model, nullptr);
    std::string tile = "alloc acc: f32[" + std::to_string(rows) + ", 4, ";
    EXPECT_NE(traced.kernels.find(tile), std::string::npos) << tile << " in " << traced.kernels;
    for (int64_t height : {1, 2, 3, 5, 7, 8}) {
      for (int64_t width : {3, 7}) {
        SCOPED_TRACE("height " + std::to_string(height) + ", width " + std::to_string(width));
        std::vector<ir::NDArray> inputs = {RandomArray({1, 9, height, width}, height * width)};
        auto expected = interp::Run(*module, inputs);
        ASSERT_TRUE(expected.ok()) << expected.status();
        ir::NDArray out = ir::NDArray::Zeros(arith::DataType::Float(32), {1, 17, height, width});
        ExpectClose(RunModel(*traced.model, inputs, {out})[0], (*expected)[0], "");
      }
    }
  }
}

// A depthwise conv sums its nine taps unrolled: no loop over taps is left in the kernel.
TEST_P(ScheduleConvTest, DepthwiseConvSumsItsTapsUnrolled) {
  ConvCase depthwise{
      .name = "dw", .c = 11, .m = 11, .h = 7, .w = 20, .k = 3, .group = 11, .pads = {1, 1, 1, 1}};
  std::string kernels = ScheduledKernels(depthwise.Model(), GetParam());
  EXPECT_NE(kernels.find("vectorized"), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("for rkw"), std::string::npos) << kernels;
}

// A depthwise 3x3 conv (relu) of `channels` channels over a plane of symbolic height and
// width, with `strides` (rows, columns), `pads` and constant weights `weights`.
std::string SymbolicPlaneDepthwise(std::vector<int64_t> strides, std::vector<int64_t> pads,
                                   std::vector<float> weights, int64_t channels = 6) {
  OnnxBuilder b;
  b.Input("x", {"n", channels, "h", "w"});
  b.FloatInitializer("k", {channels, 1, 3, 3}, std::move(weights));
  onnx::NodeProto& conv = b.Node("Conv", {"x", "k"}, {"y"});
  OnnxBuilder::IntsAttr(conv, "pads", pads);
  OnnxBuilder::IntsAttr(conv, "strides", strides);
  OnnxBuilder::IntAttr(conv, "group", channels);
  b.Node("Relu", {"y"}, {"z"});
  b.Output("z", {"n", channels, "oh", "ow"});
  return b.Serialize();
}

// The same with stride `stride` both ways and padding 1.
std::string SymbolicPlaneDepthwise(int64_t stride) {
  return SymbolicPlaneDepthwise({stride, stride}, {1, 1, 1, 1}, RandomValues(6 * 3 * 3, 11));
}

// A depthwise conv's columns, at a symbolic width, take register tiles of whole vectors: two
// vectors, then the narrowest of one vector, a half, a quarter that covers what is left. (A
// vector loop of unknown length left rows of 14 and 7 to its scalar remainder.) The first and
// last rows, whose top or bottom taps fall in the padding, take the same tiles.
TEST_P(ScheduleConvTest, DepthwiseRowsAtASymbolicWidthTakeVectorTiles) {
  std::string kernels = ScheduledKernels(SymbolicPlaneDepthwise(1), "x86_64-v4");
  for (int64_t lanes : {32, 16, 8, 4}) {
    std::string tile = "for lane in range(0, " + std::to_string(lanes) + ") vectorized";
    EXPECT_NE(kernels.find(tile), std::string::npos) << tile << " in " << kernels;
  }
  for (int64_t stride : {1, 2}) {
    std::string onnx = SymbolicPlaneDepthwise(stride);
    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    Compiled compiled(onnx, GetParam());
    // Rows narrower than a quarter vector, between each tile width and the next, and wider
    // than two vectors; one to four rows, so that every row is a first or last row or not.
    for (int64_t width : {1, 3, 5, 6, 9, 12, 14, 19, 28, 35, 56, 75}) {
      int64_t height = 1 + width % 4;
      SCOPED_TRACE("stride " + std::to_string(stride) + ", width " + std::to_string(width));
      std::vector<ir::NDArray> inputs = {RandomArray({1, 6, height, width}, width)};
      auto expected = interp::Run(*module, inputs);
      ASSERT_TRUE(expected.ok()) << expected.status();
      std::vector<int64_t> out = {1, 6, (height - 1) / stride + 1, (width - 1) / stride + 1};
      ExpectClose(compiled.Run(inputs, out, 2), (*expected)[0], "");
    }
  }
}

// Along a row of stride 2, a 3x3's first tap reads the column its last tap read one column
// before: the tiles carry it from lane to lane (a first-order recurrence) instead of loading
// it, and LLVM gathers none of the tiles' taps (it gathered that one, which shares the last
// one's phase). A stride of 1 carries nothing.
TEST_P(ScheduleConvTest, StridedDepthwiseRowsCarryATap) {
  EXPECT_NE(ScheduledKernels(SymbolicPlaneDepthwise(2), GetParam()).find("alloc carry"),
            std::string::npos);
  EXPECT_EQ(ScheduledKernels(SymbolicPlaneDepthwise(1), GetParam()).find("alloc carry"),
            std::string::npos);
  std::string text = KernelsLLVMText(SymbolicPlaneDepthwise(2), GetParam());
  EXPECT_NE(text.find("fused_conv_relu"), std::string::npos);
  // The tiles' loads are unconditional: a gather of theirs has a constant mask. (The edge
  // columns check each tap, and LLVM vectorizes some of them with masked gathers.)
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("call <") == std::string::npos) continue;
    bool unmasked_gather = line.find("@llvm.masked.gather") != std::string::npos &&
                           (line.find("i1 true") != std::string::npos ||
                            line.find("splat (i1 true)") != std::string::npos);
    EXPECT_FALSE(unmasked_gather) << line;
  }
}

// A depthwise conv with constant, finite weights and a stride of 1 along its rows takes the
// plane form: a band of padded input rows in a kernel-local buffer. A stride of 2 along its
// rows, or a weight that is not finite, leaves it the row form.
TEST_P(ScheduleConvTest, NarrowDepthwiseRowsTakeThePlaneForm) {
  const std::string plane = "alloc pad";
  EXPECT_NE(ScheduledKernels(SymbolicPlaneDepthwise(1), GetParam()).find(plane), std::string::npos);
  EXPECT_EQ(ScheduledKernels(SymbolicPlaneDepthwise(2), GetParam()).find(plane), std::string::npos);
  std::vector<float> weights = RandomValues(6 * 3 * 3, 11);
  weights[40] = std::numeric_limits<float>::infinity();
  std::string kernels =
      ScheduledKernels(SymbolicPlaneDepthwise({1, 1}, {1, 1, 1, 1}, weights), GetParam());
  EXPECT_EQ(kernels.find(plane), std::string::npos);
}

// The plane form sums flattened, in tiles of whole vectors. Where the input plane is the output
// plane (padding 1 on a 3x3), the plane's positions are: 7 x 7 is one run of 49, and 28 x 28
// one of 784, every tap read from a copy of the plane with zero rows around it, the epilogue
// stored at [n, m, 0, p]. A plane whose copies overflow their buffer (60 x 60) takes rows.
// Otherwise rows narrower than a vector take the band's sums, its rows PW (the padded width)
// apart: without padding, 7 x 7 -> 5 x 5 is one run of 4 * 7 + 5 = 33 sums, which the rows then
// store. Row by row, each row of 7 took two tiles of 4 lanes.
TEST(ScheduleConvPlaneFormTest, PlanesAreSummedFlattened) {
  auto depthwise = [](int64_t size, int64_t pad) {
    ConvCase conv{.name = "depthwise", .c = 6, .m = 6, .h = size, .w = size, .k = 3, .group = 6};
    conv.pads = {pad, pad, pad, pad};
    return ScheduledKernels(conv.Model(), "x86_64-v4");
  };
  const std::string positions = "[i0, i1, 0, 0 + owt * 32 + lane] = ";
  const std::string sums = "sums[0 + owt * 32 + lane] = 0.0 + pad[";
  std::string same = depthwise(7, 1);
  EXPECT_NE(same.find("alloc flat"), std::string::npos) << same;
  EXPECT_NE(same.find(positions), std::string::npos) << same;
  std::string valid = depthwise(7, 0);
  EXPECT_EQ(valid.find("alloc flat"), std::string::npos) << valid;
  EXPECT_NE(valid.find("alloc pad"), std::string::npos) << valid;
  EXPECT_NE(valid.find(sums), std::string::npos) << valid;
  EXPECT_NE(valid.find("cast<f64>(sums[(i2 - oh0) * 1 * pw + "), std::string::npos) << valid;
  std::string wide = depthwise(28, 1);
  EXPECT_NE(wide.find("alloc flat"), std::string::npos) << wide;
  EXPECT_NE(wide.find(positions), std::string::npos) << wide;
  EXPECT_EQ(wide.find("alloc pad"), std::string::npos) << wide;
  std::string large = depthwise(60, 1);
  EXPECT_EQ(large.find("alloc flat"), std::string::npos) << large;
  EXPECT_EQ(large.find("sums["), std::string::npos) << large;
}

// The plane form against the interpreter: planes of one row to several bands of rows (a band
// holds 238 rows of 32 columns, 453 of 16, 817 of 8: the tile's width with 16, 8 and 4
// lanes), rows of one column to one wider than a tile (the row form), strides of 1 and 2
// between rows, padding on one side only.
TEST_P(ScheduleConvTest, PlaneFormMatchesTheInterpreterAcrossBands) {
  for (int64_t row_stride : {1, 2}) {
    std::string onnx =
        SymbolicPlaneDepthwise({row_stride, 1}, {2, 0, 0, 2}, RandomValues(6 * 3 * 3, 11));
    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    Compiled compiled(onnx, GetParam());
    for (auto [height, width] : {std::pair<int64_t, int64_t>{1, 1},
                                 {2, 3},
                                 {5, 7},
                                 {300, 32},
                                 {301, 20},
                                 {520, 16},
                                 {900, 8},
                                 {9, 33},
                                 {4, 75}}) {
      SCOPED_TRACE("row stride " + std::to_string(row_stride) + ", " + std::to_string(height) +
                   " x " + std::to_string(width));
      std::vector<ir::NDArray> inputs = {RandomArray({1, 6, height, width}, height + width)};
      auto expected = interp::Run(*module, inputs);
      ASSERT_TRUE(expected.ok()) << expected.status();
      std::vector<int64_t> out = {1, 6, (height + 2 - 3) / row_stride + 1, width + 2 - 3 + 1};
      ExpectClose(compiled.Run(inputs, out, 2), (*expected)[0], "");
    }
  }
}

// A depthwise conv of whole blocks of L channels (a vector of f32) with constant, finite
// weights takes the channel-lanes form where its output rows are at most half a vector wide:
// a block's padded plane in pad, its weights in wt, every sum a vector of channels. At a
// symbolic width that is decided at run time: wider rows, and planes of more positions than
// pad holds (302 x 6 at 16 lanes), take the row form. Against the interpreter on both sides,
// at strides 1 and 2, padding on two sides only, on one and three threads.
TEST_P(ScheduleConvTest, NarrowDepthwisePlanesTakeChannelsInLanes) {
  const int64_t channels = 32;
  for (int64_t stride : {1, 2}) {
    std::string onnx = SymbolicPlaneDepthwise({stride, stride}, {2, 0, 0, 2},
                                              RandomValues(channels * 3 * 3, 5), channels);
    EXPECT_NE(ScheduledKernels(onnx, GetParam()).find("alloc wt"), std::string::npos);
    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    Compiled compiled(onnx, GetParam());
    for (auto [height, width] : {std::pair<int64_t, int64_t>{1, 1},
                                 {2, 2},
                                 {3, 5},
                                 {7, 7},
                                 {9, 14},
                                 {5, 15},
                                 {4, 16},
                                 {6, 33},
                                 {300, 4}}) {
      SCOPED_TRACE("stride " + std::to_string(stride) + ", " + std::to_string(height) + " x " +
                   std::to_string(width));
      std::vector<ir::NDArray> inputs = {RandomArray({2, channels, height, width}, width)};
      auto expected = interp::Run(*module, inputs);
      ASSERT_TRUE(expected.ok()) << expected.status();
      std::vector<int64_t> out = {2, channels, (height + 2 - 3) / stride + 1,
                                  (width + 2 - 3) / stride + 1};
      ir::NDArray one = compiled.Run(inputs, out, 1);
      ExpectClose(one, (*expected)[0], "threads=1");
      ExpectClose(compiled.Run(inputs, out, 3), one, "threads=3");
    }
  }
}

// The channel-lanes form adds 0 * w for a tap in the padding: a weight that is not finite
// leaves the conv the row form, as do channels that are no whole blocks of vectors.
TEST_P(ScheduleConvTest, ChannelsInLanesNeedFiniteWeightsAndWholeBlocks) {
  std::vector<float> weights = RandomValues(32 * 3 * 3, 5);
  weights[100] = std::numeric_limits<float>::quiet_NaN();
  const std::string lanes = "alloc wt";
  EXPECT_EQ(ScheduledKernels(SymbolicPlaneDepthwise({1, 1}, {1, 1, 1, 1}, weights, 32), GetParam())
                .find(lanes),
            std::string::npos);
  EXPECT_EQ(ScheduledKernels(SymbolicPlaneDepthwise(1), GetParam()).find(lanes), std::string::npos);
}

// On AVX-512 the channel-lanes form moves its planes through transposes in registers: the
// block's input planes to a stage of a vector of channels per position, where each lane was a
// gather; its sums, a vector of channels per position, to a row per channel, so that each
// channel's epilogue stores whole vectors of positions, where a vector of channels took a
// scatter. In mobilenet_v2 its four convs on 7 x 7 then ran in 0.37-0.45x the samples. On AVX2
// it keeps the gathers and scatters.
TEST(ScheduleConvLaneEpilogueTest, ChannelLanesFormMovesItsPlanesThroughTransposes) {
  ConvCase depthwise{.name = "depthwise",
                     .c = 16,
                     .m = 16,
                     .h = 7,
                     .w = 7,
                     .k = 3,
                     .group = 16,
                     .pads = {1, 1, 1, 1}};
  const std::string model = depthwise.Model();
  std::string scheduled = ScheduledKernels(model, "x86_64-v4");
  EXPECT_NE(scheduled.find("alloc wt"), std::string::npos) << scheduled;
  EXPECT_NE(scheduled.find("kiln.transpose(stage["), std::string::npos) << scheduled;
  EXPECT_NE(scheduled.find("kiln.transpose(channels["), std::string::npos) << scheduled;
  std::string text = KernelsLLVMText(model, "x86_64-v4");
  EXPECT_EQ(text.find("@llvm.masked.scatter"), std::string::npos) << text;
  // The gathers left are the block's weights', a vector of channels per tap.
  std::regex gather(R"(call <16 x float> @llvm\.masked\.gather)");
  const auto gathers =
      std::distance(std::sregex_iterator(text.begin(), text.end(), gather), std::sregex_iterator());
  EXPECT_LE(gathers, 9) << text;
  EXPECT_EQ(ScheduledKernels(model, "x86_64-v3").find("kiln.transpose"), std::string::npos);
}

// Weights given at run time are packed by the kernel, per block of output channels.
TEST_P(ScheduleConvTest, RunTimeWeightsArePackedInTheKernel) {
  OnnxBuilder b;
  b.Input("x", {"n", 5, 9, 9});
  b.Input("w", {19, 5, 3, 3});
  b.Node("Conv", {"x", "w"}, {"y"});
  b.Output("y", {"n", 19, 7, 7});
  std::string onnx = b.Serialize();
  std::string kernels = ScheduledKernels(onnx, GetParam());
  EXPECT_NE(kernels.find("alloc packed_w"), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("kiln.prefetch"), std::string::npos) << kernels;
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<ir::NDArray> inputs = {RandomArray({2, 5, 9, 9}, 1), RandomArray({19, 5, 3, 3}, 2)};
  auto expected = interp::Run(*module, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ExpectClose(Compiled(onnx, GetParam()).Run(inputs, {2, 19, 7, 7}, 1), (*expected)[0], "");
}

// A pointwise conv's constant weights, its matmul's A, are packed at compile time where the
// knobs pack A (tiles of more than 8 rows: 2 of 10 for 20 channels on AVX-512): the kernel
// packs no A itself, only B (its input).
TEST_P(ScheduleConvTest, PointwiseWeightsArePackedAtCompileTimeWhereTheTilerPacksA) {
  ConvCase pointwise{.name = "1x1", .c = 7, .m = 20, .h = 6, .w = 9, .k = 1, .residual = true};
  std::string kernels = ScheduledKernels(pointwise.Model(), GetParam());
  schedule::Trace defaults =
      schedule::MatmulSpace(ResolvedTarget(GetParam()), false, true, 20).Default();
  bool packs_a = defaults.Get("pack_a", 0) != 0;
  const int64_t rows = defaults.Get("tile_rows", 0);
  // The row tiles, and one of zeros past them (the matmul rule's strip reads whole vectors).
  const std::string packed = "_packed: f32[" + std::to_string((20 + rows - 1) / rows + 1) +
                             ", 7, " + std::to_string(rows) + "]";
  EXPECT_EQ(kernels.find(packed) != std::string::npos, packs_a) << packed << " in " << kernels;
  // Weights packed at compile time are prefetched (the input too:
  // PointwiseConvPrefetchesItsInputAhead).
  EXPECT_EQ(kernels.find("kiln.prefetch(A1_packed[") != std::string::npos, packs_a) << kernels;
  EXPECT_EQ(kernels.find("alloc packed_a"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("alloc packed_b"), std::string::npos) << kernels;
}

// Every outlined parallel body (`define ... @fused_conv_relu_0.parallel0(...)`) of the kernels
// of `onnx`: its stack buffers are among `allowed`, and LLVM needed no run-time overlap checks
// between buffers to vectorize it.
void ExpectParallelBodiesKeepOnly(const std::string& onnx, const std::string& target,
                                  const std::set<std::string>& allowed) {
  std::string text = KernelsLLVMText(onnx, target);
  int bodies = 0;
  for (size_t begin = text.find("\ndefine "); begin != std::string::npos;
       begin = text.find("\ndefine ", begin + 1)) {
    if (text.substr(begin, text.find('\n', begin + 1) - begin).find(".parallel") ==
        std::string::npos) {
      continue;
    }
    ++bodies;
    std::string body = text.substr(begin, text.find("\n}\n", begin) - begin);
    std::regex stack_buffer(R"(%(\w+) = alloca)");
    for (auto it = std::sregex_iterator(body.begin(), body.end(), stack_buffer);
         it != std::sregex_iterator(); ++it) {
      EXPECT_TRUE(allowed.contains((*it)[1].str())) << (*it)[1].str() << " in " << body;
    }
    EXPECT_EQ(body.find("found.conflict"), std::string::npos) << body;
  }
  EXPECT_GT(bodies, 0) << text;
}

// The register tile lives in registers: the optimized kernel keeps no stack buffer in its
// parallel body but a staged epilogue's (StagedEpiloguesTransposeTheirTilesInRegisters).
TEST_P(ScheduleConvTest, TiledConvKeepsItsAccumulatorsInRegisters) {
  ExpectParallelBodiesKeepOnly(Cases()[0].Model(), GetParam(), {"stage", "channels"});
}

// So does the column-lanes form's, beside its input rows (and the staged epilogue of the
// tiler it falls back to). With its T channels' stores in one vector loop, LLVM checked them
// for overlap at run time, and the scalar loop it kept for an overlap read acc at a variable
// index: acc stayed on the stack, and resnet18's stem took 3.2 ms in this form, not 1.3.
TEST_P(ScheduleConvTest, ColumnLanesFormKeepsItsAccumulatorsInRegisters) {
  ExpectParallelBodiesKeepOnly(ModelOf("column_stem_stride2"), GetParam(),
                               {"stage", "channels", "rows"});
}

TEST_P(ScheduleConvTest, ConvsMatchTheInterpreterOnOneAndThreeThreads) {
  for (const ConvCase& conv : Cases()) {
    SCOPED_TRACE(conv.name);
    std::string onnx = conv.Model();
    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    Compiled compiled(onnx, GetParam());
    std::vector<int64_t> out = conv.OutShape(2);
    std::vector<ir::NDArray> inputs = {RandomArray({2, conv.c, conv.h, conv.w}, 1)};
    if (conv.residual) inputs.push_back(RandomArray(out, 2));
    auto expected = interp::Run(*module, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ir::NDArray one = compiled.Run(inputs, out, 1);
    ExpectClose(one, (*expected)[0], "threads=1");
    ir::NDArray three = compiled.Run(inputs, out, 3);
    EXPECT_EQ(std::memcmp(one.bytes.data(), three.bytes.data(), one.bytes.size()), 0)
        << "results differ between 1 and 3 threads";
  }
}

// Knobs: a conv kernel built with each knob of its search space at each of its choices, the
// others at their defaults, compiled and compared with the interpreter.

std::vector<ConvCase> TunedCases() {
  return {
      {.name = "3x3_pad1", .c = 5, .m = 19, .h = 11, .w = 11, .k = 3, .pads = {1, 1, 1, 1}},
      {.name = "stride2_asymmetric_pads",
       .c = 4,
       .m = 13,
       .h = 10,
       .w = 15,
       .k = 3,
       .stride = 2,
       .pads = {1, 0, 0, 2}},
      // Enough input channels to split into blocks.
      {.name = "3x3_deep_residual",
       .c = 64,
       .m = 20,
       .h = 6,
       .w = 9,
       .k = 3,
       .pads = {1, 1, 1, 1},
       .residual = true},
      {.name = "groups_of_whole_blocks",
       .c = 6,
       .m = 32,
       .h = 8,
       .w = 8,
       .k = 3,
       .group = 2,
       .pads = {1, 1, 1, 1}},
      {.name = "depthwise",
       .c = 10,
       .m = 10,
       .h = 9,
       .w = 14,
       .k = 3,
       .stride = 2,
       .group = 10,
       .pads = {1, 1, 1, 1}},
      // 49 taps: register tiles rather than unrolled taps.
      {.name = "depthwise_7x7_wide",
       .c = 3,
       .m = 3,
       .h = 5,
       .w = 75,
       .k = 7,
       .group = 3,
       .pads = {3, 3, 3, 3}},
      // 44 rows: four register tiles even of 14 rows (AVX-512), enough for every group_tiles
      // choice to group them differently.
      {.name = "1x1_residual", .c = 7, .m = 44, .h = 6, .w = 9, .k = 1, .residual = true},
      // Stride 1 along its rows, narrow ones: the plane form.
      {.name = "depthwise_narrow_rows",
       .c = 5,
       .m = 5,
       .h = 6,
       .w = 9,
       .k = 3,
       .group = 5,
       .pads = {1, 0, 2, 1}},
      // Whole blocks of channels at every vector width: the channel-lanes form, the default
      // where rows of 7 are at most half a vector (16 lanes).
      {.name = "depthwise_channel_blocks",
       .c = 16,
       .m = 16,
       .h = 7,
       .w = 7,
       .k = 3,
       .group = 16,
       .pads = {1, 1, 1, 1}},
      // The same form dilated, with uneven padding (channel_lanes 1 takes it).
      {.name = "depthwise_channel_blocks_dilated",
       .c = 16,
       .m = 16,
       .h = 9,
       .w = 10,
       .k = 3,
       .dilation = 2,
       .group = 16,
       .pads = {2, 1, 1, 3}},
      // Few taps: the column-lanes form by default, its knobs beside the tiler's.
      CaseOf("column_stem_stride2"),
      // Deep enough that both rules prefetch the input ahead (past its last channel at the
      // end); otherwise 1x1_residual.
      {.name = "1x1_deep", .c = 72, .m = 44, .h = 6, .w = 9, .k = 1, .residual = true},
  };
}

// The one kernel whose name starts with "fused_conv".
const ir::PrimFunc* ConvKernel(const ir::IRModule& module) {
  for (const auto& [name, func] : module.prim_funcs) {
    if (name.rfind("fused_conv", 0) == 0) return &func;
  }
  ADD_FAILURE() << "no conv kernel in " << ir::ToString(module);
  return nullptr;
}

// The constants `kernel`'s call in main passes, by parameter, as Schedule finds them.
schedule::ConstantOf ConstantsOfCall(const ir::IRModule& module, const ir::PrimFunc& kernel) {
  std::vector<const ir::NDArray*> constants(kernel.buffers.size(), nullptr);
  for (const ir::BindingBlock& block : module.functions.at("main").blocks) {
    for (const ir::Binding& b : block.bindings) {
      if (b.value->kind != ir::ExprKind::kCall || b.value->callee != kernel.name) continue;
      for (size_t i = 0; i < b.value->args.size() && i < constants.size(); ++i) {
        if (b.value->args[i]->kind == ir::ExprKind::kConstant) {
          constants[i] = b.value->args[i]->data.get();
        }
      }
    }
  }
  return [&kernel, constants](const arith::Buffer& buffer) -> const ir::NDArray* {
    for (size_t i = 0; i < kernel.buffers.size(); ++i) {
      if (kernel.buffers[i] == buffer) return constants[i];
    }
    return nullptr;
  };
}

// The conv kernel's search spaces, as TunableKernels lists them.
std::vector<schedule::SearchSpace> ConvSpaces(const ConvCase& conv, const ir::Target& target) {
  std::vector<schedule::TunableKernel> kernels =
      schedule::TunableKernels(Fused(conv.Model(), target), target);
  for (const schedule::TunableKernel& k : kernels) {
    if (k.kernel.rfind("fused_conv", 0) == 0) return k.spaces;
  }
  ADD_FAILURE() << "no tunable conv kernel";
  return {};
}

std::vector<std::string> KnobNames(const schedule::SearchSpace& space) {
  std::vector<std::string> names;
  for (const schedule::Knob& knob : space.knobs) names.push_back(knob.name);
  return names;
}

TEST_P(ScheduleConvTest, ConvKernelsAreTunableInTheirRulesSpace) {
  ir::Target target = ResolvedTarget(GetParam());
  using Names = std::vector<std::string>;
  const Names tiler = {"tile_cols", "tile_vectors", "tile_rows", "channel_block"};
  for (const auto& [conv, rule, knobs] :
       {std::tuple{TunedCases()[0], "conv", tiler},
        std::tuple{TunedCases()[4], "conv", Names{"unroll_taps", "row_vectors", "parallel_rows"}},
        std::tuple{TunedCases()[7], "conv",
                   Names{"unroll_taps", "row_vectors", "parallel_rows", "plane"}},
        std::tuple{TunedCases()[5], "conv", Names{"row_vectors", "parallel_rows"}},
        std::tuple{TunedCases()[8], "conv",
                   Names{"unroll_taps", "row_vectors", "parallel_rows", "plane", "channel_lanes"}},
        std::tuple{TunedCases()[10], "conv",
                   Names{"tile_cols", "tile_vectors", "tile_rows", "channel_block",
                         "column_channels", "column_vectors"}}}) {
    SCOPED_TRACE(conv.name);
    std::vector<schedule::SearchSpace> spaces = ConvSpaces(conv, target);
    ASSERT_EQ(spaces.size(), 1u);
    EXPECT_EQ(spaces[0].rule, rule);
    EXPECT_EQ(KnobNames(spaces[0]), knobs);
    EXPECT_GT(spaces[0].Size(), 1);
  }
}

// With weights packed at compile time, the tiler runs (block, row) pairs as one parallel loop
// whatever the trace says: a trace of tuning space 9 could ask for a block at a time (one
// parallel loop of a few rows per block), which a one-thread measurement could not tell from
// pairs and which ran slower on two threads than on one.
TEST_P(ScheduleConvTest, TiledConvRunsBlockRowPairsAsOneParallelLoop) {
  ir::Target target = ResolvedTarget(GetParam());
  const ConvCase conv = TunedCases()[0];
  ir::IRModule module = Fused(conv.Model(), target);
  const ir::PrimFunc* kernel = ConvKernel(module);
  ASSERT_NE(kernel, nullptr);
  schedule::ConstantOf constants = ConstantsOfCall(module, *kernel);
  const schedule::Trace defaults = ConvSpaces(conv, target)[0].Default();
  schedule::Trace block_at_a_time = defaults;
  std::erase_if(block_at_a_time.decisions,
                [](const auto& d) { return d.knob == "parallel_blocks"; });
  block_at_a_time.decisions.push_back({"parallel_blocks", 0});
  for (const schedule::Trace& trace : {defaults, block_at_a_time}) {
    SCOPED_TRACE(trace.ToJson());
    auto scheduled = schedule::ScheduleConv(kernel->body, target, constants, trace);
    ASSERT_TRUE(scheduled.has_value());
    std::string text = ir::ToString(scheduled->body);
    size_t first = text.find(") parallel {");
    ASSERT_NE(first, std::string::npos) << text;
    EXPECT_EQ(text.find(") parallel {", first + 1), std::string::npos) << text;
    // Tasks: blocks of output channels x the plane's 11 rows.
    EXPECT_NE(text.find("for task in range(0, floordiv(19 + "), std::string::npos) << text;
    EXPECT_NE(text.find(" * 11) parallel {"), std::string::npos) << text;
    EXPECT_EQ(text.find("for ocb in"), std::string::npos) << text;
  }
}

// A pointwise conv is tuned as a matmul (the default) and in the tiler's space, whose
// kernel keeps output channels in the vector lanes.
TEST_P(ScheduleConvTest, PointwiseConvIsTunedAsAMatmulAndInTheTilersSpace) {
  ir::Target target = ResolvedTarget(GetParam());
  const ConvCase pointwise = TunedCases()[6];
  std::vector<schedule::SearchSpace> spaces = ConvSpaces(pointwise, target);
  ASSERT_EQ(spaces.size(), 2u);
  EXPECT_EQ(spaces[0].rule, "matmul");
  EXPECT_EQ(KnobNames(spaces[0]),
            KnobNames(schedule::MatmulSpace(target, false, /*reads_b_in_place=*/true)));
  EXPECT_EQ(spaces[1].rule, "conv");
  EXPECT_EQ(KnobNames(spaces[1])[0], "tile_cols");

  ir::IRModule module = Fused(pointwise.Model(), target);
  const ir::PrimFunc* kernel = ConvKernel(module);
  ASSERT_NE(kernel, nullptr);
  schedule::ConstantOf constants = ConstantsOfCall(module, *kernel);
  auto built = [&](const schedule::Trace& trace) {
    auto k = schedule::ScheduleConv(kernel->body, target, constants, trace);
    EXPECT_TRUE(k.has_value());
    return k ? ir::ToString(k->body) : "";
  };
  EXPECT_NE(built(spaces[1].Default()), built(spaces[0].Default()));
  EXPECT_EQ(built(spaces[0].Default()), built({}));
  // The tiler's kernel reads weights packed at compile time as [channel block, tap, lane]:
  // output channels in the lanes, the 7 input channels the taps.
  auto tiled = schedule::ScheduleConv(kernel->body, target, constants, spaces[1].Default());
  ASSERT_TRUE(tiled && tiled->packed);
  const int64_t lanes = 2 * std::max(4, target.vector_bits / 32);
  EXPECT_EQ(tiled->packed->data.shape,
            (std::vector<int64_t>{(pointwise.m + lanes - 1) / lanes, pointwise.c, lanes}));
}

// A pointwise conv takes the matmul rule over the flattened plane, the residual epilogue
// fused into the tile's store. B (x) is read in place in panels of whole positions, and only
// the panel that crosses the plane's end is copied (zeros past it); with pack_b on, every
// panel is copied, as in other products. Its 7 input channels make a shallow product: tasks
// of 512 columns (DefaultBlockCols).
TEST_P(ScheduleConvTest, PointwiseConvIsAMatmulOverThePlaneReadInPlace) {
  ConvCase pointwise{.name = "1x1", .c = 7, .m = 20, .h = 6, .w = 9, .k = 1, .residual = true};
  std::string kernels = ScheduledKernels(pointwise.Model(), GetParam());
  EXPECT_EQ(kernels.find("packed_w"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("prim_func @fused_conv_add"), std::string::npos) << kernels;
  const std::string in_place = "* A0[i0, kc * 256 + kk, 0, jc * 512 + jp * ";
  const std::string whole_panel_copied = "packed_b[pjp, pkk, pjj] = A0[";
  EXPECT_NE(kernels.find("alloc packed_b"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find(in_place), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find(whole_panel_copied), std::string::npos) << kernels;

  ir::Target target = ResolvedTarget(GetParam());
  ir::IRModule module = Fused(pointwise.Model(), target);
  const ir::PrimFunc* kernel = ConvKernel(module);
  ASSERT_NE(kernel, nullptr);
  schedule::Trace packed = ConvSpaces(pointwise, target)[0].Default();
  ASSERT_EQ(packed.rule, "matmul");
  ASSERT_EQ(packed.Get("pack_b", 1), 0);
  for (schedule::Decision& d : packed.decisions) d.value = d.knob == "pack_b" ? 1 : d.value;
  auto scheduled =
      schedule::ScheduleConv(kernel->body, target, ConstantsOfCall(module, *kernel), packed);
  ASSERT_TRUE(scheduled.has_value());
  std::string text = ir::ToString(scheduled->body);
  EXPECT_EQ(text.find(in_place), std::string::npos) << text;
  EXPECT_NE(text.find(whole_panel_copied), std::string::npos) << text;
}

// A pointwise conv reads a new line of its input at every step of the reduction, a plane
// further on, where the hardware's prefetchers stop at each page: both rules prefetch it 32
// channels ahead, the matmul rule's rows read in place and the tiler's tile columns.
TEST_P(ScheduleConvTest, PointwiseConvPrefetchesItsInputAhead) {
  ir::Target target = ResolvedTarget(GetParam());
  const ConvCase deep = TunedCases().back();
  ASSERT_EQ(deep.name, "1x1_deep");
  ir::IRModule module = Fused(deep.Model(), target);
  const ir::PrimFunc* kernel = ConvKernel(module);
  ASSERT_NE(kernel, nullptr);
  schedule::ConstantOf constants = ConstantsOfCall(module, *kernel);
  std::vector<schedule::SearchSpace> spaces = ConvSpaces(deep, target);
  ASSERT_EQ(spaces.size(), 2u);
  auto built = [&](const schedule::Trace& trace) {
    auto k = schedule::ScheduleConv(kernel->body, target, constants, trace);
    EXPECT_TRUE(k.has_value());
    return k ? ir::ToString(k->body) : "";
  };
  std::string matmul = built(spaces[0].Default()), tiled = built(spaces[1].Default());
  EXPECT_NE(matmul.find("kiln.prefetch(A0[i0, kc * 256 + (kk + 32), 0, jc * "), std::string::npos)
      << matmul;
  EXPECT_TRUE(
      std::regex_search(tiled, std::regex(R"(kiln\.prefetch\(A0\[i0, [^\]]*\(rc \+ 32\), )")))
      << tiled;

  // 7 channels: the matmul rule prefetches the same row of the next panel instead.
  const ConvCase shallow = TunedCases()[6];
  ASSERT_EQ(shallow.c, 7);
  std::string kernels = ScheduledKernels(shallow.Model(), GetParam());
  EXPECT_TRUE(std::regex_search(
      kernels,
      std::regex(R"(kiln\.prefetch\(A0\[i0, kc \* 256 \+ kk, 0, jc \* \d+ \+ \(jp \+ 1\) \* )")))
      << kernels;
  EXPECT_EQ(kernels.find("kk + 32"), std::string::npos) << kernels;
}

// A conv whose constant weights the tiler packs at compile time, however deep, is tuned in the
// tiler's space, not the row form's (whose trace would replay as the untuned tiler).
TEST_P(ScheduleConvTest, DeepConvIsTunedInTheTilersSpace) {
  ConvCase deep{.name = "deep", .c = 1024, .m = 20, .h = 4, .w = 5, .k = 3, .pads = {1, 1, 1, 1}};
  std::vector<schedule::SearchSpace> spaces = ConvSpaces(deep, ResolvedTarget(GetParam()));
  ASSERT_FALSE(spaces.empty());
  EXPECT_EQ(spaces[0].rule, "conv");
  EXPECT_EQ(KnobNames(spaces[0])[0], "tile_cols");
}

// The default trace builds exactly the kernel the rule builds with no trace; so does a trace
// of another rule, or of values the rule cannot use.
TEST_P(ScheduleConvTest, DefaultTraceBuildsTheUntracedKernel) {
  ir::Target target = ResolvedTarget(GetParam());
  schedule::Trace bogus = {
      "conv",
      {{"tile_cols", 0}, {"tile_vectors", -1}, {"channel_block", 7}, {"row_vectors", 1000}}};
  for (const ConvCase& conv : TunedCases()) {
    SCOPED_TRACE(conv.name);
    ir::IRModule module = Fused(conv.Model(), target);
    const ir::PrimFunc* kernel = ConvKernel(module);
    ASSERT_NE(kernel, nullptr);
    std::vector<schedule::SearchSpace> spaces = schedule::ConvSpaces(kernel->body, target);
    ASSERT_FALSE(spaces.empty());
    const schedule::SearchSpace* space = &spaces.front();
    schedule::ConstantOf constants = ConstantsOfCall(module, *kernel);
    auto built = [&](const schedule::Trace& trace) {
      auto k = schedule::ScheduleConv(kernel->body, target, constants, trace);
      EXPECT_TRUE(k.has_value());
      std::string text = k ? ir::ToString(k->body) : "";
      if (k && k->packed) {
        text += arith::ToString(k->packed->packed->shape[0]);
        text.append(k->packed->data.bytes.begin(), k->packed->data.bytes.end());
      }
      return text;
    };
    std::string untraced = built({});
    EXPECT_EQ(built(space->Default()), untraced);
    // A pointwise conv's own rule is the matmul's; a trace of the conv rule asks for its
    // second space, the tiler, at its defaults where the values are bogus.
    EXPECT_EQ(built(bogus), spaces.size() > 1 ? built(spaces[1].Default()) : untraced);
    EXPECT_EQ(built({"openblas", {{"tile_cols", 2}}}), untraced);
  }
}

// A tall tile whose accumulators are more than the registers would only spill, and takes
// LLVM several times as long to compile: it takes as many columns as the registers hold, the
// kernel of the same trace with fewer tile_cols.
TEST_P(ScheduleConvTest, ATallTileTakesNoMoreAccumulatorsThanRegisters) {
  ir::Target target = ResolvedTarget(GetParam());
  ConvCase conv = TunedCases()[0];
  ir::IRModule module = Fused(conv.Model(), target);
  const ir::PrimFunc* kernel = ConvKernel(module);
  ASSERT_NE(kernel, nullptr);
  schedule::ConstantOf constants = ConstantsOfCall(module, *kernel);
  auto built = [&](int64_t cols, int64_t rows) {
    schedule::Trace trace = {"conv", {{"tile_cols", cols}, {"tile_rows", rows}}};
    auto k = schedule::ScheduleConv(kernel->body, target, constants, trace);
    EXPECT_TRUE(k.has_value());
    return k ? ir::ToString(k->body) : "";
  };
  const int64_t fits = target.VectorRegisters() / 4;  // columns of a 2-row, 2-vector tile
  EXPECT_NE(built(fits, 2), built(fits, 1));
  EXPECT_NE(built(fits, 2), built(fits - 1, 2));
  EXPECT_EQ(built(fits + 1, 2), built(fits, 2));
  EXPECT_EQ(built(14, 2), built(fits, 2));
  EXPECT_EQ(built(14, 8), built(2, 8));  // 8 rows x 2 vectors: 1 or 2 columns
}

// Each knob of each space at each of its choices, the others at their defaults: the kernel
// matches the interpreter on one and three threads, and every choice builds a kernel of its
// own.
void ExpectEveryChoiceCorrect(const ConvCase& conv, const std::string& target_name) {
  ir::Target target = ResolvedTarget(target_name);
  std::vector<schedule::SearchSpace> spaces = ConvSpaces(conv, target);
  ASSERT_FALSE(spaces.empty());
  std::string onnx = conv.Model();
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<int64_t> out = conv.OutShape(2);
  std::vector<ir::NDArray> inputs = {RandomArray({2, conv.c, conv.h, conv.w}, 1)};
  if (conv.residual) inputs.push_back(RandomArray(out, 2));
  auto expected = interp::Run(*module, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  // The conv rule's spaces and the matmul's (a pointwise conv has both), not Winograd's
  // (its own test) or a library's.
  for (const schedule::SearchSpace& space : spaces) {
    if (space.rule != "conv" && space.rule != "matmul") continue;
    SCOPED_TRACE(space.rule);
    const std::string default_kernels = CompileWithTrace(onnx, target, space.Default()).kernels;
    for (size_t knob = 0; knob < space.knobs.size(); ++knob) {
      for (int64_t choice : space.knobs[knob].choices) {
        schedule::Trace trace = space.Default();
        trace.decisions[knob].value = choice;
        SCOPED_TRACE(trace.ToJson());
        TracedModel traced = CompileWithTrace(onnx, target, trace);
        ASSERT_NE(traced.model, nullptr);
        if (choice != space.knobs[knob].choices[0]) {
          EXPECT_NE(traced.kernels, default_kernels) << "the knob changed nothing";
        }
        for (int threads : {1, 3}) {
          std::string error;
          ASSERT_TRUE(traced.model->SetNumThreads(threads, &error)) << error;
          ir::NDArray result = RunModel(*traced.model, inputs,
                                        {ir::NDArray::Zeros(arith::DataType::Float(32), out)})[0];
          ExpectClose(result, (*expected)[0], "threads=" + std::to_string(threads));
        }
      }
    }
  }
}

TEST_P(ScheduleConvTest, EveryKnobChoiceMatchesTheInterpreter) {
  for (const ConvCase& conv : TunedCases()) {
    SCOPED_TRACE(conv.name);
    ExpectEveryChoiceCorrect(conv, GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ScheduleConvTest, ::testing::ValuesIn(CpuTestTargets()));

}  // namespace
}  // namespace kiln::testing
