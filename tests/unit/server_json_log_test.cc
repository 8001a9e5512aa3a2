// kilnd's log lines: JSON objects that any parser reads, whatever the message holds, and the
// job and tenant context that ScopedLogContext sets, nested and restored.
#include <grpc/grpc.h>
#include <grpc/support/log.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/json_log.h"
#include "spdlog/logger.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

using ::testing::ContainsRegex;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// A logger that writes into `out` through `formatter`.
std::shared_ptr<spdlog::logger> CaptureLogger(std::ostringstream& out,
                                              std::unique_ptr<spdlog::formatter> formatter) {
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>("capture", sink);
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::trace);
  return logger;
}

// Every line of `text` parsed as JSON; a line that does not parse fails the test.
std::vector<nlohmann::json> ParseLines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << line;
    lines.push_back(parsed);
  }
  return lines;
}

TEST(JsonLogTest, OneObjectPerLineWithTimeLevelAndMessage) {
  std::ostringstream out;
  auto logger = CaptureLogger(out, MakeJsonLogFormatter());
  logger->info("compiled {} for {}", "model", "x86_64");
  logger->warn("slow");
  logger->error("failed");

  std::vector<nlohmann::json> lines = ParseLines(out.str());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["level"], "info");
  EXPECT_EQ(lines[0]["msg"], "compiled model for x86_64");
  EXPECT_THAT(lines[0]["time"].get<std::string>(),
              MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"));
  EXPECT_EQ(lines[1]["level"], "warning");
  EXPECT_EQ(lines[2]["level"], "error");
  // No context: no job or tenant keys at all.
  EXPECT_FALSE(lines[0].contains("job"));
  EXPECT_FALSE(lines[0].contains("tenant"));
  EXPECT_EQ(lines[0].size(), 3u);
}

TEST(JsonLogTest, EscapesAnyMessage) {
  std::ostringstream out;
  auto logger = CaptureLogger(out, MakeJsonLogFormatter());
  const std::string tricky = "say \"hi\"\\ there\nnext line\ttab\x01\x1f\x7f end";
  logger->info("{}", tricky);
  logger->info("{}", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5");            // valid UTF-8 stays
  logger->info("{}", "bad \xff\xfe lead, \xc3 cut, \xed\xa0\x80 surrogate");  // invalid
  const std::string text = out.str();
  // One physical line per message: newlines inside are escaped.
  std::vector<nlohmann::json> lines = ParseLines(text);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["msg"], tricky);
  EXPECT_THAT(text, HasSubstr("\\u0001\\u001f\\u007f"));
  EXPECT_EQ(lines[1]["msg"], "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5");
  // Each byte outside valid UTF-8 becomes U+FFFD.
  EXPECT_EQ(lines[2]["msg"],
            "bad \xef\xbf\xbd\xef\xbf\xbd lead, \xef\xbf\xbd cut, "
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd surrogate");
}

TEST(JsonLogTest, JsonQuoteEscapesControlCharacters) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n\r\t\b"), "\"a\\\"b\\\\c\\n\\r\\t\\u0008\"");
  EXPECT_EQ(JsonQuote(std::string("nul\0!", 5)), "\"nul\\u0000!\"");
  EXPECT_EQ(JsonQuote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");                        // overlong '/'
  EXPECT_EQ(JsonQuote("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // > U+10FFFF
}

TEST(JsonLogTest, ContextAddsJobAndTenantNestsAndIsRestored) {
  std::ostringstream out;
  auto logger = CaptureLogger(out, MakeJsonLogFormatter());
  logger->info("before");
  {
    ScopedLogContext rpc("", "acme");
    logger->info("rpc");
    {
      ScopedLogContext job("job-42", "acme \"corp\"");
      logger->info("job");
    }
    logger->info("rpc again");
  }
  logger->info("after");

  std::vector<nlohmann::json> lines = ParseLines(out.str());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_FALSE(lines[0].contains("tenant"));
  EXPECT_FALSE(lines[1].contains("job"));
  EXPECT_EQ(lines[1]["tenant"], "acme");
  EXPECT_EQ(lines[2]["job"], "job-42");
  EXPECT_EQ(lines[2]["tenant"], "acme \"corp\"");
  EXPECT_FALSE(lines[3].contains("job"));
  EXPECT_EQ(lines[3]["tenant"], "acme");
  EXPECT_FALSE(lines[4].contains("job"));
  EXPECT_FALSE(lines[4].contains("tenant"));
  EXPECT_EQ(CurrentLogContext().job, "");
}

TEST(JsonLogTest, ContextBelongsToItsThread) {
  std::ostringstream out;
  auto logger = CaptureLogger(out, MakeJsonLogFormatter());
  ScopedLogContext main_context("job-main", "t1");
  std::thread([&] {
    logger->info("other thread, no context");
    ScopedLogContext worker("job-worker", "t2");
    logger->info("worker");
  }).join();
  logger->info("main");
  std::vector<nlohmann::json> lines = ParseLines(out.str());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_FALSE(lines[0].contains("job"));
  EXPECT_EQ(lines[1]["job"], "job-worker");
  EXPECT_EQ(lines[2]["job"], "job-main");
  EXPECT_EQ(lines[2]["tenant"], "t1");
}

TEST(TextLogTest, PrefixesTheContext) {
  std::ostringstream out;
  auto logger = CaptureLogger(out, MakeTextLogFormatter());
  logger->info("plain");
  {
    ScopedLogContext job("job-7", "acme");
    logger->warn("with both");
  }
  {
    ScopedLogContext tenant_only("", "acme");
    logger->info("tenant only");
  }
  std::istringstream in(out.str());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], MatchesRegex("\\[[0-9-]+ [0-9:.]+\\] \\[info\\] plain"));
  EXPECT_THAT(lines[1], EndsWith("[warning] [job=job-7 tenant=acme] with both"));
  EXPECT_THAT(lines[2], EndsWith("[info] [tenant=acme] tenant only"));
}

TEST(JsonLogTest, UseJsonLogsSwitchesRegisteredLoggers) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>("json_log_test_registered", sink);
  spdlog::register_logger(logger);
  UseJsonLogs();
  logger->info("now json");
  UseTextLogs();
  logger->info("now text");
  spdlog::drop("json_log_test_registered");
  std::istringstream in(out.str());
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_EQ(nlohmann::json::parse(first)["msg"], "now json");
  EXPECT_THAT(second, ContainsRegex("\\] now text$"));
}

TEST(JsonLogTest, GrpcLogsGoThroughSpdlog) {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  spdlog::set_default_logger(CaptureLogger(out, MakeJsonLogFormatter()));
  RouteGrpcLogsToSpdlog();
  grpc_init();  // gRPC logs nothing before
  gpr_log(GPR_ERROR, "core says %d", 42);
  grpc_shutdown();
  spdlog::set_default_logger(previous);
  std::vector<nlohmann::json> lines = ParseLines(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["level"], "error");
  EXPECT_THAT(lines[0]["msg"].get<std::string>(), ::testing::StartsWith("grpc: core says 42 ("));
}

}  // namespace
}  // namespace kiln::server
