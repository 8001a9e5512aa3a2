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
  bool help = false;
};

// Parses the arguments after the program name: "--name=value" or "--name value".
// INVALID_ARGUMENT names an unknown flag, a missing value or a malformed number.
absl::StatusOr<KilndFlags> ParseKilndFlags(const std::vector<std::string>& args);
std::string KilndUsage();

}  // namespace kiln::server
