// Artifacts for aarch64 (NEON, SVE) and riscv64 (RVV): compiled here, run under qemu-user by
// kiln-runner built for their arch, and compared with the reference interpreter. Their
// machine code is read back to check that the vector extension the target names is used, and
// one the target does not name is not.
#include <cstdio>
#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/import_and_run.h"
#include "tests/support/reference_check.h"
#include "tests/support/remote_runner.h"
#include "tests/support/tensors.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

ir::NDArray Random(std::vector<int64_t> shape, uint32_t seed) {
  ir::NDArray a = ir::NDArray::Zeros(arith::DataType::Float(32), std::move(shape));
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    a.data<float>()[i] = static_cast<float>(seed >> 8) / (1u << 24) - 0.5f;
  }
  return a;
}

// y = relu(x @ w + b) with a symbolic batch n.
std::string DenseModel(int64_t k, int64_t n) {
  OnnxBuilder b;
  b.Input("x", {"batch", k});
  b.FloatInitializer("w", {k, n}, Values<float>(Random({k, n}, 7)));
  b.FloatInitializer("b", {n}, Values<float>(Random({n}, 8)));
  b.Node("MatMul", {"x", "w"}, {"xw"});
  b.Node("Add", {"xw", "b"}, {"sum"});
  b.Node("Relu", {"sum"}, {"y"});
  b.Output("y", {"batch", n});
  return b.Serialize();
}

class CrossTargetTest : public ::testing::TestWithParam<std::string> {
 protected:
  ir::Target target() const { return *driver::ResolveTarget(GetParam()); }

  std::unique_ptr<RemoteModel> Start(const std::string& onnx, int threads = 1) {
    absl::StatusOr<driver::Artifact> artifact = driver::CompileModel(onnx, target(), {}, nullptr);
    EXPECT_TRUE(artifact.ok()) << artifact.status();
    if (!artifact.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<RemoteModel>> model =
        RemoteModel::Start(target(), artifact->bytes, threads);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }

  void ExpectMatchesReference(RemoteModel& model, const std::string& onnx,
                              const std::vector<ir::NDArray>& inputs) {
    absl::StatusOr<std::vector<ir::NDArray>> want = ImportAndRun(onnx, inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<std::vector<ir::NDArray>> got = model.Run(inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < got->size(); ++o) {
      ASSERT_EQ((*got)[o].shape, (*want)[o].shape) << "output " << o;
      for (int64_t i = 0; i < (*got)[o].num_elements(); ++i) {
        double w = (*want)[o].GetDouble(i);
        ASSERT_NEAR((*got)[o].GetDouble(i), w, 1e-5 * (1 + std::fabs(w)))
            << GetParam() << " output " << o << " element " << i;
      }
    }
  }
};

TEST_P(CrossTargetTest, DenseLayerMatchesTheReferenceAtSeveralBatchSizes) {
  const std::string onnx = DenseModel(64, 48);
  std::unique_ptr<RemoteModel> model = Start(onnx);
  ASSERT_NE(model, nullptr);
  for (int64_t batch : {1, 5, 17}) ExpectMatchesReference(*model, onnx, {Random({batch, 64}, 3)});
}

TEST_P(CrossTargetTest, ParallelKernelsMatchTheReferenceOnTwoThreads) {
  const std::string onnx = DenseModel(128, 256);
  std::unique_ptr<RemoteModel> model = Start(onnx, /*threads=*/2);
  ASSERT_NE(model, nullptr);
  ExpectMatchesReference(*model, onnx, {Random({96, 128}, 4)});
}

TEST_P(CrossTargetTest, ConvMatchesTheReference) {
  OnnxBuilder b;
  b.Input("x", {1, 3, "h", "w"});
  b.FloatInitializer("k", {8, 3, 3, 3}, Values<float>(Random({8, 3, 3, 3}, 5)));
  OnnxBuilder::IntsAttr(b.Node("Conv", {"x", "k"}, {"y"}), "pads", {1, 1, 1, 1});
  b.Output("y", {1, 8, "h", "w"});
  std::unique_ptr<RemoteModel> model = Start(b.Serialize());
  ASSERT_NE(model, nullptr);
  ExpectMatchesReference(*model, b.Serialize(), {Random({1, 3, 9, 11}, 6)});
}

// The runtime on the target reports a bad call as it does on x86_64, naming the input.
TEST_P(CrossTargetTest, ABadShapeFailsTheCallWithTheRuntimesMessage) {
  OnnxBuilder b;
  b.Input("x", {"n", 4});
  b.Input("y", {"n", 4});
  b.Node("Add", {"x", "y"}, {"z"});
  b.Output("z", {"n", 4});
  std::unique_ptr<RemoteModel> model = Start(b.Serialize());
  ASSERT_NE(model, nullptr);
  std::vector<ir::NDArray> inputs = {Random({3, 4}, 1), Random({2, 4}, 2)};
  absl::StatusOr<std::vector<ir::NDArray>> got = model->Run(inputs);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("'y'"));

  std::unique_ptr<runtime::Model> native = CompileAndLoad(b.Serialize());
  ASSERT_NE(native, nullptr);
  std::vector<DLTensor> views = {ViewOf(inputs[0]), ViewOf(inputs[1])};
  std::vector<std::vector<int64_t>> shapes;
  std::string native_error;
  EXPECT_FALSE(native->OutputShapes(views, &shapes, &native_error));
  EXPECT_EQ(got.status().message(), native_error);
  // The runner goes on serving after a failed call.
  ExpectMatchesReference(*model, b.Serialize(), {Random({2, 4}, 1), Random({2, 4}, 2)});
}

// A runner that cannot load its artifact exits; the call says so with the runner's reason.
TEST_P(CrossTargetTest, AnArtifactTheRunnerCannotLoadIsReported) {
  absl::StatusOr<std::unique_ptr<RemoteModel>> model =
      RemoteModel::Start(target(), "not an ELF file");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::vector<ir::NDArray>> got = (*model)->Run({Random({2, 4}, 1)});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(got.status().message(), HasSubstr("exited with status 2"));
  EXPECT_THAT(got.status().message(), HasSubstr("kiln-runner: "));
}

// A depthwise 3x3 conv of 32 channels on 7 x 7, constant shapes: the channel-lanes form,
// whose copy of the input gathers a lane per channel plane, 49 floats apart.
std::string NarrowDepthwiseModel() {
  OnnxBuilder b;
  b.Input("x", {1, 32, 7, 7});
  b.FloatInitializer("k", {32, 1, 3, 3}, Values<float>(Random({32, 1, 3, 3}, 9)));
  onnx::NodeProto& conv = b.Node("Conv", {"x", "k"}, {"y"});
  OnnxBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  OnnxBuilder::IntAttr(conv, "group", 32);
  b.Node("Relu", {"y"}, {"z"});
  b.Output("z", {1, 32, 7, 7});
  return b.Serialize();
}

// The disassembly of a model's artifact, by default the dense model's.
std::string Disassembly(const ir::Target& target, const std::string& onnx = DenseModel(64, 48)) {
  absl::StatusOr<driver::Artifact> artifact = driver::CompileModel(onnx, target, {}, nullptr);
  EXPECT_TRUE(artifact.ok()) << artifact.status();
  if (!artifact.ok()) return "";
  std::string path = ::testing::TempDir() + "/kiln-cross-XXXXXX.so";
  int fd = mkstemps(path.data(), 3);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, artifact->bytes.data(), artifact->bytes.size()),
            static_cast<ssize_t>(artifact->bytes.size()));
  close(fd);
  std::string text;
  FILE* pipe = popen((std::string(KILN_LLVM_OBJDUMP) + " -d " + path).c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  char buffer[4096];
  while (pipe && fgets(buffer, sizeof buffer, pipe)) text += buffer;
  if (pipe) {
    EXPECT_EQ(pclose(pipe), 0);
  }
  unlink(path.c_str());
  return text;
}

bool Contains(const std::string& text, const char* pattern) {
  return std::regex_search(text, std::regex(pattern));
}

TEST(CrossTargetCodeTest, EachTargetUsesTheVectorExtensionItNamesAndNoOther) {
  const char* kNeonFma = R"(fmla\s+v[0-9]+\.4s)";
  const char* kSveRegister = R"(\sz[0-9]+\.[bhsd])";
  const char* kRvvConfig = R"(\svseti?vli\s)";
  std::string neon = Disassembly(*driver::ResolveTarget("aarch64"));
  EXPECT_TRUE(Contains(neon, kNeonFma));
  EXPECT_FALSE(Contains(neon, kSveRegister));
  EXPECT_TRUE(Contains(Disassembly(*driver::ResolveTarget("aarch64-sve")), kSveRegister));
  EXPECT_TRUE(Contains(Disassembly(*driver::ResolveTarget("riscv64")), kRvvConfig));
  std::string scalar_rv =
      Disassembly(*driver::ResolveTarget("triple=riscv64-linux-gnu;features=+m,+a,+f,+d,+c"));
  EXPECT_THAT(scalar_rv, HasSubstr("fmadd.s"));  // the code is there, in scalar form
  EXPECT_FALSE(Contains(scalar_rv, kRvvConfig));
}

// Gathers at constant offsets from a scalar base take one 16-lane vgatherdps, not two 8-lane
// vgatherqps of i64 offsets (codegen/gather_base.h).
TEST(CrossTargetCodeTest, GathersAtConstantOffsetsTakeThirtyTwoBitIndices) {
  std::string x86 = Disassembly(*driver::ResolveTarget("x86_64-v4"), NarrowDepthwiseModel());
  EXPECT_TRUE(Contains(x86, R"(vgatherdps\s+.*zmm)"));
  EXPECT_FALSE(Contains(x86, R"(vgatherqps)"));
}

INSTANTIATE_TEST_SUITE_P(Targets, CrossTargetTest,
                         ::testing::Values("aarch64", "aarch64-sve", "riscv64"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace kiln::testing
