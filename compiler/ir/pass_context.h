// What one compilation asks of the passes beyond the module itself, and what they leave
// behind for the manifest. Passes that need none of it ignore it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "compiler/arith/expr.h"
#include "compiler/ir/target.h"

namespace kiln::ir {

struct PassContext {
  Target target;
  // The target whose schedules the kernels get, when not `target`'s: a GPU target's
  // schedules compiled for a CPU run their blocks and threads as serial loops, which checks
  // them where there is no GPU.
  std::optional<Target> schedule_target;
  // User upper bounds of symbolic dims ("seq" -> 4096), for memory planning.
  std::map<std::string, int64_t> dim_bounds;
  // The tuned schedules (traces, as JSON) the tuning database holds for a kernel of this
  // workload text (schedule::TunableKernel::workload), by bucket: "" for all values of its
  // symbols, else the value of its bucket symbol up to which one is used. Unset: default
  // schedules.
  std::function<std::map<std::string, std::string>(const std::string& workload)> tuned_traces;
  // Polled by the pipeline before each pass; a non-OK status stops it (cancelled jobs,
  // deadlines). Unset: never interrupted.
  std::function<absl::Status()> interrupted;

  // Memory planning's result, in terms of the inputs' symbolic dims: the workspace the
  // artifact allocates per run (storage shared across non-overlapping lifetimes) and what it
  // would need if every intermediate had its own storage. Null until host lowering ran.
  arith::PrimExpr workspace_bytes;
  arith::PrimExpr no_reuse_bytes;
  // The schedule pass's: kernels with knobs, and those built from tuning records.
  int tunable_kernels = 0;
  int tuned_kernels = 0;
};

}  // namespace kiln::ir
