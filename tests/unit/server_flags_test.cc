// kilnd's flags: defaults, both spellings, and errors that name the flag.
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
