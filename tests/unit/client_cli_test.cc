// The kiln command line: words to command arguments, usage errors, exit codes.
#include "client/cli.h"

#include <filesystem>
#include <sstream>

#include "compiler/ir/target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::string ErrorOf(const absl::Status& status) {
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

TEST(CliTest, ParsesCompile) {
  absl::StatusOr<CompileArgs> args = ParseCompileArgs(
      {"m.onnx", "--target", "x86_64", "-t", "wasm32", "--out=o", "--server", "h:1", "--dim-bound",
       "seq=4096", "--dim-bound=batch=8", "--timeout", "30"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->model_path, "m.onnx");
  EXPECT_THAT(args->targets, ElementsAre("x86_64", "wasm32"));
  EXPECT_EQ(args->out_dir, "o");
  EXPECT_EQ(args->server, "h:1");
  EXPECT_THAT(args->dim_bounds, ElementsAre(Pair("batch", 8), Pair("seq", 4096)));
  EXPECT_EQ(args->timeout_s, 30);
}

TEST(CliTest, CompileDefaults) {
  absl::StatusOr<CompileArgs> args = ParseCompileArgs({"m.onnx", "-t", "x86_64", "--out", "o"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->server, "");
  EXPECT_EQ(args->timeout_s, 600);
  EXPECT_TRUE(args->dim_bounds.empty());
}

TEST(CliTest, CompileUsageErrors) {
  EXPECT_EQ(ErrorOf(ParseCompileArgs({"m.onnx", "--out", "o"}).status()),
            "at least one --target is needed");
  EXPECT_EQ(ErrorOf(ParseCompileArgs({"m.onnx", "-t", "x86_64"}).status()), "--out DIR is needed");
  EXPECT_EQ(ErrorOf(ParseCompileArgs({"-t", "x86_64", "--out", "o"}).status()),
            "expected one model file, got 0 positional arguments");
  EXPECT_EQ(
      ErrorOf(ParseCompileArgs({"m.onnx", "-t", "x86_64", "--out", "o", "--out", "p"}).status()),
      "--out given twice");
  EXPECT_EQ(ErrorOf(ParseCompileArgs({"m.onnx", "-t"}).status()), "--target needs a value");
  EXPECT_EQ(
      ErrorOf(ParseCompileArgs({"m.onnx", "-t", "x", "--out", "o", "--dim-bound", "seq"}).status()),
      "--dim-bound expects NAME=VALUE, got 'seq'");
  EXPECT_EQ(
      ErrorOf(
          ParseCompileArgs({"m.onnx", "-t", "x", "--out", "o", "--dim-bound", "seq=0"}).status()),
      "--dim-bound expects a positive integer, got '0'");
  EXPECT_EQ(
      ErrorOf(ParseCompileArgs({"m.onnx", "-t", "x", "--out", "o", "--timeout", "soon"}).status()),
      "--timeout expects a positive integer, got 'soon'");
  EXPECT_EQ(ErrorOf(ParseCompileArgs({"m.onnx", "--tagret", "x"}).status()),
            "unknown flag '--tagret'");
}

TEST(CliTest, ParsesRun) {
  absl::StatusOr<RunArgs> args =
      ParseRunArgs({"out/x86_64", "--input", "x=a.npy", "--input=mask=m=1.pb", "--out", "y"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->artifact_dir, "out/x86_64");
  EXPECT_THAT(args->inputs, ElementsAre(Pair("x", "a.npy"), Pair("mask", "m=1.pb")));
  EXPECT_EQ(args->out_dir, "y");
  EXPECT_EQ(ErrorOf(ParseRunArgs({"d", "--input", "=a.npy", "--out", "y"}).status()),
            "--input expects NAME=VALUE, got '=a.npy'");
}

TEST(CliTest, ParsesTargets) {
  absl::StatusOr<TargetsArgs> args = ParseTargetsArgs({"--server", "localhost:50051"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->server, "localhost:50051");
  EXPECT_EQ(ErrorOf(ParseTargetsArgs({"extra"}).status()), "unexpected argument 'extra'");
}

TEST(CliTest, ExitCodes) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("usage:"));
  EXPECT_EQ(RunCli({"--help"}, out, err), 0);
  EXPECT_THAT(out.str(), HasSubstr("kiln compile MODEL.onnx"));
  err.str("");
  EXPECT_EQ(RunCli({"frobnicate"}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("kiln: unknown command 'frobnicate'"));
  err.str("");
  EXPECT_EQ(RunCli({"compile", "m.onnx"}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("kiln compile: at least one --target is needed"));
}

TEST(CliTest, TargetsListsPresetsInProcess) {
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"targets"}, out, err), 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("x86_64\ttriple=x86_64-unknown-linux-gnu;cpu=x86-64;features=;"
                                   "vector_bits=128\n"));
  EXPECT_THAT(out.str(), HasSubstr("x86_64-v3\ttriple=x86_64-unknown-linux-gnu;cpu=x86-64-v3;"
                                   "features=+avx2,+fma;vector_bits=256\n"));
}

TEST(CliTest, LocalCompileReportsUserErrors) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"compile", "/nonexistent/m.onnx", "-t", "x86_64", "--out", "o"}, out, err), 1);
  EXPECT_EQ(err.str(),
            "error: NOT_FOUND: cannot open '/nonexistent/m.onnx': No such file or directory\n");
  err.str("");
  EXPECT_EQ(RunCli({"compile", "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx", "-t",
                    "nosuch", "--out", ::testing::TempDir() + "/kiln_cli_out"},
                   out, err),
            1);
  EXPECT_THAT(err.str(), HasSubstr("error: INVALID_ARGUMENT: [nosuch] unknown target 'nosuch'"));
  EXPECT_EQ(out.str(), "");
}

TEST(CliTest, LocalCompileRejectsUnknownCpuAndFeature) {
  const std::string model = "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx";
  const std::string dir = ::testing::TempDir() + "/kiln_cli_bad_target";
  std::ostringstream out, err;
  EXPECT_EQ(
      RunCli({"compile", model, "-t", "triple=x86_64-linux-gnu;cpu=foo", "--out", dir}, out, err),
      1);
  EXPECT_THAT(err.str(), HasSubstr("INVALID_ARGUMENT: [triple=x86_64-linux-gnu;cpu=foo] unknown "
                                   "cpu 'foo' for x86_64-unknown-linux-gnu"));
  err.str("");
  EXPECT_EQ(RunCli({"compile", model, "-t", "triple=x86_64-linux-gnu;features=+avx2,+nosuch",
                    "--out", dir},
                   out, err),
            1);
  EXPECT_THAT(err.str(), HasSubstr("unknown feature 'nosuch' for x86_64-unknown-linux-gnu"));
  err.str("");
  EXPECT_EQ(RunCli({"inspect", model, "--after", "llvm", "-t", "triple=x86_64-linux-gnu;cpu=foo"},
                   out, err),
            1);
  EXPECT_THAT(err.str(), HasSubstr("unknown cpu 'foo' for x86_64-unknown-linux-gnu"));
  EXPECT_EQ(out.str(), "");
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(CliTest, LocalCompileWritesADescriptionUnderItsDisplayName) {
  const std::string model = "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx";
  const std::string dir = ::testing::TempDir() + "/kiln_cli_description";
  const std::string description = "triple=x86_64-linux-gnu;cpu=x86-64;features=+sse4.2";
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"compile", model, "-t", description, "--out", dir}, out, err), 0) << err.str();
  const std::string folder = ir::ParseTarget(description)->preset;
  EXPECT_TRUE(std::filesystem::exists(dir + "/" + folder + "/model.so")) << out.str();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::client
