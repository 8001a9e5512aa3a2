// GPU targets (cuda-sm80, cuda-sm90): the GPU schedule as IR text, its launch loops checked
// by the verifier and round-tripped by the parser, the kernels as PTX, the host code that
// copies and launches, CUDA artifacts run through the driver API (a fake driver over host
// memory), and the GPU schedules run on the CPU against the reference interpreter.
#include <dlfcn.h>
#include <unistd.h>

#include <sstream>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/shared_object.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/artifact_abi.h"
#include "runtime/testing/fake_libcuda.h"
#include "tests/support/fake_cuda.h"
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

// C[m, n] = relu(A[m, 70] @ B[70, n]): tiles of C need edges on both sides and the last step
// of k is partial.
std::string MatmulReluModel() {
  OnnxBuilder b;
  b.Input("a", {"m", 70});
  b.Input("b", {70, "n"});
  b.Node("MatMul", {"a", "b"}, {"t"});
  b.Node("Relu", {"t"}, {"y"});
  b.Output("y", {"m", "n"});
  return b.Serialize();
}

// Softmax along rows of 700 and their sum: reductions longer than a block.
std::string SoftmaxAndSumModel() {
  OnnxBuilder b(13);
  b.Input("x", {"n", 700});
  b.Int64Initializer("axes", {1}, {1});
  b.Node("Softmax", {"x"}, {"y"});
  b.Node("ReduceSum", {"x", "axes"}, {"s"});
  b.Output("y", {"n", 700});
  b.Output("s", {"n", 1});
  return b.Serialize();
}

// relu(conv(x, w) + b), 3x3 taps, stride 2, padding 1: taps fall in the padding on every edge.
std::string ConvReluModel() {
  OnnxBuilder b;
  b.Input("x", {"n", 3, 11, 13});
  b.FloatInitializer("w", {8, 3, 3, 3}, Wave(8 * 27, 0.5f));
  b.FloatInitializer("b", {8}, Wave(8, 0.1f));
  onnx::NodeProto& conv = b.Node("Conv", {"x", "w", "b"}, {"t"});
  OnnxBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  OnnxBuilder::IntsAttr(conv, "strides", {2, 2});
  b.Node("Relu", {"t"}, {"y"});
  b.Output("y", {"n", 8, 6, 7});
  return b.Serialize();
}

TEST(GpuScheduleTest, AConvIsAnImplicitGemmWhoseTilesGatherTheTaps) {
  std::string kernels = ScheduledKernels(ConvReluModel(), "cuda-sm80");
  EXPECT_THAT(kernels, HasSubstr("alloc b_tile: f32[1024]")) << kernels;
  // B[k, p]: the input at tap k of position p, clamped inside, zero in the padding.
  EXPECT_THAT(kernels,
              HasSubstr("A0[i0, floordiv(min(floordiv(e, 64) + k0 * 16, 26), 9), max(min("))
      << kernels;
  EXPECT_THAT(kernels, HasSubstr("out[i0, row, 0, col] = acc[(r * 4 + c) * 256 + gpu_t]"))
      << kernels;
}

TEST(GpuScheduleTest, AMatmulIsTiledInSharedMemoryInPhases) {
  std::string kernels = ScheduledKernels(MatmulReluModel(), "cuda-sm80");
  EXPECT_THAT(kernels, HasSubstr(R"(
  for gpu_b in range(0, floordiv(m + 63, 64) * floordiv(n + 63, 64)) gpu_block {
    let tile_n: i64 = floormod(gpu_b, floordiv(n + 63, 64))
    let tile_m: i64 = floormod(floordiv(gpu_b, floordiv(n + 63, 64)), floordiv(m + 63, 64))
    alloc a_tile: f32[1024]
    alloc b_tile: f32[1024]
    alloc acc: f32[4096])"))
      << kernels;
  EXPECT_THAT(kernels, HasSubstr("for k0 in range(0, floordiv(70 + 15, 16)) serial {"));
  EXPECT_THAT(
      kernels,
      HasSubstr(
          "acc[(r * 4 + c) * 256 + gpu_t] = acc[(r * 4 + c) * 256 + gpu_t] + a_tile[(ty * 4 + r) * "
          "16 + kk] * b_tile[kk * 64 + tx * 4 + c]"));
  EXPECT_THAT(kernels, HasSubstr(R"(
          if row < m && col < n {
            out[row, col] = acc[(r * 4 + c) * 256 + gpu_t]
            out[row, col] = select(out[row, col] < 0.0, 0.0, out[row, col]))"))
      << kernels;
}

TEST(GpuScheduleTest, RowsThatReduceGetABlockEachAndATree) {
  std::string kernels = ScheduledKernels(SoftmaxAndSumModel(), "cuda-sm80");
  EXPECT_THAT(kernels, HasSubstr(R"(
  for gpu_b in range(0, n) gpu_block {
    let o0: i64 = floormod(gpu_b, n)
    let o1: i64 = 0
    alloc acc: f32[1]
    alloc acc_partial: f32[256]
    for gpu_t in range(0, 256) gpu_thread {
      if gpu_t == 0 {
        acc[0] = 0.0
      }
    }
    for gpu_t in range(0, 256) gpu_thread {
      acc_partial[gpu_t] = 0.0
      for step in range(0, floordiv(700 + 255, 256)) serial {
        let r0: i64 = step * 256 + gpu_t
        if r0 < 700 {
          acc_partial[gpu_t] = acc_partial[gpu_t] + A0[o0, r0]
        }
      }
    }
    for gpu_t in range(0, 256) gpu_thread {
      if gpu_t < 128 {
        acc_partial[gpu_t] = acc_partial[gpu_t] + acc_partial[gpu_t + 128]
      }
    })"))
      << kernels;
  // The tree stops at a warp's width; the last 32 fold in registers (shuffles).
  EXPECT_THAT(kernels, HasSubstr(R"(
    for gpu_t in range(0, 256) gpu_thread {
      if gpu_t < 32 {
        acc_partial[gpu_t] = acc_partial[gpu_t] + acc_partial[gpu_t + 32]
      }
    }
    for gpu_t in range(0, 256) gpu_thread {
      let acc_folded: f32 = kiln.warp_fold.add:f32(acc_partial[gpu_t])
      if gpu_t == 0 {
        acc[0] = acc[0] + acc_folded
        out[o0, o1] = acc[0]
      }
    })"))
      << kernels;
  EXPECT_THAT(kernels, Not(HasSubstr("if gpu_t < 16"))) << kernels;
  // Softmax: the exp loop writes its elements and sums them in the same pass.
  EXPECT_THAT(kernels, HasSubstr(R"(
          out[o0, k] = exp(A0[o0, k] - max_1[0])
          sum_partial[gpu_t] = sum_partial[gpu_t] + out[o0, k])"))
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

TEST(GpuIrTest, PhasesShareOneBlockSizeAndHoldTheStores) {
  EXPECT_THAT(VerifyError("for b in range(0, n) gpu_block {\n for t in range(0, 64) gpu_thread "
                          "{\n A[t] = 0.0\n}\n for u in range(0, 32) gpu_thread {\n A[u] = "
                          "1.0\n}\n}\n"),
              HasSubstr("gpu_thread loop u has 32 threads; another gpu_thread loop of its block "
                        "has 64"));
  EXPECT_THAT(VerifyError("for b in range(0, n) gpu_block {\n A[b] = 0.0\n for t in range(0, 64) "
                          "gpu_thread {\n A[t] = 0.0\n}\n}\n"),
              HasSubstr("store to A in a gpu_block loop outside its gpu_thread loops"));
}

TEST(GpuIrTest, AWarpFoldRoundTripsAndBelongsInAPhase) {
  const char* text = R"(prim_func @k(A: f32[n], n: i64) {
  for b in range(0, 1) gpu_block {
    alloc p: f32[64]
    for t in range(0, 64) gpu_thread {
      p[t] = A[t]
    }
    for t in range(0, 64) gpu_thread {
      let s: f32 = kiln.warp_fold.max:f32(p[t])
      if t == 32 {
        A[0] = s
      }
    }
  }
}
)";
  absl::StatusOr<ir::IRModule> module = ir::ParseModule(text);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_TRUE(ir::VerifyModule(*module).ok()) << ir::VerifyModule(*module);
  EXPECT_EQ(ir::ToString(*module), text);
  EXPECT_THAT(VerifyError("for b in range(0, 1) gpu_block {\n alloc p: f32[32]\n for t in range(0, "
                          "32) gpu_thread {\n p[t] = 0.0\n }\n A[0] = "
                          "kiln.warp_fold.add:f32(p[b])\n}\n"),
              HasSubstr("kiln.warp_fold.add outside a gpu_thread loop"));
}

TEST(GpuCodegenTest, PhasesAreSeparatedByBarriersAndBlockBuffersAreShared) {
  ir::Target target = *driver::ResolveTarget("cuda-sm80");
  absl::StatusOr<std::string> tiled = driver::CompilePtx(MatmulReluModel(), target, {});
  ASSERT_TRUE(tiled.ok()) << tiled.status();
  EXPECT_THAT(*tiled, HasSubstr("bar.sync"));
  EXPECT_THAT(*tiled, HasSubstr(".shared .align 16 .b8"));
  EXPECT_THAT(*tiled, HasSubstr("ld.shared.f32"));
  absl::StatusOr<std::string> rows = driver::CompilePtx(SoftmaxAndSumModel(), target, {});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(*rows, HasSubstr("shfl.sync.down.b32")) << "warp folds are shuffles";
  absl::StatusOr<std::string> plain = driver::CompilePtx(ElementwiseModel(), target, {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(*plain, Not(HasSubstr("bar.sync"))) << "one phase needs no barrier";
  EXPECT_THAT(*plain, Not(HasSubstr(".shared")));
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

TEST(GpuDriverTest, PtxIsOnlyForGpus) {
  EXPECT_EQ(
      driver::CompilePtx(ElementwiseModel(), *driver::ResolveTarget("x86_64"), {}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// x + w then relu: one fused kernel reading an input and a constant.
std::string AddReluModel() {
  OnnxBuilder b;
  b.Input("x", {"n", 3});
  b.FloatInitializer("w", {3}, {1, -2, 3});
  b.Node("Add", {"x", "w"}, {"t"});
  b.Node("Relu", {"t"}, {"y"});
  b.Output("y", {"n", 3});
  return b.Serialize();
}

// The host code of a device artifact: inputs copied into device memory, each kernel call a
// launch over its gpu_block extent, constants uploaded by the runtime, outputs copied back.
TEST(GpuHostTest, TheHostCopiesInputsInLaunchesKernelsAndCopiesOutputsBack) {
  std::string module = ScheduledKernels(AddReluModel(), "cuda-sm80");
  EXPECT_THAT(module, HasSubstr(R"(
  let workspace: handle = kiln.device_alloc(floordiv(n * 12 + 63, 64) * 128)
  let x_data: handle = kiln.offset:handle(workspace, 0)
  kiln.copy(x_data, kiln.input_data(0:i32), n * 12, 0:i32)
  let y_data: handle = kiln.offset:handle(workspace, floordiv(n * 12 + 63, 64) * 64)
  kiln.launch(floordiv(n * 3 + 255, 256), 256:i32, fused_add_relu_0(x_data, kiln.device_constant(0:i32), y_data, n))
  kiln.copy(kiln.output_data(0:i32), y_data, n * 12, 1:i32)
  kiln.device_free(workspace)
})")) << module;
  EXPECT_THAT(ScheduledKernels(AddReluModel(), "x86_64"), Not(HasSubstr("kiln.device")));
}

std::vector<std::string> DynamicSymbols(const std::string& so) {
  std::vector<std::string> names;
  absl::StatusOr<std::vector<codegen::DynamicSymbol>> symbols = codegen::ListDynamicSymbols(so);
  EXPECT_TRUE(symbols.ok()) << symbols.status();
  if (!symbols.ok()) return names;
  for (const codegen::DynamicSymbol& symbol : *symbols) {
    names.push_back(symbol.undefined ? "undefined " + symbol.name : symbol.name);
  }
  return names;
}

TEST(GpuDriverTest, ACudaArtifactIsAnX86SharedObjectCarryingItsPtx) {
  absl::StatusOr<driver::Artifact> artifact =
      driver::CompileModel(AddReluModel(), *driver::ResolveTarget("cuda-sm80"), {}, nullptr);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_EQ(artifact->file_name, "model.so");
  EXPECT_THAT(artifact->target, HasSubstr("nvptx64-nvidia-cuda"));
  ASSERT_GE(artifact->bytes.size(), 20u);
  EXPECT_EQ(artifact->bytes.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(static_cast<unsigned char>(artifact->bytes[18]), 62);  // EM_X86_64
  EXPECT_THAT(DynamicSymbols(artifact->bytes),
              ::testing::IsSupersetOf({"kiln_abi_version", "kiln_signature", "kiln_run",
                                       "kiln_infer_shapes", "kiln_gpu_kernels",
                                       "kiln_gpu_error_ops", "kiln_gpu_ptx"}));
  for (const std::string& symbol : DynamicSymbols(artifact->bytes)) {
    EXPECT_THAT(symbol, Not(HasSubstr("undefined"))) << "the artifact needs nothing but KilnEnv";
    EXPECT_NE(symbol, "kiln_gpu_emulated_kernels");
  }
  EXPECT_THAT(artifact->manifest_json, HasSubstr("\"abi_version\": 4"));
  EXPECT_THAT(artifact->manifest_json, HasSubstr("\"device\": \"cuda\""));
}

// A CUDA artifact run through the driver API, with no GPU: the fake driver of
// runtime/testing/ runs each launch with the same kernel compiled for the CPU (from the
// emulated artifact of the same model), so the host code's copies, constants, launch grids and
// kernel parameters are all checked by the results.
class CudaArtifactTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(driver_.ok()); }
  void TearDown() override {
    model_.reset();
    for (void* handle : emulated_) dlclose(handle);
  }

  void Load(const std::string& onnx) {
    absl::StatusOr<driver::Artifact> cuda =
        driver::CompileModel(onnx, *driver::ResolveTarget("cuda-sm80"), {}, nullptr);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    driver::CompileOptions options;
    options.schedule_as = *driver::ResolveTarget("cuda-sm80");
    absl::StatusOr<driver::Artifact> cpu =
        driver::CompileModel(onnx, *driver::ResolveTarget("x86_64"), options, nullptr);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    std::string path = ::testing::TempDir() + "/kiln-emulated-XXXXXX.so";
    int fd = mkstemps(path.data(), 3);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, cpu->bytes.data(), cpu->bytes.size()),
              static_cast<ssize_t>(cpu->bytes.size()));
    close(fd);
    void* emulated = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    unlink(path.c_str());
    ASSERT_NE(emulated, nullptr) << dlerror();
    emulated_.push_back(emulated);
    std::istringstream names(Symbol<KilnGpuTextFn>(emulated, KILN_SYMBOL_GPU_KERNELS)());
    const KilnEmulatedKernelFn* kernels =
        Symbol<KilnGpuEmulatedKernelsFn>(emulated, KILN_SYMBOL_GPU_EMULATED_KERNELS)();
    auto set_kernel = driver_.Control<FakeCudaSetKernelFn>("fake_cuda_set_kernel");
    for (std::string name; std::getline(names, name); ++kernels) set_kernel(name.c_str(), *kernels);
    model_ = LoadArtifact(*cuda);
    ASSERT_NE(model_, nullptr);
  }

  std::vector<FakeCudaLaunch> Launches() { return driver_.Launches(); }

  FakeCuda driver_{KILN_FAKE_LIBCUDA};
  std::vector<void*> emulated_;
  std::unique_ptr<runtime::Model> model_;
};

TEST_F(CudaArtifactTest, ResultsMatchTheReferenceAndLaunchesCoverTheWork) {
  ASSERT_NO_FATAL_FAILURE(Load(AddReluModel()));
  for (int64_t n : {1, 85, 300}) {
    size_t earlier = Launches().size();
    ir::NDArray x = Iota({n, 3});
    for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] -= n;
    absl::StatusOr<std::vector<ir::NDArray>> want = ImportAndRun(AddReluModel(), {x});
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<ir::NDArray> got =
        RunModel(*model_, {x}, {ir::NDArray::Zeros((*want)[0].dtype, (*want)[0].shape)});
    EXPECT_EQ(Values(got[0]), Values((*want)[0])) << "n = " << n;
    std::vector<FakeCudaLaunch> launches = Launches();
    launches.erase(launches.begin(), launches.begin() + earlier);
    ASSERT_EQ(launches.size(), 1u);
    EXPECT_STREQ(launches[0].kernel, "fused_add_relu_0");
    EXPECT_EQ(launches[0].grid[0], static_cast<unsigned>((3 * n + 255) / 256)) << "n = " << n;
    EXPECT_EQ(launches[0].block[0], 256u);
    EXPECT_EQ(launches[0].num_params, 5);  // env, x, w, y, n
    EXPECT_EQ(launches[0].params[4], static_cast<uint64_t>(n));
  }
  size_t earlier = Launches().size();
  ir::NDArray empty = Iota({0, 3});
  RunModel(*model_, {empty}, {ir::NDArray::Zeros(arith::DataType::Float(32), {0, 3})});
  EXPECT_EQ(Launches().size(), earlier) << "no launch of zero blocks";
}

TEST_F(CudaArtifactTest, AnIndexOutOfRangeOnTheDeviceIsReportedByName) {
  OnnxBuilder b;
  b.Input("x", {5});
  b.Input("i", {2}, onnx::TensorProto::INT64);
  b.Node("Gather", {"x", "i"}, {"y"});
  b.Output("y", {2});
  ASSERT_NO_FATAL_FAILURE(Load(b.Serialize()));
  ir::NDArray x = Iota({5});
  ir::NDArray i = ir::NDArray::Zeros(arith::DataType::Int(64), {2});
  i.data<int64_t>()[1] = 7;
  ir::NDArray y = ir::NDArray::Zeros(arith::DataType::Float(32), {2});
  std::vector<DLTensor> in = {ViewOf(x), ViewOf(i)}, out = {ViewOf(y)};
  std::string error;
  EXPECT_FALSE(model_->Run(in, &out, &error));
  EXPECT_THAT(error, HasSubstr("gather"));
  EXPECT_THAT(error, HasSubstr("'i'"));
  EXPECT_THAT(error, HasSubstr("7"));
  i.data<int64_t>()[1] = 4;
  std::vector<ir::NDArray> got = RunModel(*model_, {x, i}, {y});
  EXPECT_EQ(Values(got[0]), (std::vector<double>{0, 4}));
}

// The GPU schedule compiled for the CPU: its index arithmetic and guards must give the
// reference interpreter's results wherever the launch does not divide the work evenly.
TEST(GpuEmulationTest, GpuSchedulesRunOnTheCpuMatchTheReference) {
  driver::CompileOptions options;
  options.schedule_as = *driver::ResolveTarget("cuda-sm80");
  for (const std::string& model : {ElementwiseModel(), CumSumModel(), AddReluModel()}) {
    absl::StatusOr<driver::Artifact> artifact =
        driver::CompileModel(model, *driver::ResolveTarget("x86_64"), options, nullptr);
    ASSERT_TRUE(artifact.ok()) << artifact.status();
    std::unique_ptr<runtime::Model> loaded = LoadArtifact(*artifact);
    ASSERT_NE(loaded, nullptr);
    const bool elementwise = model != CumSumModel();
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
}

void ExpectClose(const ir::NDArray& got, const ir::NDArray& want, const std::string& where) {
  ASSERT_EQ(got.shape, want.shape) << where;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    double w = want.GetDouble(i);
    ASSERT_NEAR(got.GetDouble(i), w, 1e-5 + 1e-5 * std::abs(w)) << where << " element " << i;
  }
}

// The tiled matmul, the conv as an implicit GEMM and the row reductions on the emulated
// device: partial tiles on every edge, a partial last k step, taps in the padding, rows of
// several blocks' worth.
TEST(GpuEmulationTest, TiledMatmulsConvsAndRowReductionsMatchTheReference) {
  driver::CompileOptions options;
  options.schedule_as = *driver::ResolveTarget("cuda-sm80");
  ir::Target x86 = *driver::ResolveTarget("x86_64");
  absl::StatusOr<driver::Artifact> matmul =
      driver::CompileModel(MatmulReluModel(), x86, options, nullptr);
  ASSERT_TRUE(matmul.ok()) << matmul.status();
  std::unique_ptr<runtime::Model> mm = LoadArtifact(*matmul);
  ASSERT_NE(mm, nullptr);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {64, 64}, {70, 130}, {5, 200}}) {
    ir::NDArray a = F32({m, 70}, Wave(m * 70, 1.0f)), b = F32({70, n}, Wave(70 * n, 0.5f));
    absl::StatusOr<std::vector<ir::NDArray>> want = ImportAndRun(MatmulReluModel(), {a, b});
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<ir::NDArray> got =
        RunModel(*mm, {a, b}, {ir::NDArray::Zeros((*want)[0].dtype, (*want)[0].shape)});
    ExpectClose(got[0], (*want)[0], absl::StrCat("m = ", m, ", n = ", n));
  }
  absl::StatusOr<driver::Artifact> conv =
      driver::CompileModel(ConvReluModel(), x86, options, nullptr);
  ASSERT_TRUE(conv.ok()) << conv.status();
  std::unique_ptr<runtime::Model> cv = LoadArtifact(*conv);
  ASSERT_NE(cv, nullptr);
  for (int64_t n : {1, 2}) {
    ir::NDArray x = F32({n, 3, 11, 13}, Wave(n * 3 * 11 * 13, 1.0f));
    absl::StatusOr<std::vector<ir::NDArray>> want = ImportAndRun(ConvReluModel(), {x});
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<ir::NDArray> got =
        RunModel(*cv, {x}, {ir::NDArray::Zeros((*want)[0].dtype, (*want)[0].shape)});
    ExpectClose(got[0], (*want)[0], absl::StrCat("conv, n = ", n));
  }
  absl::StatusOr<driver::Artifact> rows =
      driver::CompileModel(SoftmaxAndSumModel(), x86, options, nullptr);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::unique_ptr<runtime::Model> loaded = LoadArtifact(*rows);
  ASSERT_NE(loaded, nullptr);
  for (int64_t n : {1, 3}) {
    ir::NDArray x = F32({n, 700}, Wave(n * 700, 3.0f));
    absl::StatusOr<std::vector<ir::NDArray>> want = ImportAndRun(SoftmaxAndSumModel(), {x});
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<ir::NDArray> got =
        RunModel(*loaded, {x},
                 {ir::NDArray::Zeros((*want)[0].dtype, (*want)[0].shape),
                  ir::NDArray::Zeros((*want)[1].dtype, (*want)[1].shape)});
    ExpectClose(got[0], (*want)[0], absl::StrCat("softmax, n = ", n));
    ExpectClose(got[1], (*want)[1], absl::StrCat("sum, n = ", n));
  }
  EXPECT_THAT(driver::CompileOptions{}.Canonical(), Not(HasSubstr("schedule_as")));
}

}  // namespace
}  // namespace kiln::testing
