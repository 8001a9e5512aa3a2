// Whole-file reads and writes with errors that name the path.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::client {

absl::StatusOr<std::string> ReadFile(const std::string& path);
// Creates the parent folders; replaces an existing file.
absl::Status WriteFile(const std::string& path, std::string_view bytes);

}  // namespace kiln::client
