// Measures one kernel as the tuner sees it: a candidate schedule of the kernel, compiled with
// the JIT for this machine, checked against a reference (the default schedule) on the same
// random inputs, then timed. MeasureKernelIsolated does it in a child process, so a
// candidate that crashes or runs away costs a failed measurement, never the caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"

namespace kiln::tune {

// The state of a kernel's weights (its constant arguments) before each timed run. Which one a
// model gives a kernel depends on the weights of the kernels between two of its runs, on the
// cache this machine really gives one process (a VM may report its host's) and on what else
// runs, none of which tuning knows: it takes kAlternating (driver/tuning.cc).
enum class WeightCache {
  kWarm,         // left in the caches by the previous run
  kEvicted,      // evicted from every cache level: read from memory
  kAlternating,  // evicted before every other run, the first included
};

struct MeasureOptions {
  int warmup = 2;
  int repeats = 5;
  uint64_t seed = 1;  // of the random inputs
  // MeasureKernelIsolated: how long the child may take to compile the kernels (LLVM takes
  // tens of seconds on a large register tile, and finishes: this is a backstop)...
  std::chrono::milliseconds compile_timeout{120000};
  // ...and then to check and time the candidate: one that runs away is killed after this.
  std::chrono::milliseconds timeout{10000};
  // Before each timed run, load the buffers as a model leaves them for the kernel (see
  // CacheState in measure.cc): the other buffers just written, the constant arguments
  // (weights) in the state `weights` says.
  WeightCache weights = WeightCache::kEvicted;
  // The machine the kernel is compiled for; this machine ("host") when unset. Its threads
  // (a description's "threads=N") are the threads the timed runs use; one when unset.
  std::optional<ir::Target> target;
};

struct Measurement {
  // False: the candidate failed (did not compile, reported an index error, wrote other
  // values than the reference, crashed, timed out) and `failure` says how.
  bool ok = false;
  std::string failure;
  std::vector<int64_t> times_ns;  // one per repeat, in run order
  int64_t median_ns = 0;
  int64_t min_ns = 0;
};

// Parameter index -> the constant a call of `kernel` in the module's functions passes (weights,
// maybe packed at compile time by the schedule): the kernel is measured with them, as it
// will run.
std::map<size_t, const ir::NDArray*> ConstantArguments(const ir::IRModule& module,
                                                       const std::string& kernel);

// The bytes of the distinct constants the kernel calls of the module's functions pass: the
// model's weights, as its kernels read them.
int64_t WeightBytes(const ir::IRModule& module);

// The size of this machine's last-level cache in bytes (32 MiB where the system does not say).
int64_t LastLevelCacheBytes();

// Whether the weights are evicted before run `run` of a measurement (warm-ups counted from 0).
bool EvictsWeightsBefore(WeightCache weights, int run);

// What the tuner does to the caches before run `run` of a measurement, in order.
enum class CacheStep {
  kEvictWeights,     // flush the constants, then read 64 MiB of other weights
  kLoadActivations,  // read the other buffers, as the kernel before this one just wrote them
};
// The activations load last: evicting the weights leaves nothing of them in the caches either,
// and loaded first they were cold in every evicted run, which no kernel in a model meets. The
// channel-lanes form of mobilenet_v2's depthwise convs on 7 x 7 planes, which reads 16 channel
// planes at once, lost to the row form that way (bench/RESULTS.md, thirty-sixth round).
std::vector<CacheStep> CacheStepsBefore(WeightCache weights, int run);

// Allocates the buffers of kernel `kernel` with its scalars at `scalar_values` (every scalar
// the kernel takes needs a value), fills them with random values (floats in [-1, 1], ints in
// [-4, 4]) or, for a parameter a call of the kernel in the module's functions passes a
// constant, with that constant (weights, which the candidate may have packed at compile
// time), runs the reference's kernel and the candidate's on copies, compares every buffer
// the kernel writes (FloatsAgree), then times options.warmup + options.repeats runs
// of the candidate. `on_compiled`, if set, is called once the kernels are compiled, before any
// runs. An error status is a bad request or a reference that does not run (no
// such kernel, a missing scalar, kernels with different buffers, a target not this machine).
// With `reference_result` (RunReference's for the same kernel, scalars and options), the
// reference is not compiled or run again: a tuner measuring many candidates of one kernel
// pays for the reference once.
struct ReferenceResult;
absl::StatusOr<Measurement> MeasureKernel(const ir::IRModule& candidate,
                                          const ir::IRModule& reference, const std::string& kernel,
                                          const std::map<std::string, int64_t>& scalar_values,
                                          const MeasureOptions& options,
                                          const ReferenceResult* reference_result = nullptr,
                                          const std::function<void()>& on_compiled = nullptr);

// MeasureKernel in a forked child process, killed when compiling takes longer than
// options.compile_timeout or the rest longer than options.timeout. A child killed by a
// signal or by a timeout is a failed measurement naming the signal or the timeout. The JIT
// runs in the child only, so the caller's process never forks LLVM's threads.
absl::StatusOr<Measurement> MeasureKernelIsolated(
    const ir::IRModule& candidate, const ir::IRModule& reference, const std::string& kernel,
    const std::map<std::string, int64_t>& scalar_values, const MeasureOptions& options,
    const ReferenceResult* reference_result = nullptr);

// Times candidates of one kernel against each other, each already checked (MeasureKernel):
// compiles them all, then runs `rounds` rounds in which each candidate in turn runs
// options.warmup + options.repeats times, as MeasureKernel does. A shared machine's speed
// drifts over seconds by more than good schedules differ, and the least of many separate
// noisy measurements favors a lucky one; taken in turns, the candidates meet the same drift.
// One Measurement per candidate, in order, each with rounds * options.repeats times (or a
// failure: did not compile, reported an index error).
absl::StatusOr<std::vector<Measurement>> CompareKernels(
    const std::vector<ir::IRModule>& candidates, const std::string& kernel,
    const std::map<std::string, int64_t>& scalar_values, const MeasureOptions& options, int rounds,
    const std::function<void()>& on_compiled = nullptr);

// CompareKernels in a forked child process; a crash or a timeout is FAILED_PRECONDITION.
absl::StatusOr<std::vector<Measurement>> CompareKernelsIsolated(
    const std::vector<ir::IRModule>& candidates, const std::string& kernel,
    const std::map<std::string, int64_t>& scalar_values, const MeasureOptions& options, int rounds);

// Whether a candidate's float `actual` may stand for the reference's `expected` in a buffer
// whose largest finite magnitude is `scale`: equal (infinities, NaN for NaN), or within
// 1e-5 + 1e-4 * (|expected| + scale). The scale term is there because a schedule that sums
// in another order (tiles, a library) errs in proportion to the magnitude of the terms, not
// of their sum: an output that cancelled (GPT's LM head: 0.0056944 against 0.0057078, the
// buffer's values near 1) differs by more than a relative bound allows, while a wrong
// schedule (a missing or misplaced term) errs by the outputs' own scale.
bool FloatsAgree(double actual, double expected, double scale);

// Every buffer of the reference kernel after it ran on MeasureKernel's inputs.
struct ReferenceResult {
  std::vector<std::string> buffers;  // bytes, in parameter order
};
absl::StatusOr<ReferenceResult> RunReference(const ir::IRModule& reference,
                                             const std::string& kernel,
                                             const std::map<std::string, int64_t>& scalar_values,
                                             const MeasureOptions& options,
                                             const std::function<void()>& on_compiled = nullptr);
// RunReference in a child process (a crash or a timeout is FAILED_PRECONDITION).
absl::StatusOr<ReferenceResult> RunReferenceIsolated(
    const ir::IRModule& reference, const std::string& kernel,
    const std::map<std::string, int64_t>& scalar_values, const MeasureOptions& options);

}  // namespace kiln::tune
