// The pool rule, end to end: max pools compiled for a target, run on one and three threads,
// compared with the reference interpreter element for element (a max rounds nothing, so the
// values are equal, not close). Widths are no multiple of a vector and the batch is 2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/interp/interpreter.h"
#include "compiler/schedule/pool_rule.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"

namespace kiln::testing {
namespace {

struct PoolCase {
  std::string name;
  int64_t c, h, w, k;
  int64_t stride = 1, dilation = 1;
  std::vector<int64_t> pads = {0, 0, 0, 0};  // top, left, bottom, right
  bool ceil_mode = false;

  int64_t OutDim(int64_t in, int64_t begin, int64_t end) const {
    int64_t span = in + begin + end - dilation * (k - 1) - 1;
    return (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  }
  std::vector<int64_t> OutShape(int64_t batch) const {
    return {batch, c, OutDim(h, pads[0], pads[2]), OutDim(w, pads[1], pads[3])};
  }

  std::string Model() const {
    OnnxBuilder b;
    b.Input("x", {"n", c, h, w});
    onnx::NodeProto& pool = b.Node("MaxPool", {"x"}, {"y"});
    OnnxBuilder::IntsAttr(pool, "kernel_shape", {k, k});
    OnnxBuilder::IntsAttr(pool, "strides", {stride, stride});
    OnnxBuilder::IntsAttr(pool, "dilations", {dilation, dilation});
    OnnxBuilder::IntsAttr(pool, "pads", pads);
    OnnxBuilder::IntAttr(pool, "ceil_mode", ceil_mode ? 1 : 0);
    std::vector<int64_t> out = OutShape(1);
    b.Output("y", {"n", c, out[2], out[3]});
    return b.Serialize();
  }
};

std::vector<PoolCase> Cases() {
  return {
      // resnet18's: 3x3, stride 2, padded by 1.
      {.name = "3x3_stride2_pad1",
       .c = 3,
       .h = 41,
       .w = 45,
       .k = 3,
       .stride = 2,
       .pads = {1, 1, 1, 1}},
      {.name = "2x2_stride2", .c = 4, .h = 10, .w = 38, .k = 2, .stride = 2},
      // Rows narrower than one vector: LLVM's vector loop, no tiles.
      {.name = "narrow_rows", .c = 5, .h = 9, .w = 9, .k = 3, .pads = {1, 1, 1, 1}},
      {.name = "asymmetric_pads", .c = 2, .h = 12, .w = 40, .k = 3, .pads = {2, 0, 0, 2}},
      {.name = "dilation2", .c = 2, .h = 13, .w = 50, .k = 3, .dilation = 2, .pads = {2, 2, 2, 2}},
      // The last window hangs past the input: columns past hi are checked.
      {.name = "ceil_mode",
       .c = 3,
       .h = 12,
       .w = 36,
       .k = 3,
       .stride = 2,
       .pads = {0, 0, 0, 0},
       .ceil_mode = true},
      // No input rows: every tap of the two output rows lies in the padding.
      {.name = "no_input_rows", .c = 2, .h = 0, .w = 40, .k = 3, .pads = {2, 1, 2, 1}},
      {.name = "5x5_stride3", .c = 2, .h = 20, .w = 70, .k = 5, .stride = 3, .pads = {2, 2, 2, 2}},
  };
}

// x's elements with every tenth one -inf or +inf, so that some windows' max is an infinity.
// (No NaN: the interpreter's std::max drops a NaN where the compiled
// max, before this rule as after, propagates it.)
ir::NDArray InputWithInfinities(const PoolCase& pool) {
  ir::NDArray x = RandomArray({2, pool.c, pool.h, pool.w}, 3);
  for (int64_t i = 7; i < x.num_elements(); i += 10) {
    x.SetDouble(i, (i / 10) % 2 ? INFINITY : -INFINITY);
  }
  return x;
}

void ExpectSameValues(const ir::NDArray& actual, const ir::NDArray& expected,
                      const std::string& what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  int bad = 0;
  for (int64_t i = 0; i < expected.num_elements() && bad < 5; ++i) {
    double a = actual.GetDouble(i), e = expected.GetDouble(i);
    if (a != e) {
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected " << e;
      ++bad;
    }
  }
}

class SchedulePoolTest : public ::testing::TestWithParam<std::string> {};

// The rule takes the pool: output rows in parallel, whole vectors of columns with the taps
// unrolled, and the checked taps only in the edge columns' loops.
TEST_P(SchedulePoolTest, MaxPoolRowsRunInParallelInVectorTiles) {
  std::string kernels = ScheduledKernels(Cases()[0].Model(), GetParam());
  int64_t lanes = std::max<int64_t>(4, ResolvedTarget(GetParam()).vector_bits / 32);
  EXPECT_NE(kernels.find("for task in range(0, 3 * 21) parallel"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("for lane in range(0, " + std::to_string(lanes) + ") vectorized"),
            std::string::npos)
      << kernels;
  // 9 taps unrolled into one expression, a balanced tree of maxes 4 deep (a chain waited on
  // 9), the first of each row carried from the column before (stride 2).
  EXPECT_NE(kernels.find("= max(max(max(max(carry[0], A0["), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("max(max(max(max(max("), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("max(-inf, "), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("carry[3] = A0["), std::string::npos) << kernels;
  // A stride of 1 carries nothing.
  std::string stride1 = ScheduledKernels(Cases()[3].Model(), GetParam());
  EXPECT_EQ(stride1.find("carry"), std::string::npos) << stride1;
}

// Along a row of stride 2 the tiles carry each row's first tap from the column before, so that
// LLVM loads only whole pairs of columns and runs every column of a tile as a vector. Loaded,
// the first tap made it keep a scalar remainder: a tile of 16 ran 8 columns one at a time.
// Without padding, every column of the pool is a tile's.
TEST(SchedulePoolRuleTest, StrideTwoTilesHaveNoScalarColumns) {
  PoolCase pool{.name = "unpadded", .c = 4, .h = 33, .w = 65, .k = 3, .stride = 2};
  for (const char* name : {"x86_64-v3", "x86_64-v4"}) {
    SCOPED_TRACE(name);
    std::string text = KernelsLLVMText(pool.Model(), name);
    EXPECT_NE(text.find("fcmp ogt <"), std::string::npos) << text;
    EXPECT_EQ(text.find("fcmp ogt float "), std::string::npos) << text;
  }
}

TEST_P(SchedulePoolTest, MaxPoolsMatchTheInterpreterOnOneAndThreeThreads) {
  for (const PoolCase& pool : Cases()) {
    SCOPED_TRACE(pool.name);
    std::string onnx = pool.Model();
    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    std::string kernels = ScheduledKernels(onnx, GetParam());
    EXPECT_NE(kernels.find("vectorized"), std::string::npos) << kernels;
    Compiled compiled(onnx, GetParam());
    std::vector<ir::NDArray> inputs = {InputWithInfinities(pool)};
    auto expected = interp::Run(*module, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ir::NDArray one = compiled.Run(inputs, pool.OutShape(2), 1);
    ExpectSameValues(one, (*expected)[0], "threads=1");
    ir::NDArray three = compiled.Run(inputs, pool.OutShape(2), 3);
    EXPECT_EQ(std::memcmp(one.bytes.data(), three.bytes.data(), one.bytes.size()), 0)
        << "results differ between 1 and 3 threads";
  }
}

// An average pool is no max pool: the rule leaves it alone.
TEST(SchedulePoolRuleTest, AveragePoolIsNotTaken) {
  OnnxBuilder b;
  b.Input("x", {1, 2, 8, 8});
  onnx::NodeProto& pool = b.Node("AveragePool", {"x"}, {"y"});
  OnnxBuilder::IntsAttr(pool, "kernel_shape", {3, 3});
  b.Output("y", {1, 2, 6, 6});
  ir::Target target = ResolvedTarget("x86_64");
  ir::IRModule fused = Fused(b.Serialize(), target);
  ASSERT_FALSE(fused.prim_funcs.empty());
  for (const auto& [name, func] : fused.prim_funcs) {
    if (func.is_host || !func.body) continue;
    EXPECT_FALSE(schedule::SchedulePool(func.body, target).has_value()) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, SchedulePoolTest, ::testing::ValuesIn(CpuTestTargets()));

}  // namespace
}  // namespace kiln::testing
