// `kiln run` end to end on the hand-written artifact of runtime/testing/test_artifact.c
// (y = 2x + bias[i], x: f32[n, 3], bias: f32[n]).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/cli.h"
#include "client/tensor_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/runtime.h"
#include "tests/support/cli_fixture.h"

namespace kiln::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kArtifact = std::string(KILN_TEST_ARTIFACT_DIR) + "/good.so";

class RunTest : public testing::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    WriteF32("x.npy", {2, 3}, {1, 2, 3, 4, 5, 6});
    WriteF32("bias.npy", {2}, {10, 20});
  }

  void WriteF32(const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
    absl::StatusOr<Tensor> tensor = MakeTensor(DLDataType{kDLFloat, 32, 1}, std::move(shape));
    ASSERT_TRUE(tensor.ok());
    std::memcpy(tensor->data.data(), values.data(), tensor->data.size());
    ASSERT_TRUE(WriteNpyFile(Path(name), *tensor).ok());
  }
};

TEST_F(RunTest, WritesOutputsAsNpy) {
  ASSERT_EQ(Kiln({"run", kArtifact, "--input", "x=" + Path("x.npy"), "--input",
                  "bias=" + Path("bias.npy"), "--out", Path("out")}),
            0)
      << err_.str();
  EXPECT_EQ(out_.str(), "y: " + Path("out/y.npy") + " f32[2, 3]\n");
  absl::StatusOr<Tensor> y = ReadTensorFile(Path("out/y.npy"));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(y->shape, ElementsAre(2, 3));
  std::vector<float> values(6);
  std::memcpy(values.data(), y->data.data(), 24);
  EXPECT_THAT(values, ElementsAre(12, 14, 16, 28, 30, 32));
}

TEST_F(RunTest, FindsTheArtifactInItsFolder) {
  std::filesystem::create_directories(Path("artifact"));
  std::filesystem::copy_file(kArtifact, Path("artifact/model.so"));
  std::filesystem::copy_file(kArtifact, Path("other.so"));  // outside the folder: not seen
  EXPECT_EQ(Kiln({"run", Path("artifact"), "--input=x=" + Path("x.npy"),
                  "--input=bias=" + Path("bias.npy"), "--out=" + Path("out")}),
            0)
      << err_.str();
  EXPECT_TRUE(std::filesystem::exists(Path("out/y.npy")));
  std::filesystem::copy_file(kArtifact, Path("artifact/second.so"));
  EXPECT_EQ(Kiln({"run", Path("artifact"), "--out", Path("out")}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("several artifacts in '" + Path("artifact") + "'"));
}

TEST_F(RunTest, InputNamesMustMatchTheModel) {
  EXPECT_EQ(Kiln({"run", kArtifact, "--input", "x=" + Path("x.npy"), "--out", Path("out")}), 1);
  EXPECT_EQ(err_.str(),
            "error: INVALID_ARGUMENT: missing input 'bias' (f32[n]); give it with --input "
            "bias=FILE\n");
  EXPECT_EQ(
      Kiln({"run", kArtifact, "--input", "x=" + Path("x.npy"), "--input",
            "bias=" + Path("bias.npy"), "--input", "z=" + Path("x.npy"), "--out", Path("out")}),
      1);
  EXPECT_EQ(err_.str(),
            "error: INVALID_ARGUMENT: unknown input 'z'; the model's inputs are: x f32[n, 3], "
            "bias f32[n]\n");
  EXPECT_EQ(Kiln({"run", kArtifact, "--input", "x=" + Path("x.npy"), "--input",
                  "x=" + Path("x.npy"), "--out", Path("out")}),
            1);
  EXPECT_THAT(err_.str(), HasSubstr("input 'x' given twice"));
}

TEST_F(RunTest, ShapeErrorsReachTheUser) {
  WriteF32("bias3.npy", {3}, {1, 2, 3});
  EXPECT_EQ(Kiln({"run", kArtifact, "--input", "x=" + Path("x.npy"), "--input",
                  "bias=" + Path("bias3.npy"), "--out", Path("out")}),
            1);
  EXPECT_EQ(err_.str(),
            "error: INVALID_ARGUMENT: input 'bias' dimension 0 (n): expected 2, got 3\n");
  EXPECT_FALSE(std::filesystem::exists(Path("out/y.npy")));
}

TEST_F(RunTest, AWasmArtifactIsForABrowserOrNode) {
  std::filesystem::create_directories(Path("wasm32"));
  std::ofstream(Path("wasm32/model.wasm")) << "\0asm";
  const std::string message =
      "' is a WebAssembly module: run it in a browser or Node.js with runtime/js/kiln.mjs (see "
      "runtime/js/README.md); kiln run loads native artifacts\n";
  EXPECT_EQ(Kiln({"run", Path("wasm32"), "--out", Path("out")}), 1);
  EXPECT_EQ(err_.str(), "error: INVALID_ARGUMENT: '" + Path("wasm32/model.wasm") + message);
  EXPECT_EQ(Kiln({"run", Path("wasm32/model.wasm"), "--out", Path("out")}), 1);
  EXPECT_EQ(err_.str(), "error: INVALID_ARGUMENT: '" + Path("wasm32/model.wasm") + message);
}

TEST_F(RunTest, MissingArtifactAndBadFiles) {
  EXPECT_EQ(Kiln({"run", Path("nowhere"), "--out", Path("out")}), 1);
  EXPECT_EQ(err_.str(), "error: NOT_FOUND: no artifact folder '" + Path("nowhere") + "'\n");
  std::filesystem::create_directories(Path("empty"));
  EXPECT_EQ(Kiln({"run", Path("empty"), "--out", Path("out")}), 1);
  EXPECT_EQ(err_.str(), "error: NOT_FOUND: no .so artifact in '" + Path("empty") + "'\n");
  EXPECT_EQ(Kiln({"run", kArtifact, "--input", "x=" + Path("nope.npy"), "--input",
                  "bias=" + Path("bias.npy"), "--out", Path("out")}),
            1);
  EXPECT_THAT(err_.str(), HasSubstr("cannot open '" + Path("nope.npy") + "'"));
}

}  // namespace
}  // namespace kiln::client
