#include "compiler/driver/pipeline.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/ir/verifier.h"
#include "compiler/schedule/schedule.h"
#include "compiler/transform/eliminate_dead_code.h"
#include "compiler/transform/fuse_ops.h"
#include "compiler/transform/legalize.h"
#include "compiler/transform/legalize_control.h"
#include "compiler/transform/lower_host.h"

namespace kiln::driver {

// Adapts a pass that needs nothing but the module.
template <absl::StatusOr<ir::IRModule> (*pass)(ir::IRModule)>
absl::StatusOr<ir::IRModule> ModuleOnly(ir::IRModule module, ir::PassContext&) {
  return pass(std::move(module));
}

// A trace from the database that replays into one of the kernel's spaces, or nullopt.
static std::optional<schedule::Trace> Replayable(const schedule::TunableKernel& kernel,
                                                 const std::string& json) {
  absl::StatusOr<schedule::Trace> trace = schedule::ParseTrace(json);
  if (!trace.ok()) return std::nullopt;
  for (const schedule::SearchSpace& space : kernel.spaces) {
    if (space.Contains(*trace)) return *trace;
  }
  return std::nullopt;  // a record of another space: the key's space version should differ
}

// Each tunable kernel takes its tuning records' traces where the database has them: one for
// all values of its symbols, and specializations per bucket.
static absl::StatusOr<ir::IRModule> ScheduleForTarget(ir::IRModule module,
                                                      ir::PassContext& context) {
  std::map<std::string, std::map<std::string, std::string>> records;  // kernel -> bucket -> json
  std::set<std::string> tuned;                                        // kernels built from a record
  auto lookup = [&](const schedule::TunableKernel& kernel) -> const auto& {
    auto [it, inserted] = records.try_emplace(kernel.kernel);
    if (inserted && context.tuned_traces) it->second = context.tuned_traces(kernel.workload);
    return it->second;
  };
  auto choose = [&](const schedule::TunableKernel& kernel) -> std::optional<schedule::Trace> {
    ++context.tunable_kernels;
    const auto& traces = lookup(kernel);
    auto all = traces.find("");
    if (all == traces.end()) return std::nullopt;
    std::optional<schedule::Trace> trace = Replayable(kernel, all->second);
    if (trace) tuned.insert(kernel.kernel);
    return trace;
  };
  auto buckets = [&](const schedule::TunableKernel& kernel) {
    std::vector<schedule::Bucket> out;
    for (const auto& [bucket, json] : lookup(kernel)) {
      int64_t up_to = 0;
      if (bucket.empty() || !absl::SimpleAtoi(bucket, &up_to)) continue;
      if (std::optional<schedule::Trace> trace = Replayable(kernel, json)) {
        out.push_back({up_to, *std::move(trace)});
        tuned.insert(kernel.kernel);
      }
    }
    return out;
  };
  absl::StatusOr<ir::IRModule> scheduled = schedule::Schedule(
      std::move(module), context.schedule_target.value_or(context.target), choose, buckets);
  context.tuned_kernels = static_cast<int>(tuned.size());
  return scheduled;
}

const std::vector<Pass>& Pipeline() {
  static const auto* passes = new std::vector<Pass>{
      // Bindings nothing uses go, shape arithmetic folded at import above all.
      {"eliminate_dead_code", ModuleOnly<transform::EliminateDeadCode>},
      // A loop's scan outputs get their run-time length (iterations that ran) as a symbolic dim.
      {"bind_loop_trip_counts", ModuleOnly<transform::BindLoopTripCounts>},
      // Each operator becomes a loop-level kernel with symbolic extents; control-flow bodies too.
      {"legalize", ModuleOnly<transform::Legalize>},
      // Kernels merge with their consumers where their loops allow (classified, not by op name).
      {"fuse_ops", ModuleOnly<transform::FuseOps>},
      // Each kernel gets its tuned schedule for the target from the tuning database, else the
      // default of its class: tiles, threads, vectors.
      {"schedule", ScheduleForTarget},
      // `main` becomes ahead-of-time host code: bind shapes, check, plan and carve the
      // workspace, call the kernels.
      {"lower_host", transform::LowerHost},
  };
  return *passes;
}

static absl::Status Verify(const ir::IRModule& module, const std::string& after) {
  absl::Status status = ir::VerifyModule(module);
  if (status.ok()) return status;
  return absl::InternalError(
      absl::StrCat("the IR is malformed after ", after, ": ", std::string(status.message())));
}

absl::StatusOr<ir::IRModule> RunPipeline(ir::IRModule module, const AfterPass& after_pass,
                                         const std::string& stop_after, ir::PassContext& context) {
  // A pass that breaks an invariant is caught right after it runs, not passes later.
  KILN_RETURN_IF_ERROR(Verify(module, "import"));
  for (const Pass& pass : Pipeline()) {
    if (context.interrupted) KILN_RETURN_IF_ERROR(context.interrupted());
    KILN_ASSIGN_OR_RETURN(module, pass.run(std::move(module), context));
    KILN_RETURN_IF_ERROR(Verify(module, pass.name));
    if (after_pass) after_pass(pass.name, module);
    if (pass.name == stop_after) break;
  }
  return module;
}

absl::StatusOr<ir::IRModule> RunPipeline(ir::IRModule module, const AfterPass& after_pass,
                                         const std::string& stop_after, const ir::Target* target) {
  ir::PassContext context;
  context.target = target ? *target : *ir::ParseTarget("x86_64");
  return RunPipeline(std::move(module), after_pass, stop_after, context);
}

}  // namespace kiln::driver
