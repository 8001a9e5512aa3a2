// kilnd's flags: defaults, both spellings, and errors that name the flag.
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/kilnd_flags.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;

TEST(KilndFlagsTest, DefaultsMatchTheDesign) {
  absl::StatusOr<KilndFlags> flags = ParseKilndFlags({});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->server.listen_address, "127.0.0.1:50051");
  EXPECT_EQ(flags->server.data_dir, "./var");
  EXPECT_EQ(flags->log_level, "info");
  EXPECT_FALSE(flags->help);
}

TEST(KilndFlagsTest, AcceptsBothSpellings) {
  absl::StatusOr<KilndFlags> flags =
      ParseKilndFlags({"--listen=0.0.0.0:9000", "--data-dir", "/srv/kiln", "--log-level=debug",
                       "--max-model-bytes", "1000", "--max-jobs=3", "--max-queued-jobs=7"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->server.listen_address, "0.0.0.0:9000");
  EXPECT_EQ(flags->server.data_dir, "/srv/kiln");
  EXPECT_EQ(flags->log_level, "debug");
  EXPECT_EQ(flags->server.service.max_model_bytes, 1000u);
  EXPECT_EQ(flags->server.service.max_running_jobs, 3);
  EXPECT_EQ(flags->server.service.max_queued_jobs, 7);
}

TEST(KilndFlagsTest, ConfigFileSetsFlagsAndTheCommandLineOverridesIt) {
  const std::string path = ::testing::TempDir() + "/kilnd_flags_test.conf";
  {
    std::ofstream file(path);
    file << "# kilnd settings\n\n"
         << "listen = 0.0.0.0:9000\n"
         << "  data-dir=/srv/kiln  \n"
         << "max-jobs = 3\n"
         << "drain-seconds = 12\n"
         << "tls-cert = /etc/kiln/tls.crt\n";
  }
  absl::StatusOr<KilndFlags> flags = ParseKilndFlags({"--max-jobs=5", "--config", path});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->server.listen_address, "0.0.0.0:9000");
  EXPECT_EQ(flags->server.data_dir, "/srv/kiln");
  EXPECT_EQ(flags->server.service.max_running_jobs, 5);  // the command line wins
  EXPECT_EQ(flags->server.drain, absl::Seconds(12));
  EXPECT_EQ(flags->server.tls.cert_file, "/etc/kiln/tls.crt");

  {
    std::ofstream file(path);
    file << "listen = 0.0.0.0:9000\nmax-jobs three\n";
  }
  EXPECT_THAT(ParseKilndFlags({"--config=" + path}).status().message(),
              HasSubstr(path + ":2: expected `name = value`"));
  {
    std::ofstream file(path);
    file << "max-jobs = three\n";
  }
  EXPECT_THAT(ParseKilndFlags({"--config=" + path}).status().message(), HasSubstr("--max-jobs"));
  EXPECT_THAT(ParseKilndFlags({"--config=/nonexistent/kilnd.conf"}).status().message(),
              HasSubstr("cannot read /nonexistent/kilnd.conf"));
}

// The manifests under deploy/ run kilnd with their config file; every name in it must parse.
TEST(KilndFlagsTest, TheDeployConfigParses) {
  absl::StatusOr<KilndFlags> flags =
      ParseKilndFlags({"--config=" + std::string(KILN_SOURCE_DIR) + "/deploy/base/kilnd.conf"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->server.listen_address, "0.0.0.0:50051");
}

TEST(KilndFlagsTest, HelpIsReported) {
  EXPECT_TRUE(ParseKilndFlags({"--help"})->help);
  EXPECT_THAT(KilndUsage(), HasSubstr("--data-dir"));
}

TEST(KilndFlagsTest, ErrorsNameTheFlag) {
  EXPECT_THAT(ParseKilndFlags({"--port=1"}).status().message(), HasSubstr("unknown flag --port"));
  EXPECT_THAT(ParseKilndFlags({"--data-dir"}).status().message(), HasSubstr("--data-dir needs"));
  EXPECT_THAT(ParseKilndFlags({"--max-jobs=two"}).status().message(), HasSubstr("--max-jobs"));
  EXPECT_THAT(ParseKilndFlags({"--max-jobs=0"}).status().message(), HasSubstr("at least 1"));
  EXPECT_TRUE(ParseKilndFlags({"--max-queued-jobs=0"}).ok());  // no queue: busy means refused
  EXPECT_THAT(ParseKilndFlags({"--log-level=loud"}).status().message(), HasSubstr("loud"));
  EXPECT_THAT(ParseKilndFlags({"stray"}).status().message(), HasSubstr("stray"));
}

}  // namespace
}  // namespace kiln::server
