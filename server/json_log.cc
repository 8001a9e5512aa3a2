#include "server/json_log.h"

#include <grpc/support/log.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <utility>

#include "spdlog/pattern_formatter.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

thread_local LogContext current_context;

// The length of the valid UTF-8 sequence at text[i], or 0 if the byte there does not start
// one (Unicode 15, table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

void AppendQuoted(std::string_view text, std::string& out) {
  out += '"';
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(text, i);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// "2026-12-01T12:00:00.123Z": UTC, milliseconds.
std::string FormatTime(spdlog::log_clock::time_point time) {
  const auto since_epoch = time.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
  const std::time_t t = seconds.count();
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[80];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return text;
}

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const LogContext& context = CurrentLogContext();
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    std::string line = "{\"time\":\"" + FormatTime(msg.time) + "\",\"level\":";
    AppendQuoted(std::string_view(level.data(), level.size()), line);
    line += ",\"msg\":";
    AppendQuoted(std::string_view(msg.payload.data(), msg.payload.size()), line);
    if (!context.job.empty()) {
      line += ",\"job\":";
      AppendQuoted(context.job, line);
    }
    if (!context.tenant.empty()) {
      line += ",\"tenant\":";
      AppendQuoted(context.tenant, line);
    }
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>();
  }
};

// The %* flag of the text pattern: "[job=J tenant=T] ", each part only when set.
class ContextFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const LogContext& context = CurrentLogContext();
    if (context.job.empty() && context.tenant.empty()) return;
    std::string prefix = "[";
    if (!context.job.empty()) prefix += "job=" + context.job;
    if (!context.job.empty() && !context.tenant.empty()) prefix += " ";
    if (!context.tenant.empty()) prefix += "tenant=" + context.tenant;
    prefix += "] ";
    dest.append(prefix.data(), prefix.data() + prefix.size());
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<ContextFlag>();
  }
};

}  // namespace

const LogContext& CurrentLogContext() { return current_context; }

ScopedLogContext::ScopedLogContext(std::string job, std::string tenant)
    : previous_(std::exchange(current_context, LogContext{std::move(job), std::move(tenant)})) {}

ScopedLogContext::~ScopedLogContext() { current_context = std::move(previous_); }

std::string JsonQuote(std::string_view text) {
  std::string out;
  AppendQuoted(text, out);
  return out;
}

std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter() {
  return std::make_unique<JsonLogFormatter>();
}

std::unique_ptr<spdlog::formatter> MakeTextLogFormatter() {
  // spdlog's default look ("%+"), with the context before the message.
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<ContextFlag>('*').set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %*%v");
  return formatter;
}

void UseJsonLogs() { spdlog::set_formatter(MakeJsonLogFormatter()); }

void UseTextLogs() { spdlog::set_formatter(MakeTextLogFormatter()); }

void RouteGrpcLogsToSpdlog() {
  gpr_set_log_function([](gpr_log_func_args* args) {
    const spdlog::level::level_enum level =
        args->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::err
        : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                  : spdlog::level::debug;
    spdlog::log(level, "grpc: {} ({}:{})", args->message, args->file, args->line);
  });
}

}  // namespace kiln::server
