// The default schedules, end to end: ONNX models compiled for a target, run through the runtime
// on one and several threads, compared with the reference interpreter. Sizes are chosen so
// that no dimension is a multiple of a tile (6 rows, 8 or 16 columns, 128-column blocks,
// 256-deep blocks), and M is symbolic.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <random>

#include "compiler/driver/driver.h"
#include "compiler/driver/pipeline.h"
#include "compiler/interp/interpreter.h"
#include "kiln/runtime.hpp"
#include "tests/support/onnx_builder.h"

namespace kiln {
namespace {

using testing::OnnxBuilder;

ir::NDArray Random(std::vector<int64_t> shape, int seed) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.SetDouble(i, dist(rng));
  return a;
}

DLTensor View(ir::NDArray& a) {
  DLTensor t{};
  t.data = a.bytes.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(a.shape.size());
  t.dtype = {kDLFloat, 32, 1};
  t.shape = a.shape.data();
  return t;
}

// The whole pipeline's kernels for `target`, printed.
std::string ScheduledKernels(const std::string& onnx, const std::string& target) {
  auto m = driver::ImportModel(onnx);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return "";
  ir::Target t = *ir::ParseTarget(target);
  auto lowered = driver::RunPipeline(*std::move(m), nullptr, "", &t);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  return lowered.ok() ? ir::ToString(*lowered) : "";
}

class Compiled {
 public:
  Compiled(const std::string& onnx, const std::string& target) {
    auto artifact = driver::CompileModel(onnx, *ir::ParseTarget(target), {}, nullptr);
    EXPECT_TRUE(artifact.ok()) << artifact.status();
    if (!artifact.ok()) return;
    char path[] = "/tmp/kiln-schedule-test-XXXXXX.so";
    int fd = mkstemps(path, 3);
    EXPECT_EQ(write(fd, artifact->bytes.data(), artifact->bytes.size()),
              static_cast<ssize_t>(artifact->bytes.size()));
    close(fd);
    std::string error;
    model_ = runtime::Model::Load(path, &error);
    unlink(path);
    EXPECT_NE(model_, nullptr) << error;
  }

  // Runs on `threads` threads; one output of `out_shape`.
  ir::NDArray Run(std::vector<ir::NDArray> inputs, std::vector<int64_t> out_shape, int threads) {
    ir::NDArray out = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(out_shape));
    if (!model_) return out;
    std::string error;
    EXPECT_TRUE(model_->SetNumThreads(threads, &error)) << error;
    std::vector<DLTensor> in;
    for (ir::NDArray& a : inputs) in.push_back(View(a));
    std::vector<DLTensor> outs = {View(out)};
    EXPECT_TRUE(model_->Run(in, &outs, &error)) << error;
    return out;
  }

 private:
  std::unique_ptr<runtime::Model> model_;
};

// Products of many terms are summed in the same order; FMA rounds once instead of twice.
void ExpectClose(const ir::NDArray& actual, const ir::NDArray& expected, const std::string& what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  int bad = 0;
  for (int64_t i = 0; i < expected.num_elements() && bad < 5; ++i) {
    double a = actual.GetDouble(i), e = expected.GetDouble(i);
    if (std::fabs(a - e) > 1e-4 * std::max(1.0, std::fabs(e))) {
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected " << e;
      ++bad;
    }
  }
}

std::string MatmulModel(int64_t k, int64_t n) {
  OnnxBuilder b;
  b.Input("a", {"m", k});
  b.Input("b", {k, n});
  b.Node("MatMul", {"a", "b"}, {"y"});
  b.Output("y", {"m", n});
  return b.Serialize();
}

class ScheduleMatmulTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScheduleMatmulTest, MatmulIsTiledAndPacked) {
  std::string kernels = ScheduledKernels(MatmulModel(300, 150), GetParam());
  EXPECT_NE(kernels.find("packed_b"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("parallel"), std::string::npos) << kernels;
}

TEST_P(ScheduleMatmulTest, OddSizesMatchTheInterpreter) {
  // K = 300 spans two depth blocks, N = 150 two column blocks with a partial panel.
  std::string onnx = MatmulModel(300, 150);
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  for (int64_t m : {1, 5, 6, 13}) {
    ir::NDArray a = Random({m, 300}, 1), b = Random({300, 150}, 2);
    auto expected = interp::Run(*module, {a, b});
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int threads : {1, 3}) {
      ExpectClose(compiled.Run({a, b}, {m, 150}, threads), (*expected)[0],
                  "m=" + std::to_string(m) + " threads=" + std::to_string(threads));
    }
  }
}

TEST_P(ScheduleMatmulTest, SmallAndBatchedMatmulsMatchTheInterpreter) {
  OnnxBuilder b;
  b.Input("a", {2, "m", 5});
  b.Input("b", {5, 19});
  b.Node("MatMul", {"a", "b"}, {"y"});
  b.Output("y", {2, "m", 19});
  std::string onnx = b.Serialize();
  EXPECT_NE(ScheduledKernels(onnx, GetParam()).find("packed_b"), std::string::npos);
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, GetParam());
  for (int64_t m : {1, 7}) {
    ir::NDArray x = Random({2, m, 5}, 3), w = Random({5, 19}, 4);
    auto expected = interp::Run(*module, {x, w});
    ASSERT_TRUE(expected.ok()) << expected.status();
    ExpectClose(compiled.Run({x, w}, {2, m, 19}, 2), (*expected)[0], "m=" + std::to_string(m));
  }
}

// One-output models over x: f32[n, 300], compiled and run on 1 and 3 threads.
void ExpectLikeInterpreter(const OnnxBuilder& b, const std::string& target,
                           std::vector<int64_t> out_shape) {
  std::string onnx = b.Serialize();
  auto module = driver::ImportModel(onnx);
  ASSERT_TRUE(module.ok()) << module.status();
  Compiled compiled(onnx, target);
  ir::NDArray x = Random({257, 300}, 5), y = Random({257, 300}, 6);
  auto expected = interp::Run(*module, {x, y});
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int threads : {1, 3}) {
    ExpectClose(compiled.Run({x, y}, out_shape, threads), (*expected)[0],
                "threads=" + std::to_string(threads));
  }
}

TEST_P(ScheduleMatmulTest, ParallelElementwiseAndSoftmaxMatchTheInterpreter) {
  OnnxBuilder b;
  b.Input("x", {"n", 300});
  b.Input("y", {"n", 300});
  b.Node("Add", {"x", "y"}, {"s"});
  b.Node("Softmax", {"s"}, {"p"});
  b.Output("p", {"n", 300});
  EXPECT_NE(ScheduledKernels(b.Serialize(), GetParam()).find("parallel"), std::string::npos);
  ExpectLikeInterpreter(b, GetParam(), {257, 300});
}

TEST_P(ScheduleMatmulTest, ReductionsStayCorrect) {
  for (int64_t axis : {0, 1}) {
    OnnxBuilder b;
    b.Input("x", {"n", 300});
    b.Input("y", {"n", 300});
    b.Node("Mul", {"x", "y"}, {"s"});
    b.Int64Initializer("axes", {1}, {axis});
    b.Node("ReduceSum", {"s", "axes"}, {"r"});
    b.Output("r",
             axis == 0 ? std::vector<testing::Dim>{1, 300} : std::vector<testing::Dim>{"n", 1});
    SCOPED_TRACE("axis " + std::to_string(axis));
    ExpectLikeInterpreter(b, GetParam(),
                          axis == 0 ? std::vector<int64_t>{1, 300} : std::vector<int64_t>{257, 1});
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ScheduleMatmulTest, ::testing::Values("x86_64", "x86_64-v3"));

}  // namespace
}  // namespace kiln
