// `kiln tuning`: export, import and stats of a local cache's tuning database, through RunCli.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "client/cli.h"
#include "client/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client {
namespace {

using ::testing::HasSubstr;

// Two records as `kiln tuning export` writes them (sorted by workload).
constexpr char kRecords[] =
    R"j({"workload":"w:01","target":"triple=x86_64-unknown-linux-gnu;cpu=x86-64",)j"
    R"j("space_version":1,"bucket":"n=64","compiler_version":"kiln-0.2.0","device":"cpu",)j"
    R"j("median_ns":120.5,"times_ns":[120.5,130.0],"created_unix":1700000000,)j"
    R"j("trace_json":{"tile":[8,4]}})j"
    "\n"
    R"j({"workload":"w:02","target":"triple=x86_64-unknown-linux-gnu;cpu=x86-64",)j"
    R"j("space_version":1,"bucket":"","compiler_version":"kiln-0.1.0","device":"cpu",)j"
    R"j("median_ns":99.0,"times_ns":[],"created_unix":1700000001,"trace_json":[]})j"
    "\n";

class TuningCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_tuning_cli_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    cache_ = (dir_ / "cache").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteInput(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // Runs `kiln tuning <words> --cache <cache_>`; out_ and err_ hold what it printed.
  int Tuning(std::vector<std::string> words) {
    out_.str("");
    err_.str("");
    words.insert(words.begin(), "tuning");
    words.insert(words.end(), {"--cache", cache_});
    return RunCli(words, out_, err_);
  }

  std::filesystem::path dir_;
  std::string cache_;
  std::ostringstream out_, err_;
};

TEST_F(TuningCliTest, ExportOfAMissingDatabaseIsAnError) {
  EXPECT_EQ(Tuning({"export"}), 1);
  EXPECT_EQ(err_.str(),
            "error: NOT_FOUND: no cache database at " + cache_ + "/kiln.db (see --cache DIR)\n");
  EXPECT_FALSE(std::filesystem::exists(cache_));
}

TEST_F(TuningCliTest, ExportOfAnEmptyDatabaseIsEmpty) {
  ASSERT_EQ(Tuning({"import", WriteInput("empty.jsonl", "\n")}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "imported 0 tuning records\n");
  ASSERT_EQ(Tuning({"export"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "");
  ASSERT_EQ(Tuning({"stats"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "records\t0\nworkloads\t0\n");
}

TEST_F(TuningCliTest, ImportThenExport) {
  const std::string file = WriteInput("records.jsonl", kRecords);
  ASSERT_EQ(Tuning({"import", file}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "imported 2 tuning records\n");
  EXPECT_EQ(err_.str(), "");
  ASSERT_EQ(Tuning({"export"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), kRecords);
  ASSERT_EQ(Tuning({"import", file}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "imported 0 tuning records\n");
  ASSERT_EQ(Tuning({"stats"}), 0) << err_.str();
  EXPECT_EQ(out_.str(),
            "records\t2\nworkloads\t2\ncompiler_version\tkiln-0.1.0\t1\n"
            "compiler_version\tkiln-0.2.0\t1\t(this kiln)\n");
}

TEST_F(TuningCliTest, BadImportFileNamesTheLineAndImportsNothing) {
  const std::string file =
      WriteInput("bad.jsonl", std::string(kRecords) + "\n{\"workload\":\"w:03\"}\n");
  EXPECT_EQ(Tuning({"import", file}), 1);
  EXPECT_EQ(err_.str(), "error: INVALID_ARGUMENT: " + file + ": line 4: target: missing\n");
  EXPECT_EQ(out_.str(), "");
  ASSERT_EQ(Tuning({"export"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "");
}

TEST_F(TuningCliTest, MissingImportFileCreatesNoDatabase) {
  EXPECT_EQ(Tuning({"import", (dir_ / "nosuch.jsonl").string()}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("error: NOT_FOUND: cannot open '"));
  EXPECT_FALSE(std::filesystem::exists(cache_));
}

// `kiln inspect --cache` schedules each kernel as compile does: from its record when the
// database has one, and says how many did.
TEST_F(TuningCliTest, InspectSchedulesKernelsFromTheRecords) {
  const std::string model = "/usr/share/libonnx-testdata/data/node/test_matmul_2d/model.onnx";
  auto inspect = [&](const std::string& after) {
    out_.str("");
    err_.str("");
    return RunCli({"inspect", model, "--after", after, "--target", "x86_64", "--cache", cache_},
                  out_, err_);
  };
  EXPECT_EQ(inspect("schedule"), 1);
  EXPECT_EQ(err_.str(),
            "error: NOT_FOUND: no cache database at " + cache_ + "/kiln.db (see --cache DIR)\n");
  EXPECT_FALSE(std::filesystem::exists(cache_));

  ASSERT_EQ(Tuning({"import", WriteInput("empty.jsonl", "")}), 0) << err_.str();
  ASSERT_EQ(inspect("schedule"), 0) << err_.str();
  EXPECT_EQ(err_.str(), "0 of 1 tunable kernels from tuning records\n");
  const std::string untuned = out_.str();
  EXPECT_THAT(untuned, HasSubstr("prim_func @matmul_0("));

  std::ostringstream out, err;
  ASSERT_EQ(
      RunCli({"tune", model, "--target", "x86_64", "--trials-per-kernel", "2", "--cache", cache_},
             out, err),
      0)
      << err.str();
  ASSERT_EQ(inspect("schedule"), 0) << err_.str();
  EXPECT_EQ(err_.str(), "1 of 1 tunable kernels from tuning records\n");
  EXPECT_THAT(out_.str(), HasSubstr("prim_func @matmul_0("));
  // Before the schedule pass the records play no part, and it says nothing of them.
  ASSERT_EQ(inspect("legalize"), 0) << err_.str();
  EXPECT_EQ(err_.str(), "");
}

TEST_F(TuningCliTest, UsageErrors) {
  EXPECT_EQ(Tuning({}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("kiln tuning: expected export, import FILE or stats\nusage:"));
  EXPECT_EQ(Tuning({"frob"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("kiln tuning: unknown action 'frob'"));
  EXPECT_EQ(Tuning({"import"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("kiln tuning: import expects one FILE"));
  EXPECT_EQ(Tuning({"export", "x"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("kiln tuning: unexpected argument 'x'"));
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"--help"}, out, err), 0);
  EXPECT_THAT(out.str(), HasSubstr("kiln tuning import FILE [--cache DIR]"));
}

// `kiln tune`'s totals count a kernel as tuned only when a trial of it ran: one whose default
// did not run, or whose every trial failed, has no record.
TEST(TuneSummaryTest, KernelsWithoutARunningTrialAreNotCountedAsTuned) {
  v1::TuneSummary summary;
  summary.set_kernels(4);
  summary.set_already_tuned(1);
  summary.set_trials(7);
  summary.set_failed_trials(5);
  auto add = [&](const std::string& kernel, int trials, int failed, double gflops) {
    v1::KernelTuneResult* r = summary.add_results();
    r->set_kernel(kernel);
    r->set_trials(trials);
    r->set_failed(failed);
    r->set_default_gflops(gflops);
    r->set_best_gflops(gflops);
    for (int i = 0; i < failed; ++i) r->add_failures("trace " + std::to_string(i) + ": crashed");
  };
  add("matmul_ok", 4, 2, 10.0);
  add("conv_every_trial_failed", 3, 3, 0);
  add("softmax_default_failed", 0, 0, 0);
  summary.mutable_results(2)->add_failures("the default schedule did not compile");
  std::ostringstream out, err;
  PrintTuneSummary(summary, {out, err});
  EXPECT_THAT(out.str(), HasSubstr("softmax_default_failed: not tuned: the default schedule "
                                   "did not compile\n"));
  EXPECT_THAT(out.str(), HasSubstr("conv_every_trial_failed: 3 failed trials:\n"));
  EXPECT_THAT(out.str(), HasSubstr("4 tunable kernels: 1 tuned now (7 trials, 5 failed), 2 could "
                                   "not be tuned, 1 had records (GFLOP/s)\n"));
}

}  // namespace
}  // namespace kiln::client
