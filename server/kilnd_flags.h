// kilnd's command line. Hand-parsed so flags read like the kiln CLI's ("--data-dir").
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/server.h"

namespace kiln::server {

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
