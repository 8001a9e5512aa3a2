#include "compiler/driver/pipeline.h"

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/ir/verifier.h"
#include "compiler/transform/eliminate_dead_code.h"
#include "compiler/transform/fuse_ops.h"
#include "compiler/transform/legalize.h"
#include "compiler/transform/lower_host.h"
#include "compiler/schedule/schedule.h"

namespace kiln::driver {

const std::vector<Pass>& Pipeline() {
  static const auto* passes = new std::vector<Pass>{
      // Bindings nothing uses go, shape arithmetic folded at import above all.
      {"eliminate_dead_code", transform::EliminateDeadCode},
      // Each operator becomes a loop-level kernel with symbolic extents.
      {"legalize", transform::Legalize},
      // Kernels merge with their consumers where their loops allow (classified, not by op name).
      {"fuse_ops", transform::FuseOps},
      // Each kernel gets the default schedule of its class for the target: tiles, threads, vectors.
      {"schedule", nullptr, schedule::Schedule},
      // `main` becomes ahead-of-time host code: bind shapes, check, carve memory, call.
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

absl::StatusOr<ir::IRModule> RunPipeline(
    ir::IRModule module,
    const std::function<void(const std::string&, const ir::IRModule&)>& after_pass,
    const std::string& stop_after, const ir::Target* target) {
  const ir::Target chosen = target ? *target : *ir::ParseTarget("x86_64");
  // A pass that breaks an invariant is caught right after it runs, not passes later.
  KILN_RETURN_IF_ERROR(Verify(module, "import"));
  for (const Pass& pass : Pipeline()) {
    KILN_ASSIGN_OR_RETURN(module, pass.run ? pass.run(std::move(module))
                                           : pass.run_for_target(std::move(module), chosen));
    KILN_RETURN_IF_ERROR(Verify(module, pass.name));
    if (after_pass) after_pass(pass.name, module);
    if (pass.name == stop_after) break;
  }
  return module;
}

}  // namespace kiln::driver
