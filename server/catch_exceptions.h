// No C++ exception may escape an RPC handler or a compiler call: it would take the daemon down.
// Used at every RPC boundary and around each compiler run, so one bad target fails alone.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"

namespace kiln::server {

// Runs `body` (returning absl::Status or absl::StatusOr<T>) and turns any exception it throws
// into INTERNAL naming `where`. A thrown exception is a bug, so it is logged as an error.
template <typename F>
auto CatchExceptions(std::string_view where, F&& body) -> decltype(body()) {
  std::string what;
  try {
    return body();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  spdlog::error("{}: internal error: {}", where, what);
  return absl::InternalError(std::string(where) + ": internal error: " + what);
}

}  // namespace kiln::server
