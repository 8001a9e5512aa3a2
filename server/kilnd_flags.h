// kilnd's command line. Hand-parsed so flags read like the kiln CLI's ("--data-dir").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/server.h"

namespace kiln::server {

// kilnd's --job-memory-bytes unless set: 8 GiB of address space per compile worker, room for
// the largest model accepted by default (512 MiB, held several times over: request, parsed
// model, constants, artifact) plus LLVM. On a smaller machine the kernel's out-of-memory killer
// picks the worker, not kilnd, which also ends as RESOURCE_EXHAUSTED. ServiceOptions' own
// default is 0 (compile in process), for tests and embedders.
inline constexpr int64_t kDefaultJobMemoryBytes = int64_t{8} << 30;

struct KilndFlags {
  ServerOptions server;
  std::string log_level = "info";  // spdlog level name
  bool json_logs = false;          // one JSON object per line instead of text
  bool help = false;
};

// Parses the arguments after the program name: "--name=value" or "--name value".
// "--config FILE" reads `name = value` lines (flag names without "--", # comments) first;
// flags on the command line override them. INVALID_ARGUMENT names an unknown flag, a
// missing value, a malformed number or the config file's line.
absl::StatusOr<KilndFlags> ParseKilndFlags(const std::vector<std::string>& args);
std::string KilndUsage();

}  // namespace kiln::server
