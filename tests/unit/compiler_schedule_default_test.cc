// The generic rule (default_rule.cc) with the index simplification before it
// (simplify_indices.h), end to end: a multi-head split of BERT's attention, x[b, s, 64]
// reshaped to four heads of 16 and transposed, reads x at plain indices (no division by the
// symbolic s per element), runs its outer loops fused into parallel tasks (a batch of one was
// one task), vectorizes the copy that is contiguous on both sides, and matches the
// interpreter. Tuning records keep naming kernels as fusion left them.
#include <gtest/gtest.h>

#include <array>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "compiler/interp/interpreter.h"
#include "compiler/schedule/schedule.h"
#include "compiler/schedule/simplify_indices.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/schedule_check.h"

namespace kiln::testing {
namespace {

// x[b, s, 64] -> [b, s, 4, 16] -> transposed by `perm`.
std::string HeadSplit(const std::vector<int64_t>& perm) {
  OnnxBuilder b;
  b.Input("x", {"b", "s", 64});
  b.Int64Initializer("shape", {4}, {0, 0, 4, 16});
  b.Node("Reshape", {"x", "shape"}, {"heads"});
  onnx::NodeProto& t = b.Node("Transpose", {"heads"}, {"y"});
  OnnxBuilder::IntsAttr(t, "perm", perm);
  const std::vector<Dim> split = {"b", "s", 4, 16};
  std::vector<Dim> out;
  for (int64_t p : perm) out.push_back(split[p]);
  b.Output("y", out);
  return b.Serialize();
}

// The line of `kernels` that stores the kernel's output.
std::string OutputStore(const std::string& kernels) {
  std::istringstream lines(kernels);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("out[") != std::string::npos && line.find(" = ") != std::string::npos) {
      return line.substr(line.find_first_not_of(' '));
    }
  }
  return "";
}

class ScheduleDefaultTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScheduleDefaultTest, HeadSplitsReadPlainIndicesInParallelTasks) {
  struct Case {
    std::vector<int64_t> perm;
    std::string store;     // the kernel's store, as printed
    std::string parallel;  // its parallel loop: the outer loops fused until 8 tasks or more
    bool vectorized;       // whether its inner loop is
  };
  const std::vector<Case> cases = {
      {{0, 2, 1, 3}, "out[i0, i1, i2, i3] = A0[i0, i2, i1 * 16 + i3]", "range(0, b * s * 4)", true},
      {{0, 2, 3, 1}, "out[i0, i1, i2, i3] = A0[i0, i3, i1 * 16 + i2]", "range(0, b * 64)", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("perm ", c.perm[1], c.perm[2], c.perm[3]));
    const std::string onnx = HeadSplit(c.perm);
    const std::string kernels = ScheduledKernels(onnx, GetParam());
    EXPECT_EQ(OutputStore(kernels), c.store) << kernels;
    EXPECT_NE(kernels.find("for i0_fused in " + c.parallel + " parallel"), std::string::npos)
        << kernels;
    EXPECT_EQ(kernels.find("for i3 in range(0, 16) vectorized") != std::string::npos, c.vectorized)
        << kernels;
    auto module = driver::ImportModel(onnx);
    ASSERT_TRUE(module.ok()) << module.status();
    Compiled compiled(onnx, GetParam());
    for (auto [b, s] : std::vector<std::array<int64_t, 2>>{{1, 1}, {1, 5}, {2, 33}, {3, 128}}) {
      ir::NDArray x = RandomArray({b, s, 64}, 7);
      auto expected = interp::Run(*module, {x});
      ASSERT_TRUE(expected.ok()) << expected.status();
      for (int threads : {1, 3}) {
        ExpectClose(compiled.Run({x}, (*expected)[0].shape, threads), (*expected)[0],
                    absl::StrCat("b=", b, " s=", s, " threads=", threads));
      }
    }
  }
}

// An element-wise kernel over [b, s, 64] runs b * s tasks, one vector loop each: with the
// batch loop alone parallel, a batch of one ran on one thread.
TEST_P(ScheduleDefaultTest, ElementwiseRowsFuseSymbolicOuterLoops) {
  OnnxBuilder b;
  b.Input("x", {"b", "s", 64});
  b.Input("z", {"b", "s", 64});
  b.Node("Add", {"x", "z"}, {"y"});
  b.Output("y", {"b", "s", 64});
  const std::string onnx = b.Serialize();
  const std::string kernels = ScheduledKernels(onnx, GetParam());
  EXPECT_NE(kernels.find("for i0_fused in range(0, b * s) parallel"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("for i2 in range(0, 64) vectorized"), std::string::npos) << kernels;
  Compiled compiled(onnx, GetParam());
  for (auto [bv, s] : std::vector<std::array<int64_t, 2>>{{1, 1}, {1, 7}, {3, 5}}) {
    ir::NDArray x = RandomArray({bv, s, 64}, 1), z = RandomArray({bv, s, 64}, 2);
    ir::NDArray want = ir::NDArray::Zeros(arith::DataType::Float(32), {bv, s, 64});
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      want.SetDouble(i, static_cast<float>(x.GetDouble(i)) + static_cast<float>(z.GetDouble(i)));
    }
    for (int threads : {1, 3}) {
      ExpectClose(compiled.Run({x, z}, want.shape, threads), want,
                  absl::StrCat("b=", bv, " s=", s, " threads=", threads));
    }
  }
}

// A tuning record names its kernel by the kernel's text as fusion leaves it, not as
// simplified: simplification only canonicalizes, and records made before it keep applying. A
// padded conv's taps are checked against the input's extents, which simplification rewrites.
TEST_P(ScheduleDefaultTest, TuningKeysAreTheKernelsAsFusionLeftThem) {
  OnnxBuilder b;
  b.Input("x", {1, 8, 10, 10});
  b.FloatInitializer("w", {16, 8, 3, 3}, RandomValues(16 * 8 * 9, 4));
  onnx::NodeProto& conv = b.Node("Conv", {"x", "w"}, {"y"});
  OnnxBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  b.Output("y", {1, 16, 10, 10});
  const ir::Target target = ResolvedTarget(GetParam());
  const ir::IRModule fused = Fused(b.Serialize(), target);
  const std::vector<schedule::TunableKernel> kernels = schedule::TunableKernels(fused, target);
  ASSERT_EQ(kernels.size(), 1u);
  const ir::PrimFunc& kernel = fused.prim_funcs.at(kernels[0].kernel);
  EXPECT_NE(ir::ToString(schedule::SimplifyIndices(kernel.body)), ir::ToString(kernel.body));
  EXPECT_EQ(kernels[0].workload.rfind(ir::CanonicalText(kernel), 0), 0u) << kernels[0].workload;
}

INSTANTIATE_TEST_SUITE_P(Targets, ScheduleDefaultTest, ::testing::ValuesIn(CpuTestTargets()));

}  // namespace
}  // namespace kiln::testing
