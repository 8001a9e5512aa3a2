// The parts of `kiln bench` worth testing on their own: statistics over latency samples, the
// inputs it runs on (from files or random, with every dim accounted for) and memory readings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/artifact_exec.h"
#include "client/commands.h"
#include "kiln/runtime.hpp"

namespace kiln::client {

struct LatencyStats {
  int64_t count = 0;
  double min_ms = 0;
  double median_ms = 0;  // the middle sample, or the mean of the two middle ones
  double p90_ms = 0;     // nearest rank: the smallest sample with at least 90% at or below it
  double mean_ms = 0;
  double max_ms = 0;
};
// Statistics of one or more samples, in milliseconds.
LatencyStats SummarizeLatencies(std::vector<double> samples_ms);

// The inputs of a bench run, in the model's order: files as given, the rest random. Symbolic
// dims take their values from --shape and the files; a dim that none of them decides, a
// --shape or file that contradicts a fixed dim, and a rank mismatch are errors naming the input
// and the dim. Random data comes from a fixed seed: floats in [-1, 1), integers in [0, 32),
// bools 0 or 1.
absl::StatusOr<NamedTensors> MakeBenchInputs(const BenchArgs& args,
                                             const std::vector<runtime::TensorInfo>& expected);

// The process's resident set (VmRSS) and its high-water mark (VmHWM) from /proc/self/status;
// -1 where the system does not say.
struct MemoryReading {
  int64_t rss_bytes = -1;
  int64_t peak_rss_bytes = -1;
};
MemoryReading ReadProcessMemory();

// The raw JSON values of manifest.json's top-level keys that mention "workspace", as
// `"key": value` pairs joined by commas; empty when there are none.
std::string ManifestWorkspaceFields(const std::string& manifest_json);

}  // namespace kiln::client
