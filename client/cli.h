// The kiln command line: words in, a command's arguments out, the command run.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands.h"

namespace kiln::client {

// Each takes the words after the command name. Flags are "--name VALUE" or "--name=VALUE";
// -t is --target.
absl::StatusOr<CompileArgs> ParseCompileArgs(const std::vector<std::string>& words);
absl::StatusOr<RunArgs> ParseRunArgs(const std::vector<std::string>& words);
absl::StatusOr<BenchArgs> ParseBenchArgs(const std::vector<std::string>& words);
absl::StatusOr<InspectArgs> ParseInspectArgs(const std::vector<std::string>& words);
absl::StatusOr<TargetsArgs> ParseTargetsArgs(const std::vector<std::string>& words);
absl::StatusOr<TuneArgs> ParseTuneArgs(const std::vector<std::string>& words);
absl::StatusOr<TuningArgs> ParseTuningArgs(const std::vector<std::string>& words);
absl::StatusOr<JobsArgs> ParseJobsArgs(const std::vector<std::string>& words);
absl::StatusOr<CacheArgs> ParseCacheArgs(const std::vector<std::string>& words);

// Runs `kiln <words>`; returns the exit status: 0 done, 1 the command failed, 2 bad usage.
int RunCli(const std::vector<std::string>& words, std::ostream& out, std::ostream& err);

}  // namespace kiln::client
