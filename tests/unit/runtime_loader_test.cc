// Loads the hand-written artifacts of runtime/testing/test_artifact.c through the C API and the
// C++ wrapper: signature queries, shapes, results, and every error the runtime promises.
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/runtime.h"
#include "kiln/runtime.hpp"

namespace kiln::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ArtifactPath(const std::string& name) {
  return std::string(KILN_TEST_ARTIFACT_DIR) + "/" + name + ".so";
}

std::string LoadError(const std::string& path) {
  KilnModel* model = reinterpret_cast<KilnModel*>(1);
  EXPECT_NE(kiln_model_load(path.c_str(), &model), 0);
  EXPECT_EQ(model, nullptr);
  return kiln_last_error();
}

DLTensor F32Tensor(std::vector<int64_t>& shape, float* data) {
  DLTensor tensor{};
  tensor.data = data;
  tensor.device = {kDLCPU, 0};
  tensor.ndim = static_cast<int>(shape.size());
  tensor.dtype = {kDLFloat, 32, 1};
  tensor.shape = shape.data();
  return tensor;
}

// y = 2x + bias[i] for x: f32[n, 3], bias: f32[n].
class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    model_ = Model::Load(ArtifactPath("good"), &error);
    ASSERT_NE(model_, nullptr) << error;
  }

  // Inputs over x_shape_/bias_shape_ and x_/bias_ as they are when called.
  std::vector<DLTensor> Inputs() {
    return {F32Tensor(x_shape_, x_.data()), F32Tensor(bias_shape_, bias_.data())};
  }

  std::string RunError(std::vector<DLTensor> inputs, std::vector<DLTensor> outputs) {
    std::string error;
    EXPECT_FALSE(model_->Run(inputs, &outputs, &error));
    return error;
  }

  std::string ShapeError(std::vector<DLTensor> inputs) {
    std::vector<std::vector<int64_t>> shapes;
    std::string error;
    EXPECT_FALSE(model_->OutputShapes(inputs, &shapes, &error));
    return error;
  }

  std::unique_ptr<Model> model_;
  std::vector<int64_t> x_shape_{2, 3};
  std::vector<int64_t> bias_shape_{2};
  std::vector<int64_t> y_shape_{2, 3};
  std::vector<float> x_{1, 2, 3, 4, 5, 6};
  std::vector<float> bias_{10, 20};
  std::vector<float> y_ = std::vector<float>(6, -1);
};

TEST_F(LoaderTest, SignatureQueriesThroughTheCApi) {
  const KilnModel* m = model_->c_model();
  ASSERT_EQ(kiln_model_num_inputs(m), 2);
  ASSERT_EQ(kiln_model_num_outputs(m), 1);
  EXPECT_STREQ(kiln_model_tensor_name(m, 0, 0), "x");
  EXPECT_STREQ(kiln_model_tensor_name(m, 0, 1), "bias");
  EXPECT_STREQ(kiln_model_tensor_name(m, 1, 0), "y");
  DLDataType dtype = kiln_model_tensor_dtype(m, 1, 0);
  EXPECT_EQ(dtype.code, kDLFloat);
  EXPECT_EQ(dtype.bits, 32);
  EXPECT_EQ(dtype.lanes, 1);
  EXPECT_EQ(kiln_model_tensor_ndim(m, 0, 0), 2);
  EXPECT_STREQ(kiln_model_tensor_dim(m, 0, 0, 0), "n");
  EXPECT_STREQ(kiln_model_tensor_dim(m, 0, 0, 1), "3");
}

TEST_F(LoaderTest, OutOfRangeQueriesAnswerNothing) {
  const KilnModel* m = model_->c_model();
  EXPECT_EQ(kiln_model_tensor_name(m, 0, 2), nullptr);
  EXPECT_EQ(kiln_model_tensor_name(m, 1, -1), nullptr);
  EXPECT_EQ(kiln_model_tensor_ndim(m, 1, 1), -1);
  EXPECT_EQ(kiln_model_tensor_dim(m, 0, 0, 2), nullptr);
  EXPECT_EQ(kiln_model_tensor_dtype(m, 0, 5).bits, 0);
  EXPECT_EQ(kiln_model_num_inputs(nullptr), -1);
}

TEST_F(LoaderTest, WrapperDescribesTheSignature) {
  ASSERT_EQ(model_->inputs().size(), 2u);
  EXPECT_EQ(Describe(model_->inputs()[0]), "f32[n, 3]");
  EXPECT_EQ(Describe(model_->inputs()[1]), "f32[n]");
  ASSERT_EQ(model_->outputs().size(), 1u);
  EXPECT_EQ(model_->outputs()[0].name, "y");
}

TEST_F(LoaderTest, ComputesOutputShapesWithoutData) {
  x_shape_ = {5, 3};
  bias_shape_ = {5};
  std::vector<DLTensor> inputs = Inputs();
  for (DLTensor& t : inputs) t.data = nullptr;
  std::vector<std::vector<int64_t>> shapes;
  std::string error;
  ASSERT_TRUE(model_->OutputShapes(inputs, &shapes, &error)) << error;
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_THAT(shapes[0], ElementsAre(5, 3));
}

TEST_F(LoaderTest, RunsAndComputesResults) {
  std::vector<DLTensor> outputs = {F32Tensor(y_shape_, y_.data())};
  std::string error;
  ASSERT_TRUE(model_->Run(Inputs(), &outputs, &error)) << error;
  EXPECT_THAT(y_, ElementsAre(12, 14, 16, 28, 30, 32));
}

TEST_F(LoaderTest, RunsOnSeveralThreads) {
  std::string error;
  ASSERT_TRUE(model_->SetNumThreads(3, &error)) << error;
  EXPECT_EQ(model_->num_threads(), 3);
  x_shape_ = {7, 3};
  bias_shape_ = {7};
  y_shape_ = {7, 3};
  x_.assign(21, 1);
  bias_ = {0, 1, 2, 3, 4, 5, 6};
  y_.assign(21, -1);
  std::vector<DLTensor> outputs = {F32Tensor(y_shape_, y_.data())};
  ASSERT_TRUE(model_->Run(Inputs(), &outputs, &error)) << error;
  for (int i = 0; i < 21; ++i) EXPECT_EQ(y_[i], 2 + i / 3) << i;
  ASSERT_TRUE(model_->SetNumThreads(1, &error)) << error;
  ASSERT_TRUE(model_->Run(Inputs(), &outputs, &error)) << error;
}

TEST_F(LoaderTest, HonorsByteOffset) {
  std::vector<float> padded = {99, 1, 2, 3, 4, 5, 6};
  std::vector<DLTensor> inputs = Inputs();
  inputs[0].data = padded.data();
  inputs[0].byte_offset = sizeof(float);
  std::vector<DLTensor> outputs = {F32Tensor(y_shape_, y_.data())};
  std::string error;
  ASSERT_TRUE(model_->Run(inputs, &outputs, &error)) << error;
  EXPECT_THAT(y_, ElementsAre(12, 14, 16, 28, 30, 32));
}

TEST_F(LoaderTest, WrongRankNamesTheInput) {
  x_shape_ = {2, 3, 1};
  EXPECT_EQ(ShapeError(Inputs()), "input 'x': expected rank 2, got 3");
}

TEST_F(LoaderTest, WrongDTypeNamesTheInput) {
  std::vector<DLTensor> inputs = Inputs();
  inputs[0].dtype = {kDLInt, 64, 1};
  EXPECT_EQ(ShapeError(inputs), "input 'x': expected dtype f32, got i64");
  inputs[0].dtype = {kDLBfloat, 16, 1};
  EXPECT_EQ(ShapeError(inputs),
            "input 'x': expected dtype f32, got dtype(code=4, bits=16, lanes=1)");
}

TEST_F(LoaderTest, WrongStaticDimNamesInputAndDim) {
  x_shape_ = {2, 100};
  EXPECT_EQ(ShapeError(Inputs()), "input 'x' dimension 1: expected 3, got 100");
}

TEST_F(LoaderTest, NegativeDimIsRejected) {
  x_shape_ = {-2, 3};
  EXPECT_EQ(ShapeError(Inputs()), "input 'x' dimension 0: negative size -2");
}

TEST_F(LoaderTest, SymbolicMismatchReportedByArtifactNamesTheDim) {
  bias_shape_ = {8};
  EXPECT_EQ(ShapeError(Inputs()), "input 'bias' dimension 0 (n): expected 2, got 8");
  std::vector<DLTensor> outputs = {F32Tensor(y_shape_, y_.data())};
  EXPECT_EQ(RunError(Inputs(), outputs), "input 'bias' dimension 0 (n): expected 2, got 8");
}

TEST_F(LoaderTest, OutputShapeMismatchNamesTheOutput) {
  y_shape_ = {1, 3};
  std::vector<DLTensor> outputs = {F32Tensor(y_shape_, y_.data())};
  EXPECT_EQ(RunError(Inputs(), outputs), "output 'y' dimension 0 (n): expected 2, got 1");
  y_shape_ = {2, 4};
  EXPECT_EQ(RunError(Inputs(), {F32Tensor(y_shape_, y_.data())}),
            "output 'y' dimension 1: expected 3, got 4");
}

TEST_F(LoaderTest, WrongTensorCounts) {
  std::vector<DLTensor> inputs = Inputs();
  inputs.pop_back();
  EXPECT_EQ(ShapeError(inputs), "expected 2 inputs, got 1");
  EXPECT_EQ(RunError(Inputs(), {}), "expected 1 outputs, got 0");
}

TEST_F(LoaderTest, MissingDataIsRejectedBeforeTheCall) {
  std::vector<DLTensor> outputs = {F32Tensor(y_shape_, nullptr)};
  EXPECT_EQ(RunError(Inputs(), outputs), "output 'y': data is NULL");
}

TEST_F(LoaderTest, ColumnMajorStridesAreRejected) {
  std::vector<int64_t> strides = {1, 2};
  std::vector<DLTensor> inputs = Inputs();
  inputs[0].strides = strides.data();
  EXPECT_EQ(ShapeError(inputs), "input 'x': strides must be NULL or dense row-major");
}

TEST_F(LoaderTest, FailedWorkspaceAllocationIsReported) {
  // The test artifact asks for -1 bytes when n = 13, and fails silently when n = 14.
  x_shape_ = {13, 3};
  bias_shape_ = {13};
  y_shape_ = {13, 3};
  x_.assign(39, 0);
  bias_.assign(13, 0);
  y_.assign(39, 0);
  EXPECT_EQ(RunError(Inputs(), {F32Tensor(y_shape_, y_.data())}),
            "workspace allocation of -1 bytes failed");
  x_shape_[0] = bias_shape_[0] = y_shape_[0] = 14;
  x_.assign(42, 0);
  bias_.assign(14, 0);
  y_.assign(42, 0);
  EXPECT_EQ(RunError(Inputs(), {F32Tensor(y_shape_, y_.data())}), "workspace allocation failed");
}

TEST(LoaderErrorTest, MissingFileNamesTheFile) {
  std::string path = ArtifactPath("does_not_exist");
  EXPECT_EQ(LoadError(path), "cannot open artifact '" + path + "': No such file or directory");
}

TEST(LoaderErrorTest, NotASharedObject) {
  std::string path = ::testing::TempDir() + "/not_an_artifact.so";
  std::ofstream(path) << "text, not an ELF object\n";
  EXPECT_THAT(LoadError(path), HasSubstr("cannot load artifact '" + path));
}

TEST(LoaderErrorTest, AnArtifactForAnotherArchSaysWhichArch) {
  std::string path = ::testing::TempDir() + "/aarch64_artifact.so";
  unsigned char header[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  header[16] = 3;    // ET_DYN
  header[18] = 183;  // EM_AARCH64
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<char*>(header), sizeof header);
  EXPECT_EQ(LoadError(path), "artifact '" + path +
                                 "' is built for aarch64; this machine is x86_64 (compile for "
                                 "this machine's target, or run it where it belongs)");
}

TEST(LoaderErrorTest, MissingSymbolNamesFileAndSymbol) {
  std::string path = ArtifactPath("no_run");
  EXPECT_EQ(LoadError(path), "artifact '" + path + "' does not export 'kiln_run'");
}

TEST(LoaderErrorTest, OtherAbiVersion) {
  std::string path = ArtifactPath("abi_v1");
  EXPECT_EQ(LoadError(path),
            "artifact '" + path +
                "' has ABI version 1; this runtime supports versions 3 (CPU) and 4 (device)");
}

TEST(LoaderErrorTest, BadSignature) {
  std::string path = ArtifactPath("bad_signature");
  EXPECT_EQ(LoadError(path),
            "artifact '" + path + "': bad signature: line 2: unknown dtype 'bf16'");
}

TEST(LoaderErrorTest, NullArguments) {
  EXPECT_NE(kiln_model_load(ArtifactPath("good").c_str(), nullptr), 0);
  EXPECT_STREQ(kiln_last_error(), "kiln_model_load: out is NULL");
  KilnModel* model = nullptr;
  EXPECT_NE(kiln_model_load(nullptr, &model), 0);
  EXPECT_STREQ(kiln_last_error(), "kiln_model_load: artifact path is NULL");
}

TEST(LoaderErrorTest, WrapperReportsLoadErrors) {
  std::string error;
  EXPECT_EQ(Model::Load(ArtifactPath("no_run"), &error), nullptr);
  EXPECT_THAT(error, HasSubstr("does not export 'kiln_run'"));
}

TEST(LoaderErrorTest, LastErrorIsPerThread) {
  LoadError(ArtifactPath("no_run"));
  std::string other_thread;
  std::thread([&] { other_thread = kiln_last_error(); }).join();
  EXPECT_EQ(other_thread, "");
  EXPECT_THAT(kiln_last_error(), HasSubstr("kiln_run"));
}

TEST_F(LoaderTest, FreeingAnotherInstanceOfTheFileKeepsThisOneWorking) {
  std::string error;
  std::unique_ptr<Model> other = Model::Load(ArtifactPath("good"), &error);
  ASSERT_NE(other, nullptr) << error;
  other.reset();  // dlclose of one handle must leave the artifact mapped for the other
  std::vector<DLTensor> outputs = {F32Tensor(y_shape_, y_.data())};
  ASSERT_TRUE(model_->Run(Inputs(), &outputs, &error)) << error;
  EXPECT_THAT(y_, ElementsAre(12, 14, 16, 28, 30, 32));
}

}  // namespace
}  // namespace kiln::runtime
