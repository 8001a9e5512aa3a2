// The kiln CLI's service commands against an in-process kilnd: `kiln jobs`, `kiln cache`,
// and reaching a kilnd that wants a token (KILN_TOKEN) over mutual TLS (KILN_TLS_*).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "client/cli.h"
#include "tests/support/service_fixture.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CliTest : public FakeCompilerTest {
 protected:
  int Kiln(std::vector<std::string> words) {
    out_.str("");
    err_.str("");
    return client::RunCli(words, out_, err_);
  }
  std::string Address() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  std::ostringstream out_, err_;
};

TEST_F(CliTest, JobsListGetWatchAndCancel) {
  const std::string digest = UploadModel(Bytes(100));
  ASSERT_TRUE(Compile(digest, {"x86_64"}).status.ok());
  ASSERT_EQ(Kiln({"jobs", "--server", Address()}), 0) << err_.str();
  const std::string line = out_.str();
  EXPECT_THAT(line, HasSubstr("\tcompile\tsucceeded\tx86_64\t" + digest));
  const std::string id = line.substr(0, line.find('\t'));

  ASSERT_EQ(Kiln({"jobs", "watch", id, "--server", Address()}), 0) << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("[x86_64] cache miss"));
  EXPECT_THAT(err_.str(), HasSubstr("[x86_64] done: model.so"));
  ASSERT_EQ(Kiln({"jobs", "watch", id, "--from", "2", "--server", Address()}), 0);
  EXPECT_THAT(err_.str(), Not(HasSubstr("cache miss")));  // event 0: before the resume point

  ASSERT_EQ(Kiln({"jobs", "get", id, "--server", Address()}), 0);
  EXPECT_THAT(out_.str(), HasSubstr(id + "\tcompile\tsucceeded"));
  EXPECT_EQ(Kiln({"jobs", "get", "job-nope", "--server", Address()}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("NOT_FOUND"));
  EXPECT_EQ(Kiln({"jobs", "watch", "--server", Address()}), 2);  // no ID
  EXPECT_EQ(Kiln({"jobs", "list"}), 2);                          // no server
}

TEST_F(CliTest, WatchOfACancelledJobFails) {
  const std::string digest = UploadModel(Bytes(100));
  absl::Notification compiling, release;
  fake_.during = [&] {
    if (!compiling.HasBeenNotified()) compiling.Notify();
    release.WaitForNotification();
  };
  v1::SubmitCompileRequest submit;
  submit.mutable_compile()->set_model_digest(digest);
  submit.mutable_compile()->add_targets("x86_64");
  v1::Job job;
  grpc::ClientContext context;
  SetDeadline(context);
  ASSERT_TRUE(stub_->SubmitCompile(&context, submit, &job).ok());
  compiling.WaitForNotification();
  ASSERT_EQ(Kiln({"jobs", "cancel", job.id(), "--server", Address()}), 0) << err_.str();
  release.Notify();
  EXPECT_EQ(Kiln({"jobs", "watch", job.id(), "--server", Address()}), 1);
  EXPECT_THAT(out_.str(), HasSubstr("\tcancelled\t"));
  EXPECT_THAT(err_.str(), HasSubstr("CANCELLED"));
}

TEST_F(CliTest, CacheStatsAndEvictThroughKilndAndLocally) {
  const std::string digest = UploadModel(Bytes(100));
  ASSERT_TRUE(Compile(digest, {"x86_64"}).status.ok());
  ASSERT_EQ(Kiln({"cache", "stats", "--server", Address()}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("artifacts\t1\n"));
  EXPECT_THAT(out_.str(), HasSubstr("models\t1\n"));
  EXPECT_THAT(out_.str(), HasSubstr("misses\t1\n"));
  ASSERT_EQ(Kiln({"cache", "evict", "--all", "--server", Address()}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("evicted 1 artifacts"));
  // The same database read directly, as on the daemon's machine.
  ASSERT_EQ(Kiln({"cache", "stats", "--cache", data_dir_.string()}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("artifacts\t0\n"));
  EXPECT_THAT(out_.str(), HasSubstr("evictions\t1\n"));
  EXPECT_EQ(Kiln({"cache", "evict", "--server", Address()}), 2);  // evict what?
  EXPECT_EQ(Kiln({"cache", "stats", "--cache", "/nonexistent"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("/nonexistent"));
}

// A kilnd whose tuner times every candidate a billion times, so each is killed at its
// timeout: a failed trial.
class RunawayTuningCliTest : public CliTest {
 protected:
  void SetUp() override {
    ServiceOptions options = Options();
    options.tune_measure.repeats = 1 << 30;
    options.tune_measure.timeout = std::chrono::milliseconds(100);
    Start(options);
  }
};

// `kiln tune --server` prints every failed trial with its trace and reason, not only the
// first.
TEST_F(RunawayTuningCliTest, TunePrintsEveryFailedTrial) {
  const std::string model =
      ::testing::TempDir() + "/kiln_runaway_" + std::to_string(getpid()) + ".onnx";
  std::ofstream(model, std::ios::binary) << MatmulModel();
  ASSERT_EQ(
      Kiln({"tune", model, "--server", Address(), "--trials-per-kernel", "2", "--dim", "n=64"}), 0)
      << err_.str();
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr(": 2 failed trials:\n")) << out;
  size_t lines = 0;
  for (size_t at = out.find("\n  {"); at != std::string::npos; at = out.find("\n  {", at + 1)) {
    const std::string line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
    EXPECT_THAT(line, HasSubstr("}: timed out after")) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 2u) << out;
  EXPECT_THAT(out, HasSubstr("(2 trials, 2 failed)")) << out;
  std::filesystem::remove(model);
}

// KILN_TOKEN and KILN_TLS_* reach a kilnd with tokens and mutual TLS.
class CliAuthTest : public CliTest {
 protected:
  void SetUp() override {
    const std::string dir = ::testing::TempDir() + "/kiln_cli_auth_" + std::to_string(getpid());
    ASSERT_EQ(
        std::system(("bash " KILN_SOURCE_DIR "/tests/support/make_test_certs.sh " + dir).c_str()),
        0);
    std::ofstream(dir + "/tokens") << "alpha-compile-token-0001 alpha compile\n";
    ServerOptions options;
    options.token_file = dir + "/tokens";
    options.tls = {.cert_file = dir + "/server.crt",
                   .key_file = dir + "/server.key",
                   .client_ca_file = dir + "/ca.crt"};
    options.service = Options();
    Start(options);
    pki_ = dir;
  }
  void TearDown() override {
    for (const char* name : {"KILN_TOKEN", "KILN_TLS_CA", "KILN_TLS_CERT", "KILN_TLS_KEY"}) {
      unsetenv(name);
    }
    CliTest::TearDown();
  }
  std::string pki_;
};

TEST_F(CliAuthTest, TokenAndClientCertificateFromTheEnvironment) {
  EXPECT_EQ(Kiln({"targets", "--server", Address()}), 1);  // plain text to a TLS port
  setenv("KILN_TLS_CA", (pki_ + "/ca.crt").c_str(), 1);
  setenv("KILN_TLS_CERT", (pki_ + "/client.crt").c_str(), 1);
  setenv("KILN_TLS_KEY", (pki_ + "/client.key").c_str(), 1);
  EXPECT_EQ(Kiln({"targets", "--server", Address()}), 1);  // TLS, but no token
  EXPECT_THAT(err_.str(), HasSubstr("UNAUTHENTICATED"));
  setenv("KILN_TOKEN", "alpha-compile-token-0001", 1);
  EXPECT_EQ(Kiln({"targets", "--server", Address()}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("x86_64"));
  EXPECT_EQ(Kiln({"cache", "evict", "--all", "--server", Address()}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("PERMISSION_DENIED"));
  setenv("KILN_TLS_KEY", "/nonexistent/client.key", 1);
  EXPECT_EQ(Kiln({"targets", "--server", Address()}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("KILN_TLS_KEY: cannot read /nonexistent/client.key"));
}

}  // namespace
}  // namespace kiln::server
