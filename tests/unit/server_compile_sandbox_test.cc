// The compile sandbox with a real kilnd worker: it compiles what the compiler in process
// compiles, and a model that blows up memory, runs past its deadline, is cancelled or crashes
// the worker ends with a status while the caller goes on compiling.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "cache/digest.h"
#include "cache/tuning_db.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/compile_sandbox.h"
#include "tests/support/onnx_builder.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

SandboxOptions Sandbox(int64_t memory_bytes = 0) {
  return {.worker_path = KILN_KILND, .memory_bytes = memory_bytes};
}

ir::Target X86() { return *driver::ResolveTarget("x86_64"); }

// y = relu(x @ w), with a symbolic batch.
std::string SmallModel() {
  kiln::testing::OnnxBuilder b;
  b.Input("x", {"n", 4});
  b.FloatInitializer("w", {4, 4}, std::vector<float>(16, 0.5f));
  b.Node("MatMul", {"x", "w"}, {"h"});
  b.Node("Relu", {"h"}, {"y"});
  b.Output("y", {"n", 4});
  return b.Serialize();
}

// A constant of 2^31 floats (8 GiB) that the importer folds, i.e. materializes.
std::string ShapeBlowUpModel() {
  kiln::testing::OnnxBuilder b;
  b.Input("x", {1});
  b.Int64Initializer("shape", {1}, {int64_t{1} << 31});
  b.Node("ConstantOfShape", {"shape"}, {"big"});
  b.Node("Add", {"x", "big"}, {"y"});
  b.Output("y", {int64_t{1} << 31});
  return b.Serialize();
}

// `nodes` chained Relu nodes: tens of MB of ONNX that takes the compiler a long time.
std::string ManyNodesModel(int nodes) {
  kiln::testing::OnnxBuilder b;
  b.Input("v0", {"n"});
  for (int i = 0; i < nodes; ++i) {
    b.Node("Relu", {"v" + std::to_string(i)}, {"v" + std::to_string(i + 1)},
           "r" + std::to_string(i));
  }
  b.Output("v" + std::to_string(nodes), {"n"});
  return b.Serialize();
}

// The processes whose parent is this one (compile workers, here).
std::vector<pid_t> Children() {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = atoi(entry->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(text.substr(paren + 2));
    std::string state;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent == getpid()) children.push_back(pid);
  }
  closedir(proc);
  return children;
}

// The first child to appear within `timeout`, else -1.
pid_t AwaitChild(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (std::vector<pid_t> children = Children(); !children.empty()) return children[0];
    absl::SleepFor(absl::Milliseconds(10));
  }
  return -1;
}

struct Outcome {
  absl::StatusOr<driver::Artifact> artifact;
  std::vector<driver::CompileEvent> events;
  absl::Duration took;
};

Outcome CompileIn(const CompilerFn& compiler, const std::string& onnx,
                  driver::CompileOptions options = {}) {
  Outcome outcome;
  const absl::Time start = absl::Now();
  outcome.artifact = compiler(onnx, X86(), options, [&](const driver::CompileEvent& event) {
    outcome.events.push_back(event);
  });
  outcome.took = absl::Now() - start;
  return outcome;
}

std::vector<std::string> Names(const std::vector<driver::CompileEvent>& events) {
  std::vector<std::string> names;
  for (const driver::CompileEvent& event : events) {
    names.push_back(std::to_string(static_cast<int>(event.kind)) + " " + event.name);
  }
  return names;
}

TEST(CompileSandboxTest, CompilesTheSameArtifactAsTheCompilerInProcess) {
  const std::string db_path = ::testing::TempDir() + "/kiln_sandbox_test.db";
  std::filesystem::remove(db_path);
  absl::StatusOr<std::unique_ptr<cache::TuningDb>> db = cache::TuningDb::Open(db_path);
  ASSERT_TRUE(db.ok()) << db.status();
  driver::CompileOptions options;
  options.dim_bounds = {{"n", 64}};
  options.tuning_db = db->get();  // the worker opens the same file, as kilnd's workers do

  SandboxOptions sandbox = Sandbox(int64_t{4} << 30);
  sandbox.tuning_db_path = db_path;
  Outcome in_worker = CompileIn(SandboxedCompiler(sandbox), SmallModel(), options);
  Outcome in_process = CompileIn(driver::CompileModel, SmallModel(), options);
  ASSERT_TRUE(in_worker.artifact.ok()) << in_worker.artifact.status();
  ASSERT_TRUE(in_process.artifact.ok()) << in_process.artifact.status();
  EXPECT_EQ(in_worker.artifact->target, in_process.artifact->target);
  EXPECT_EQ(in_worker.artifact->file_name, in_process.artifact->file_name);
  // Byte for byte: equal cache keys promise equal artifacts, in any process.
  EXPECT_EQ(in_worker.artifact->bytes, in_process.artifact->bytes);
  EXPECT_EQ(in_worker.artifact->manifest_json, in_process.artifact->manifest_json);
  EXPECT_THAT(in_worker.artifact->manifest_json,
              HasSubstr(cache::Sha256Digest(in_worker.artifact->bytes)));
  EXPECT_FALSE(in_worker.events.empty());
  EXPECT_EQ(Names(in_worker.events), Names(in_process.events));
  EXPECT_THAT(Children(), IsEmpty());
}

TEST(CompileSandboxTest, AUserErrorComesBackAsIs) {
  Outcome outcome = CompileIn(SandboxedCompiler(Sandbox()), "not an onnx model");
  EXPECT_EQ(outcome.artifact.status().code(), absl::StatusCode::kInvalidArgument)
      << outcome.artifact.status();
}

TEST(CompileSandboxTest, AShapeBlowUpIsResourceExhaustedNamingTheLimit) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer builds run the worker without a memory limit";
#endif
  const int64_t limit = int64_t{256} << 20;
  const CompilerFn compiler = SandboxedCompiler(Sandbox(limit));
  Outcome outcome = CompileIn(compiler, ShapeBlowUpModel());
  EXPECT_EQ(outcome.artifact.status().code(), absl::StatusCode::kResourceExhausted)
      << outcome.artifact.status();
  EXPECT_THAT(outcome.artifact.status().message(), HasSubstr(std::to_string(limit)));
  EXPECT_THAT(outcome.artifact.status().message(), HasSubstr("memory"));
  EXPECT_THAT(Children(), IsEmpty());
  // The same sandbox goes on compiling.
  EXPECT_TRUE(CompileIn(compiler, SmallModel()).artifact.ok());
}

TEST(CompileSandboxTest, AMillionNodesStopAtTheDeadlineEvenInsideOnePass) {
  const std::string model = ManyNodesModel(1000000);
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  driver::CompileOptions options;
  options.interrupted = [deadline] {
    return absl::Now() < deadline ? absl::OkStatus()
                                  : absl::DeadlineExceededError("job ran past its deadline");
  };
  Outcome outcome = CompileIn(SandboxedCompiler(Sandbox(int64_t{8} << 30)), model, options);
  EXPECT_EQ(outcome.artifact.status().code(), absl::StatusCode::kDeadlineExceeded)
      << outcome.artifact.status();
  EXPECT_LT(absl::Now() - deadline, absl::Seconds(1));
  EXPECT_THAT(Children(), IsEmpty());
}

TEST(CompileSandboxTest, CancellingKillsTheWorkerPromptly) {
  std::atomic<bool> cancelled{false};
  driver::CompileOptions options;
  options.interrupted = [&cancelled] {
    return cancelled ? absl::CancelledError("the client went away") : absl::OkStatus();
  };
  absl::Time cancelled_at;
  std::thread canceller([&] {
    ASSERT_GT(AwaitChild(absl::Seconds(10)), 0);
    absl::SleepFor(absl::Milliseconds(300));
    cancelled_at = absl::Now();
    cancelled = true;
  });
  Outcome outcome = CompileIn(SandboxedCompiler(Sandbox()), ManyNodesModel(200000), options);
  const absl::Time returned = absl::Now();
  canceller.join();
  EXPECT_EQ(outcome.artifact.status().code(), absl::StatusCode::kCancelled)
      << outcome.artifact.status();
  EXPECT_LT(returned - cancelled_at, absl::Milliseconds(500));
  EXPECT_THAT(Children(), IsEmpty());
}

TEST(CompileSandboxTest, AWorkerCrashIsInternalAndTheNextCompileWorks) {
  const CompilerFn compiler = SandboxedCompiler(Sandbox());
  std::thread crasher([] {
    const pid_t worker = AwaitChild(absl::Seconds(10));
    ASSERT_GT(worker, 0);
    absl::SleepFor(absl::Milliseconds(200));
    kill(worker, SIGSEGV);
  });
  Outcome outcome = CompileIn(compiler, ManyNodesModel(200000));
  crasher.join();
  EXPECT_EQ(outcome.artifact.status().code(), absl::StatusCode::kInternal)
      << outcome.artifact.status();
  EXPECT_THAT(outcome.artifact.status().message(), HasSubstr("signal 11"));
  EXPECT_THAT(outcome.artifact.status().message(), HasSubstr("x86_64"));
  EXPECT_THAT(Children(), IsEmpty());
  Outcome next = CompileIn(compiler, SmallModel());
  EXPECT_TRUE(next.artifact.ok()) << next.artifact.status();
}

TEST(CompileSandboxTest, AMissingWorkerBinaryIsInternal) {
  SandboxOptions sandbox = Sandbox();
  sandbox.worker_path = "/nonexistent/kilnd";
  Outcome outcome = CompileIn(SandboxedCompiler(sandbox), SmallModel());
  EXPECT_EQ(outcome.artifact.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(outcome.artifact.status().message(), HasSubstr("/nonexistent/kilnd"));
}

}  // namespace
}  // namespace kiln::server
