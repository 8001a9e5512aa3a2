#include "compiler/driver/pipeline.h"

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

// Each tunable kernel takes its tuning record's trace where the database has one.
static absl::StatusOr<ir::IRModule> ScheduleForTarget(ir::IRModule module,
                                                      ir::PassContext& context) {
  auto choose = [&](const schedule::TunableKernel& kernel) -> std::optional<schedule::Trace> {
    ++context.tunable_kernels;
    if (!context.tuned_trace) return std::nullopt;
    std::optional<std::string> json = context.tuned_trace(kernel.workload);
    if (!json) return std::nullopt;
    absl::StatusOr<schedule::Trace> trace = schedule::ParseTrace(*json);
    if (!trace.ok()) return std::nullopt;
    for (const schedule::SearchSpace& space : kernel.spaces) {
      if (!space.Contains(*trace)) continue;
      ++context.tuned_kernels;
      return *trace;
    }
    return std::nullopt;  // a record of another space: the key's space version should differ
  };
  return schedule::Schedule(std::move(module), context.schedule_target.value_or(context.target),
                            choose);
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
