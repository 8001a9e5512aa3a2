// Device artifacts (ABI version 4): the emulated device, the CUDA device driven end to end over
// a fake driver (runtime/testing/fake_libcuda.c), the device services of CallEnv, and the
// loader's checks of a device artifact's exports. The artifacts are the variants of
// runtime/testing/test_device_artifact.c: y = 2 * x + c[k] over blocks of 4 threads.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/runtime.hpp"
#include "runtime/src/call_env.h"
#include "runtime/src/device.h"
#include "runtime/testing/fake_libcuda.h"
#include "tests/support/fake_cuda.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr float kConstant[4] = {0.5f, 1.0f, 2.0f, 4.0f};

std::string ArtifactPath(const std::string& name) {
  return std::string(KILN_TEST_ARTIFACT_DIR) + "/" + name + ".so";
}

std::string LoadError(const std::string& path) {
  std::string error;
  EXPECT_EQ(Model::Load(path, &error), nullptr);
  return error;
}

DLTensor Tensor(std::vector<int64_t>& shape, void* data, DLDataType dtype) {
  DLTensor tensor{};
  tensor.data = data;
  tensor.device = {kDLCPU, 0};
  tensor.ndim = static_cast<int>(shape.size());
  tensor.dtype = dtype;
  tensor.shape = shape.data();
  return tensor;
}

// Runs the artifact on x and k; returns "" and sets *y, or the error.
std::string RunScaleAdd(Model& model, std::vector<float> x, int64_t k, std::vector<float>* y) {
  std::vector<int64_t> x_shape{static_cast<int64_t>(x.size())};
  std::vector<int64_t> k_shape{1};
  y->assign(x.size(), -1.0f);
  std::vector<DLTensor> outputs{Tensor(x_shape, y->data(), {kDLFloat, 32, 1})};
  std::string error;
  model.Run({Tensor(x_shape, x.data(), {kDLFloat, 32, 1}), Tensor(k_shape, &k, {kDLInt, 64, 1})},
            &outputs, &error);
  return error;
}

std::vector<float> Iota(int64_t n) {
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i) values.push_back(static_cast<float>(i) - 3.0f);
  return values;
}

void ExpectScaleAdd(const std::vector<float>& x, int64_t k, const std::vector<float>& y) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], 2 * x[i] + kConstant[k]) << i;
}

const std::string kIndexErrorMessage =
    "input 'k' holds index 7, out of range for dimension 0 of size 4 (gather axis 0)";

// ---- Emulated device.

TEST(EmulatedDeviceTest, ComputesForSeveralSizes) {
  std::string error;
  auto model = Model::Load(ArtifactPath("device_emulated"), &error);
  ASSERT_NE(model, nullptr) << error;
  for (int64_t n : {0, 1, 3, 4, 5, 17}) {
    std::vector<float> x = Iota(n), y;
    ASSERT_EQ(RunScaleAdd(*model, x, 2, &y), "") << n;
    ExpectScaleAdd(x, 2, y);
  }
}

TEST(EmulatedDeviceTest, KernelIndexErrorNamesInputAndOp) {
  std::string error;
  auto model = Model::Load(ArtifactPath("device_emulated"), &error);
  ASSERT_NE(model, nullptr) << error;
  std::vector<float> x = Iota(6), y;
  EXPECT_EQ(RunScaleAdd(*model, x, 7, &y), kIndexErrorMessage);
  ASSERT_EQ(RunScaleAdd(*model, x, 3, &y), "");
  ExpectScaleAdd(x, 3, y);
}

TEST(EmulatedDeviceTest, OutputShapes) {
  std::string error;
  auto model = Model::Load(ArtifactPath("device_emulated"), &error);
  ASSERT_NE(model, nullptr) << error;
  std::vector<int64_t> x_shape{5}, k_shape{1};
  std::vector<std::vector<int64_t>> shapes;
  ASSERT_TRUE(model->OutputShapes(
      {Tensor(x_shape, nullptr, {kDLFloat, 32, 1}), Tensor(k_shape, nullptr, {kDLInt, 64, 1})},
      &shapes, &error))
      << error;
  EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{{5}}));
}

TEST(EmulatedDeviceTest, MemoryIs256ByteAlignedAndDistinctForZeroBytes) {
  EmulatedDevice device({});
  for (int64_t bytes : {0, 1, 255, 256, 1000}) {
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_EQ(device.Alloc(bytes, &a), "");
    ASSERT_EQ(device.Alloc(bytes, &b), "");
    EXPECT_NE(a, b);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u) << bytes;
    device.Free(a);
    device.Free(b);
  }
  void* none = nullptr;
  EXPECT_EQ(device.Alloc(-1, &none), "device allocation of -1 bytes failed");
  EXPECT_EQ(none, nullptr);
}

TEST(EmulatedDeviceTest, ConstantsAreCopiedOnceAndCachedByIndex) {
  EmulatedDevice device({});
  float first[2] = {1, 2};
  float second[2] = {3, 4};
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(device.Constant(0, first, sizeof first, &a), "");
  ASSERT_EQ(device.Constant(0, second, sizeof second, &b), "");
  EXPECT_EQ(a, b);
  EXPECT_EQ(static_cast<float*>(a)[1], 2.0f);
  ASSERT_EQ(device.Constant(1, second, sizeof second, &b), "");
  EXPECT_NE(a, b);
}

// ---- CallEnv's device services.

Signature DeviceSignature() {
  Signature signature;
  ParseSignature("kiln-signature 1\ninput x f32 1 n\ninput k i64 1 1\noutput y f32 1 n\n",
                 &signature);
  return signature;
}

// An emulated device that counts live allocations and can claim an index-error record.
class CountingDevice : public EmulatedDevice {
 public:
  CountingDevice() : EmulatedDevice({}) {}
  std::string Alloc(int64_t bytes, void** out) override {
    std::string error = EmulatedDevice::Alloc(bytes, out);
    if (error.empty()) ++live;
    return error;
  }
  void Free(void* ptr) override {
    --live;
    EmulatedDevice::Free(ptr);
  }
  std::string EndRun(DeviceIndexError* out) override {
    *out = record;
    return "";
  }
  int live = 0;
  DeviceIndexError record;
};

TEST(CallEnvDeviceTest, DeviceServicesAreNullWithoutADevice) {
  Signature signature = DeviceSignature();
  CallEnv call(signature);
  EXPECT_EQ(call.env()->device_alloc, nullptr);
  EXPECT_EQ(call.env()->device_free, nullptr);
  EXPECT_EQ(call.env()->copy, nullptr);
  EXPECT_EQ(call.env()->device_constant, nullptr);
  EXPECT_EQ(call.env()->launch, nullptr);
}

TEST(CallEnvDeviceTest, FreesDeviceMemoryTheArtifactLeft) {
  Signature signature = DeviceSignature();
  CountingDevice device;
  {
    CallEnv call(signature, nullptr, nullptr, &device);
    KilnEnv* env = call.env();
    void* kept = env->device_alloc(env->self, 100);
    void* freed = env->device_alloc(env->self, 0);
    ASSERT_NE(kept, nullptr);
    ASSERT_NE(freed, nullptr);
    env->device_free(env->self, freed);
    int local = 0;
    env->device_free(env->self, &local);  // not from this env: ignored
    EXPECT_EQ(device.live, 1);
  }
  EXPECT_EQ(device.live, 0);
}

TEST(CallEnvDeviceTest, BadCopiesAndLaunchesAreReported) {
  Signature signature = DeviceSignature();
  CountingDevice device;
  CallEnv bad_kind(signature, nullptr, nullptr, &device);
  char a = 0, b = 0;
  EXPECT_EQ(bad_kind.env()->copy(bad_kind.env()->self, &a, &b, 1, 7), 1);
  EXPECT_EQ(bad_kind.FailureMessage(), "copy of kind 7: not a KILN_COPY_* kind");
  CallEnv bad_size(signature, nullptr, nullptr, &device);
  EXPECT_EQ(bad_size.env()->copy(bad_size.env()->self, &a, &b, -2, KILN_COPY_DEVICE_TO_DEVICE), 1);
  EXPECT_EQ(bad_size.FailureMessage(), "copy of -2 bytes: negative size");
  CallEnv bad_kernel(signature, nullptr, nullptr, &device);
  EXPECT_EQ(bad_kernel.env()->launch(bad_kernel.env()->self, 3, 1, 32, nullptr), 1);
  EXPECT_EQ(bad_kernel.FailureMessage(), "launch of kernel #3 failed: the artifact has 0 kernels");
}

TEST(CallEnvDeviceTest, ClaimedRecordReadsAsTheIndexErrorOfTheCpu) {
  Signature signature = DeviceSignature();
  for (int32_t input : {1, -1}) {
    for (int32_t dim : {0, -1, KILN_INDEX_SEQUENCE_LENGTH}) {
      CallEnv cpu(signature);
      cpu.env()->index_error(cpu.env()->self, input, dim, 9, 4, "gather_elements");
      CountingDevice device;
      device.record = {true, input, dim, 9, 4, "gather_elements"};
      CallEnv gpu(signature, nullptr, nullptr, &device);
      ASSERT_TRUE(gpu.BeginDeviceRun());
      EXPECT_FALSE(gpu.HasReport());
      gpu.EndDeviceRun();
      EXPECT_EQ(gpu.FailureMessage(), cpu.FailureMessage()) << input << " " << dim;
    }
  }
}

// ---- The CUDA device, over the fake driver.

class FakeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(driver_.ok());
    live_allocations_ = driver_.Control<FakeCudaLiveAllocationsFn>("fake_cuda_live_allocations");
  }
  void TearDown() override {
    model_.reset();
    if (artifact_ != nullptr) dlclose(artifact_);
  }

  // Loads device_ptx, whose launches the fake runs with the artifact's kernel for the CPU.
  void LoadPtxModel() {
    std::string path = ArtifactPath("device_ptx");
    std::string error;
    model_ = Model::Load(path, &error);
    ASSERT_NE(model_, nullptr) << error;
    artifact_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(artifact_, nullptr) << dlerror();
    driver_.Control<FakeCudaSetKernelFn>("fake_cuda_set_kernel")(
        "scale_add", testing::Symbol<KilnEmulatedKernelFn>(artifact_, "test_device_scale_add"));
  }

  std::vector<FakeCudaLaunch> Launches() { return driver_.Launches(); }

  testing::FakeCuda driver_{KILN_FAKE_LIBCUDA};
  void* artifact_ = nullptr;
  FakeCudaLiveAllocationsFn live_allocations_ = nullptr;
  std::unique_ptr<Model> model_;
};

TEST_F(FakeCudaTest, LaunchesHaveTheKernelGridThreadsAndParameters) {
  ASSERT_NO_FATAL_FAILURE(LoadPtxModel());
  std::vector<float> x = Iota(10), y;
  ASSERT_EQ(RunScaleAdd(*model_, x, 1, &y), "");
  ExpectScaleAdd(x, 1, y);
  std::vector<FakeCudaLaunch> launches = Launches();
  ASSERT_EQ(launches.size(), 1u);
  const FakeCudaLaunch& launch = launches[0];
  EXPECT_STREQ(launch.kernel, "scale_add");
  EXPECT_EQ(std::vector<unsigned>(launch.grid, launch.grid + 3), (std::vector<unsigned>{3, 1, 1}));
  EXPECT_EQ(std::vector<unsigned>(launch.block, launch.block + 3),
            (std::vector<unsigned>{4, 1, 1}));
  EXPECT_EQ(launch.shared_bytes, 0u);
  ASSERT_EQ(launch.num_params, 7);
  for (int i = 1; i <= 4; ++i) {
    EXPECT_NE(launch.params[i], 0u) << i;
    EXPECT_EQ(launch.params[i] % 256, 0u) << i;  // buffers are device pointers
  }
  EXPECT_EQ(launch.params[5], 10u);  // n
  EXPECT_EQ(launch.params[6], 2u);   // scale, an int32_t
  // The constant stays on the device while the model is loaded; the rest was freed.
  EXPECT_EQ(live_allocations_(), 1);
  model_.reset();
  EXPECT_EQ(live_allocations_(), 0);
}

TEST_F(FakeCudaTest, EmptyInputsLaunchNothing) {
  ASSERT_NO_FATAL_FAILURE(LoadPtxModel());
  std::vector<float> y;
  ASSERT_EQ(RunScaleAdd(*model_, {}, 0, &y), "");
  EXPECT_TRUE(Launches().empty());
}

TEST_F(FakeCudaTest, RunsFromAnyThread) {
  ASSERT_NO_FATAL_FAILURE(LoadPtxModel());
  // The fake fails every call made without a current context, as the driver does.
  std::vector<float> x = Iota(5), y;
  std::string error = "not run";
  std::thread([&] { error = RunScaleAdd(*model_, x, 0, &y); }).join();
  ASSERT_EQ(error, "");
  ExpectScaleAdd(x, 0, y);
}

TEST_F(FakeCudaTest, DeviceIndexErrorIsReportedAsOnTheCpu) {
  ASSERT_NO_FATAL_FAILURE(LoadPtxModel());
  // {claimed, input, dim, op id, index, size}: what the kernel would write for k = 7.
  const int64_t record[6] = {1, 1, 0, 0, 7, 4};
  driver_.Control<FakeCudaClaimIndexErrorFn>("fake_cuda_claim_index_error")(record);
  std::vector<float> x = Iota(5), y;
  EXPECT_EQ(RunScaleAdd(*model_, x, 1, &y), kIndexErrorMessage);
  // The record is cleared before the next run.
  ASSERT_EQ(RunScaleAdd(*model_, x, 1, &y), "");
  ExpectScaleAdd(x, 1, y);
}

TEST_F(FakeCudaTest, LaunchFailureIsClearAndTheModelStaysUsable) {
  ASSERT_NO_FATAL_FAILURE(LoadPtxModel());
  driver_.Control<FakeCudaFailLaunchesFn>("fake_cuda_fail_launches")(1);
  std::vector<float> x = Iota(9), y;
  EXPECT_EQ(RunScaleAdd(*model_, x, 1, &y),
            "launch of kernel 'scale_add' (3 blocks of 4 threads) failed: "
            "CUDA_ERROR_LAUNCH_FAILED (unspecified launch failure)");
  EXPECT_EQ(live_allocations_(), 1);  // the constant
  ASSERT_EQ(RunScaleAdd(*model_, x, 1, &y), "");
  ExpectScaleAdd(x, 1, y);
}

TEST_F(FakeCudaTest, AllocationFailureIsClearAndTheModelStaysUsable) {
  ASSERT_NO_FATAL_FAILURE(LoadPtxModel());
  auto fail_alloc_above = driver_.Control<FakeCudaFailAllocAboveFn>("fake_cuda_fail_alloc_above");
  fail_alloc_above(16);
  std::vector<float> x = Iota(10), y;
  EXPECT_EQ(RunScaleAdd(*model_, x, 1, &y),
            "cuMemAlloc of 40 bytes failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  // What the artifact got before the failure is freed: only the constant stays.
  EXPECT_EQ(live_allocations_(), 1);
  fail_alloc_above(-1);
  ASSERT_EQ(RunScaleAdd(*model_, x, 1, &y), "");
  ExpectScaleAdd(x, 1, y);
}

TEST_F(FakeCudaTest, NoDeviceFailsTheLoad) {
  driver_.Control<FakeCudaSetDeviceCountFn>("fake_cuda_set_device_count")(0);
  std::string path = ArtifactPath("device_ptx");
  EXPECT_EQ(LoadError(path),
            "artifact '" + path + "' runs on a CUDA GPU, but there is no CUDA device");
}

TEST_F(FakeCudaTest, RejectedPtxGivesTheJitLog) {
  std::string path = ArtifactPath("device_bad_ptx");
  EXPECT_EQ(LoadError(path), "artifact '" + path +
                                 "' runs on a CUDA GPU, but the CUDA driver rejects its PTX: "
                                 "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a PTX JIT "
                                 "compilation failed): ptxas fatal: not PTX: no .version or "
                                 ".target");
}

TEST_F(FakeCudaTest, PtxWithoutAKernelFailsTheLoad) {
  std::string path = ArtifactPath("device_missing_kernel");
  EXPECT_EQ(LoadError(path), "artifact '" + path +
                                 "' runs on a CUDA GPU, but its PTX lacks kernel 'scale_add': "
                                 "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND (named symbol "
                                 "not found)");
}

// ---- Without a usable driver.

class CudaDriverTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("KILN_CUDA_LIBRARY"); }
};

TEST_F(CudaDriverTest, MissingDriverFailsTheLoad) {
  setenv("KILN_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  std::string path = ArtifactPath("device_ptx");
  EXPECT_THAT(LoadError(path),
              StartsWith("artifact '" + path +
                         "' runs on a CUDA GPU, but /nonexistent/libcuda.so.1 cannot be loaded "
                         "(is the NVIDIA driver installed?): /nonexistent/libcuda.so.1: "));
}

TEST_F(CudaDriverTest, StubDriverFailsTheLoad) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  struct stat info;
  if (stat(stub, &info) != 0) GTEST_SKIP() << "no CUDA toolkit stub driver at " << stub;
  setenv("KILN_CUDA_LIBRARY", stub, 1);
  std::string path = ArtifactPath("device_ptx");
  EXPECT_THAT(LoadError(path), StartsWith("artifact '" + path +
                                          "' runs on a CUDA GPU, but the CUDA driver cannot "
                                          "start: cuInit failed: CUDA_ERROR_STUB_LIBRARY"));
}

// ---- The loader's checks.

TEST(DeviceLoaderTest, AcceptsCpuAndDeviceAbiVersions) {
  std::string error;
  auto cpu = Model::Load(ArtifactPath("good"), &error);
  EXPECT_NE(cpu, nullptr) << error;
  auto device = Model::Load(ArtifactPath("device_emulated"), &error);
  EXPECT_NE(device, nullptr) << error;
  std::string path = ArtifactPath("abi_v5");
  EXPECT_EQ(LoadError(path), "artifact '" + path +
                                 "' has ABI version 5; this runtime supports versions 3 (CPU) "
                                 "and 4 (device)");
}

TEST(DeviceLoaderTest, MissingExportIsNamed) {
  std::string path = ArtifactPath("device_no_error_ops");
  EXPECT_EQ(LoadError(path), "artifact '" + path + "' does not export 'kiln_gpu_error_ops'");
}

TEST(DeviceLoaderTest, ExactlyOneKindOfKernels) {
  std::string both = ArtifactPath("device_both");
  EXPECT_EQ(LoadError(both), "artifact '" + both +
                                 "' is a device artifact (ABI version 4) but exports both "
                                 "kiln_gpu_ptx and kiln_gpu_emulated_kernels; it must export one");
  std::string neither = ArtifactPath("device_neither");
  EXPECT_EQ(LoadError(neither),
            "artifact '" + neither +
                "' is a device artifact (ABI version 4) but exports neither kiln_gpu_ptx nor "
                "kiln_gpu_emulated_kernels; it must export one");
}

TEST(DeviceLoaderTest, EmulatedKernelCountMustMatchTheNames) {
  std::string path = ArtifactPath("device_bad_count");
  EXPECT_EQ(LoadError(path), "artifact '" + path +
                                 "': kiln_gpu_kernels names 1 kernels, but "
                                 "kiln_gpu_emulated_kernels has 0");
}

}  // namespace
}  // namespace kiln::runtime
