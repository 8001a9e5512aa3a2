// GPU targets (cuda-sm80, cuda-sm90): the GPU schedule as IR text, its launch loops checked
// by the verifier and round-tripped by the parser, the kernels as PTX, and the GPU schedules
// run on the CPU (blocks and threads as serial loops) against the reference interpreter.
#include "compiler/codegen/codegen.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/import_and_run.h"
#include "tests/support/schedule_check.h"
#include "tests/support/tensors.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ElementwiseModel() {
  OnnxBuilder b;
  b.Input("x", {"n", 3});
  b.Node("Relu", {"x"}, {"y"});
  b.Output("y", {"n", 3});
  return b.Serialize();
}

// A running sum: each step reads the one before, so it cannot be spread over threads.
std::string CumSumModel() {
  OnnxBuilder b;
  b.Input("x", {"n"});
  b.Int64Initializer("axis", {}, {0});
  b.Node("CumSum", {"x", "axis"}, {"y"});
  b.Output("y", {"n"});
  return b.Serialize();
}

TEST(GpuScheduleTest, DataParallelLoopsAreFusedAndSpreadOverBlocksOfThreads) {
  std::string kernels = ScheduledKernels(ElementwiseModel(), "cuda-sm80");
  EXPECT_THAT(kernels, HasSubstr(R"(
  for gpu_b in range(0, floordiv(n * 3 + 255, 256)) gpu_block {
    for gpu_t in range(0, 256) gpu_thread {
      let gpu_i: i64 = gpu_b * 256 + gpu_t
      if gpu_i < n * 3 {)"))
      << kernels;
  EXPECT_THAT(kernels, HasSubstr("floormod(gpu_i, 3)")) << kernels;
}

TEST(GpuScheduleTest, BlockSizeComesFromTheTarget) {
  std::string kernels = ScheduledKernels(ElementwiseModel(),
                                         "triple=nvptx64-nvidia-cuda;cpu=sm_90;features=+ptx78;"
                                         "threads_per_block=128");
  EXPECT_THAT(kernels, HasSubstr("for gpu_t in range(0, 128) gpu_thread")) << kernels;
}

TEST(GpuScheduleTest, AKernelWhoseIterationsDependOnEachOtherRunsInOneThread) {
  std::string kernels = ScheduledKernels(CumSumModel(), "cuda-sm80");
  EXPECT_THAT(kernels, HasSubstr(R"(
  for gpu_b in range(0, 1) gpu_block {
    for gpu_t in range(0, 1) gpu_thread {)"))
      << kernels;
}

TEST(GpuIrTest, LaunchLoopsRoundTripThroughText) {
  const char* text = R"(prim_func @k(A: f32[n], n: i64) {
  for b in range(0, floordiv(n + 63, 64)) gpu_block {
    for t in range(0, 64) gpu_thread {
      let i: i64 = b * 64 + t
      if i < n {
        A[i] = 0.0
      }
    }
  }
}
)";
  absl::StatusOr<ir::IRModule> module = ir::ParseModule(text);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_TRUE(ir::VerifyModule(*module).ok()) << ir::VerifyModule(*module);
  EXPECT_EQ(ir::ToString(*module), text);
}

std::string VerifyError(const std::string& body) {
  absl::StatusOr<ir::IRModule> module =
      ir::ParseModule("prim_func @k(A: f32[n], n: i64) {\n" + body + "}\n");
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return "";
  return std::string(ir::VerifyModule(*module).message());
}

TEST(GpuIrTest, TheVerifierRejectsMalformedLaunches) {
  EXPECT_THAT(VerifyError("for t in range(0, 64) gpu_thread {\n A[t] = 0.0\n}\n"),
              HasSubstr("gpu_thread loop t outside a gpu_block loop"));
  EXPECT_THAT(VerifyError("for b in range(0, n) gpu_block {\n for t in range(0, n) gpu_thread "
                          "{\n A[t] = 0.0\n}\n}\n"),
              HasSubstr("needs a positive constant extent"));
  EXPECT_THAT(VerifyError("for b in range(1, n) gpu_block {\n A[b] = 0.0\n}\n"),
              HasSubstr("gpu_block loop b does not start at 0"));
  EXPECT_THAT(VerifyError("for b in range(0, n) gpu_block {\n for c in range(0, n) gpu_block "
                          "{\n A[c] = 0.0\n}\n}\n"),
              HasSubstr("gpu_block loop c inside another gpu_block loop"));
}

TEST(GpuCodegenTest, KernelsBecomePtxEntriesReadingTheirBlockAndThread) {
  for (const char* name : {"cuda-sm80", "cuda-sm90"}) {
    ir::Target target = *driver::ResolveTarget(name);
    absl::StatusOr<std::string> ptx = driver::CompilePtx(ElementwiseModel(), target, {});
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    EXPECT_THAT(*ptx, HasSubstr(".target " + target.cpu));
    EXPECT_THAT(*ptx, HasSubstr(".visible .entry relu_0("));
    EXPECT_THAT(*ptx, HasSubstr("%ctaid.x"));
    EXPECT_THAT(*ptx, HasSubstr("%tid.x"));
  }
}

TEST(GpuCodegenTest, AnIndexOutOfRangeIsRecordedInDeviceMemory) {
  OnnxBuilder b;
  b.Input("x", {5});
  b.Input("i", {2}, onnx::TensorProto::INT64);
  b.Node("Gather", {"x", "i"}, {"y"});
  b.Output("y", {2});
  absl::StatusOr<std::string> ptx =
      driver::CompilePtx(b.Serialize(), *driver::ResolveTarget("cuda-sm80"), {});
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_THAT(*ptx, HasSubstr(".visible .global .align 8 .b8 kiln_gpu_index_error[48]"));
  EXPECT_THAT(*ptx, HasSubstr("atom.global.cas.b64"));
}

TEST(GpuDriverTest, ArtifactsForAGpuAreNotBuiltYetAndSaySo) {
  absl::StatusOr<driver::Artifact> artifact =
      driver::CompileModel(ElementwiseModel(), *driver::ResolveTarget("cuda-sm80"), {}, nullptr);
  EXPECT_EQ(artifact.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(artifact.status().message(), HasSubstr("kiln inspect --after ptx"));
  EXPECT_EQ(
      driver::CompilePtx(ElementwiseModel(), *driver::ResolveTarget("x86_64"), {}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// The GPU schedule compiled for the CPU: its index arithmetic and guards must give the
// reference interpreter's results wherever the launch does not divide the work evenly.
TEST(GpuEmulationTest, GpuSchedulesRunOnTheCpuMatchTheReference) {
  driver::CompileOptions options;
  options.schedule_as = *driver::ResolveTarget("cuda-sm80");
  for (const std::string& model : {ElementwiseModel(), CumSumModel()}) {
    absl::StatusOr<driver::Artifact> artifact =
        driver::CompileModel(model, *driver::ResolveTarget("x86_64"), options, nullptr);
    ASSERT_TRUE(artifact.ok()) << artifact.status();
    std::unique_ptr<runtime::Model> loaded = LoadArtifact(*artifact);
    ASSERT_NE(loaded, nullptr);
    const bool elementwise = model == ElementwiseModel();
    for (int64_t n : {1, 85, 300}) {
      ir::NDArray x = elementwise ? Iota({n, 3}) : Iota({n});
      for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] -= n;
      absl::StatusOr<std::vector<ir::NDArray>> want = ImportAndRun(model, {x});
      ASSERT_TRUE(want.ok()) << want.status();
      std::vector<ir::NDArray> got =
          RunModel(*loaded, {x}, {ir::NDArray::Zeros((*want)[0].dtype, (*want)[0].shape)});
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(Values(got[0]), Values((*want)[0])) << "n = " << n;
    }
  }
  EXPECT_THAT(options.Canonical(), HasSubstr("schedule_as=triple=nvptx64-nvidia-cuda"));
  EXPECT_THAT(driver::CompileOptions{}.Canonical(), Not(HasSubstr("schedule_as")));
}

}  // namespace
}  // namespace kiln::testing
