// kilnd's log lines carry the job and tenant they are about. The context is thread-local: a
// ScopedLogContext sets it for the lines its thread logs until it goes out of scope. With
// UseJsonLogs, every line is one JSON object:
//   {"time":"2026-12-01T12:00:00.123Z","level":"info","msg":"...","job":"job-1","tenant":"acme"}
// ("job" and "tenant" only when set); with UseTextLogs, text lines with a prefix
// "[job=job-1 tenant=acme] " before the message.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "spdlog/formatter.h"

namespace kiln::server {

struct LogContext {
  std::string job;
  std::string tenant;
};

// The calling thread's context; empty fields when none is set.
const LogContext& CurrentLogContext();

// Sets the calling thread's context (both fields, empty ones included) for its lifetime and
// restores the enclosing one after, so contexts nest. Threads do not inherit it: a worker
// sets its own.
class ScopedLogContext {
 public:
  ScopedLogContext(std::string job, std::string tenant);
  ~ScopedLogContext();
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;

 private:
  LogContext previous_;
};

// Formatters for any spdlog logger or sink; the context is read on the thread that formats,
// so use them with synchronous loggers (spdlog's default).
std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter();
std::unique_ptr<spdlog::formatter> MakeTextLogFormatter();

// Switch every registered spdlog logger (the default one included) to JSON lines, or to text
// lines with the context prefix.
void UseJsonLogs();
void UseTextLogs();

// Sends gRPC's own log lines (gpr_log, e.g. "At least one of the completion queues must be
// frequently polled") through spdlog's default logger, so they take the same format.
void RouteGrpcLogsToSpdlog();

// `text` as a JSON string literal, quotes included: control characters as \n, \t or \u00XX,
// and every byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string JsonQuote(std::string_view text);

}  // namespace kiln::server
