// The tuner: for each tunable kernel of a module, an evolutionary search over its schedules
// (schedule::SearchSpace), guided by a cost model (cost_model.h) and paid for in
// measurements (measure.h). Every candidate is checked against the default schedule's output
// before its time counts, and runs in a child process, so a bad one is a failed trial.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"
#include "compiler/schedule/schedule.h"
#include "compiler/schedule/trace.h"
#include "compiler/tune/measure.h"

namespace kiln::tune {

struct TuneOptions {
  int trials_per_kernel = 32;               // measured candidates per kernel, its default included
  int trials = 0;                           // for the whole module; 0: trials_per_kernel each
  std::chrono::milliseconds time_limit{0};  // for the whole module; 0: none
  // Values of the kernels' symbolic extents (scalars) to measure at; a scalar missing here
  // is measured at default_symbol_value.
  std::map<std::string, int64_t> symbol_values;
  int64_t default_symbol_value = 64;
  // Shape buckets: a kernel with a bucket symbol (TunableKernel::bucket_symbol) is tuned at
  // each of these values, one record each, instead of once at its symbol's value above.
  std::vector<int64_t> bucket_values;
  // Without bucket_values: a kernel whose bucket symbol has an upper bound here is tuned at
  // the powers of two up to it (and at the bound).
  bool auto_buckets = false;
  std::map<std::string, int64_t> symbol_bounds;
  uint64_t seed = 1;
  MeasureOptions measure;
  // After the search, its fastest few trials and the default run again in turns, this many
  // rounds (CompareKernels), and the fastest of them is the result; 0: the search's fastest.
  int confirm_rounds = 3;
  // Checked between trials; true stops the search (the results so far are returned).
  std::function<bool()> cancelled;
};

struct TuneProgress {
  std::string kernel;
  int kernel_index = 0;  // 1-based
  int kernels = 0;
  int trials_done = 0;  // this module, all kernels
  int trials_budget = 0;
  double best_gflops = 0;    // this kernel's best so far
  double seconds_left = -1;  // estimated; < 0 when unknown
};

struct TuneResult {
  schedule::TunableKernel kernel;
  // The value of kernel.bucket_symbol the schedule was tuned at ("64"), or "" for one tuned
  // for all values.
  std::string bucket;
  schedule::Trace best;
  // Of `best` and of the default schedule: from the comparison after the search where it ran.
  Measurement best_measurement;
  Measurement default_measurement;
  int trials = 0;  // measured, failures included
  int failed = 0;
  std::vector<schedule::Trace> tried;  // the measured traces, in the order they ran
  // What each failed trial reported ("trace: why"), or why the kernel could not be tuned at
  // all (its default schedule did not run: then trials is 0 and this has one entry); also
  // why comparing the fastest again failed, where it did.
  std::vector<std::string> failures;
  double flops = 0;  // floating-point operations of one run at the measured extents
};

// "kernel" or, for a bucket, "kernel (n=64)".
std::string DisplayName(const TuneResult& result);

// Tunes the kernels of `module` (the pipeline's module as it enters the schedule pass) for
// `target`, which must be this machine's arch, in name order, each once or per bucket,
// skipping the (kernel, bucket) pairs `skip` says are tuned already. `on_result` hears each
// kernel's result as soon as it is done, so that a cancelled or failed search keeps what it found;
// `progress` hears every trial.
absl::StatusOr<std::vector<TuneResult>> TuneModule(
    const ir::IRModule& module, const ir::Target& target, const TuneOptions& options,
    const std::function<bool(const schedule::TunableKernel&, const std::string& bucket)>& skip,
    const std::function<void(const TuneResult&)>& on_result,
    const std::function<void(const TuneProgress&)>& progress);

// Floating-point operations one run of `func` does with its scalars at `values` (loops
// whose extent cannot be evaluated count once): the numerator of GFLOP/s.
double CountFlops(const ir::PrimFunc& func, const std::map<std::string, int64_t>& values);

}  // namespace kiln::tune
