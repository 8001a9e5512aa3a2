// `kiln bench`: flags, latency statistics, bench inputs (files, --shape, random) and real runs
// on the hand-written artifact of runtime/testing/test_artifact.c (x: f32[n, 3], bias: f32[n])
// and on a model compiled by `kiln compile`.
#include <cstring>
#include <filesystem>
#include <sstream>

#include "client/bench.h"
#include "client/cli.h"
#include "client/files.h"
#include "client/tensor_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/cli_fixture.h"

namespace kiln::client {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Pair;

const std::string kArtifact = std::string(KILN_TEST_ARTIFACT_DIR) + "/good.so";

std::string ErrorOf(const absl::Status& status) {
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

TEST(BenchStatsTest, MedianAndP90OfKnownSamples) {
  LatencyStats odd = SummarizeLatencies({5, 1, 4, 2, 3});
  EXPECT_EQ(odd.count, 5);
  EXPECT_THAT(odd.median_ms, DoubleEq(3));
  EXPECT_THAT(odd.p90_ms, DoubleEq(5));  // rank ceil(4.5) = 5
  EXPECT_THAT(odd.min_ms, DoubleEq(1));
  EXPECT_THAT(odd.max_ms, DoubleEq(5));
  EXPECT_THAT(odd.mean_ms, DoubleEq(3));

  LatencyStats even = SummarizeLatencies({10, 2, 8, 4, 6, 1, 3, 5, 7, 9});
  EXPECT_THAT(even.median_ms, DoubleEq(5.5));
  EXPECT_THAT(even.p90_ms, DoubleEq(9));  // rank 9 of 10, not the maximum

  std::vector<double> twenty;
  for (int i = 20; i >= 1; --i) twenty.push_back(i);
  LatencyStats stats = SummarizeLatencies(twenty);
  EXPECT_THAT(stats.median_ms, DoubleEq(10.5));
  EXPECT_THAT(stats.p90_ms, DoubleEq(18));
  EXPECT_THAT(stats.mean_ms, DoubleEq(10.5));

  LatencyStats one = SummarizeLatencies({0.25});
  EXPECT_THAT(one.median_ms, DoubleEq(0.25));
  EXPECT_THAT(one.p90_ms, DoubleEq(0.25));
  EXPECT_EQ(SummarizeLatencies({}).count, 0);
}

TEST(BenchFlagsTest, ParsesEveryFlag) {
  absl::StatusOr<BenchArgs> args =
      ParseBenchArgs({"out/x86_64", "--input", "x=a.npy", "--shape=bias=4", "--shape", "m=2,0,7",
                      "--threads", "2", "--repeat=50", "--warmup", "0"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->artifact_dir, "out/x86_64");
  EXPECT_THAT(args->inputs, ElementsAre(Pair("x", "a.npy")));
  EXPECT_THAT(args->shapes,
              ElementsAre(Pair("bias", ElementsAre(4)), Pair("m", ElementsAre(2, 0, 7))));
  EXPECT_EQ(args->threads, 2);
  EXPECT_EQ(args->repeat, 50);
  EXPECT_EQ(args->warmup, 0);

  absl::StatusOr<BenchArgs> defaults = ParseBenchArgs({"a"});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->threads, -1);
  EXPECT_EQ(defaults->repeat, 20);
  EXPECT_EQ(defaults->warmup, 2);
}

TEST(BenchFlagsTest, RejectsBadValues) {
  EXPECT_EQ(ErrorOf(ParseBenchArgs({}).status()),
            "expected one artifact folder, got 0 positional arguments");
  EXPECT_EQ(ErrorOf(ParseBenchArgs({"a", "--shape", "x=2,n"}).status()),
            "--shape x=2,n: dimension 'n' is not a non-negative integer");
  EXPECT_EQ(ErrorOf(ParseBenchArgs({"a", "--shape", "x=2,-1"}).status()),
            "--shape x=2,-1: dimension '-1' is not a non-negative integer");
  EXPECT_EQ(ErrorOf(ParseBenchArgs({"a", "--shape", "x"}).status()),
            "--shape expects NAME=VALUE, got 'x'");
  EXPECT_EQ(ErrorOf(ParseBenchArgs({"a", "--threads", "-1"}).status()),
            "--threads expects a non-negative integer, got '-1'");
  EXPECT_EQ(ErrorOf(ParseBenchArgs({"a", "--repeat", "0"}).status()),
            "--repeat expects a positive integer, got '0'");
  EXPECT_EQ(ErrorOf(ParseBenchArgs({"a", "--warmup", "x"}).status()),
            "--warmup expects a non-negative integer, got 'x'");
  EXPECT_EQ(ErrorOf(ParseBenchArgs({"a", "--repeat", "3", "--repeat", "4"}).status()),
            "--repeat given twice");
  EXPECT_EQ(ErrorOf(ParseBenchArgs({"a", "--out", "o"}).status()), "unknown flag '--out'");
}

TEST(BenchFlagsTest, UsageNamesBench) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"bench"}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("kiln bench: expected one artifact folder"));
  EXPECT_THAT(err.str(), HasSubstr("kiln bench ARTIFACT_DIR [--input NAME=FILE | --shape"));
}

const runtime::TensorInfo kX{"x", DLDataType{kDLFloat, 32, 1}, {"n", "3"}};
const runtime::TensorInfo kBias{"bias", DLDataType{kDLFloat, 32, 1}, {"n"}};
const runtime::TensorInfo kIds{"ids", DLDataType{kDLInt, 64, 1}, {"n", "seq+1"}};

BenchArgs WithShapes(std::vector<std::pair<std::string, std::vector<int64_t>>> shapes) {
  BenchArgs args;
  args.shapes = std::move(shapes);
  return args;
}

TEST(BenchInputsTest, SymbolsFromOneShapeDecideTheOthers) {
  absl::StatusOr<NamedTensors> inputs = MakeBenchInputs(WithShapes({{"x", {4, 3}}}), {kX, kBias});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  ASSERT_EQ(inputs->size(), 2u);
  EXPECT_EQ((*inputs)[0].first, "x");
  EXPECT_THAT((*inputs)[0].second.shape, ElementsAre(4, 3));
  EXPECT_THAT((*inputs)[1].second.shape, ElementsAre(4));
  const float* x = reinterpret_cast<const float*>((*inputs)[0].second.data.data());
  bool all_zero = true;
  for (int i = 0; i < 12; ++i) {
    EXPECT_GE(x[i], -1.0f);
    EXPECT_LT(x[i], 1.0f);
    all_zero = all_zero && x[i] == 0;
  }
  EXPECT_FALSE(all_zero);
}

TEST(BenchInputsTest, RandomDataIsDeterministicAndInRange) {
  BenchArgs args = WithShapes({{"ids", {3, 5}}});
  absl::StatusOr<NamedTensors> first = MakeBenchInputs(args, {kIds});
  absl::StatusOr<NamedTensors> second = MakeBenchInputs(args, {kIds});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ((*first)[0].second.data, (*second)[0].second.data);
  const int64_t* ids = reinterpret_cast<const int64_t*>((*first)[0].second.data.data());
  for (int i = 0; i < 15; ++i) {
    EXPECT_GE(ids[i], 0);
    EXPECT_LT(ids[i], 32);
  }
}

TEST(BenchInputsTest, UndecidedDimsAreErrorsNamingInputAndDim) {
  EXPECT_EQ(ErrorOf(MakeBenchInputs({}, {kX, kBias}).status()),
            "dimension 0 (n) of input 'x' (f32[n, 3]) is not known: give --shape x=D0,... or "
            "--input x=FILE");
  // An expression dim is never derived from the symbols.
  EXPECT_EQ(ErrorOf(MakeBenchInputs(WithShapes({{"x", {2, 3}}}), {kX, kIds}).status()),
            "dimension 1 (seq+1) of input 'ids' (i64[n, seq+1]) is not known: give --shape "
            "ids=D0,... or --input ids=FILE");
}

TEST(BenchInputsTest, ShapesThatContradictTheSignatureAreErrors) {
  EXPECT_EQ(ErrorOf(MakeBenchInputs(WithShapes({{"x", {2, 4}}}), {kX, kBias}).status()),
            "--shape x=2,4: dimension 1 of input 'x' is fixed at 3 (f32[n, 3]), got 4");
  EXPECT_EQ(ErrorOf(MakeBenchInputs(WithShapes({{"x", {2}}}), {kX, kBias}).status()),
            "--shape x=2: input 'x' has 2 dimensions (f32[n, 3]), got 1");
  EXPECT_EQ(
      ErrorOf(MakeBenchInputs(WithShapes({{"x", {2, 3}}, {"bias", {5}}}), {kX, kBias}).status()),
      "--shape bias=5: dimension 0 of input 'bias' (n) is 5, but input 'x' makes n = 2");
  EXPECT_EQ(ErrorOf(MakeBenchInputs(WithShapes({{"y", {2}}}), {kX, kBias}).status()),
            "unknown input 'y'; the model's inputs are: x f32[n, 3], bias f32[n]");
}

using BenchRunTest = testing::CliTest;

TEST_F(BenchRunTest, FilesAndShapesTogether) {
  absl::StatusOr<Tensor> bias = MakeTensor(DLDataType{kDLFloat, 32, 1}, {5});
  ASSERT_TRUE(bias.ok());
  ASSERT_TRUE(WriteNpyFile(Path("bias.npy"), *bias).ok());
  BenchArgs args;
  args.inputs = {{"bias", Path("bias.npy")}};
  absl::StatusOr<NamedTensors> inputs = MakeBenchInputs(args, {kX, kBias});
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  EXPECT_THAT((*inputs)[0].second.shape, ElementsAre(5, 3));
  args.shapes = {{"bias", {5}}};
  EXPECT_EQ(ErrorOf(MakeBenchInputs(args, {kX, kBias}).status()),
            "input 'bias' given twice (--input and --shape)");
  args.shapes = {{"x", {4, 3}}};
  EXPECT_EQ(ErrorOf(MakeBenchInputs(args, {kX, kBias}).status()),
            "--shape x=4,3: dimension 0 of input 'x' (n) is 4, but input 'bias' makes n = 5");
}

TEST_F(BenchRunTest, PrintsLatencyMemoryAndOneJsonLine) {
  ASSERT_EQ(Kiln({"bench", kArtifact, "--shape", "x=4,3", "--repeat", "7", "--warmup", "1",
                  "--threads", "1"}),
            0)
      << err_.str();
  std::string text = out_.str();
  EXPECT_THAT(text, HasSubstr("inputs: x f32[4, 3] random, bias f32[4] random\n"));
  EXPECT_THAT(text, HasSubstr("threads: 1  warmup: 1  repeat: 7\n"));
  EXPECT_THAT(text, HasSubstr("latency (ms): min "));
  EXPECT_THAT(text, HasSubstr("memory: peak RSS "));
  std::string json = text.substr(text.find("kiln-bench {"));
  EXPECT_THAT(json, MatchesRegex("kiln-bench \\{\"artifact\": \".*good.so\", \"threads\": 1, "
                                 "\"warmup\": 1, \"repeat\": 7, \"min_ms\": [0-9.]+, "
                                 "\"median_ms\": [0-9.]+, \"p90_ms\": [0-9.]+, \"mean_ms\": "
                                 "[0-9.]+, \"max_ms\": [0-9.]+, \"peak_rss_bytes\": [1-9][0-9]+, "
                                 "\"rss_before_runs_bytes\": [1-9][0-9]+, \"latencies_ms\": "
                                 "\\[[0-9.]+(, [0-9.]+){6}\\]\\}\n"));
}

TEST_F(BenchRunTest, RunErrorsReachTheUser) {
  // n = 14 makes the test artifact fail without a report.
  EXPECT_EQ(Kiln({"bench", kArtifact, "--shape", "x=14,3"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("error: INVALID_ARGUMENT: "));
  EXPECT_EQ(Kiln({"bench", kArtifact}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("dimension 0 (n) of input 'x' (f32[n, 3]) is not known"));
  EXPECT_EQ(Kiln({"bench", Path("nowhere")}), 1);
  EXPECT_EQ(err_.str(), "error: NOT_FOUND: no artifact folder '" + Path("nowhere") + "'\n");
}

TEST_F(BenchRunTest, ReportsTheManifestsWorkspace) {
  std::filesystem::create_directories(Path("artifact"));
  std::filesystem::copy_file(kArtifact, Path("artifact/model.so"));
  ASSERT_TRUE(WriteFile(Path("artifact/manifest.json"),
                        "{\"target\": \"x86_64\", \"inputs\": [{\"name\": \"x,\"}],\n"
                        " \"workspace_bytes\": 4096, \"workspace\": {\"size\": \"64*n\"}}\n")
                  .ok());
  ASSERT_EQ(Kiln({"bench", Path("artifact"), "--shape", "x=2,3", "--repeat", "1"}), 0)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("workspace (manifest): \"workspace_bytes\": 4096, "
                                    "\"workspace\": {\"size\": \"64*n\"}\n"));
  EXPECT_THAT(out_.str(), HasSubstr(", \"workspace\": {\"workspace_bytes\": 4096, "
                                    "\"workspace\": {\"size\": \"64*n\"}}, \"latencies_ms\": ["));
}

TEST(BenchManifestTest, OnlyTopLevelWorkspaceKeys) {
  EXPECT_EQ(ManifestWorkspaceFields("{\"a\": {\"workspace\": 1}, \"b\": \"workspace\"}"), "");
  EXPECT_EQ(ManifestWorkspaceFields("not json"), "");
  EXPECT_EQ(ManifestWorkspaceFields("{\"workspace_bytes\": 12}"), "\"workspace_bytes\": 12");
}

// A model that `kiln compile` turned into a real artifact: y = x + y of ONNX's test_add.
TEST_F(BenchRunTest, BenchesACompiledModel) {
  const std::string model = "/usr/share/libonnx-testdata/data/node/test_add/model.onnx";
  ASSERT_EQ(Kiln({"compile", model, "-t", "x86_64", "--out", Path("out")}), 0) << err_.str();
  ASSERT_EQ(Kiln({"bench", Path("out/x86_64"), "--repeat", "5", "--threads", "2"}), 0)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("inputs: x f32[3, 4, 5] random, y f32[3, 4, 5] random\n"));
  EXPECT_THAT(out_.str(), HasSubstr("\"threads\": 2, \"warmup\": 2, \"repeat\": 5, \"min_ms\": "));
}

}  // namespace
}  // namespace kiln::client
