// Scheduling: every kernel gets the default rule of its class for the target (DESIGN.md,
// "schedule"): matmul kernels are tiled for registers and caches with B packed into panels;
// convolutions are tiled (conv_rule.h), their constant weights packed at compile time, which
// changes the kernel's parameter and its caller's argument together (a pass across levels);
// every other loop nest has its outer data-parallel loop run on the thread pool and its
// contiguous inner loop vectorized. For a GPU target every kernel is spread over blocks and
// threads instead (ScheduleForGpu).
//
// Before the default rules comes tuning: a kernel whose rule has knobs (tile sizes, vector
// widths, parallel grain) is a TunableKernel, and the caller may choose the trace it is built
// with (the best record of the tuning database, or a candidate the tuner measures).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/graph.h"
#include "compiler/ir/target.h"
#include "compiler/schedule/trace.h"

namespace kiln::schedule {

struct TunableKernel {
  std::string kernel;  // its name in the module
  // What the kernel computes, whatever model it came from: its canonical text (names by
  // first appearance, symbolic extents as variables) and which parameters are constants at
  // its call site (weights, which rules pack at compile time). Equal workloads take the same
  // schedules.
  std::string workload;
  // The rules that can build it, the default rule's first; never empty.
  std::vector<SearchSpace> spaces;
  // The symbolic extent its schedules may be specialized on (its first scalar; "" when it
  // has none): tuned at representative values, it runs the schedule of the smallest bucket
  // that holds the value at run time.
  std::string bucket_symbol;
};

// The trace to build a kernel with; nullopt (or a trace outside the kernel's spaces) for the
// default rule's choices.
using ChooseTrace = std::function<std::optional<Trace>(const TunableKernel&)>;

// Specializations of a kernel on its bucket symbol: `trace` where the symbol is at most
// `up_to`. A kernel with buckets dispatches on the symbol at run time, smallest bucket
// first, and values above every bucket run the schedule ChooseTrace gave (or the default).
struct Bucket {
  int64_t up_to = 0;
  Trace trace;
};
using ChooseBuckets = std::function<std::vector<Bucket>(const TunableKernel&)>;

absl::StatusOr<ir::IRModule> Schedule(ir::IRModule module, const ir::Target& target,
                                      const ChooseTrace& choose = nullptr,
                                      const ChooseBuckets& buckets = nullptr);

// The kernels of `module` whose schedules have knobs on `target`, in name order.
std::vector<TunableKernel> TunableKernels(const ir::IRModule& module, const ir::Target& target);

}  // namespace kiln::schedule
